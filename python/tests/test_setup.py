"""setup.py's build switches: a value it cannot pass to CMake is refused
before anything is built, with one line naming the variable."""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_sanpath_native_must_be_on_or_off():
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, SANPATH_NATIVE="fast")
        env.pop("SANPATH_CMAKE_BUILD_DIR", None)
        r = subprocess.run([sys.executable, os.path.join(ROOT, "setup.py"), "-q", "build_ext", "--build-temp", tmp,
                            "--build-lib", tmp], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "setup.py: SANPATH_NATIVE must be ON or OFF, not 'fast'" in r.stderr
    assert "cmake" not in r.stdout.lower()
