#!/usr/bin/python3
"""`sanpath forward --precision double` on a HuggingFace BERT folder, end to end in numpy.

Usage: forward_numpy_hf.py <bert folder> <comma-separated token ids>
Reads config.json and model.safetensors (F32 or F64, memory-mapped), embeds the
tokens (LayerNorm(word + position + token_type 0)), runs the post-LN encoder in
float64 and measures every layer's relative residual ‖X − 1 mean(X)ᵀ‖_{1,∞} / ‖X‖_{1,∞}
(math.md §3). Prints one JSON line: the relative residuals and the seconds spent
loading, in the forward pass, and in GELU's erf (math.erf element by element: numpy
has no erf; bench/cli_double.py subtracts this time, which favours numpy).
"""
import json
import math
import mmap
import os
import struct
import sys
import time

import numpy as np

DTYPES = {"F64": "<f8", "F32": "<f4"}


def load(folder):
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    f = open(os.path.join(folder, "model.safetensors"), "rb")
    data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    base = 8 + n

    def tensor(name):
        t = header[name]
        lo, hi = t["data_offsets"]
        a = np.frombuffer(data, dtype=DTYPES[t["dtype"]], count=(hi - lo) // int(DTYPES[t["dtype"]][-1]),
                          offset=base + lo)
        return a.reshape(t["shape"]).astype(np.float64)

    return cfg, tensor


def layer_norm(X, g, b, eps):
    C = X - X.mean(axis=1, keepdims=True)
    return C / np.sqrt((C * C).mean(axis=1, keepdims=True) + eps) * g + b


def relative_residual(X):
    R = X - X.mean(axis=0, keepdims=True)
    comp = lambda M: math.sqrt(np.abs(M).sum(axis=0).max() * np.abs(M).sum(axis=1).max())
    return comp(R) / comp(X)


def main():
    folder, ids = sys.argv[1], [int(t) for t in sys.argv[2].split(",")]
    t0 = time.perf_counter()
    cfg, T = load(folder)
    H, d, eps = cfg["num_attention_heads"], cfg["hidden_size"], cfg.get("layer_norm_eps", 1e-12)
    L, dq = cfg["num_hidden_layers"], cfg["hidden_size"] // cfg["num_attention_heads"]
    e = "bert.embeddings."
    n = len(ids)
    word = T(e + "word_embeddings.weight")
    X = word[ids] + T(e + "position_embeddings.weight")[:n] + T(e + "token_type_embeddings.weight")[0]
    X = layer_norm(X, T(e + "LayerNorm.weight"), T(e + "LayerNorm.bias"), eps)
    layers = []
    for l in range(L):
        p = f"bert.encoder.layer.{l}."
        w = {k: T(p + v) for k, v in {
            "WQ": "attention.self.query.weight", "bQ": "attention.self.query.bias",
            "WK": "attention.self.key.weight", "bK": "attention.self.key.bias",
            "WV": "attention.self.value.weight", "bV": "attention.self.value.bias",
            "WO": "attention.output.dense.weight", "bO": "attention.output.dense.bias",
            "g1": "attention.output.LayerNorm.weight", "c1": "attention.output.LayerNorm.bias",
            "W1": "intermediate.dense.weight", "b1": "intermediate.dense.bias",
            "W2": "output.dense.weight", "b2": "output.dense.bias",
            "g2": "output.LayerNorm.weight", "c2": "output.LayerNorm.bias"}.items()}
        layers.append(w)
    t1 = time.perf_counter()
    erf = np.frompyfunc(math.erf, 1, 1)
    erf_seconds = 0.0
    rel = [relative_residual(X)]
    scale = 1.0 / math.sqrt(dq)
    for w in layers:
        Q, K, V = X @ w["WQ"].T + w["bQ"], X @ w["WK"].T + w["bK"], X @ w["WV"].T + w["bV"]
        heads = np.empty_like(V)
        for h in range(H):
            s = slice(h * dq, (h + 1) * dq)
            A = (Q[:, s] @ K[:, s].T) * scale
            A -= A.max(axis=1, keepdims=True)
            P = np.exp(A)
            P /= P.sum(axis=1, keepdims=True)
            heads[:, s] = P @ V[:, s]
        Z = layer_norm(heads @ w["WO"].T + w["bO"] + X, w["g1"], w["c1"], eps)
        Hid = Z @ w["W1"].T + w["b1"]
        te = time.perf_counter()
        E = erf(Hid / math.sqrt(2.0)).astype(np.float64)
        erf_seconds += time.perf_counter() - te
        M = (0.5 * Hid * (1.0 + E)) @ w["W2"].T + w["b2"] + Z
        X = layer_norm(M, w["g2"], w["c2"], eps)
        rel.append(relative_residual(X))
    t2 = time.perf_counter()
    print(json.dumps({"relative_residual": rel, "load_seconds": t1 - t0, "forward_seconds": t2 - t1,
                      "erf_seconds": erf_seconds}))


if __name__ == "__main__":
    main()
