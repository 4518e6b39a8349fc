#!/usr/bin/env python3
"""Self-test of sanpath_ref.py's measures (math.md section 9), no sanpath binary needed.

- hand-computed facts: a diagonal X (singular values, svd_residual in the
  composite norm, stable and effective rank), orthogonal rows (cosine 0),
  uniform and causal-uniform attention (entropy ln n, first-token mass 1/n), an
  exactly rank-1 X (p_k = 0 omitted: effective rank 1);
- a random X against plain numpy float64 (np.linalg.svd) to 1e-12;
- a collapsed X = 1c^T + eps R with eps = 1e-3000: the companions
  (one_minus_cosine, stable_rank_minus_one, effective_rank_minus_one) and
  svd_residual at log2(1/eps) + 192 bits against a brute force at twice those
  bits plus 256 (1 - cosine by subtraction, the rank-1 term from the Gram
  matrix's leading eigenvector by mp.eigsy), to 40 digits;
- the check-forward plumbing: a fake `sanpath forward --format json` written
  from the reference's own values passes, a wrong digit, a false "< 1e-N", a
  missing measure, an attention measure at layer 0 and a missing digits entry
  each fail.
Run: /usr/bin/python3 tests/reference/test_measures_ref.py (exit 0 when every check passes).
"""

import contextlib
import io
import json
import math
import os
import random
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sanpath_ref as R  # noqa: E402
from mpmath import mp, mpf  # noqa: E402
from selftest import run_tests  # noqa: E402

CHECKS = [0]
TMP = tempfile.mkdtemp(prefix="measref.")


def ok(cond, what):
    CHECKS[0] += 1
    assert cond, what


def rel(a, b):
    a, b = mpf(a), mpf(b)
    return abs(a - b) / max(abs(a), abs(b)) if (a or b) else mpf(0)


def near(a, b, digits, what):
    ok(rel(a, b) < mpf(10) ** -digits, f"{what}: {mp.nstr(a, digits + 3)} vs {mp.nstr(b, digits + 3)}")


def test_hand_facts():
    mp.prec = 200
    # X = diag(4, 3) padded: sigma = 4, 3; the rank-1 remainder is 3 e_2 e_2^T (composite 3), |X|_{1,inf} = 4
    X = R.to_mp([[0, 4, 0], [3, 0, 0]])
    m = R.layer_measures(X)
    s, u, v = R.singular_values(X)
    near(s[0], 4, 50, "sigma_1")
    near(s[1], 3, 50, "sigma_2")
    near(m["svd_residual"], mpf(3) / 4, 50, "svd_residual of diag(4, 3)")
    near(m["stable_rank"], mpf(25) / 16, 50, "stable_rank")
    near(m["stable_rank_minus_one"], mpf(9) / 16, 50, "stable_rank_minus_one")
    H = -(mpf(4) / 7 * mp.log(mpf(4) / 7) + mpf(3) / 7 * mp.log(mpf(3) / 7))
    near(m["effective_rank"], mp.exp(H), 50, "effective_rank")
    near(m["effective_rank_minus_one"], mp.exp(H) - 1, 50, "effective_rank_minus_one")
    near(m["cosine"] + 1, 1, 50, "cosine of orthogonal rows")
    near(m["one_minus_cosine"], 1, 50, "one_minus_cosine of orthogonal rows")
    # mean (1.5, 2, 0): residual rows (-1.5, 2, 0), (1.5, -2, 0): Frobenius sqrt(2 * 6.25) = 2.5 sqrt 2
    near(m["mu"], mpf(5) / 2 * mp.sqrt(2), 50, "mu")
    # cosine of rows (1, 0), (1, 1), (0, 1): pairs 1/sqrt2, 0, 1/sqrt2
    m = R.layer_measures(R.to_mp([[1, 0], [1, 1], [0, 1]]))
    near(m["cosine"], mp.sqrt(2) / 3, 50, "cosine mean over pairs")
    near(m["one_minus_cosine"], 1 - mp.sqrt(2) / 3, 50, "one_minus_cosine mean over pairs")
    # exactly rank 1 (sigma_2 = 0 omitted): effective rank 1, stable rank 1, svd_residual 0
    m = R.layer_measures(R.to_mp([[1, 2, 3], [2, 4, 6], [-1, -2, -3]]))
    ok(abs(m["effective_rank_minus_one"]) < mpf(10) ** -50, f"rank 1: {m['effective_rank_minus_one']}")
    ok(abs(m["stable_rank_minus_one"]) < mpf(10) ** -50, f"rank 1: {m['stable_rank_minus_one']}")
    ok(m["svd_residual"] < mpf(10) ** -50, f"rank 1: svd_residual {m['svd_residual']}")
    # attention: uniform over 4 keys (entropy ln 4, first-token mass 1/4); causal uniform rows 1/(i+1)
    n = 4
    uni = [[mpf(1) / n] * n for _ in range(n)]
    cau = [[mpf(1) / (i + 1) if j <= i else mpf(0) for j in range(n)] for i in range(n)]
    X = R.to_mp([[1, 2], [3, 5], [7, 11], [13, 17]])
    m = R.layer_measures(X, [uni, cau])
    ent = (n * mp.log(n) + mp.fsum(mp.log(i + 1) for i in range(n))) / (2 * n)
    near(m["attention_entropy"], ent, 50, "attention_entropy (uniform + causal uniform)")
    near(m["first_token_mass"], (mpf(1) / n + mp.fsum(mpf(1) / (i + 1) for i in range(n)) / n) / 2, 50,
         "first_token_mass")
    ok("attention_entropy" not in R.layer_measures(X), "no attention measures without P")


