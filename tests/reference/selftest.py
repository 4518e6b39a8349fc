"""The runner of the references' own tests (test_families_ref.py, test_measures_ref.py)."""
import shutil


def run_tests(tests, checks, tmp):
    """Runs every test, prints ok/FAIL for each, removes `tmp`; 1 when one failed, else 0.
    `checks` is the one-element list the tests count their checks in."""
    failed = 0
    for t in tests:
        try:
            t()
            print(f"ok   {t.__name__}")
        except Exception as e:   # an assertion, or the reference failing where it should not
            failed += 1
            print(f"FAIL {t.__name__}: {type(e).__name__}: {e}")
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{checks[0]} checks, {failed} of {len(tests)} tests failed")
    return 1 if failed else 0
