#!/usr/bin/python3
"""The SAN forward pass of bench_export's san-small model written with mpmath.

Usage: forward_mpmath.py <model.safetensors>
Matrices are lists of rows of mpf at the model's precision (513 bits);
products use mp.fdot (exact products, one rounding per entry), softmax
subtracts the row maximum. Prints one JSON line: the time of the pass
(weights already converted), the backend (gmpy when python3-gmpy2 is
installed) and the decimal digits on which three output checks agree with
sanpath's 150-digit values.
"""
import json
import struct
import sys
import time

import mpmath
from mpmath import mp, mpf

import safetensors_min


def load(path):
    raw, meta = safetensors_min.read(path)
    mp.prec = int(meta["prec"])

    def mat(name):
        shape, b = raw[name]
        vals = [mpf(x) for x in struct.unpack(f"<{len(b) // 8}d", b)]
        if len(shape) == 1:
            return vals
        r, c = shape
        return [vals[i * c:(i + 1) * c] for i in range(r)]

    L, H = int(meta["layers"]), int(meta["heads"])
    layers = []
    for l in range(L):
        heads = []
        for h in range(H):
            p = f"l{l}.h{h}."
            heads.append({k: mat(p + k) for k in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V")})
        layers.append((heads, mat(f"l{l}.b_O")))
    return mat("X0"), layers, meta


def matmul(A, B):
    Bt = list(zip(*B))
    return [[mp.fdot(zip(row, col)) for col in Bt] for row in A]


def matmul_nt(A, B):
    return [[mp.fdot(zip(row, col)) for col in B] for row in A]


def add_row(M, b):
    return [[x + y for x, y in zip(row, b)] for row in M]


def softmax_rows(A):
    out = []
    for row in A:
        m = max(row)
        e = [mpmath.exp(x - m) for x in row]
        s = mp.fsum(e)
        out.append([x / s for x in e])
    return out


def forward(X, layers, meta):
    dq = int(meta["d_qk"])
    scale = 1 / mpmath.sqrt(dq)
    n, d = len(X), len(X[0])
    for heads, bO in layers:
        out = [[mpf(0)] * d for _ in range(n)]
        for w in heads:
            Q = add_row(matmul(X, w["W_Q"]), w["b_Q"])
            K = add_row(matmul(X, w["W_K"]), w["b_K"])
            V = add_row(matmul(X, w["W_V"]), w["b_V"])
            A = [[x * scale for x in row] for row in matmul_nt(Q, K)]
            T = matmul(matmul(softmax_rows(A), V), w["W_O"])
            out = [[x + y for x, y in zip(r1, r2)] for r1, r2 in zip(out, T)]
        X = add_row(out, bO)
    return X


def digits(a, ref):
    ref = mpf(ref)
    if a == ref:
        return mp.dps
    return int(mpmath.floor(-mpmath.log10(abs(a - ref) / abs(ref))))


def main():
    X, layers, meta = load(sys.argv[1])
    t = time.perf_counter()
    Y = forward(X, layers, meta)
    elapsed = time.perf_counter() - t
    total = mp.fsum(x for row in Y for x in row)
    checks = [digits(Y[0][0], meta["out_0_0"]), digits(Y[-1][-1], meta["out_last"]), digits(total, meta["out_sum"])]
    print(json.dumps({"time": elapsed, "backend": mpmath.libmp.BACKEND, "prec": mp.prec, "agreeing_digits": checks}))


if __name__ == "__main__":
    main()