def test_numpy():
    mp.prec = 160
    rng = np.random.default_rng(3)
    for n, d in ((5, 8), (7, 3), (4, 4)):
        Xn = rng.normal(size=(n, d)) + rng.normal(size=d)
        m = R.layer_measures(R.to_mp(Xn.tolist()))
        U, s, Vt = np.linalg.svd(Xn)
        E = Xn - s[0] * np.outer(U[:, 0], Vt[0])
        comp = lambda M: math.sqrt(np.abs(M).sum(axis=0).max() * np.abs(M).sum(axis=1).max())
        un = Xn / np.linalg.norm(Xn, axis=1, keepdims=True)
        C = un @ un.T
        cos = np.mean([C[i, j] for i in range(n) for j in range(i + 1, n)])
        p = s / s.sum()
        want = {"mu": np.linalg.norm(Xn - Xn.mean(axis=0)), "svd_residual": comp(E) / comp(Xn), "cosine": cos,
                "one_minus_cosine": 1 - cos, "stable_rank": (s ** 2).sum() / s[0] ** 2,
                "stable_rank_minus_one": (s[1:] ** 2).sum() / s[0] ** 2,
                "effective_rank": math.exp(-(p * np.log(p)).sum()),
                "effective_rank_minus_one": math.exp(-(p * np.log(p)).sum()) - 1}
        for k, w in want.items():
            ok(rel(m[k], w) < 1e-12, f"{n}x{d} {k}: reference {mp.nstr(m[k], 17)}, numpy {w!r}")


def collapsed(eps_exp, bits, seed=5, n=4, d=6):
    """X = 1c^T + 10^eps_exp R at `bits` bits (c, R drawn once; exact doubles)."""
    rng = random.Random(seed)
    c = [rng.gauss(0, 1) for _ in range(d)]
    Rr = [[rng.gauss(0, 1) for _ in range(d)] for _ in range(n)]
    mp.prec = bits
    e = mpf(10) ** eps_exp
    return [[mpf(c[j]) + e * mpf(Rr[i][j]) for j in range(d)] for i in range(n)]


