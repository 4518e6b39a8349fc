#!/usr/bin/env python3
"""Figure 2 of Dong, Cordonnier & Loukas (ICML 2021) computed directly with
numpy in float64, from the official notebook's model surgery on a HuggingFace
BERT (post-LN) checkpoint — written from math.md §2 and the HF BERT module
layout, not from sanpath's sources:

  SAN         X' = LN_attn(dense(attention(X)))          (MLP and its LN removed)
  SAN+MLP     Z  = LN_attn(dense(attention(X)));  X' = LN_out(Z + out(act(inter(Z))))
  SAN+skip    X' = LN_attn(dense(attention(X)) + X)
  transformer Z  = LN_attn(dense(attention(X)) + X);  X' = LN_out(Z + out(act(inter(Z))))

Each curve is the relative residual ‖X − 1 mean(X)ᵀ‖_{1,∞} / ‖X‖_{1,∞} per
layer, and over the batch its mean, sample standard deviation (ddof=1), min,
median and max.

  figure2_numpy.py gen-input OUT.safetensors B N D SEED   X of shape [B, N, D]
  figure2_numpy.py check MODEL_DIR X.safetensors RUN.json  compare with
      `sanpath collapse --conventions paper --input X.safetensors --format json`
Exit status 0 when every number agrees to a relative 1e-7, 1 otherwise.
"""
import json
import math
import struct
import sys

import numpy as np

TOL = 1e-7


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        dt = {"F64": "<f8", "F32": "<f4"}[t["dtype"]]
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=dt).astype(np.float64).reshape(t["shape"])
    return out


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        raw = np.ascontiguousarray(a, dtype="<f8").tobytes()
        header[name] = {"dtype": "F64", "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


erf = np.vectorize(math.erf)


def act(name, x):
    if name == "gelu":
        return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))
    if name == "relu":
        return np.maximum(x, 0.0)
    if name in ("gelu_new", "gelu_tanh"):
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    raise SystemExit("unsupported activation " + name)


def linear(t, prefix, x):  # torch nn.Linear: x Wᵀ + b
    return x @ t[prefix + ".weight"].T + t[prefix + ".bias"]


def layer_norm(t, prefix, x, eps):
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * t[prefix + ".weight"] + t[prefix + ".bias"]


def attention(t, p, x, heads):
    q, k, v = (linear(t, p + ".attention.self." + w, x) for w in ("query", "key", "value"))
    n, d = x.shape
    dh = d // heads
    ctx = np.zeros((n, d))
    for h in range(heads):
        s = slice(h * dh, (h + 1) * dh)
        a = q[:, s] @ k[:, s].T / math.sqrt(dh)
        a = np.exp(a - a.max(axis=1, keepdims=True))
        ctx[:, s] = (a / a.sum(axis=1, keepdims=True)) @ v[:, s]
    return linear(t, p + ".attention.output.dense", ctx)


def curve(t, cfg, x, name):
    eps, heads, hact = cfg["layer_norm_eps"], cfg["num_attention_heads"], cfg["hidden_act"]
    out = [x]
    for l in range(cfg["num_hidden_layers"]):
        p = "encoder.layer.%d" % l
        a = attention(t, p, x, heads)
        skip = name in ("SAN+skip", "transformer")
        z = layer_norm(t, p + ".attention.output.LayerNorm", a + x if skip else a, eps)
        if name in ("SAN+MLP", "transformer"):
            f = linear(t, p + ".output.dense", act(hact, linear(t, p + ".intermediate.dense", z)))
            z = layer_norm(t, p + ".output.LayerNorm", z + f, eps)
        x = z
        out.append(x)
    return out


def composite(m):
    return math.sqrt(np.abs(m).sum(axis=0).max() * np.abs(m).sum(axis=1).max())


def relative_residual(x):
    return composite(x - x.mean(axis=0, keepdims=True)) / composite(x)


def main():
    if sys.argv[1] == "gen-input":
        out, b, n, d, seed = sys.argv[2], *map(int, sys.argv[3:7])
        rng = np.random.RandomState(seed)
        write_safetensors(out, {"X": rng.normal(size=(1, 1, d)) + rng.normal(size=(b, n, d))})
        return 0
    model_dir, xfile, run = sys.argv[2:5]
    cfg = json.load(open(model_dir + "/config.json"))
    t = {k[len("bert."):] if k.startswith("bert.") else k: v for k, v in read_safetensors(model_dir + "/model.safetensors").items()}
    X = read_safetensors(xfile)["X"]
    j = json.load(open(run))
    bad = 0

    def same(where, printed, ref):
        nonlocal bad
        v = float(printed)
        if not abs(v - ref) <= TOL * abs(ref):
            print("figure2: %s: sanpath %s, numpy %.17g" % (where, printed, ref))
            bad += 1

    if j.get("conventions") != "paper":
        print("figure2: conventions is %r, not 'paper'" % j.get("conventions"))
        bad += 1
    names = [v["name"] for v in j["variants"]]
    if names != ["SAN", "SAN+MLP", "SAN+skip", "transformer"]:
        print("figure2: variants %s" % names)
        return 1
    checked = 0
    for v in j["variants"]:
        curves = np.array([[relative_residual(x) for x in curve(t, cfg, X[i], v["name"])] for i in range(X.shape[0])])
        for i, inp in enumerate(v["inputs"]):
            for l, layer in enumerate(inp["layers"]):
                same("%s input %d layer %d" % (v["name"], i, l), layer["relative_residual"], curves[i, l])
                checked += 1
        for l, layer in enumerate(v["layers"]):
            st, c = layer["relative_residual"], curves[:, l]
            ref = {"mean": c.mean(), "stddev": c.std(ddof=1), "min": c.min(), "median": np.median(c), "max": c.max()}
            for key, value in ref.items():
                same("%s layer %d %s" % (v["name"], l, key), st[key], value)
                checked += 1
    print("figure2: %d numbers checked against numpy, %d differ" % (checked, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
