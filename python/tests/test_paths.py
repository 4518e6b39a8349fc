"""Exact path counts and streaming enumeration."""
import math

import pytest

import sanpath
from conftest import cli_message, cli_ok


def test_exact_counts_beyond_64_bits():
    g = sanpath.path_counts(30, 12, True)
    assert g.total == 13 ** 30 and g.total > 2 ** 64 and isinstance(g.total, int)
    assert g.by_length == [math.comb(30, k) * 12 ** k for k in range(31)]
    h = sanpath.path_counts(40, 7, False)
    assert h.total == 7 ** 40 and h.by_length[40] == 7 ** 40 and sum(h.by_length) == 7 ** 40
    assert g.to_dict()["total"] == str(13 ** 30)


def small_san():
    return sanpath.random_model(3, 2, 6, skip=True, mlp="none", layernorm="none", d_ff=0, seed=3)


def test_stream_equals_enumeration():
    m, x = small_san(), sanpath.random_input(4, seed=1)
    streamed = list(sanpath.iter_paths(m, x, precision=128))
    kept = sanpath.enumerate_paths(m, x, precision=128).to_dict()["paths"]
    assert len(streamed) == len(kept) == 27
    for s, k in zip(streamed, kept):
        assert [None if h < 0 else h for h in s.heads] == k["heads"]
        assert str(s.norm) == k["term_norm"]["composite"]
        assert str(s.residual) == k["term_residual"]["composite"]
        assert s.digits == k["digits"]


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])


def test_stream_memory_does_not_grow_with_paths():
    # 4^8 = 65536 paths: kept as records they would take tens of MiB.
    m = sanpath.random_model(8, 3, 6, skip=True, mlp="none", layernorm="none", d_ff=0, seed=5)
    it = sanpath.iter_paths(m, sanpath.random_input(4, seed=1), precision="double", confirm=False)
    n, start = 0, None
    for _ in it:
        n += 1
        if n == 2000:
            start = rss_kib()
    assert n == 4 ** 8
    assert rss_kib() - start < 4096, (start, rss_kib())


def test_stream_stops_early():
    m = sanpath.random_model(8, 3, 6, skip=True, mlp="none", layernorm="none", d_ff=0, seed=5)
    it = sanpath.iter_paths(m, sanpath.random_input(4, seed=1), precision="double", confirm=False)
    first = [next(it) for _ in range(3)]
    it.close()
    assert [p.heads for p in first][0] == [-1] * 8


def test_length_sums_and_samples():
    m, x = small_san(), sanpath.random_input(4, seed=1)
    s = sanpath.length_sums(m, x)
    assert [e.count for e in s.lengths] == [math.comb(3, k) * 2 ** k for k in range(4)]
    assert s.decomposition_holds
    r = sanpath.sample_paths(m, x, 10, seed=2)
    assert len(r.to_dict()["samples"]) == 4


def test_check_means_what_paths_check_means(cli, tmp_path):
    # check= is paths --check: auto, mpfr (a run one tier up, the same values) or certified; rounding and,
    # for sampling, certified are refused with the CLI's message. verify_decomposition=True is
    # --verify-decomposition.
    m, x = small_san(), sanpath.random_input(4, seed=1)
    path = str(tmp_path / "san.safetensors")
    m.save(path)
    assert sanpath.length_sums(m, x, check="mpfr").to_json() == sanpath.length_sums(m, x).to_json()
    assert sanpath.length_sums(m, x, verify_decomposition=True).decomposition_holds
    args = ["--model", path, "--random-input", "4", "--seed", "1"]
    for call, cli_args in ((lambda: sanpath.length_sums(m, x, check="rounding"), ["--sums", "--check", "rounding"]),
                           (lambda: sanpath.enumerate_paths(m, x, check="rounding"),
                            ["--enumerate", "--check", "rounding"]),
                           (lambda: sanpath.effectiveness(m, x, check="rounding"),
                            ["--effectiveness", "--check", "rounding"])):
        with pytest.raises(sanpath.InputError) as e:
            call()
        assert str(e.value) == cli_message(cli, "paths", *args, *cli_args)
    assert cli_message(cli, "paths", *args, "--sums", "--check").endswith("--verify-decomposition")


def test_enumerate_paths_verify_decomposition(cli, tmp_path):
    # verify_decomposition=True is paths --enumerate --verify-decomposition (Theorem 2.1 on every path):
    # the same result when it holds, refused with a filter (not every path).
    path = str(tmp_path / "san.safetensors")
    small_san().save(path)
    m, x = sanpath.load(path), sanpath.random_input(4, seed=1)
    r = sanpath.enumerate_paths(m, x, verify_decomposition=True)
    assert r.to_json() == sanpath.enumerate_paths(m, x).to_json()
    assert r.to_dict()["decomposition_holds"]
    args = ["--model", path, "--random-input", "4", "--seed", "1", "--enumerate", "--format", "json"]
    assert r.to_json() == cli_ok(cli, "paths", *args, "--verify-decomposition")
    with pytest.raises(sanpath.InputError, match=r"^verify_decomposition: the reconstruction is checked on every "
                                                 r"path only"):
        sanpath.enumerate_paths(m, x, length=1, verify_decomposition=True)