def brute(X):
    """The companions and svd_residual the long way, at the current (doubled) precision: 1 - cosine,
    stable_rank - 1, effective_rank - 1 by subtraction; the singular values from the eigenvalues of the
    d x d Gram matrix X^T X (mp.eigsy), the rank-1 term X v_1 v_1^T from its leading eigenvector."""
    n, d = len(X), len(X[0])
    M = R.layer_measures(X)         # cosine, stable_rank, effective_rank themselves (not the companions)
    G = mp.matrix(d, d)
    for a in range(d):
        for b in range(d):
            G[a, b] = mp.fsum(X[i][a] * X[i][b] for i in range(n))
    ev, Q = mp.eigsy(G)
    lam = sorted([(ev[k], k) for k in range(d)], reverse=True)
    k1 = lam[0][1]
    v = [Q[a, k1] for a in range(d)]
    Xv = [mp.fdot(row, v) for row in X]
    E = [[X[i][j] - Xv[i] * v[j] for j in range(d)] for i in range(n)]
    sig = [mp.sqrt(max(x, 0)) for x, _ in lam][:min(n, d)]
    p = [s / mp.fsum(sig) for s in sig if s > 0]
    H = -mp.fsum(x * mp.log(x) for x in p)
    return {"one_minus_cosine": 1 - M["cosine"], "stable_rank_minus_one": M["stable_rank"] - 1,
            "effective_rank_minus_one": mp.exp(H) - 1, "svd_residual": R.norm_composite(E) / R.norm_composite(X)}


def test_collapsed():
    ex = -3000
    cancel = int(-ex * math.log2(10)) + 1
    X = collapsed(ex, cancel + 192)
    m = R.layer_measures(X)
    mp.prec = 2 * cancel + 256 + 192
    b = brute(collapsed(ex, mp.prec))
    for k in ("one_minus_cosine", "stable_rank_minus_one", "effective_rank_minus_one", "svd_residual"):
        near(m[k], b[k], 40, f"collapsed (eps 1e{ex}) {k} against the brute force")
    ok(2 * ex - 3 < mp.log10(m["one_minus_cosine"]) < 2 * ex + 3, f"1 - cos of order eps^2: {m['one_minus_cosine']}")
    ok(2 * ex - 3 < mp.log10(m["stable_rank_minus_one"]) < 2 * ex + 3, "stable_rank - 1 of order eps^2")
    ok(ex - 3 < mp.log10(m["svd_residual"]) < ex + 3, "svd_residual of order eps")


# --------------------------------------------------------------------------- check-forward plumbing

