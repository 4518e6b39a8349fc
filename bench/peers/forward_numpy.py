#!/usr/bin/python3
"""The forward pass of bench_export's BERT-base model written with numpy.

Usage: forward_numpy.py <model.safetensors> <repetitions>
Prints one JSON line: per-repetition times of the pass (weights already
loaded and packed, as sanpath's are converted inside its timed call), the
largest entry-wise difference from sanpath's output relative to its largest
entry, the OpenBLAS core in use and its thread count.
"""
import ctypes
import json
import sys
import time

import numpy as np

import safetensors_min


def openblas_info():
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "openblas" in line and line.split()[-1].endswith(".so")}
        for path in sorted(libs):
            lib = ctypes.CDLL(path)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return lib.openblas_get_corename().decode(), lib.openblas_get_num_threads()
    except (OSError, AttributeError):
        pass
    return "unknown", 0


def load(path):
    raw, meta = safetensors_min.read(path)
    T = {k: np.frombuffer(b, dtype="<f8").reshape(s) for k, (s, b) in raw.items()}
    L, H = int(meta["layers"]), int(meta["heads"])
    layers = []
    for l in range(L):
        p = f"l{l}."
        hs = [f"{p}h{h}." for h in range(H)]
        layers.append(dict(
            WQ=np.hstack([T[h + "W_Q"] for h in hs]), WK=np.hstack([T[h + "W_K"] for h in hs]),
            WV=np.hstack([T[h + "W_V"] for h in hs]), WO=np.vstack([T[h + "W_O"] for h in hs]),
            bQ=np.concatenate([T[h + "b_Q"] for h in hs]), bK=np.concatenate([T[h + "b_K"] for h in hs]),
            bV=np.concatenate([T[h + "b_V"] for h in hs]), bO=T[p + "b_O"],
            W1=T.get(p + "W_1"), b1=T.get(p + "b_1"), W2=T.get(p + "W_2"), b2=T.get(p + "b_2"),
            g1=T.get(p + "ln1_g"), c1=T.get(p + "ln1_b"), g2=T.get(p + "ln2_g"), c2=T.get(p + "ln2_b")))
    return T["X0"].copy(), layers, meta, T.get("out")


def layer_norm(X, g, b, eps):
    mean = X.mean(axis=1, keepdims=True)
    C = X - mean
    var = (C * C).mean(axis=1, keepdims=True)
    return C / np.sqrt(var + eps) * g + b


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x * x * x)))


def forward(X, layers, meta):
    H, dq = int(meta["heads"]), int(meta["d_qk"])
    skip, mlp, post = meta["skip"] == "1", meta["mlp"] != "none", meta["layernorm"] == "post"
    eps = float(meta["ln_eps"])
    scale = 1.0 / np.sqrt(dq)
    for w in layers:
        Q = X @ w["WQ"] + w["bQ"]
        K = X @ w["WK"] + w["bK"]
        V = X @ w["WV"] + w["bV"]
        heads = np.empty((X.shape[0], V.shape[1]))
        for h in range(H):
            s = slice(h * dq, (h + 1) * dq)
            A = (Q[:, s] @ K[:, s].T) * scale
            A -= A.max(axis=1, keepdims=True)
            P = np.exp(A)
            P /= P.sum(axis=1, keepdims=True)
            heads[:, s] = P @ V[:, s]
        Z = heads @ w["WO"] + w["bO"]
        if skip:
            Z += X
        if post:
            Z = layer_norm(Z, w["g1"], w["c1"], eps)
        if mlp:
            M = gelu_tanh(Z @ w["W1"] + w["b1"]) @ w["W2"] + w["b2"]
            M += Z
            X = layer_norm(M, w["g2"], w["c2"], eps) if post else M
        else:
            X = Z
    return X


def main():
    path, reps = sys.argv[1], int(sys.argv[2])
    X0, layers, meta, expected = load(path)
    times, out = [], None
    for _ in range(reps):
        t = time.perf_counter()
        out = forward(X0, layers, meta)
        times.append(time.perf_counter() - t)
    err = float(np.max(np.abs(out - expected)) / np.max(np.abs(expected))) if expected is not None else None
    core, threads = openblas_info()
    print(json.dumps({"times": times, "max_rel_diff": err, "openblas_core": core, "openblas_threads": threads}))


if __name__ == "__main__":
    main()