def write_native_san(path, L=2, H=2, d=4, seed=9):
    rng = random.Random(seed)
    g = lambda r, c: [rng.gauss(0, 0.5) for _ in range(r * c)]
    t = {}
    for l in range(L):
        for h in range(H):
            q = f"layers.{l}.heads.{h}."
            for k in ("W_Q", "W_K", "W_V"):
                t[q + k] = ([d, d // H], g(d, d // H))
            t[q + "W_O"] = ([d // H, d], g(d // H, d))
            for k in ("b_Q", "b_K", "b_V"):
                t[q + k] = ([d // H], [0.0] * (d // H))
        t[f"layers.{l}.b_O"] = ([d], [0.0] * d)
    cfg = {"layers": L, "heads": H, "d_model": d, "d_qk": d // H, "d_v": d // H, "d_ff": 0, "activation": "gelu",
           "ln_eps": 1e-12, "skip": "off", "mlp": "none", "layernorm": "none", "mask": "causal"}
    R.write_safetensors(path, t, metadata={"format": "sanpath", "sanpath.config": json.dumps(cfg)})
    return cfg


def fake_run(model_path, input_path, cfg, digits=17):
    """A `sanpath forward --measures all --format json` result printed from the reference at 300 bits."""
    model = R.load_model(model_path)
    want = dict(model.own)
    mp.prec = 300
    _, t = R.read_safetensors(input_path)
    Xs, Ps = R.forward(model, R.to_mp(R._matrix(t["X"])), want, keep_P=True)
    s = lambda x: mp.nstr(x, digits, min_fixed=1, max_fixed=0)
    layers = []
    for l, X in enumerate(Xs):
        st = R.layer_stats(X)
        me = R.layer_measures(X, Ps[l - 1] if l else None)
        dq = {k: 15 for k in st}
        dq.update({k: 15 for k in me})
        layers.append({"layer": l, "digits": 15, "digits_by_quantity": dq,
                       "residual": {"composite": s(st["residual_composite"]), "one": s(st["residual_one"]),
                                    "inf": s(st["residual_inf"]), "frobenius": s(st["residual_frobenius"])},
                       "norm": {"composite": s(st["norm_composite"]), "frobenius": s(st["norm_frobenius"])},
                       "relative_residual": s(st["relative_residual"]),
                       "measures": {k: s(v) for k, v in me.items()}})
    return {"precision": "double", "precision_bits": 53, "center": "mean", "variant": want,
            "model": {"layers": cfg["layers"], "heads": cfg["heads"], "d_model": cfg["d_model"],
                      "d_qk": cfg["d_qk"], "d_v": cfg["d_v"]}, "layers": layers}


def run_check(model_path, input_path, j, extra=()):
    path = os.path.join(TMP, "run.json")
    with open(path, "w") as f:
        json.dump(j, f)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = R.main(["check-forward", "--model", model_path, "--input", input_path, *extra, path])
    return rc, out.getvalue()


def test_check_forward():
    model_path = os.path.join(TMP, "san.safetensors")
    input_path = os.path.join(TMP, "x.safetensors")
    cfg = write_native_san(model_path)
    with contextlib.redirect_stdout(io.StringIO()):
        R.main(["gen-input", "--out", input_path, "--tokens", "4", "--d-model", "4", "--seed", "2"])
    good = fake_run(model_path, input_path, cfg)
    ok(set(good["layers"][1]["measures"]) == set(R.MEASURE_KEYS), "the fake run prints every measure")
    rc, out = run_check(model_path, input_path, good, ["--measures", "all"])
    ok(rc == 0, f"the reference's own values pass: {out}")

    def bad(mutate, what, extra=("--measures", "all")):
        j = json.loads(json.dumps(good))
        mutate(j)
        rc, out = run_check(model_path, input_path, j, list(extra))
        ok(rc == 1 and "MISMATCH" in out, f"{what} must fail: rc {rc}, {out}")

    def wrong_digit(j):
        v = j["layers"][2]["measures"]["effective_rank_minus_one"]
        mant, e = v.split("e")
        j["layers"][2]["measures"]["effective_rank_minus_one"] = mant[:-3] + str((int(mant[-3]) + 2) % 10) + \
            mant[-2:] + "e" + e
    bad(wrong_digit, "a wrong 15th digit")
    bad(lambda j: j["layers"][1]["measures"].__setitem__("one_minus_cosine", "< 1e-30"), "a false bound")
    bad(lambda j: j["layers"][1]["measures"].pop("first_token_mass"), "a missing measure with --measures all")
    bad(lambda j: j["layers"][0]["measures"].__setitem__("attention_entropy", "1.0"), "attention at layer 0")
    bad(lambda j: j["layers"][1]["digits_by_quantity"].pop("cosine"), "no digits for a measure")
    bad(lambda j: j["layers"][1]["measures"].__setitem__("mu", "1.0"), "a wrong mu with --measures mu",
        extra=("--measures", "mu"))
    # a bound that holds and an unconfirmed (null) value pass; a subset asked for, with its companion
    j = json.loads(json.dumps(good))
    j["layers"][1]["measures"]["svd_residual"] = "< 1e2"
    j["layers"][1]["measures"]["cosine"] = "0.5"
    j["layers"][1]["digits_by_quantity"]["cosine"] = None
    rc, out = run_check(model_path, input_path, j)
    ok(rc == 0, f"a true bound and a null-digit value pass: {out}")
    j = json.loads(json.dumps(good))
    for rec in j["layers"]:
        rec["measures"] = {k: v for k, v in rec["measures"].items() if k in ("cosine", "one_minus_cosine")}
    rc, out = run_check(model_path, input_path, j, ["--measures", "cosine"])
    ok(rc == 0, f"--measures cosine with its companion passes: {out}")
    rc, out = run_check(model_path, input_path, j, ["--measures", "cosine,mu"])
    ok(rc == 1, f"--measures cosine,mu without mu fails: {out}")


def main():
    tests = [test_hand_facts, test_numpy, test_collapsed, test_check_forward]
    return run_tests(tests, CHECKS, TMP)


if __name__ == "__main__":
    sys.exit(main())
