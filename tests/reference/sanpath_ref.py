#!/usr/bin/env python3
"""Independent reference implementation of docs/math.md (sanpath's contract) in mpmath.

Written from math.md, the safetensors format and the HuggingFace layout
conventions only -- not from sanpath's C++ sources -- so that the test suite can
check sanpath's numbers against a second implementation at higher precision.
HuggingFace folders (config.json + model.safetensors): bert, gpt2, and, from
shared/docs/families.md and math.md section 8 only, xlnet, t5 (encoder),
gpt_neox, phi, opt, gemma, gemma2, vit (pixel input: --pixels),
llama/mistral/qwen2, qwen3 and gemma3 (text; a gemma3 file's language model); those take
check-forward, residual-norms and check-paths (sums, enumeration, effectiveness; not --rerun)
but not check-bounds.

Library part (import it) and a command line (run it):

  sanpath_ref.py gen-input --out X.safetensors --tokens N --d-model D [--seed S] [--spread F] [--dtype F64|F32|F16|BF16]
  sanpath_ref.py gen-pixels --out P.safetensors --size S [--channels C] [--seed S] [--dtype F32|...]
  sanpath_ref.py check-paths --effectiveness --model PATH ... JSON...   (`sanpath paths --effectiveness`)
  sanpath_ref.py residual-norms --model PATH (--input X.safetensors | --tokens IDS | --pixels P.safetensors)
        --bits B [--digits D] [variant options]
  sanpath_ref.py check-forward --model PATH (--tokens IDS | --input X.safetensors | --pixels P.safetensors)
        [--skip on|off] [--mlp none|plain|residual] [--layernorm none|pre|post]
        [--mask none|causal] [--center mean|median|optimal] [--measures all|LIST] [--max-ref-bits B] JSON...

check-forward recomputes every layer of every given `sanpath forward --format
json` result (same model, input and variant; e.g. one at --precision auto and
one at --precision double) at max(precision_bits) + 128 bits, plus the bits
the smallest printed relative residual loses to cancellation in this direct
evaluation (log2(1/rho): sanpath's centred pass does not lose them), and checks that
each printed number agrees with the reference to the digits sanpath says it
confirmed (a number printed as "< 1e-N" must have reference < 1e-N). A layer's
"measures" (`sanpath forward --measures`, math.md section 9: mu, svd_residual,
cosine, stable_rank, effective_rank, attention_entropy, first_token_mass and the
companions one_minus_cosine, stable_rank_minus_one, effective_rank_minus_one) are
checked the same way, with their digits under the same names in
digits_by_quantity; --measures SPEC also checks that every layer prints exactly
those. Exit 0 when everything agrees, 1 on any disagreement (each printed with
both values).

Conventions (math.md + HF layouts):
  * matrices are lists of rows; X is n x d (tokens = rows).
  * decimal constants (LayerNorm eps, 0.044715) are parsed as decimal strings
    at the working precision; weights are taken exactly as stored (every F16,
    BF16, F32, F64 value is exactly representable in mpmath).
  * median centre of an even number of rows: the mean of the two middle values
    (math.md says "column medians"; any value between the two middle values
    minimises the 1-norm, this is the usual convention).
"""

import argparse
import itertools
import json
import math
import os
import random
import struct
import sys

from mpmath import mp, mpf

# Residuals of collapsed layers lie near 1e-30000: their digits pass through
# Python integers far longer than the 4300 digits CPython converts by default
# (mpmath's pure-Python backend, used when gmpy2 is absent, hits that limit).
if hasattr(sys, "set_int_max_str_digits"):
    sys.set_int_max_str_digits(0)

# ---------------------------------------------------------------------------
# safetensors
# ---------------------------------------------------------------------------

_DTYPES = {"F64": (8, "d"), "F32": (4, "f"), "F16": (2, "e"), "BF16": (2, None)}


def read_safetensors(path):
    """Returns (metadata dict, {name: (shape, flat list of Python floats)}).

    Format: u64 little-endian header length N, N bytes of JSON
    {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}},
    then the data section; offsets are relative to the data section start,
    tensors are row-major little-endian.
    """
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        raise ValueError(f"{path}: header length {n} beyond the end of the file")
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = memoryview(blob)[8 + n:]
    meta = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, info in header.items():
        dtype = info["dtype"]
        shape = list(info["shape"])
        begin, end = info["data_offsets"]
        if dtype not in _DTYPES:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {dtype}")
        size, code = _DTYPES[dtype]
        count = 1
        for s in shape:
            count *= s
        if end - begin != count * size or end > len(data):
            raise ValueError(f"{path}: tensor {name}: bad data_offsets {begin},{end}")
        raw = bytes(data[begin:end])
        if dtype == "BF16":
            halves = struct.unpack(f"<{count}H", raw)
            vals = [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in halves]
        else:
            vals = list(struct.unpack(f"<{count}{code}", raw))
        for v in vals:
            if v != v or v in (float("inf"), float("-inf")):
                raise ValueError(f"{path}: tensor {name}: NaN/Inf")
        tensors[name] = (shape, vals)
    return meta, tensors


def _bf16_bits(x):
    """The bfloat16 nearest to x (ties to even), as its 16 bits."""
    (u,) = struct.unpack("<I", struct.pack("<f", x))
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def round_to_dtype(x, dtype):
    """x rounded to the storage format (the value that write_safetensors stores)."""
    if dtype == "F64":
        return x
    if dtype == "BF16":
        return struct.unpack("<f", struct.pack("<I", _bf16_bits(x) << 16))[0]
    code = _DTYPES[dtype][1]
    return struct.unpack("<" + code, struct.pack("<" + code, x))[0]


def write_safetensors(path, tensors, dtype="F64", metadata=None):
    """tensors: {name: (shape, flat list of floats)}."""
    size, code = _DTYPES[dtype]
    header = {}
    chunks = []
    offset = 0
    for name in sorted(tensors):
        shape, vals = tensors[name]
        if dtype == "BF16":
            raw = struct.pack(f"<{len(vals)}H", *(_bf16_bits(v) for v in vals))
        else:
            raw = struct.pack(f"<{len(vals)}{code}", *vals)
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for c in chunks:
            f.write(c)


def _matrix(shape_vals):
    shape, vals = shape_vals
    if len(shape) != 2:
        raise ValueError(f"expected a matrix, got shape {shape}")
    r, c = shape
    return [[vals[i * c + j] for j in range(c)] for i in range(r)]


def _vector(shape_vals):
    shape, vals = shape_vals
    if len(shape) != 1:
        raise ValueError(f"expected a vector, got shape {shape}")
    return list(vals)


def transpose(M):
    return [list(r) for r in zip(*M)]


# ---------------------------------------------------------------------------
# Model: per layer, per head W_Q (d x d_qk), W_K, W_V (d x d_v), W_O (d_v x d),
# b_Q, b_K, b_V, b_O; MLP W_1 (d x d_ff), b_1, W_2 (d_ff x d), b_2; LayerNorm
# ln1_g, ln1_b, ln2_g, ln2_b. Values are Python floats (exact stored values).
# ---------------------------------------------------------------------------


class Model:
    def __init__(self):
        self.arch = None            # "native" | "bert" | "gpt2"
        self.L = self.H = self.d = self.d_qk = self.d_v = self.d_ff = 0
        self.activation = "gelu"    # relu | gelu | gelu_tanh
        self.eps = "1e-12"          # decimal string
        self.own = {}               # skip (on/off), mlp, layernorm, mask
        self.layers = []            # list of dicts (length L; shared layers repeat the object)
        self.emb = None             # None or dict(kind, word, position, token_type, ln_g, ln_b, eps)


def _json_decimal(text):
    """JSON with every non-integer number kept as its decimal string."""
    return json.loads(text, parse_float=lambda s: s)


def _dec(x):
    return x if isinstance(x, str) else repr(x)


def load_model(path):
    if os.path.isdir(path):
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            cfg = _json_decimal(f.read())
        _, t = read_safetensors(os.path.join(path, "model.safetensors"))
        mt = cfg.get("model_type", "")
        if mt in BERT_LOADERS:
            return BERT_LOADERS[mt](cfg, t)
        if mt == "gpt2":
            return _load_gpt2(cfg, t)
        if mt in FAMILY_LOADERS:
            return FAMILY_LOADERS[mt](cfg, t)
        raise ValueError(f"{path}: model_type {mt!r} not supported by the reference")
    meta, t = read_safetensors(path)
    if meta.get("format") != "sanpath":
        raise ValueError(f"{path}: not a native sanpath file (metadata format {meta.get('format')!r})")
    return _load_native(_json_decimal(meta["sanpath.config"]), t)


def _split_cols(M, start, width):
    return [row[start:start + width] for row in M]


def _load_native(cfg, t):
    m = Model()
    m.arch = "native"
    m.L, m.H, m.d = cfg["layers"], cfg["heads"], cfg["d_model"]
    m.d_qk, m.d_v, m.d_ff = cfg["d_qk"], cfg["d_v"], cfg["d_ff"]
    m.activation = cfg["activation"]
    m.eps = _dec(cfg["ln_eps"])
    skip = cfg["skip"]
    m.own = {"skip": "on" if skip in (True, "on") else "off", "mlp": cfg["mlp"],
             "layernorm": cfg["layernorm"], "mask": cfg["mask"]}
    stored = cfg.get("stored_layers", m.L)
    if stored not in (1, m.L):
        raise ValueError(f"stored_layers {stored} with {m.L} layers")
    stored_layers = []
    for l in range(stored):
        p = f"layers.{l}."
        layer = {"heads": []}
        for h in range(m.H):
            q = f"{p}heads.{h}."
            layer["heads"].append({k: (_matrix(t[q + k]) if k.startswith("W") else _vector(t[q + k]))
                                   for k in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V")})
        layer["b_O"] = _vector(t[p + "b_O"])
        if p + "W_1" in t:
            layer["W_1"], layer["b_1"] = _matrix(t[p + "W_1"]), _vector(t[p + "b_1"])
            layer["W_2"], layer["b_2"] = _matrix(t[p + "W_2"]), _vector(t[p + "b_2"])
        for k in ("ln1_g", "ln1_b", "ln2_g", "ln2_b"):
            if p + k in t:
                layer[k] = _vector(t[p + k])
        stored_layers.append(layer)
    m.layers = [stored_layers[l if stored == m.L else 0] for l in range(m.L)]
    emb = cfg.get("embeddings")
    if emb:
        kind = emb.get("kind")
        e = {"kind": kind, "word": _matrix(t["embeddings.word"]), "position": _matrix(t["embeddings.position"])}
        if kind == "bert":
            e["token_type"] = _matrix(t["embeddings.token_type"])
            e["ln_g"], e["ln_b"] = _vector(t["embeddings.ln_g"]), _vector(t["embeddings.ln_b"])
            e["eps"] = _dec(emb.get("ln_eps", cfg["ln_eps"]))
        elif kind != "gpt2":
            raise ValueError(f"native embeddings kind {kind!r} not supported by the reference")
        m.emb = e
    return m


def _strip(t, prefix):
    """Keys with or without the model prefix (bert. / transformer.)."""
    out = {}
    for k, v in t.items():
        out[k[len(prefix):] if k.startswith(prefix) else k] = v
    return out


def _post_ln_layer(t, H, dh, q, k, v, o, ln1, w1, w2, ln2):
    """A post-LN encoder layer from torch Linear names (weight [out, in], y = x W^T + b): the attention's
    q, k, v (heads in column blocks of dh), its output map o, LayerNorm ln1, the MLP w1, w2, LayerNorm ln2."""
    WQt, WKt, WVt = (transpose(_matrix(t[n + ".weight"])) for n in (q, k, v))
    bQ, bK, bV = (_vector(t[n + ".bias"]) for n in (q, k, v))
    WOt = transpose(_matrix(t[o + ".weight"]))   # [in = H*dh, out = d]
    heads = []
    for h in range(H):
        s = h * dh
        heads.append({"W_Q": _split_cols(WQt, s, dh), "W_K": _split_cols(WKt, s, dh),
                      "W_V": _split_cols(WVt, s, dh), "W_O": WOt[s:s + dh],
                      "b_Q": bQ[s:s + dh], "b_K": bK[s:s + dh], "b_V": bV[s:s + dh]})
    return {"heads": heads, "b_O": _vector(t[o + ".bias"]),
            "ln1_g": _vector(t[ln1 + ".weight"]), "ln1_b": _vector(t[ln1 + ".bias"]),
            "W_1": transpose(_matrix(t[w1 + ".weight"])), "b_1": _vector(t[w1 + ".bias"]),
            "W_2": transpose(_matrix(t[w2 + ".weight"])), "b_2": _vector(t[w2 + ".bias"]),
            "ln2_g": _vector(t[ln2 + ".weight"]), "ln2_b": _vector(t[ln2 + ".bias"])}


_ACTIVATIONS = {"gelu": "gelu", "relu": "relu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}


def _post_ln_model(cfg, L, H, d, d_ff, act, eps):
    m = Model()
    m.arch = "bert"
    m.L, m.H, m.d = L, H, d
    if d % H:
        raise ValueError("config.json: the width is not a multiple of the heads")
    m.d_qk = m.d_v = d // H
    m.d_ff = d_ff
    m.activation = _ACTIVATIONS[act]
    m.eps = _dec(eps)
    m.own = {"skip": "on", "mlp": "residual", "layernorm": "post", "mask": "none"}
    return m


def _load_bert(cfg, t, prefix="bert."):
    """BERT, and RoBERTa (prefix roberta.: BERT's structure, its positions counted from pad_token_id + 1)."""
    t = _strip(t, prefix)
    m = _post_ln_model(cfg, cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["hidden_size"],
                       cfg["intermediate_size"], cfg.get("hidden_act", "gelu"), cfg.get("layer_norm_eps", "1e-12"))
    for l in range(m.L):
        p = f"encoder.layer.{l}."
        m.layers.append(_post_ln_layer(t, m.H, m.d_qk, p + "attention.self.query", p + "attention.self.key",
                                       p + "attention.self.value", p + "attention.output.dense",
                                       p + "attention.output.LayerNorm", p + "intermediate.dense",
                                       p + "output.dense", p + "output.LayerNorm"))
    m.emb = {"kind": "bert", "word": _matrix(t["embeddings.word_embeddings.weight"]),
             "position": _matrix(t["embeddings.position_embeddings.weight"]),
             "token_type": _matrix(t["embeddings.token_type_embeddings.weight"]),
             "ln_g": _vector(t["embeddings.LayerNorm.weight"]), "ln_b": _vector(t["embeddings.LayerNorm.bias"]),
             "eps": m.eps}
    if prefix == "roberta.":
        pad = cfg.get("pad_token_id", 1)
        m.emb.update(offset=pad + 1, pad=pad)
    return m


def _load_roberta(cfg, t):
    return _load_bert(cfg, t, "roberta.")


def _load_distilbert(cfg, t):
    """HF's DistilBERT: LayerNorm(word + position) (no token types; eps 1e-12 throughout), post-LN layers of
    q_lin, k_lin, v_lin, out_lin, sa_layer_norm, ffn.lin1, ffn.lin2, output_layer_norm; config dim, n_layers,
    n_heads, hidden_dim, activation."""
    if cfg.get("sinusoidal_pos_embds"):
        raise ValueError("config.json: sinusoidal_pos_embds: not supported by the reference")
    t = _strip(t, "distilbert.")
    m = _post_ln_model(cfg, cfg["n_layers"], cfg["n_heads"], cfg["dim"], cfg["hidden_dim"],
                       cfg.get("activation", "gelu"), "1e-12")
    for l in range(m.L):
        p = f"transformer.layer.{l}."
        a = p + "attention."
        m.layers.append(_post_ln_layer(t, m.H, m.d_qk, a + "q_lin", a + "k_lin", a + "v_lin", a + "out_lin",
                                       p + "sa_layer_norm", p + "ffn.lin1", p + "ffn.lin2", p + "output_layer_norm"))
    m.emb = {"kind": "bert", "word": _matrix(t["embeddings.word_embeddings.weight"]),
             "position": _matrix(t["embeddings.position_embeddings.weight"]), "token_type": None,
             "ln_g": _vector(t["embeddings.LayerNorm.weight"]), "ln_b": _vector(t["embeddings.LayerNorm.bias"]),
             "eps": m.eps}
    return m


def _load_albert(cfg, t):
    """HF's ALBERT: LayerNorm(word + position + token_type[0]) of width embedding_size, then
    encoder.embedding_hidden_mapping_in to hidden_size; layer l is albert_layer_groups[l // (L / groups)]
    (one layer a group: inner_group_num 1), post-LN: attention.{query, key, value, dense, LayerNorm}, ffn,
    ffn_output, full_layer_layer_norm."""
    if cfg.get("inner_group_num", 1) != 1:
        raise ValueError("config.json: inner_group_num: only 1 is supported by the reference")
    t = _strip(t, "albert.")
    m = _post_ln_model(cfg, cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["hidden_size"],
                       cfg["intermediate_size"], cfg.get("hidden_act", "gelu_new"), cfg.get("layer_norm_eps", "1e-12"))
    groups = cfg.get("num_hidden_groups", 1)
    if m.L % groups:
        raise ValueError("config.json: num_hidden_groups does not divide num_hidden_layers")
    built = {}
    for l in range(m.L):
        g = l // (m.L // groups)
        if g not in built:
            p = f"encoder.albert_layer_groups.{g}.albert_layers.0."
            a = p + "attention."
            built[g] = _post_ln_layer(t, m.H, m.d_qk, a + "query", a + "key", a + "value", a + "dense",
                                      a + "LayerNorm", p + "ffn", p + "ffn_output", p + "full_layer_layer_norm")
        m.layers.append(built[g])
    if "embeddings.word_embeddings.weight" not in t:  # a bare stack (init --layout albert): X input only
        return m
    m.emb = {"kind": "bert", "word": _matrix(t["embeddings.word_embeddings.weight"]),
             "position": _matrix(t["embeddings.position_embeddings.weight"]),
             "token_type": _matrix(t["embeddings.token_type_embeddings.weight"]),
             "ln_g": _vector(t["embeddings.LayerNorm.weight"]), "ln_b": _vector(t["embeddings.LayerNorm.bias"]),
             "eps": m.eps, "map_W": transpose(_matrix(t["encoder.embedding_hidden_mapping_in.weight"])),
             "map_b": _vector(t["encoder.embedding_hidden_mapping_in.bias"])}
    return m


def _load_gpt2(cfg, t):
    t = _strip(t, "transformer.")
    m = Model()
    m.arch = "gpt2"
    m.L, m.H, m.d = cfg["n_layer"], cfg["n_head"], cfg["n_embd"]
    m.d_qk = m.d_v = m.d // m.H
    m.d_ff = cfg.get("n_inner") or 4 * m.d
    act = cfg.get("activation_function", "gelu_new")
    m.activation = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}[act]
    m.eps = _dec(cfg.get("layer_norm_epsilon", "1e-05"))
    m.own = {"skip": "on", "mlp": "residual", "layernorm": "pre", "mask": "causal"}
    d, dh = m.d, m.d_qk
    for l in range(m.L):
        p = f"h.{l}."
        # Conv1D: weight [in, out], y = x W + b. c_attn: output = Q | K | V.
        Wa = _matrix(t[p + "attn.c_attn.weight"])
        ba = _vector(t[p + "attn.c_attn.bias"])
        Wp = _matrix(t[p + "attn.c_proj.weight"])     # [H*dh, d]
        heads = []
        for h in range(m.H):
            s = h * dh
            heads.append({"W_Q": _split_cols(Wa, s, dh), "W_K": _split_cols(Wa, d + s, dh),
                          "W_V": _split_cols(Wa, 2 * d + s, dh), "W_O": Wp[s:s + dh],
                          "b_Q": ba[s:s + dh], "b_K": ba[d + s:d + s + dh], "b_V": ba[2 * d + s:2 * d + s + dh]})
        layer = {"heads": heads, "b_O": _vector(t[p + "attn.c_proj.bias"]),
                 "ln1_g": _vector(t[p + "ln_1.weight"]), "ln1_b": _vector(t[p + "ln_1.bias"]),
                 "W_1": _matrix(t[p + "mlp.c_fc.weight"]), "b_1": _vector(t[p + "mlp.c_fc.bias"]),
                 "W_2": _matrix(t[p + "mlp.c_proj.weight"]), "b_2": _vector(t[p + "mlp.c_proj.bias"]),
                 "ln2_g": _vector(t[p + "ln_2.weight"]), "ln2_b": _vector(t[p + "ln_2.bias"])}
        m.layers.append(layer)
    m.emb = {"kind": "gpt2", "word": _matrix(t["wte.weight"]), "position": _matrix(t["wpe.weight"])}
    return m


# ---------------------------------------------------------------------------
# Arithmetic at the current mp.prec. Products use mp.fdot (exact products,
# one rounding of the sum); sums use mp.fsum.
# ---------------------------------------------------------------------------


def to_mp(M):
    return [[mpf(x) for x in row] for row in M]


def vec_mp(v):
    return [mpf(x) for x in v]


def matmul(A, B):
    """A (n x k) times B (k x m), B given as rows."""
    Bc = [list(c) for c in zip(*B)]
    return [[mp.fdot(a, c) for c in Bc] for a in A]


def add_bias(M, b):
    return [[x + y for x, y in zip(row, b)] for row in M]


def madd(A, B):
    return [[x + y for x, y in zip(ra, rb)] for ra, rb in zip(A, B)]


def layernorm(X, g, b, eps):
    out = []
    for row in X:
        d = len(row)
        mean = mp.fsum(row) / d
        c = [x - mean for x in row]
        var = mp.fsum(x * x for x in c) / d
        s = mp.sqrt(var + eps)
        out.append([ci / s * gi + bi for ci, gi, bi in zip(c, g, b)])
    return out


def activation(name):
    if name == "relu":
        return lambda x: x if x > 0 else mpf(0)
    if name == "gelu":
        r2 = mp.sqrt(2)
        return lambda x: x * (1 + mp.erf(x / r2)) / 2
    if name == "gelu_tanh":
        k = mp.sqrt(2 / mp.pi)
        c = mpf("0.044715")
        return lambda x: x * (1 + mp.tanh(k * (x + c * x * x * x))) / 2
    if name == "gelu_fast":      # families.md: the literal 0.7978845608
        k = mpf("0.7978845608")
        c = mpf("0.044715")
        return lambda x: x * (1 + mp.tanh(k * x * (1 + c * x * x))) / 2
    if name == "silu":
        return lambda x: x / (1 + mp.exp(-x))
    raise ValueError(f"activation {name!r}")


def softmax_rows(A, causal):
    P = []
    for i, row in enumerate(A):
        m = len(row) if not causal else i + 1
        live = row[:m]
        mx = max(live)
        e = [mp.exp(a - mx) for a in live]
        s = mp.fsum(e)
        P.append([x / s for x in e] + [mpf(0)] * (len(row) - m))
    return P


class MpWeights:
    """A model's weights converted to mpf once (exact, precision independent)."""

    def __init__(self, model):
        self.layers = []
        cache = {}
        for layer in model.layers:
            key = id(layer)
            if key not in cache:
                c = {"heads": []}
                for hd in layer["heads"]:
                    c["heads"].append({k: (to_mp(v) if k.startswith("W") else vec_mp(v)) for k, v in hd.items()})
                for k, v in layer.items():
                    if k != "heads":
                        c[k] = to_mp(v) if k.startswith("W") else vec_mp(v)
                cache[key] = c
            self.layers.append(cache[key])


def embed(model, tokens):
    """X^0 from token ids: BERT LayerNorm(word + position + token_type[0]) (RoBERTa's positions from row
    pad_token_id + 1, for sequences without the pad token; DistilBERT without token types; ALBERT's then mapped
    by embedding_hidden_mapping_in); GPT-2 wte + wpe."""
    if isinstance(model, FamilyModel):
        return family_embed(model, tokens)
    e = model.emb
    if e is None:
        raise ValueError("the model has no embeddings")
    offset = e.get("offset", 0)
    X = []
    for i, tok in enumerate(tokens):
        if not 0 <= tok < len(e["word"]):
            raise ValueError(f"token {tok} out of range")
        if e.get("pad") is not None and tok == e["pad"]:
            raise ValueError(f"token {tok} is pad_token_id: HF gives it position padding_idx, not supported")
        if offset + i >= len(e["position"]):
            raise ValueError("sequence longer than the position table")
        row = [mpf(w) + mpf(p) for w, p in zip(e["word"][tok], e["position"][offset + i])]
        if e["kind"] == "bert" and e["token_type"] is not None:
            row = [r + mpf(t) for r, t in zip(row, e["token_type"][0])]
        X.append(row)
    if e["kind"] == "bert":
        X = layernorm(X, vec_mp(e["ln_g"]), vec_mp(e["ln_b"]), mpf(e["eps"]))
    if e.get("map_W") is not None:
        X = add_bias(matmul(X, [vec_mp(r) for r in e["map_W"]]), e["map_b"])
    return X


def attention(X, lw, d_qk, causal, keep_P=None):
    """Attn(X) = sum_h P_h V_h W_O^h + 1 b_O^T (math.md section 1)."""
    n = len(X)
    scale = mp.sqrt(d_qk)
    total = None
    Ps = []
    for hd in lw["heads"]:
        Q = add_bias(matmul(X, hd["W_Q"]), hd["b_Q"])
        K = add_bias(matmul(X, hd["W_K"]), hd["b_K"])
        V = add_bias(matmul(X, hd["W_V"]), hd["b_V"])
        A = [[mp.fdot(Q[i], K[j]) / scale for j in range(n)] for i in range(n)]
        P = softmax_rows(A, causal)
        Ps.append(P)
        out = matmul(matmul(P, V), hd["W_O"])
        total = out if total is None else madd(total, out)
    if keep_P is not None:
        keep_P.append(Ps)
    return add_bias(total, lw["b_O"])


def mlp_f(Z, lw, act):
    Hd = add_bias(matmul(Z, lw["W_1"]), lw["b_1"])
    Hd = [[act(x) for x in row] for row in Hd]
    return add_bias(matmul(Hd, lw["W_2"]), lw["b_2"])


def forward(model, X0, variant, mpw=None, keep_P=False):
    """All X^l, l = 0..L, at the current mp.prec (math.md section 2).

    variant: dict skip (on/off), mlp (none/plain/residual), layernorm (none/pre/post), mask (none/causal).
    Returns (Xs, Ps) with Ps[l][h] the attention matrix of layer l+1, head h (when keep_P).
    """
    if isinstance(model, FamilyModel):
        return family_forward(model, X0, variant, mpw, keep_P)
    mpw = mpw or MpWeights(model)
    eps = mpf(model.eps)
    act = activation(model.activation)
    skip = variant["skip"] == "on"
    mlp = variant["mlp"]
    ln = variant["layernorm"]
    causal = variant["mask"] == "causal"
    Xs = [X0]
    Ps = [] if keep_P else None
    X = X0
    for lw in mpw.layers:
        if ln == "pre":
            att = attention(layernorm(X, lw["ln1_g"], lw["ln1_b"], eps), lw, model.d_qk, causal, Ps)
        else:
            att = attention(X, lw, model.d_qk, causal, Ps)
        Z = madd(X, att) if skip else att
        if ln == "post":
            Z = layernorm(Z, lw["ln1_g"], lw["ln1_b"], eps)
        if mlp == "none":
            Xn = Z
        else:
            f = mlp_f(layernorm(Z, lw["ln2_g"], lw["ln2_b"], eps) if ln == "pre" else Z, lw, act)
            Xn = madd(Z, f) if mlp == "residual" else f
            if ln == "post":
                Xn = layernorm(Xn, lw["ln2_g"], lw["ln2_b"], eps)
        Xs.append(Xn)
        X = Xn
    return Xs, Ps


# ---------------------------------------------------------------------------
# The layout families of shared/docs/families.md (XLNet, T5 encoder, GPT-NeoX,
# Phi, OPT, Gemma, Gemma 2, ViT) and math.md section 8 (Llama, Mistral, Qwen2),
# written from those two files only. A FamilyModel's layer is a dict:
#   heads: per query head W_Q (d x d_qk), b_Q, W_K, b_K, W_V (d x d_v), b_V,
#          W_O (d_v x d) [+ XLNet W_R (d x d_qk), r_w, r_r]; a kv head shared by
#          several query heads is repeated in each (math.md's x W convention);
#   b_O (or None); norms n1, n2 [, n3, n4: Gemma 2] as {g, b} (b None: RMSNorm);
#   mlp {kind plain: W_1 (d x f), b_1, W_2 (f x d), b_2 (biases may be None) |
#        kind gated: W_gate, W_up (d x f), W_down (f x d)}.
# Absent biases are None (zero), absent LayerNorm parameters g = 1, b = 0.
# ---------------------------------------------------------------------------


class FamilyModel(Model):
    def __init__(self, family):
        super().__init__()
        self.arch = family
        self.family = family
        self.norm = "ln"              # ln | rms (x/s * g) | rms1p (Gemma: x/s * (1 + w))
        self.rotary = 0               # rotary dimensions r (0: none); pairs (i, i + r/2), theta_i = base^(-2i/r)
        self.theta = "10000"          # rotary base, decimal string
        self.rope = None              # Gemma 3: per layer (base, linear factor f), decimal strings: angle p theta_i / f
        self.qk_norm = False          # Qwen3, Gemma 3: each head's query and key rows normed (layer keys q_norm,
                                      # k_norm; gain w or 1 + w as self.norm) after the projection, before rotary
        self.parallel = False         # X' = [skip]X + Attn(N1(X)) + [mlp residual] f(N2(X))
        self.scale = None             # None: 1/sqrt(d_qk); "1": no scaling (T5); "x": x^(-1/2) (Gemma 2)
        self.softcap = None           # decimal string c: S = c tanh(S / c)
        self.window = None            # sliding window W (Gemma 2), on the layers in self.sliding
        self.sliding = set()
        self.sandwich = False         # Gemma 2: n3 on Attn's output, n4 on f's output
        self.t5 = None                # {table: nb x H, nb, md}
        self.xlnet = False
        self.clamp_len = -1
        self.ln_options = ("none",)   # accepted --layernorm values (the own placement is added)
        self.image = None             # ViT: (S, p, C)


_ACT = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_fast",
        "relu": "relu", "silu": "silu", "swish": "silu"}


def _act_name(value, allowed, key):
    if value not in allowed:
        raise ValueError(f"config.json: {key}: {value!r} is not one of {sorted(allowed)}")
    return _ACT[value]


def _tensor(t, name):
    if name not in t:
        raise ValueError(f"missing tensor {name}")
    return t[name]


def _mat(t, name):
    return _matrix(_tensor(t, name))


def _vec(t, name, required=True):
    if not required and name not in t:
        return None
    return _vector(_tensor(t, name))


def _lin_T(t, name):
    """A torch Linear weight [out, in] as math.md's W (in x out)."""
    return transpose(_mat(t, name))


def _ln_params(t, prefix, d, affine=True):
    if not affine and prefix + "weight" not in t:
        return {"g": [1.0] * d, "b": [0.0] * d}
    return {"g": _vec(t, prefix + "weight"), "b": _vec(t, prefix + "bias")}


def _rms_params(t, name):
    return {"g": _vec(t, name), "b": None}


def _heads_qkvo(Wq, bq, Wk, bk, Wv, bv, Wo, H, Hkv, dh):
    """Per query head from [out, in] projections: q rows h*dh.., k and v rows of kv head floor(h*Hkv/H),
    W_O^h = o[:, h*dh..]^T (d_h x d). Biases None -> zero vectors."""
    WoT = transpose(Wo)
    z = [0.0] * dh
    sl = lambda b, s: b[s:s + dh] if b is not None else z
    heads = []
    for h in range(H):
        g = h * Hkv // H
        heads.append({"W_Q": transpose(Wq[h * dh:(h + 1) * dh]), "b_Q": sl(bq, h * dh),
                      "W_K": transpose(Wk[g * dh:(g + 1) * dh]), "b_K": sl(bk, g * dh),
                      "W_V": transpose(Wv[g * dh:(g + 1) * dh]), "b_V": sl(bv, g * dh),
                      "W_O": WoT[h * dh:(h + 1) * dh]})
    return heads


def _cfg(cfg, key, default=None, required=False):
    if key not in cfg:
        if required:
            raise ValueError(f"config.json: {key}: missing")
        return default
    return cfg[key]


def _no_rope_scaling(cfg):
    if cfg.get("rope_scaling") is not None:
        raise ValueError("config.json: rope_scaling: not null (not defined)")
    rp = cfg.get("rope_parameters")
    if rp is not None and rp.get("rope_type", "default") != "default":
        raise ValueError("config.json: rope_parameters: rope_type other than default")
    return rp or {}


def _rotary_dims(dh, fraction, key):
    r = int(dh * float(fraction))      # the double product truncated toward zero
    if r % 2:
        raise ValueError(f"config.json: {key}: rotary dimension {r} is odd")
    return r


def _load_xlnet(cfg, t):
    t = _strip(t, "transformer.")
    m = FamilyModel("xlnet")
    d, H, L = cfg["d_model"], cfg["n_head"], cfg["n_layer"]
    if d % 2 or d % H:
        raise ValueError("config.json: d_model: odd or not a multiple of n_head")
    dh = cfg.get("d_head", d // H)
    if dh != d // H:
        raise ValueError("config.json: d_head: not d_model / n_head")
    attn_type = cfg.get("attn_type", "bi")
    if attn_type not in ("bi", "uni"):
        raise ValueError(f"config.json: attn_type: {attn_type!r}")
    if cfg.get("bi_data", False):
        raise ValueError("config.json: bi_data: true")
    if cfg.get("same_length", False) and attn_type == "uni":
        raise ValueError("config.json: same_length: true with attn_type uni")
    m.L, m.H, m.d, m.d_qk, m.d_v, m.d_ff = L, H, d, dh, dh, cfg["d_inner"]
    m.activation = _act_name(cfg.get("ff_activation", "gelu"), ("gelu", "gelu_new", "relu", "silu", "swish"),
                             "ff_activation")
    m.eps = _dec(cfg.get("layer_norm_eps", "1e-12"))
    m.xlnet = True
    m.clamp_len = int(cfg.get("clamp_len", -1))
    m.own = {"skip": "on", "mlp": "residual", "layernorm": "post", "mask": "causal" if attn_type == "uni" else "none"}

    def per_head(name, h):          # stored d x H x d_h; head h: [:, h, :] (d x d_h)
        shape, vals = _tensor(t, name)
        if shape != [d, H, dh]:
            raise ValueError(f"{name}: shape {shape}, expected {[d, H, dh]}")
        return [[vals[(c * H + h) * dh + e] for e in range(dh)] for c in range(d)]

    for l in range(L):
        p = f"layer.{l}."
        a = p + "rel_attn."
        rw, rr = _mat(t, a + "r_w_bias"), _mat(t, a + "r_r_bias")
        heads = []
        for h in range(H):
            heads.append({"W_Q": per_head(a + "q", h), "W_K": per_head(a + "k", h), "W_V": per_head(a + "v", h),
                          "W_R": per_head(a + "r", h), "W_O": transpose(per_head(a + "o", h)),
                          "b_Q": [0.0] * dh, "b_K": [0.0] * dh, "b_V": [0.0] * dh, "r_w": rw[h], "r_r": rr[h]})
        m.layers.append({"heads": heads, "b_O": None, "n1": _ln_params(t, a + "layer_norm.", d),
                         "n2": _ln_params(t, p + "ff.layer_norm.", d),
                         "mlp": {"kind": "plain", "W_1": _lin_T(t, p + "ff.layer_1.weight"),
                                 "b_1": _vec(t, p + "ff.layer_1.bias"), "W_2": _lin_T(t, p + "ff.layer_2.weight"),
                                 "b_2": _vec(t, p + "ff.layer_2.bias")}})
    m.emb = {"kind": "rows", "word": _mat(t, "word_embedding.weight")}
    return m


def t5_bucket(delta, nb, md):
    """families.md's T5 encoder bucket of delta = j - i (key minus query), in exact integers."""
    nbh = nb // 2
    me = nbh // 2
    if me < 1 or md <= me:
        raise ValueError(f"T5 buckets: me = {me}, md = {md}: refused (me < 1 or md <= me)")
    a = abs(delta)
    base = nbh if delta > 0 else 0
    if a < me:
        return base + a
    e = nbh - me
    k = 0                           # the largest k with a^e me^k >= md^k me^e (k <= nb' - 1 - me suffices)
    while me + k < nbh - 1 and a ** e * me ** (k + 1) >= md ** (k + 1) * me ** e:
        k += 1
    return base + min(nbh - 1, me + k)


def _load_t5(cfg, t):
    if cfg.get("is_decoder", False):
        raise ValueError("config.json: is_decoder: true")
    m = FamilyModel("t5")
    d, H, dkv, L, dff = cfg["d_model"], cfg["num_heads"], cfg["d_kv"], cfg["num_layers"], cfg["d_ff"]
    nb = cfg.get("relative_attention_num_buckets", 32)
    md = cfg.get("relative_attention_max_distance", 128)
    t5_bucket(0, nb, md)            # refuses me < 1, md <= me
    ffp = cfg.get("feed_forward_proj", "relu")
    parts = ffp.split("-")
    gated = len(parts) == 2 and parts[0] == "gated"
    if len(parts) > 2 or (len(parts) == 2 and not gated) or parts[-1] not in ("relu", "gelu", "gelu_new", "silu"):
        raise ValueError(f"config.json: feed_forward_proj: {ffp!r}")
    act = "gelu_new" if ffp == "gated-gelu" else parts[-1]
    if "dense_act_fn" in cfg and cfg["dense_act_fn"] != act:
        raise ValueError("config.json: dense_act_fn: contradicts feed_forward_proj")
    if "is_gated_act" in cfg and bool(cfg["is_gated_act"]) != gated:
        raise ValueError("config.json: is_gated_act: contradicts feed_forward_proj")
    m.L, m.H, m.d, m.d_qk, m.d_v, m.d_ff = L, H, d, dkv, dkv, dff
    m.activation = _ACT[act]
    m.eps = _dec(cfg.get("layer_norm_epsilon", "1e-6"))
    m.norm = "rms"
    m.scale = "1"
    m.own = {"skip": "on", "mlp": "residual", "layernorm": "pre", "mask": "none"}
    table = _mat(t, "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight")
    if len(table) != nb or len(table[0]) != H:
        raise ValueError("relative_attention_bias: shape is not nb x H")
    m.t5 = {"table": table, "nb": nb, "md": md}
    for l in range(L):
        p = f"encoder.block.{l}.layer."
        s = p + "0.SelfAttention."
        heads = _heads_qkvo(_mat(t, s + "q.weight"), None, _mat(t, s + "k.weight"), None, _mat(t, s + "v.weight"),
                            None, _mat(t, s + "o.weight"), H, H, dkv)
        f = p + "1.DenseReluDense."
        if gated:
            mlp = {"kind": "gated", "W_gate": _lin_T(t, f + "wi_0.weight"), "W_up": _lin_T(t, f + "wi_1.weight"),
                   "W_down": _lin_T(t, f + "wo.weight")}
        else:
            mlp = {"kind": "plain", "W_1": _lin_T(t, f + "wi.weight"), "b_1": None,
                   "W_2": _lin_T(t, f + "wo.weight"), "b_2": None}
        m.layers.append({"heads": heads, "b_O": None, "n1": _rms_params(t, p + "0.layer_norm.weight"),
                         "n2": _rms_params(t, p + "1.layer_norm.weight"), "mlp": mlp})
    word = "shared.weight" if "shared.weight" in t else "encoder.embed_tokens.weight"
    m.emb = {"kind": "rows", "word": _mat(t, word)}
    return m


def _load_gpt_neox(cfg, t):
    t = _strip(t, "gpt_neox.")
    m = FamilyModel("gpt_neox")
    d, H, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    if d % H:
        raise ValueError("config.json: hidden_size: not a multiple of num_attention_heads")
    dh = d // H
    rp = _no_rope_scaling(cfg)
    frac = rp.get("partial_rotary_factor", cfg.get("rotary_pct", 0.25))
    m.theta = _dec(rp.get("rope_theta", cfg.get("rotary_emb_base", 10000)))
    m.rotary = _rotary_dims(dh, frac, "rotary_pct")
    m.L, m.H, m.d, m.d_qk, m.d_v, m.d_ff = L, H, d, dh, dh, cfg["intermediate_size"]
    m.activation = _act_name(cfg.get("hidden_act", "gelu"), ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast",
                                                             "relu"), "hidden_act")
    m.eps = _dec(cfg.get("layer_norm_eps", "1e-5"))
    m.parallel = bool(cfg.get("use_parallel_residual", True))
    bias = bool(cfg.get("attention_bias", True))
    m.own = {"skip": "on", "mlp": "residual", "layernorm": "pre", "mask": "causal"}
    for l in range(L):
        p = f"layers.{l}."
        W = _mat(t, p + "attention.query_key_value.weight")          # [3d, d], rows h*3dh + c*dh + j
        b = _vec(t, p + "attention.query_key_value.bias") if bias else [0.0] * (3 * d)
        WoT = transpose(_mat(t, p + "attention.dense.weight"))
        heads = []
        for h in range(H):
            s = 3 * dh * h
            heads.append({"W_Q": transpose(W[s:s + dh]), "b_Q": b[s:s + dh],
                          "W_K": transpose(W[s + dh:s + 2 * dh]), "b_K": b[s + dh:s + 2 * dh],
                          "W_V": transpose(W[s + 2 * dh:s + 3 * dh]), "b_V": b[s + 2 * dh:s + 3 * dh],
                          "W_O": WoT[h * dh:(h + 1) * dh]})
        m.layers.append({"heads": heads, "b_O": _vec(t, p + "attention.dense.bias") if bias else None,
                         "n1": _ln_params(t, p + "input_layernorm.", d),
                         "n2": _ln_params(t, p + "post_attention_layernorm.", d),
                         "mlp": {"kind": "plain", "W_1": _lin_T(t, p + "mlp.dense_h_to_4h.weight"),
                                 "b_1": _vec(t, p + "mlp.dense_h_to_4h.bias"),
                                 "W_2": _lin_T(t, p + "mlp.dense_4h_to_h.weight"),
                                 "b_2": _vec(t, p + "mlp.dense_4h_to_h.bias")}})
    m.emb = {"kind": "rows", "word": _mat(t, "embed_in.weight")}
    return m


def _load_phi(cfg, t):
    t = _strip(t, "model.")
    m = FamilyModel("phi")
    d, H, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    Hkv = cfg.get("num_key_value_heads") or H
    if d % H:
        raise ValueError("config.json: hidden_size: not a multiple of num_attention_heads")
    if H % Hkv:
        raise ValueError("config.json: num_key_value_heads: does not divide num_attention_heads")
    if cfg.get("qk_layernorm", False):
        raise ValueError("config.json: qk_layernorm: true")
    dh = d // H
    rp = _no_rope_scaling(cfg)
    m.theta = _dec(rp.get("rope_theta", cfg.get("rope_theta", 10000)))
    m.rotary = _rotary_dims(dh, rp.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 0.5)),
                            "partial_rotary_factor")
    m.L, m.H, m.d, m.d_qk, m.d_v, m.d_ff = L, H, d, dh, dh, cfg["intermediate_size"]
    m.activation = _act_name(cfg.get("hidden_act", "gelu_new"), ("gelu", "gelu_new", "gelu_pytorch_tanh",
                                                                 "gelu_fast", "relu"), "hidden_act")
    m.eps = _dec(cfg.get("layer_norm_eps", "1e-5"))
    m.parallel = True
    m.own = {"skip": "on", "mlp": "residual", "layernorm": "pre", "mask": "causal"}
    for l in range(L):
        p = f"layers.{l}."
        a = p + "self_attn."
        heads = _heads_qkvo(_mat(t, a + "q_proj.weight"), _vec(t, a + "q_proj.bias"), _mat(t, a + "k_proj.weight"),
                            _vec(t, a + "k_proj.bias"), _mat(t, a + "v_proj.weight"), _vec(t, a + "v_proj.bias"),
                            _mat(t, a + "dense.weight"), H, Hkv, dh)
        ln = _ln_params(t, p + "input_layernorm.", d)
        m.layers.append({"heads": heads, "b_O": _vec(t, a + "dense.bias"), "n1": ln, "n2": ln,
                         "mlp": {"kind": "plain", "W_1": _lin_T(t, p + "mlp.fc1.weight"),
                                 "b_1": _vec(t, p + "mlp.fc1.bias"), "W_2": _lin_T(t, p + "mlp.fc2.weight"),
                                 "b_2": _vec(t, p + "mlp.fc2.bias")}})
    m.emb = {"kind": "rows", "word": _mat(t, "embed_tokens.weight")}
    return m


def _load_opt(cfg, t):
    t = _strip(_strip(t, "model.decoder."), "decoder.")
    m = FamilyModel("opt")
    d, H, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    if d % H:
        raise ValueError("config.json: hidden_size: not a multiple of num_attention_heads")
    dh = d // H
    m.L, m.H, m.d, m.d_qk, m.d_v, m.d_ff = L, H, d, dh, dh, cfg["ffn_dim"]
    m.activation = _act_name(cfg.get("activation_function", "relu"), ("gelu", "gelu_new", "gelu_pytorch_tanh",
                                                                      "gelu_fast", "relu"), "activation_function")
    m.eps = "1e-5"
    pre = bool(cfg.get("do_layer_norm_before", True))
    e = cfg.get("word_embed_proj_dim") or d
    bias = bool(cfg.get("enable_bias", True))
    affine = bool(cfg.get("layer_norm_elementwise_affine", True))
    m.own = {"skip": "on", "mlp": "residual", "layernorm": "pre" if pre else "post", "mask": "causal"}
    for l in range(L):
        p = f"layers.{l}."
        a = p + "self_attn."
        bv = (lambda n: _vec(t, n)) if bias else (lambda n: None)
        heads = _heads_qkvo(_mat(t, a + "q_proj.weight"), bv(a + "q_proj.bias"), _mat(t, a + "k_proj.weight"),
                            bv(a + "k_proj.bias"), _mat(t, a + "v_proj.weight"), bv(a + "v_proj.bias"),
                            _mat(t, a + "out_proj.weight"), H, H, dh)
        m.layers.append({"heads": heads, "b_O": bv(a + "out_proj.bias"),
                         "n1": _ln_params(t, p + "self_attn_layer_norm.", d, affine),
                         "n2": _ln_params(t, p + "final_layer_norm.", d, affine),
                         "mlp": {"kind": "plain", "W_1": _lin_T(t, p + "fc1.weight"), "b_1": bv(p + "fc1.bias"),
                                 "W_2": _lin_T(t, p + "fc2.weight"), "b_2": bv(p + "fc2.bias")}})
    word = _mat(t, "embed_tokens.weight")
    if len(word[0]) != e:
        raise ValueError(f"embed_tokens: width {len(word[0])}, word_embed_proj_dim {e}")
    proj = None
    if e != d:
        if "project_in.weight" not in t:
            raise ValueError("project_in.weight: missing with word_embed_proj_dim != hidden_size")
        proj = _mat(t, "project_in.weight")           # [d, e]
    pos = _mat(t, "embed_positions.weight")
    P = cfg.get("max_position_embeddings", len(pos) - 2)
    m.emb = {"kind": "opt", "word": word, "project_in": proj, "position": pos, "max_positions": P}
    return m


def _gemma_common(cfg, t, family):
    t = _strip(t, "model.")
    m = FamilyModel(family)
    d, H, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    Hkv = _cfg(cfg, "num_key_value_heads", required=True)
    dh = _cfg(cfg, "head_dim", required=True)
    if H % Hkv:
        raise ValueError("config.json: num_key_value_heads: does not divide num_attention_heads")
    if dh % 2:
        raise ValueError("config.json: head_dim: odd")
    rp = _no_rope_scaling(cfg)
    if float(cfg.get("partial_rotary_factor", 1)) != 1:
        raise ValueError("config.json: partial_rotary_factor: not 1")
    if cfg.get("use_bidirectional_attention", False):
        raise ValueError("config.json: use_bidirectional_attention: true")
    m.L, m.H, m.d, m.d_qk, m.d_v, m.d_ff = L, H, d, dh, dh, _cfg(cfg, "intermediate_size", required=True)
    m.theta = _dec(rp.get("rope_theta", cfg.get("rope_theta", 10000)))
    m.rotary = dh
    m.eps = _dec(cfg.get("rms_norm_eps", "1e-6"))
    m.norm = "rms1p"
    m.own = {"skip": "on", "mlp": "residual", "layernorm": "pre", "mask": "causal"}
    bias = bool(cfg.get("attention_bias", False))
    for l in range(L):
        p = f"layers.{l}."
        a = p + "self_attn."
        bv = (lambda n: _vec(t, n)) if bias else (lambda n: None)
        heads = _heads_qkvo(_mat(t, a + "q_proj.weight"), bv(a + "q_proj.bias"), _mat(t, a + "k_proj.weight"),
                            bv(a + "k_proj.bias"), _mat(t, a + "v_proj.weight"), bv(a + "v_proj.bias"),
                            _mat(t, a + "o_proj.weight"), H, Hkv, dh)
        layer = {"heads": heads, "b_O": bv(a + "o_proj.bias"),
                 "n1": _rms_params(t, p + "input_layernorm.weight"),
                 "mlp": {"kind": "gated", "W_gate": _lin_T(t, p + "mlp.gate_proj.weight"),
                         "W_up": _lin_T(t, p + "mlp.up_proj.weight"), "W_down": _lin_T(t, p + "mlp.down_proj.weight")}}
        if family == "gemma":
            layer["n2"] = _rms_params(t, p + "post_attention_layernorm.weight")
        else:
            layer["n3"] = _rms_params(t, p + "post_attention_layernorm.weight")
            layer["n2"] = _rms_params(t, p + "pre_feedforward_layernorm.weight")
            layer["n4"] = _rms_params(t, p + "post_feedforward_layernorm.weight")
        m.layers.append(layer)
    m.emb = {"kind": "scaled", "word": _mat(t, "embed_tokens.weight")}
    return m


def _load_gemma(cfg, t):
    m = _gemma_common(cfg, t, "gemma")
    act = cfg.get("hidden_activation")
    m.activation = "gelu_tanh" if act is None else _act_name(act, ("gelu_pytorch_tanh", "gelu_new", "gelu"),
                                                             "hidden_activation")
    return m


def _load_gemma2(cfg, t):
    m = _gemma_common(cfg, t, "gemma2")
    act = cfg.get("hidden_activation") or "gelu_pytorch_tanh"
    m.activation = _act_name(act, ("gelu_pytorch_tanh", "gelu_new", "gelu"), "hidden_activation")
    m.sandwich = True
    m.scale = _dec(_cfg(cfg, "query_pre_attn_scalar", required=True))
    cap = cfg.get("attn_logit_softcapping", "50.0")
    m.softcap = None if cap is None else _dec(cap)
    w = cfg.get("sliding_window", 4096)
    m.window = None if w is None else int(w)
    types = cfg.get("layer_types")
    if types is None:
        m.sliding = {l for l in range(m.L) if l % 2 == 0}
    else:
        if len(types) != m.L or any(x not in ("sliding_attention", "full_attention") for x in types):
            raise ValueError("config.json: layer_types: wrong length or entries")
        m.sliding = {l for l, x in enumerate(types) if x == "sliding_attention"}
    return m


def _load_vit(cfg, t):
    t = _strip(t, "vit.")
    m = FamilyModel("vit")
    d, H, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    if d % H:
        raise ValueError("config.json: hidden_size: not a multiple of num_attention_heads")
    dh = d // H
    S, p, C = cfg.get("image_size", 224), cfg.get("patch_size", 16), cfg.get("num_channels", 3)
    if not isinstance(S, int) or not isinstance(p, int):
        raise ValueError("config.json: image_size/patch_size: not square")
    m.L, m.H, m.d, m.d_qk, m.d_v, m.d_ff = L, H, d, dh, dh, cfg["intermediate_size"]
    m.activation = _act_name(cfg.get("hidden_act", "gelu"), ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu"),
                             "hidden_act")
    m.eps = _dec(cfg.get("layer_norm_eps", "1e-12"))
    m.own = {"skip": "on", "mlp": "residual", "layernorm": "pre", "mask": "none"}
    m.ln_options = ("none", "post")
    m.image = (S, p, C)
    qkv_bias = bool(cfg.get("qkv_bias", True))
    for l in range(L):
        q = f"encoder.layer.{l}."
        a = q + "attention.attention."
        bv = (lambda n: _vec(t, n)) if qkv_bias else (lambda n: None)
        heads = _heads_qkvo(_mat(t, a + "query.weight"), bv(a + "query.bias"), _mat(t, a + "key.weight"),
                            bv(a + "key.bias"), _mat(t, a + "value.weight"), bv(a + "value.bias"),
                            _mat(t, q + "attention.output.dense.weight"), H, H, dh)
        m.layers.append({"heads": heads, "b_O": _vec(t, q + "attention.output.dense.bias"),
                         "n1": _ln_params(t, q + "layernorm_before.", d),
                         "n2": _ln_params(t, q + "layernorm_after.", d),
                         "mlp": {"kind": "plain", "W_1": _lin_T(t, q + "intermediate.dense.weight"),
                                 "b_1": _vec(t, q + "intermediate.dense.bias"),
                                 "W_2": _lin_T(t, q + "output.dense.weight"), "b_2": _vec(t, q + "output.dense.bias")}})
    shape, vals = _tensor(t, "embeddings.patch_embeddings.projection.weight")
    if shape != [d, C, p, p]:
        raise ValueError(f"patch projection: shape {shape}, expected {[d, C, p, p]}")
    g = S // p
    cls = _tensor(t, "embeddings.cls_token")
    pos = _tensor(t, "embeddings.position_embeddings")
    if pos[0] != [1, g * g + 1, d] or cls[0] != [1, 1, d]:
        raise ValueError("position_embeddings / cls_token: bad shape")
    patch_b = _vec(t, "embeddings.patch_embeddings.projection.bias", required=False) or [0.0] * d
    m.emb = {"kind": "vit", "patch": vals, "patch_b": patch_b,
             "cls": cls[1], "position": [pos[1][i * d:(i + 1) * d] for i in range(g * g + 1)]}
    return m


def _load_llama(cfg, t):
    """math.md section 8: Llama, Mistral, Qwen2 (pre-RMSNorm, full rotary, grouped kv heads, gated silu MLP)."""
    t = _strip(t, "model.")
    m = FamilyModel(cfg["model_type"])
    d, H, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    Hkv = cfg.get("num_key_value_heads") or H
    dh = cfg.get("head_dim") or d // H
    _no_rope_scaling(cfg)
    if float(cfg.get("partial_rotary_factor", 1)) != 1:
        raise ValueError("config.json: partial_rotary_factor: not 1")
    m.L, m.H, m.d, m.d_qk, m.d_v, m.d_ff = L, H, d, dh, dh, cfg["intermediate_size"]
    m.activation = _act_name(cfg.get("hidden_act", "silu"), ("silu",), "hidden_act")
    m.eps = _dec(cfg.get("rms_norm_eps", "1e-6"))
    m.theta = _dec(cfg.get("rope_theta", 10000))
    m.rotary = dh
    m.norm = "rms"
    m.own = {"skip": "on", "mlp": "residual", "layernorm": "pre", "mask": "causal"}
    for l in range(L):
        p = f"layers.{l}."
        a = p + "self_attn."
        bv = lambda n: _vec(t, n, required=False)
        heads = _heads_qkvo(_mat(t, a + "q_proj.weight"), bv(a + "q_proj.bias"), _mat(t, a + "k_proj.weight"),
                            bv(a + "k_proj.bias"), _mat(t, a + "v_proj.weight"), bv(a + "v_proj.bias"),
                            _mat(t, a + "o_proj.weight"), H, Hkv, dh)
        m.layers.append({"heads": heads, "b_O": None, "n1": _rms_params(t, p + "input_layernorm.weight"),
                         "n2": _rms_params(t, p + "post_attention_layernorm.weight"),
                         "mlp": {"kind": "gated", "W_gate": _lin_T(t, p + "mlp.gate_proj.weight"),
                                 "W_up": _lin_T(t, p + "mlp.up_proj.weight"),
                                 "W_down": _lin_T(t, p + "mlp.down_proj.weight")}})
    m.emb = {"kind": "rows", "word": _mat(t, "embed_tokens.weight")}
    return m


def _qkn_layers(m, t, H, Hkv, dh, bias, sandwich):
    """Qwen3 / Gemma 3 layers (families.md, query/key norms): Llama's projections (biases on q, k, v and o when
    attention_bias), q_norm / k_norm [d_h], two norms (Qwen3) or Gemma 2's four, a gated MLP."""
    for l in range(m.L):
        p = f"layers.{l}."
        a = p + "self_attn."
        bv = (lambda n: _vec(t, n)) if bias else (lambda n: None)
        heads = _heads_qkvo(_mat(t, a + "q_proj.weight"), bv(a + "q_proj.bias"), _mat(t, a + "k_proj.weight"),
                            bv(a + "k_proj.bias"), _mat(t, a + "v_proj.weight"), bv(a + "v_proj.bias"),
                            _mat(t, a + "o_proj.weight"), H, Hkv, dh)
        layer = {"heads": heads, "b_O": bv(a + "o_proj.bias"), "n1": _rms_params(t, p + "input_layernorm.weight"),
                 "q_norm": _rms_params(t, a + "q_norm.weight"), "k_norm": _rms_params(t, a + "k_norm.weight"),
                 "mlp": {"kind": "gated", "W_gate": _lin_T(t, p + "mlp.gate_proj.weight"),
                         "W_up": _lin_T(t, p + "mlp.up_proj.weight"), "W_down": _lin_T(t, p + "mlp.down_proj.weight")}}
        for k in ("q_norm", "k_norm"):
            if len(layer[k]["g"]) != dh:
                raise ValueError(f"{a}{k}.weight: length {len(layer[k]['g'])}, expected head_dim {dh}")
        if sandwich:
            layer["n3"] = _rms_params(t, p + "post_attention_layernorm.weight")
            layer["n2"] = _rms_params(t, p + "pre_feedforward_layernorm.weight")
            layer["n4"] = _rms_params(t, p + "post_feedforward_layernorm.weight")
        else:
            layer["n2"] = _rms_params(t, p + "post_attention_layernorm.weight")
        m.layers.append(layer)
    m.emb = {"kind": "scaled" if sandwich else "rows", "word": _mat(t, "embed_tokens.weight")}


def _load_qwen3(cfg, t):
    """families.md, Qwen3: Llama's layer with the query/key norm (gain w), head_dim default 128, one base."""
    t = _strip(t, "model.")
    m = FamilyModel("qwen3")
    d, H, L = (_cfg(cfg, k, required=True) for k in ("hidden_size", "num_attention_heads", "num_hidden_layers"))
    Hkv = cfg.get("num_key_value_heads") or H
    if "head_dim" in cfg and cfg["head_dim"] is None:
        raise ValueError("config.json: head_dim: null")
    dh = cfg.get("head_dim", 128)
    if dh % 2:
        raise ValueError("config.json: head_dim: odd")
    if H % Hkv:
        raise ValueError("config.json: num_key_value_heads: does not divide num_attention_heads")
    rs = cfg.get("rope_scaling")
    if rs is not None and rs != {"rope_type": "default"}:
        raise ValueError("config.json: rope_scaling: other than null or default")
    theta = cfg.get("rope_theta", 10000)
    rp = cfg.get("rope_parameters")
    if rp is not None:
        if rp.get("rope_type", "default") != "default":
            raise ValueError("config.json: rope_parameters: rope_type other than default")
        if "rope_theta" in rp:
            if "rope_theta" in cfg and mpf(_dec(rp["rope_theta"])) != mpf(_dec(theta)):
                raise ValueError("config.json: rope_theta: disagrees with rope_parameters.rope_theta")
            theta = rp["rope_theta"]
    if float(cfg.get("partial_rotary_factor", 1)) != 1:
        raise ValueError("config.json: partial_rotary_factor: not 1")
    if cfg.get("use_sliding_window", False):
        raise ValueError("config.json: use_sliding_window: true")
    types = cfg.get("layer_types")
    if types is not None and (len(types) != L or any(x != "full_attention" for x in types)):
        raise ValueError("config.json: layer_types: wrong length or not all full_attention")
    m.L, m.H, m.d, m.d_qk, m.d_v, m.d_ff = L, H, d, dh, dh, _cfg(cfg, "intermediate_size", required=True)
    m.activation = _act_name(cfg.get("hidden_act", "silu"), ("silu",), "hidden_act")
    m.eps = _dec(cfg.get("rms_norm_eps", "1e-6"))
    m.theta = _dec(theta)
    m.rotary = dh
    m.norm = "rms"
    m.qk_norm = True
    m.own = {"skip": "on", "mlp": "residual", "layernorm": "pre", "mask": "causal"}
    _qkn_layers(m, t, H, Hkv, dh, bool(cfg.get("attention_bias", False)), sandwich=False)
    return m


# families.md, Gemma 3: Gemma3TextConfig's defaults (None: null is allowed and has a meaning)
GEMMA3_DEFAULTS = {"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
                   "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                   "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": "1e-6", "rope_theta": "1000000",
                   "rope_local_base_freq": "10000", "query_pre_attn_scalar": 256}
GEMMA3_NULLABLE = {"rope_scaling": None, "sliding_window": 4096, "sliding_window_pattern": 6, "layer_types": None,
                   "attention_bias": False, "attn_logit_softcapping": None, "use_bidirectional_attention": False}


def _gemma3_rope(entry, key):
    """(rope_type, factor) of a rope_scaling or rope_parameters entry: default -> 1, linear -> factor >= 1."""
    if entry is None:
        return "1"
    allowed = {"rope_type", "type", "factor"} | ({"rope_theta"} if key == "rope_parameters" else set())
    if not isinstance(entry, dict) or set(entry) - allowed:
        raise ValueError(f"config.json: {key}: keys other than {sorted(allowed)}")
    kind = entry.get("rope_type", entry.get("type", "default"))
    if kind == "default":
        return "1"
    if kind != "linear":
        raise ValueError(f"config.json: {key}: rope_type {kind!r} is not supported")
    f = entry.get("factor")
    if isinstance(f, bool) or not isinstance(f, (int, float, str)) or not mpf(_dec(f)) >= 1:
        raise ValueError(f"config.json: {key}: linear factor not a number >= 1")
    return _dec(f)


def _load_gemma3(cfg, t):
    """families.md, Gemma 3 (text; a gemma3 file's language model): Gemma 2's four norms without the cap, the
    query/key norm (gain 1 + w), the layer pattern, a rotary base and linear factor per layer type."""
    m = FamilyModel("gemma3")
    if cfg.get("model_type") == "gemma3":
        tc = cfg.get("text_config")
        if not isinstance(tc, dict):
            raise ValueError("config.json: text_config: missing or not an object")
        if tc.get("model_type", "gemma3_text") != "gemma3_text":
            raise ValueError("config.json: text_config.model_type: not gemma3_text")
        prefix = "language_model.model." if any(k.startswith("language_model.model.") for k in t) \
            else "model.language_model."
        t = {k[len(prefix):]: v for k, v in t.items() if k.startswith(prefix)}
        refused_token = int(cfg.get("image_token_index", 262144))
    else:
        tc, refused_token = cfg, None
        t = _strip(t, "model.")

    def get(key):
        if key in GEMMA3_DEFAULTS:
            if key in tc and tc[key] is None:
                raise ValueError(f"config.json: {key}: null")
            return tc.get(key, GEMMA3_DEFAULTS[key])
        return tc.get(key, GEMMA3_NULLABLE[key])

    d, H, L, Hkv, dh = (get(k) for k in ("hidden_size", "num_attention_heads", "num_hidden_layers",
                                          "num_key_value_heads", "head_dim"))
    if dh % 2:
        raise ValueError("config.json: head_dim: odd")
    if H % Hkv:
        raise ValueError("config.json: num_key_value_heads: does not divide num_attention_heads")
    if get("use_bidirectional_attention"):
        raise ValueError("config.json: use_bidirectional_attention: true")
    if get("attn_logit_softcapping") is not None:
        raise ValueError("config.json: attn_logit_softcapping: not null")
    if float(tc.get("partial_rotary_factor", 1)) != 1:
        raise ValueError("config.json: partial_rotary_factor: not 1")
    qpas = get("query_pre_attn_scalar")
    if not mpf(_dec(qpas)) > 0:
        raise ValueError("config.json: query_pre_attn_scalar: not > 0")
    types = get("layer_types")
    if types is None:
        P = get("sliding_window_pattern")
        if isinstance(P, bool) or not isinstance(P, int) or P < 1:
            raise ValueError("config.json: sliding_window_pattern: not a positive integer")
        if "_sliding_window_pattern" in tc and tc["_sliding_window_pattern"] != P:
            raise ValueError("config.json: _sliding_window_pattern: contradicts sliding_window_pattern")
        types = ["full_attention" if (l + 1) % P == 0 else "sliding_attention" for l in range(L)]
    if len(types) != L or any(x not in ("sliding_attention", "full_attention") for x in types):
        raise ValueError("config.json: layer_types: wrong length or entries")
    m.sliding = {l for l, x in enumerate(types) if x == "sliding_attention"}
    W = get("sliding_window")
    if m.sliding and (W is None or W < 1):
        raise ValueError("config.json: sliding_window: null or below 1 while some layer slides")
    m.window = W
    # rotary per layer type: sliding (rope_local_base_freq, 1), full (rope_theta, rope_scaling's linear factor)
    base = {"sliding_attention": (_dec(get("rope_local_base_freq")), "1"),
            "full_attention": (_dec(get("rope_theta")), _gemma3_rope(get("rope_scaling"), "rope_scaling"))}
    rp = tc.get("rope_parameters")
    if rp is not None:
        if not isinstance(rp, dict) or not rp or set(rp) - set(base):
            raise ValueError("config.json: rope_parameters: not keyed by layer type")
        given = {"sliding_attention": ("rope_local_base_freq" in tc, False),
                 "full_attention": ("rope_theta" in tc, "rope_scaling" in tc)}
        for kind, entry in rp.items():
            f = _gemma3_rope(entry, "rope_parameters")
            th = _dec(entry["rope_theta"]) if "rope_theta" in entry else base[kind][0]
            if (given[kind][0] and mpf(th) != mpf(base[kind][0])) or (
                    (given[kind][1] or kind == "sliding_attention") and mpf(f) != mpf(base[kind][1])):
                raise ValueError(f"config.json: rope_parameters: {kind} disagrees with the rope keys")
            base[kind] = (th, f)
    m.rope = [base[x] for x in types]
    m.L, m.H, m.d, m.d_qk, m.d_v, m.d_ff = L, H, d, dh, dh, get("intermediate_size")
    m.activation = _act_name(get("hidden_activation"), ("gelu_pytorch_tanh", "gelu_new", "gelu"),
                             "hidden_activation")
    m.eps = _dec(get("rms_norm_eps"))
    m.rotary = dh
    m.norm = "rms1p"
    m.qk_norm = True
    m.sandwich = True
    m.scale = _dec(qpas)
    m.own = {"skip": "on", "mlp": "residual", "layernorm": "pre", "mask": "causal"}
    _qkn_layers(m, t, H, Hkv, dh, bool(get("attention_bias")), sandwich=True)
    m.emb["refused_token"] = refused_token
    if len(m.emb["word"]) != get("vocab_size"):
        raise ValueError(f"embed_tokens.weight: {len(m.emb['word'])} rows, vocab_size {get('vocab_size')}")
    return m


BERT_LOADERS = {"bert": _load_bert, "roberta": _load_roberta, "distilbert": _load_distilbert,
                "albert": _load_albert}
FAMILY_LOADERS = {"xlnet": _load_xlnet, "t5": _load_t5, "gpt_neox": _load_gpt_neox, "phi": _load_phi,
                  "opt": _load_opt, "gemma": _load_gemma, "gemma2": _load_gemma2, "vit": _load_vit,
                  "llama": _load_llama, "mistral": _load_llama, "qwen2": _load_llama, "qwen3": _load_qwen3,
                  "gemma3_text": _load_gemma3, "gemma3": _load_gemma3}


def _to_mp_any(v):
    if isinstance(v, dict):
        return {k: _to_mp_any(x) for k, x in v.items()}
    if isinstance(v, list):
        if v and isinstance(v[0], list):
            return [[mpf(x) for x in row] for row in v]
        if v and isinstance(v[0], dict):
            return [_to_mp_any(x) for x in v]
        return [mpf(x) for x in v]
    return v


class FamilyMpWeights:
    """A FamilyModel's layers converted to mpf once (exact)."""

    def __init__(self, model):
        cache = {}
        self.layers = []
        for layer in model.layers:
            if id(layer) not in cache:
                cache[id(layer)] = _to_mp_any(layer)
            self.layers.append(cache[id(layer)])
        self.t5_table = to_mp(model.t5["table"]) if model.t5 else None


def family_norm(model, nw, X):
    """LayerNorm (g, b), RMSNorm x/sqrt(mean(x^2) + eps) * g, or Gemma's * (1 + w), per row."""
    eps = mpf(model.eps)
    if model.norm == "ln":
        return layernorm(X, nw["g"], nw["b"], eps)
    gain = [1 + w for w in nw["g"]] if model.norm == "rms1p" else nw["g"]
    out = []
    for row in X:
        s = mp.sqrt(mp.fsum(x * x for x in row) / len(row) + eps)
        out.append([x / s * g for x, g in zip(row, gain)])
    return out


def rotate_half(M, r, theta, factor="1"):
    """Rows of M at positions 0..n-1: pairs (i, i + r/2), i < r/2, rotated by p theta^(-2i/r) / factor (working
    precision; factor: Gemma 3's linear rotary scale)."""
    half = r // 2
    base = mpf(theta)
    freqs = [mp.power(base, mpf(-2 * i) / r) / mpf(factor) for i in range(half)]
    out = []
    for p, row in enumerate(M):
        new = list(row)
        for i, f in enumerate(freqs):
            c, s = mp.cos(p * f), mp.sin(p * f)
            new[i] = row[i] * c - row[i + half] * s
            new[i + half] = row[i + half] * c + row[i] * s
        out.append(new)
    return out


def xlnet_sinusoid(p, d):
    """R(p) = [sin(p theta_0..), cos(p theta_0..)], theta_k = 10000^(-2k/d)."""
    th = [mp.power(10000, mpf(-2 * k) / d) for k in range(d // 2)]
    return [mp.sin(p * x) for x in th] + [mp.cos(p * x) for x in th]


def visible_keys(model, layer_index, n, causal):
    """Per query row i, the keys it sees: all; j <= i (causal); and i - j < W on Gemma 2's and 3's sliding layers."""
    w = model.window if (causal and model.window is not None and layer_index in model.sliding) else None
    return [[j for j in range(n) if (not causal or j <= i) and (w is None or i - j < w)] for i in range(n)]


def family_scores(model, mpw, lw, layer_index, X, h):
    """Head h's logits A (n x n, before the mask): projections, rotary, position terms, scale, softcap."""
    hd = lw["heads"][h]
    n = len(X)
    Q = matmul(X, hd["W_Q"])
    K = matmul(X, hd["W_K"])
    if hd.get("b_Q") is not None:
        Q = add_bias(Q, hd["b_Q"])
    if hd.get("b_K") is not None:
        K = add_bias(K, hd["b_K"])
    if model.qk_norm:  # families.md: each head's rows normed after the projection, before the rotation
        Q, K = family_norm(model, lw["q_norm"], Q), family_norm(model, lw["k_norm"], K)
    if model.rotary:
        theta, f = model.rope[layer_index] if model.rope else (model.theta, "1")
        Q, K = rotate_half(Q, model.rotary, theta, f), rotate_half(K, model.rotary, theta, f)
    if model.xlnet:
        c = model.clamp_len
        pos = lambda i, j: max(-c, min(c, i - j)) if c > 0 else i - j
        RW = {}
        for p in {pos(i, j) for i in range(n) for j in range(n)}:
            RW[p] = matmul([xlnet_sinusoid(p, model.d)], hd["W_R"])[0]
        qw = [[q + b for q, b in zip(row, hd["r_w"])] for row in Q]
        qr = [[q + b for q, b in zip(row, hd["r_r"])] for row in Q]
        s = mp.sqrt(model.d_qk)
        return [[(mp.fdot(qw[i], K[j]) + mp.fdot(qr[i], RW[pos(i, j)])) / s for j in range(n)] for i in range(n)]
    if model.scale == "1":
        A = [[mp.fdot(Q[i], K[j]) for j in range(n)] for i in range(n)]
    elif model.scale is None:
        s = mp.sqrt(model.d_qk)
        A = [[mp.fdot(Q[i], K[j]) / s for j in range(n)] for i in range(n)]
    else:
        s = 1 / mp.sqrt(mpf(model.scale))
        A = [[mp.fdot(Q[i], K[j]) * s for j in range(n)] for i in range(n)]
    if model.t5:
        T, nb, md = mpw.t5_table, model.t5["nb"], model.t5["md"]
        A = [[A[i][j] + T[t5_bucket(j - i, nb, md)][h] for j in range(n)] for i in range(n)]
    if model.softcap is not None:
        c = mpf(model.softcap)
        A = [[c * mp.tanh(a / c) for a in row] for row in A]
    return A


def family_attention(model, mpw, lw, layer_index, X, causal, keep=None):
    n = len(X)
    vis = visible_keys(model, layer_index, n, causal)
    total = None
    Ps = []
    for h, hd in enumerate(lw["heads"]):
        A = family_scores(model, mpw, lw, layer_index, X, h)
        P = []
        for i in range(n):
            mx = max(A[i][j] for j in vis[i])
            e = {j: mp.exp(A[i][j] - mx) for j in vis[i]}
            s = mp.fsum(e.values())
            P.append([e[j] / s if j in e else mpf(0) for j in range(n)])
        Ps.append(P)
        V = matmul(X, hd["W_V"])
        if hd.get("b_V") is not None:
            V = add_bias(V, hd["b_V"])
        out = matmul(matmul(P, V), hd["W_O"])
        total = out if total is None else madd(total, out)
    if keep is not None:
        keep.append(Ps)
    return add_bias(total, lw["b_O"]) if lw.get("b_O") is not None else total


def family_mlp(model, m, Z):
    act = activation(model.activation)
    if m["kind"] == "gated":
        G = matmul(Z, m["W_gate"])
        U = matmul(Z, m["W_up"])
        return matmul([[act(g) * u for g, u in zip(rg, ru)] for rg, ru in zip(G, U)], m["W_down"])
    Hd = matmul(Z, m["W_1"])
    if m.get("b_1") is not None:
        Hd = add_bias(Hd, m["b_1"])
    out = matmul([[act(x) for x in row] for row in Hd], m["W_2"])
    return add_bias(out, m["b_2"]) if m.get("b_2") is not None else out


def check_family_variant(model, variant):
    own = model.own["layernorm"]
    ln = variant["layernorm"]
    if ln != own and ln not in model.ln_options:
        raise ValueError(f"{model.family}: --layernorm {ln} refused (takes none or the model's own, {own})")
    if model.parallel and variant["mlp"] == "plain":
        raise ValueError(f"{model.family}: --mlp plain refused on a parallel block")


def family_layer(model, mpw, lw, l, X, variant, keep=None):
    """One layer under the variant options (families.md's variant tables)."""
    skip, mlp, ln = variant["skip"] == "on", variant["mlp"], variant["layernorm"]
    causal = variant["mask"] == "causal"
    N = lambda key, Y: family_norm(model, lw[key], Y) if ln != "none" else Y
    att = lambda Y: family_attention(model, mpw, lw, l, Y, causal, keep)
    if model.parallel:
        out = att(N("n1", X))
        if skip:
            out = madd(X, out)
        if mlp == "residual":
            out = madd(out, family_mlp(model, lw["mlp"], N("n2", X)))
        return out
    if ln == "post":
        a = att(X)
        Z = family_norm(model, lw["n1"], madd(X, a) if skip else a)
        if mlp == "none":
            return Z
        f = family_mlp(model, lw["mlp"], Z)
        return family_norm(model, lw["n2"], madd(Z, f) if mlp == "residual" else f)
    a = att(N("n1", X))
    if model.sandwich and ln != "none":
        a = family_norm(model, lw["n3"], a)
    Z = madd(X, a) if skip else a
    if mlp == "none":
        return Z
    f = family_mlp(model, lw["mlp"], N("n2", Z))
    if model.sandwich and ln != "none":
        f = family_norm(model, lw["n4"], f)
    return madd(Z, f) if mlp == "residual" else f


def family_forward(model, X0, variant, mpw=None, keep_P=False):
    check_family_variant(model, variant)
    if not isinstance(mpw, FamilyMpWeights):
        mpw = FamilyMpWeights(model)
    Xs, Ps = [X0], ([] if keep_P else None)
    X = X0
    for l, lw in enumerate(mpw.layers):
        X = family_layer(model, mpw, lw, l, X, variant, Ps)
        Xs.append(X)
    return Xs, Ps


def family_embed(model, tokens):
    """X^0 from token ids: the rows; Gemma sqrt(d) * rows; OPT rows [project_in^T] + positions[i + 2]."""
    e = model.emb
    if e["kind"] == "vit":
        raise ValueError("vit: token input refused (give --pixels)")
    if not tokens:
        raise ValueError("empty token sequence")
    for tok in tokens:
        if not 0 <= tok < len(e["word"]):
            raise ValueError(f"token {tok} out of range")
        if tok == e.get("refused_token"):
            raise ValueError(f"token {tok} is image_token_index (gemma3: image features are not computed)")
    X = [vec_mp(e["word"][tok]) for tok in tokens]
    if e["kind"] == "scaled":
        r = mp.sqrt(model.d)
        X = [[r * x for x in row] for row in X]
    elif e["kind"] == "opt":
        if len(tokens) > e["max_positions"] or len(tokens) + 2 > len(e["position"]):
            raise ValueError("opt: input longer than max_position_embeddings")
        if e["project_in"] is not None:
            X = matmul(X, transpose(to_mp(e["project_in"])))
        X = [[x + mpf(p) for x, p in zip(row, e["position"][i + 2])] for i, row in enumerate(X)]
    return X


def vit_embed(model, path):
    """X^0 = [cls; e_0; ...; e_{N-1}] + pos, patch k = r g + s row-major, e_k = b + sum W[o,c,i,j] x[c, rp+i, sp+j]."""
    if model.image is None:
        raise ValueError(f"{model.family}: pixel input refused (not a ViT)")
    _, t = read_safetensors(path)
    if "pixel_values" not in t:
        raise ValueError(f"{path}: no tensor named pixel_values")
    shape, x = t["pixel_values"]
    S, p, C = model.image
    if len(shape) == 4:
        if shape[0] != 1:
            raise ValueError(f"{path}: {shape[0]} images; the reference takes one")
        shape = shape[1:]
    if len(shape) != 3 or shape[0] != C or shape[1] != S or shape[2] != S:
        raise ValueError(f"{path}: pixel_values shape {shape}, expected {[C, S, S]}")
    e, d, g = model.emb, model.d, S // p
    W = e["patch"]
    pix = lambda c, y, z: x[(c * S + y) * S + z]
    X = [[mpf(v) for v in e["cls"]]]
    for r in range(g):
        for s in range(g):
            col = [pix(c, r * p + i, s * p + j) for c in range(C) for i in range(p) for j in range(p)]
            X.append([mp.fdot(W[o * C * p * p:(o + 1) * C * p * p], col) + e["patch_b"][o] for o in range(d)])
    return [[v + mpf(q) for v, q in zip(row, e["position"][k])] for k, row in enumerate(X)]


# ---------------------------------------------------------------------------
# Norms and residuals (math.md section 3)
# ---------------------------------------------------------------------------


def norm_one(M):
    return max(mp.fsum(abs(r[j]) for r in M) for j in range(len(M[0])))


def norm_inf(M):
    return max(mp.fsum(abs(x) for x in r) for r in M)


def norm_composite(M):
    return mp.sqrt(norm_one(M) * norm_inf(M))


def norm_frobenius(M):
    return mp.sqrt(mp.fsum(x * x for r in M for x in r))


def centre(X, kind):
    n = len(X)
    cols = list(zip(*X))
    if kind == "mean":
        return [mp.fsum(c) / n for c in cols]
    if kind == "median":
        out = []
        for c in cols:
            s = sorted(c)
            out.append(s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2)
        return out
    raise ValueError(f"centre {kind!r}")


def residual(X, kind="mean"):
    c = centre(X, kind)
    return [[x - ci for x, ci in zip(r, c)] for r in X]


def layer_stats(X, kind="mean"):
    """The quantities `sanpath forward` reports per layer, as mpf."""
    R = residual(X, kind)
    r1, ri = norm_one(R), norm_inf(R)
    s = {"residual_one": r1, "residual_inf": ri, "residual_composite": mp.sqrt(r1 * ri),
         "residual_frobenius": norm_frobenius(R),
         "norm_composite": norm_composite(X), "norm_frobenius": norm_frobenius(X)}
    s["relative_residual"] = s["residual_composite"] / s["norm_composite"]
    return s


def optimal_enclosure_checks(X):
    """Facts any enclosure [lower, upper] of min_c ||X - 1c^T||_{1,inf} must satisfy.

    lower per math.md = sqrt(min_c||.||_1 * min_c||.||_inf); min_c||.||_1 is the
    median-centred 1-norm (exact); min_c||.||_inf lies in [max_{i,k}||x_i-x_k||_1/2,
    min over the mean and median centres]. upper <= composite at mean and median
    centres (both are candidates) and upper >= the true minimum >= lower.
    Returns (lower_lo, lower_hi, upper_hi).
    """
    n1_med = norm_one(residual(X, "median"))
    inf_hi = min(norm_inf(residual(X, "mean")), norm_inf(residual(X, "median")))
    inf_lo = max(mp.fsum(abs(a - b) for a, b in zip(X[i], X[k]))
                 for i in range(len(X)) for k in range(len(X))) / 2
    comp_hi = min(norm_composite(residual(X, "mean")), norm_composite(residual(X, "median")))
    return mp.sqrt(n1_med * inf_lo), mp.sqrt(n1_med * inf_hi), comp_hi


# ---------------------------------------------------------------------------
# Measures beyond the residual (math.md section 9)
# ---------------------------------------------------------------------------

#: The measures of math.md section 9, in the order of its table.
MEASURES = ("mu", "svd_residual", "cosine", "stable_rank", "effective_rank", "attention_entropy",
            "first_token_mass")
#: The companions printed beside the measures that tend to 1 in a collapsed layer.
MEASURE_COMPANIONS = {"cosine": "one_minus_cosine", "stable_rank": "stable_rank_minus_one",
                      "effective_rank": "effective_rank_minus_one"}
#: Measures of the attention matrices: layers >= 1 only.
ATTENTION_MEASURES = ("attention_entropy", "first_token_mass")
#: Every key a layer's "measures" object may hold.
MEASURE_KEYS = MEASURES + tuple(MEASURE_COMPANIONS.values())


def singular_values(X):
    """(sigma, u_1, v_1): the singular values sigma_1 >= sigma_2 >= ... of X (min(n, d) of them) and the
    leading pair (u_1: n entries, v_1: d entries), at the working precision, by mpmath's svd_r.

    svd_r works on X itself (Householder bidiagonalisation, then QR sweeps), not on a Gram matrix: every
    sigma_k comes with an absolute error of about 2^-prec sigma_1, and u_1, v_1 with 2^-prec (the gap
    sigma_1 - sigma_2 is about sigma_1 in a collapsed layer). sigma_2 / sigma_1 = rho therefore keeps
    prec - log2(1/rho) bits: the cancellation bits the checker adds (_cancellation_bits)."""
    U, S, V = mp.svd_r(mp.matrix(X))
    s = [S[k] for k in range(len(S))]
    order = sorted(range(len(s)), key=lambda k: -s[k])
    k1 = order[0]
    return [s[k] for k in order], [U[i, k1] for i in range(U.rows)], [V[k1, j] for j in range(V.cols)]


def effective_rank_log(sigma):
    """H = -sum_k p_k ln p_k, p_k = sigma_k / sum_j sigma_j (p_k = 0 omitted), without cancellation:
    the leading term p_1 ln(1/p_1) is p_1 log1p(sum_{k>=2} sigma_k / sigma_1)."""
    s = [x for x in sigma if x > 0]
    if not s:
        return None
    total = mp.fsum(s)
    tail = mp.fsum(s[1:])
    return (s[0] * mp.log1p(tail / s[0]) + mp.fsum(x * mp.log(total / x) for x in s[1:])) / total


def layer_measures(X, Ps=None):
    """math.md section 9's measures of one layer's output X (n x d) and, given Ps (the layer's attention
    matrices, one n x n per head, masked entries 0; layers >= 1), of its attention, as mpf at the working
    precision: {name: value} over MEASURE_KEYS (the attention ones only with Ps; cosine and its companion
    only with n >= 2 and no zero row). The companions are computed without cancellation against 1:
      1 - cos(x_i, x_j) = |x_i/|x_i| - x_j/|x_j||^2 / 2,
      stable_rank - 1 = sum_{k>=2} sigma_k^2 / sigma_1^2,
      effective_rank - 1 = expm1(H) with H from effective_rank_log.
    The reference holds X whole: a collapsed layer needs the working precision to exceed log2(1/rho)
    (rho = sigma_2 / sigma_1, about the relative residual) by the digits checked."""
    n, d = len(X), len(X[0])
    m = {"mu": norm_frobenius(residual(X, "mean"))}
    sigma, u, v = singular_values(X)
    s1 = sigma[0]
    E = [[X[i][j] - s1 * u[i] * v[j] for j in range(d)] for i in range(n)]
    m["svd_residual"] = norm_composite(E) / norm_composite(X)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    lengths = [mp.sqrt(mp.fsum(x * x for x in row)) for row in X]
    if pairs and all(lengths):       # undefined for n = 1 or a zero row
        unit = [[x / r for x in row] for row, r in zip(X, lengths)]
        m["cosine"] = mp.fsum(mp.fdot(unit[i], unit[j]) for i, j in pairs) / len(pairs)
        m["one_minus_cosine"] = mp.fsum(mp.fsum((a - b) ** 2 for a, b in zip(unit[i], unit[j]))
                                        for i, j in pairs) / (2 * len(pairs))
    m["stable_rank"] = norm_frobenius(X) ** 2 / s1 ** 2
    m["stable_rank_minus_one"] = mp.fsum(x * x for x in sigma[1:]) / s1 ** 2
    H = effective_rank_log(sigma)
    m["effective_rank"] = mp.exp(H)
    m["effective_rank_minus_one"] = mp.expm1(H)
    if Ps is not None:
        rows = len(Ps) * n
        m["attention_entropy"] = mp.fsum(-p * mp.log(p) for P in Ps for row in P for p in row if p > 0) / rows
        m["first_token_mass"] = mp.fsum(P[i][0] for P in Ps for i in range(n)) / rows
    return m


def expected_measure_keys(spec, layer):
    """(required, allowed) keys of a layer's "measures" object for `--measures SPEC` (all or a comma list)."""
    names = MEASURES if spec == "all" else tuple(x.strip() for x in spec.split(",") if x.strip())
    for x in names:
        if x not in MEASURES:
            raise ValueError(f"--measures: unknown measure {x!r} (known: {', '.join(MEASURES)})")
    if layer == 0:
        names = tuple(x for x in names if x not in ATTENTION_MEASURES)
    companions = tuple(MEASURE_COMPANIONS[x] for x in names if x in MEASURE_COMPANIONS)
    if spec == "all":
        return set(names + companions), set(names + companions)
    return set(names), set(names + companions)


# ---------------------------------------------------------------------------
# Path decomposition by length (math.md section 4) and the bounds (section 5)
# ---------------------------------------------------------------------------


def identity(d):
    return [[mpf(1) if i == j else mpf(0) for j in range(d)] for i in range(d)]


def _int_matrix(M):
    """A matrix of Python floats as (integer matrix N, e) with M = N 2^e exactly."""
    ratios = [[x.as_integer_ratio() for x in row] for row in M]
    e = max((den.bit_length() - 1 for row in ratios for _, den in row), default=0)
    return [[num << (e - (den.bit_length() - 1)) for num, den in row] for row in ratios], -e


def exact_product_norms(A, B):
    """||A B||_1, ||A B||_inf of float matrices, from the exact integer product; one rounding each."""
    (NA, ea), (NB, eb) = _int_matrix(A), _int_matrix(B)
    cols = list(zip(*NB))
    C = [[sum(x * y for x, y in zip(r, c)) for c in cols] for r in NA]
    one = max(sum(abs(r[j]) for r in C) for j in range(len(C[0])))
    inf = max(sum(abs(x) for x in r) for r in C)
    return mp.ldexp(mpf(one), ea + eb), mp.ldexp(mpf(inf), ea + eb)


def beta_parts(layer):
    """Per head of a (float) layer: (||W_Q W_K^T||_1, ||W_V W_O||_{1,inf}), exact products."""
    out = []
    for hd in layer["heads"]:
        qk1, _ = exact_product_norms(hd["W_Q"], transpose(hd["W_K"]))
        vo1, voi = exact_product_norms(hd["W_V"], hd["W_O"])
        out.append((qk1, mp.sqrt(vo1 * voi)))
    return out


def head_products(lw):
    """Per head: W_h = W_V^h W_O^h and W_QK^h = W_Q^h W_K^h^T (both d x d)."""
    return ([matmul(hd["W_V"], hd["W_O"]) for hd in lw["heads"]],
            [matmul(hd["W_Q"], transpose(hd["W_K"])) for hd in lw["heads"]])


def length_sums(model, X0, variant, mpw=None):
    """S_k^L for k = 0..L, the bias b^L and X^L, with the P matrices of the actual forward pass.

    Only for attention-only networks (mlp none, layernorm none):
      S_k^0 = X if k = 0 else 0;  S_k^l = [skip] S_k^{l-1} + sum_h P_h^l S_{k-1}^{l-1} W_h^l
      b^0 = 0;  b^l = (S^l)^T b^{l-1} + c_l,  S^l = [I +] sum_h W_h^l,  c_l = sum_h W_O^{h T} b_V^h + b_O
    so that X^L = sum_k S_k^L + 1 b^T. Returns (S list, b, X^L).
    """
    if variant["mlp"] != "none" or variant["layernorm"] != "none":
        raise ValueError("the path decomposition needs mlp none and layernorm none")
    if isinstance(model, FamilyModel):
        mpw = mpw if isinstance(mpw, FamilyMpWeights) else FamilyMpWeights(model)
        Xs, Ps = family_forward(model, X0, variant, mpw, keep_P=True)
    else:
        mpw = mpw or MpWeights(model)
        Xs, Ps = forward(model, X0, variant, mpw, keep_P=True)
    skip = variant["skip"] == "on"
    n, d, L = len(X0), model.d, model.L
    zero = [[mpf(0)] * d for _ in range(n)]
    S = [X0] + [zero] * L
    b = [mpf(0)] * d
    for l, lw in enumerate(mpw.layers):
        # Y W_h is evaluated as (Y W_V) W_O: the same number, without forming the d x d product.
        newS = []
        for k in range(L + 1):
            acc = [row[:] for row in S[k]] if skip else [[mpf(0)] * d for _ in range(n)]
            if k > 0 and any(x != 0 for row in S[k - 1] for x in row):
                for P, hd in zip(Ps[l], lw["heads"]):
                    acc = madd(acc, matmul(P, matmul(matmul(S[k - 1], hd["W_V"]), hd["W_O"])))
            newS.append(acc)
        S = newS
        # b^T S^l = [b^T +] sum_h (b^T W_V) W_O ;  c_l = sum_h W_O^T b_V + b_O
        bS = [b[:] if skip else [mpf(0)] * d]
        for hd in lw["heads"]:
            bS.append(matmul(matmul([b], hd["W_V"]), hd["W_O"])[0])
            if hd.get("b_V") is not None:  # the families' absent biases are None (zero)
                bS.append(matmul([hd["b_V"]], hd["W_O"])[0])
        bO = lw["b_O"] if lw.get("b_O") is not None else [mpf(0)] * d
        b = [mp.fsum(v[j] for v in bS) + bO[j] for j in range(d)]
    return S, b, Xs[-1]


def length_sum_stats(S, XL):
    """Per length k: Frobenius norm, composite residual (mean centre), share ||S_k||_F / ||X^L||_F."""
    nX = norm_frobenius(XL)
    out = []
    for Sk in S:
        f = norm_frobenius(Sk)
        out.append({"frobenius": f, "residual_composite": norm_composite(residual(Sk, "mean")), "share": f / nX})
    return out


LIPSCHITZ = {"relu": "1", "gelu": "1.1290", "gelu_tanh": "1.1300"}


def bound_constants(model, variant, gamma="1", mpw=None, parts=None):
    """beta[l][h] = ||W_QK^{l,h}||_1 ||W_h^l||_{1,inf}; per layer a_l; a = from beta = max beta_l.

    a = 4 gamma beta H lambda / sqrt(d_qk), lambda = 1 without MLP, and for a plain MLP
    Lip(act) ||W_1||_{1,inf} ||W_2||_{1,inf} (per layer; the uniform a takes the largest).
    """
    mpw = mpw or MpWeights(model)
    parts = parts or [beta_parts(layer) for layer in model.layers]
    g = mpf(gamma)
    beta, lam = [], []
    for lw, pl in zip(mpw.layers, parts):
        beta.append([qk * vo for qk, vo in pl])
        if variant["mlp"] == "plain":
            lam.append(mpf(LIPSCHITZ[model.activation]) * norm_composite(lw["W_1"]) * norm_composite(lw["W_2"]))
        else:
            lam.append(mpf(1))
    k = 4 * g * model.H / mp.sqrt(model.d_qk)
    a_l = [k * max(bl) * ll for bl, ll in zip(beta, lam)]
    a = k * max(max(bl) for bl in beta) * max(lam)
    return beta, a_l, a


def uniform_bound_log10(a, r0, L):
    """log10 of a^((3^L - 1)/2) r0^(3^L) (Theorems 2.2/2.3), exact integer exponents."""
    e = 3 ** L
    return mpf((e - 1) // 2) * mp.log10(a) + e * mp.log10(r0)


def layerwise_bound_log10(a_l, r0, L):
    """log10 r_L <= sum_{k=1..L} 3^(L-k) log10 a_k + 3^L log10 r_0."""
    return mp.fsum(mpf(3 ** (L - k)) * mp.log10(a_l[k - 1]) for k in range(1, L + 1)) + 3 ** L * mp.log10(r0)


# ---------------------------------------------------------------------------
# Comparing with sanpath's printed numbers
# ---------------------------------------------------------------------------


def parse_printed(s):
    """'6.82e0' -> ('value', mpf, significant digits printed); '< 1e-12' -> ('below', mpf bound, 0)."""
    s = s.strip()
    if s.startswith("<"):
        return "below", mpf(s[1:].strip()), 0
    mant = s.lower().split("e")[0].lstrip("+-")
    digits = mant.replace(".", "").lstrip("0")
    return "value", mpf(s), max(len(digits), 1)


def check_number(printed, digits, ref, counted=False):
    """(ok, message, |diff| / tolerance or None). One unit in the last checked significant digit.

    checked digits D = min(confirmed digits, printed significant digits); pass when
    |printed - ref| <= 10^(e - D + 1), e the decimal exponent of max(|printed|, |ref|).
    A bound '< 1e-N' passes when |ref| < 1e-N. `counted`: `digits` is the count
    sanpath prints beside the value (digits_by_quantity, a row's or a statistic's
    digits), which never exceeds the digits printed: D is then that count.
    """
    kind, v, p = parse_printed(printed)
    digits = digits or 0          # null: nothing confirmed
    if counted and kind == "value" and v != 0 and digits > p:  # an exact 0 has every digit
        return False, f"printed {printed}: {p} significant digits, fewer than its count {digits}", None
    if kind == "below":
        ok = abs(ref) < v
        return ok, f"printed {printed}, reference {mp.nstr(ref, 20)}", None
    err = abs(v - ref)
    D = min(digits, p)
    if D <= 0:
        return True, f"printed {printed} (no confirmed digits, not checked)", None
    big = max(abs(v), abs(ref))
    if big == 0:
        return True, "both zero", mpf(0)
    e = int(mp.floor(mp.log10(big)))
    tol = mpf(10) ** (e - D + 1)
    ok = err <= tol
    return ok, (f"printed {printed} ({D} digits checked), reference {mp.nstr(ref, D + 5)}, "
                f"|diff| {mp.nstr(err, 3)} vs tolerance {mp.nstr(tol, 2)}"), err / tol



def _check_optimal_intervals(ck, where, rec, printed, X, stats):
    """A certified run at the optimal centre (math.md sections 3 and 10): an interval for every printed
    quantity and for composite_lower; the centre-free norms of X contain the exact values; the composite at
    the best centre found lies between the true minimum (>= lower_lo) and the mean's and median's composites
    (both are candidates), and the lower end is at most the true minimum (<= upper_hi)."""
    iv = rec.get("intervals", {})
    want = set(printed) | {"residual_composite_lower"}
    ck.checked += 1
    if set(iv) != want:
        ck.fail(f"{where}: a certified optimal-centre run with intervals {sorted(iv)}, expected {sorted(want)}")
        return
    for q in ("norm_composite", "norm_frobenius"):
        ck.interval(f"{where} {q}", iv[q][0], iv[q][1], stats[q])
    lo_lo, _, up_hi = optimal_enclosure_checks(X)
    c_lo, c_hi = mpf(iv["residual_composite"][0]), mpf(iv["residual_composite"][1])
    l_lo = mpf(iv["residual_composite_lower"][0])
    ck.checked += 1
    if not (c_hi >= lo_lo and c_lo <= up_hi and l_lo <= up_hi):
        ck.fail(f"{where}: residual_composite [{iv['residual_composite'][0]}, {iv['residual_composite'][1]}] and "
                f"residual_composite_lower from {iv['residual_composite_lower'][0]} contradict the true minimum's "
                f"enclosure [{mp.nstr(lo_lo, 17)}, {mp.nstr(up_hi, 17)}]")


def _check_optimal(where, rec, X, fail):
    """The optimal centre's enclosure [composite_lower, composite] against certified facts.

    math.md: lower = sqrt(min_c||.||_1 * min_c||.||_inf), upper = the least composite over
    candidate centres; one, inf, frobenius are then the upper's centre's norms.
    Slack: one unit in the last checked digit of each printed number.
    """
    res, dq = rec["residual"], rec["digits_by_quantity"]

    def val(key, dkey):
        kind, v, p = parse_printed(res[key])
        if kind != "value":
            return None, None
        D = min(dq.get(dkey, 0), p)
        return v, (mpf(10) ** (1 - D) if D > 0 else None)

    lo_lo, lo_hi, up_hi = optimal_enclosure_checks(X)
    n1_med = norm_one(residual(X, "median"))
    n = len(X)
    inf_lo = max(mp.fsum(abs(a - b) for a, b in zip(X[i], X[k])) for i in range(n) for k in range(n)) / 2
    up, su = val("composite", "residual_composite")
    lo, sl = val("composite_lower", "residual_composite_lower")
    one, s1 = val("one", "residual_one")
    inf, si = val("inf", "residual_inf")
    count = 0
    if lo is not None and sl is not None:
        count += 1
        if not lo_lo * (1 - sl) <= lo <= lo_hi * (1 + sl):
            fail(f"{where}: composite_lower {res['composite_lower']} ({dq.get('residual_composite_lower')} digits "
                 f"claimed) is not math.md's sqrt(min_c||.||_1 min_c||.||_inf), which lies in "
                 f"[{mp.nstr(lo_lo, 17)}, {mp.nstr(lo_hi, 17)}] (min_c||.||_1 = {mp.nstr(n1_med, 17)}, "
                 f"min_c||.||_inf >= max_ik ||x_i - x_k||_1 / 2 = {mp.nstr(inf_lo, 17)})")
    if up is not None and su is not None:
        count += 1
        if not lo_lo * (1 - su) <= up <= up_hi * (1 + su):
            fail(f"{where}: composite (upper) {res['composite']} not in [{mp.nstr(lo_lo, 17)}, "
                 f"min(mean, median composite) = {mp.nstr(up_hi, 17)}]")
        if lo is not None and up < lo * (1 - su):
            fail(f"{where}: upper {res['composite']} < lower {res['composite_lower']}")
        if one is not None and inf is not None and s1 is not None and si is not None:
            count += 3
            c = mp.sqrt(one * inf)
            if abs(c - up) > (su + s1 + si) * up:
                fail(f"{where}: composite {res['composite']} != sqrt(one * inf) = {mp.nstr(c, 17)}")
            if one < n1_med * (1 - s1):
                fail(f"{where}: one {res['one']} below min_c||.||_1 = {mp.nstr(n1_med, 17)}")
            if inf < inf_lo * (1 - si):
                fail(f"{where}: inf {res['inf']} below a lower bound of min_c||.||_inf, {mp.nstr(inf_lo, 17)}")
    return count


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------


def _gen_input(a):
    rng = random.Random(a.seed)
    c = [rng.gauss(0, 1) for _ in range(a.d_model)]
    X = [[c[j] + a.spread * rng.gauss(0, 1) for j in range(a.d_model)] for _ in range(a.tokens)]
    X = [[round_to_dtype(x, a.dtype) for x in r] for r in X]
    write_safetensors(a.out, {"X": ([a.tokens, a.d_model], [x for r in X for x in r])}, dtype=a.dtype)
    return 0


def _gen_pixels(a):
    rng = random.Random(a.seed)
    vals = [round_to_dtype(rng.gauss(0, 1), a.dtype) for _ in range(a.channels * a.size * a.size)]
    write_safetensors(a.out, {"pixel_values": ([a.channels, a.size, a.size], vals)}, dtype=a.dtype)
    return 0


def _gen_head(a):
    """Test fixture, not a reference: random task-head tensors under families.md's names in a HuggingFace
    folder written by `sanpath init --layout` (whose final norms are neutral and whose heads are tied or
    absent), so that every map of the head (task_head) moves the logits: final norm gains (1 + 0.3 N, Gemma's
    0.3 N) and biases; an untied lm_head (Mistral, Qwen2, Phi with its bias); XLNet's lm_loss.bias; ViT's
    classifier (5 classes); Gemma 2's and 3's final_logit_softcapping (--softcap); RoBERTa's, DistilBERT's and
    ALBERT's sequence classifiers (the pooler map and the classifier, the stack's names moved under the
    family's prefix as HF's ...ForSequenceClassification stores them). Weights are rewritten in F64."""
    path = os.path.join(a.model, "model.safetensors")
    cfg_path = os.path.join(a.model, "config.json")
    _, t = read_safetensors(path)
    cfg = json.load(open(cfg_path, encoding="utf-8"))
    mt = cfg["model_type"]
    d = cfg.get("hidden_size", cfg.get("d_model", cfg.get("dim")))  # DistilBERT: dim
    V = cfg.get("vocab_size")
    rng = random.Random(a.seed)
    draw = lambda n, mean, sd: [mean + sd * rng.gauss(0, 1) for _ in range(n)]
    norm = lambda name, mean, bias=True: t.update({name + ".weight": ([d], draw(d, mean, 0.3)),
                                                   **({name + ".bias": ([d], draw(d, 0, 0.3))} if bias else {})})
    if mt in ("llama", "mistral", "qwen2", "qwen3"):
        norm("model.norm", 1, bias=False)
        if mt != "llama":  # Llama keeps init's tied head (tie_word_embeddings true)
            t["lm_head.weight"] = ([V, d], draw(V * d, 0, 1))
            cfg["tie_word_embeddings"] = False
    elif mt in ("gemma", "gemma2", "gemma3_text"):
        norm("model.norm", 0, bias=False)
        if mt != "gemma":
            cfg["final_logit_softcapping"] = a.softcap
    elif mt == "xlnet":
        t["lm_loss.bias"] = ([V], draw(V, 0, 0.5))
    elif mt == "vit":
        norm("layernorm", 1)
        t["classifier.weight"] = ([5, d], draw(5 * d, 0, 1))
        t["classifier.bias"] = ([5], draw(5, 0, 0.3))
    elif mt == "opt":
        norm("model.decoder.final_layer_norm" if "model.decoder.embed_tokens.weight" in t else
             "decoder.final_layer_norm", 1)
    elif mt == "phi":
        norm("model.final_layernorm" if "model.final_layernorm.weight" in t else "final_layernorm", 1)
        t["lm_head.weight"] = ([V, d], draw(V * d, 0, 1))
        t["lm_head.bias"] = ([V], draw(V, 0, 0.5))
    elif mt == "gpt_neox":
        norm("gpt_neox.final_layer_norm" if "gpt_neox.final_layer_norm.weight" in t else "final_layer_norm", 1)
    elif mt in ("roberta", "distilbert", "albert"):
        # A ...ForSequenceClassification file: the stack under its prefix, the pooler map (d x d), then the
        # classifier of C classes (RoBERTa 4, DistilBERT 3, ALBERT 5), each with its bias.
        prefix = mt + "."
        t = {k if k.startswith(prefix) else prefix + k: v for k, v in t.items()}
        pooler, out, C = {"roberta": ("classifier.dense", "classifier.out_proj", 4),
                          "distilbert": ("pre_classifier", "classifier", 3),
                          "albert": ("albert.pooler", "classifier", 5)}[mt]
        t[pooler + ".weight"] = ([d, d], draw(d * d, 0, 0.5))
        t[pooler + ".bias"] = ([d], draw(d, 0, 0.3))
        t[out + ".weight"] = ([C, d], draw(C * d, 0, 1))
        t[out + ".bias"] = ([C], draw(C, 0, 0.3))
    else:
        raise ValueError(f"{cfg_path}: model_type {mt!r}: no head to draw")
    write_safetensors(path, t, dtype="F64")
    cfg["torch_dtype"] = "float64"
    with open(cfg_path, "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2)
    return 0


def _load_input(model, a):
    if getattr(a, "pixels", None):
        return vit_embed(model, a.pixels)
    if isinstance(model, FamilyModel) and model.image is not None:
        raise ValueError("vit: token or X input refused (give --pixels)")
    if a.tokens:
        return embed(model, [int(x) for x in a.tokens.split(",")])
    _, t = read_safetensors(a.input)
    if "X" not in t:
        raise ValueError(f"{a.input}: no tensor named X")
    X = _matrix(t["X"])
    if len(X[0]) != model.d:
        raise ValueError(f"{a.input}: X has {len(X[0])} columns, the model d = {model.d}")
    return to_mp(X)


class _Checker:
    """Collects mismatches, counts checked numbers, tracks the largest error in units of the last digit."""

    def __init__(self, verbose=False):
        self.failures = 0
        self.checked = 0
        self.worst = None
        self.verbose = verbose

    def fail(self, msg):
        self.failures += 1
        print(f"MISMATCH {msg}")

    def number(self, where, printed, digits, ref, counted=True):
        """`counted`: as check_number; False where `digits` is a depth chosen by the checker."""
        ok, msg, ratio = check_number(printed, digits, ref, counted)
        self.checked += 1
        if not ok:
            self.fail(f"{where}: {msg}")
        elif self.verbose:
            print(f"ok {where}: {msg}")
        if ratio is not None and (self.worst is None or ratio > self.worst[0]):
            self.worst = (ratio, where)
        return ok

    def interval(self, where, lo, hi, ref):
        """A certified enclosure [lo, hi] (decimal strings, math.md section 10) contains the reference value."""
        self.checked += 1
        a, b = mpf(lo), mpf(hi)
        if not (a <= b):
            self.fail(f"{where}: interval [{lo}, {hi}] is empty")
        elif not (a <= ref <= b):
            self.fail(f"{where}: interval [{lo}, {hi}] does not contain the reference {mp.nstr(ref, 30)}")
        elif self.verbose:
            print(f"ok {where}: {mp.nstr(ref, 30)} in [{lo}, {hi}]")

    def close_to(self, where, printed, ref, rel_tol, what="reference"):
        """printed (a decimal string) within rel_tol of ref (both mpf); for numbers without a digit count."""
        self.checked += 1
        kind, v, _ = parse_printed(printed)
        if kind != "value":
            if not abs(ref) < v:
                self.fail(f"{where}: printed {printed}, {what} {mp.nstr(ref, 20)}")
            return
        if abs(v - ref) > rel_tol * max(abs(ref), abs(v)):
            self.fail(f"{where}: printed {printed}, {what} {mp.nstr(ref, 20)} "
                      f"(relative difference {mp.nstr(abs(v - ref) / max(abs(ref), abs(v)), 3)} > {mp.nstr(rel_tol, 3)})")

    def header(self, path, j, model, want, extra=()):
        jm = j.get("model", {})
        for key, mine in (("layers", model.L), ("heads", model.H), ("d_model", model.d), ("d_qk", model.d_qk),
                          ("d_v", model.d_v)) + tuple(extra):
            if jm.get(key) != mine:
                self.fail(f"{path}: model.{key} = {jm.get(key)}, reference loader says {mine}")
        if "own_variant" in jm and jm["own_variant"] != model.own:
            self.fail(f"{path}: own_variant {jm.get('own_variant')}, reference loader says {model.own}")
        if j.get("variant") != want:
            self.fail(f"{path}: variant {j.get('variant')}, requested {want}")

    def summary(self, bits):
        text = f"{self.checked} numbers checked against a {bits}-bit reference"
        if self.worst is not None:
            text += (f"; largest error {float(self.worst[0]):.2f} units of the last checked digit"
                     f" ({self.worst[1]})")
        if self.failures:
            print(f"FAIL {self.failures} mismatches; {text}")
            return 1
        print(f"ok {text}")
        return 0


def _setup(a):
    """Model, requested variant, parsed JSON runs and the reference precision (max precision_bits + 128)."""
    model = load_model(a.model)
    want = dict(model.own)
    for k in ("skip", "mlp", "layernorm", "mask"):
        if getattr(a, k):
            want[k] = getattr(a, k)
    runs = []
    for path in a.json:
        with open(path, encoding="utf-8") as f:
            runs.append((os.path.basename(path), json.load(f)))
    # (a certified double run's intervals come from its enclosing run at check_precision_bits)
    bits = max(max(j["precision_bits"], j.get("check_precision_bits") or 0 if j.get("check_method") == "certified"
                   else j["precision_bits"]) for _, j in runs) + 128
    if bits > a.max_ref_bits:
        raise ValueError(f"the reference would need {bits} bits, above --max-ref-bits {a.max_ref_bits}: "
                         f"choose a smaller case")
    # This reference stores X^l whole: a residual rho·‖X‖ costs log2(1/rho) bits
    # of cancellation, which sanpath's centred pass (math.md section 7) does not
    # pay. Add them, so that the reference resolves every printed residual.
    return model, want, runs, bits + max(_cancellation_bits(j) for _, j in runs)


def _cancellation_bits(j):
    """Bits the smallest relative residual printed as a value in a forward (layers) or bounds (depths) JSON
    loses to cancellation in a direct evaluation: ceil(log2(1/rho)), 0 when none is below 1."""
    printed = [rec["relative_residual"] for rec in j.get("layers", [])]
    printed += [d["measured"]["relative"] for d in j.get("depths", []) if "measured" in d]
    # the measures (math.md section 9) of a collapsed layer: sigma_2 / sigma_1 is about svd_residual, and
    # 1 - cos and stable_rank - 1 are of its square
    squared = []
    for rec in j.get("layers", []):
        ms = rec.get("measures") or {}
        printed += [ms[k] for k in ("svd_residual",) if k in ms]
        squared += [ms[k] for k in ("one_minus_cosine", "stable_rank_minus_one") if k in ms]
    least = 0
    for text, power in [(t, 1) for t in printed] + [(t, 2) for t in squared]:
        kind, v, _ = parse_printed(text)
        if kind == "value" and 0 < v < 1:
            least = max(least, int(mp.ceil(-mp.log(v, 2) / power)))
    return least


def _check_forward(a):
    model, want, runs, bits = _setup(a)
    ck = _Checker(a.verbose)
    for path, j in runs:
        ck.header(path, j, model, want)
        if j.get("center") != a.center:
            ck.fail(f"{path}: center {j.get('center')}, requested {a.center}")
        if a.method and j.get("method") != a.method:
            ck.fail(f"{path}: method {j.get('method')}, requested {a.method}")
        if len(j["layers"]) != model.L + 1:
            ck.fail(f"{path}: {len(j['layers'])} layer records, expected {model.L + 1}")
    if ck.failures:
        return 1
    mp.prec = bits
    X0 = _load_input(model, a)
    with_measures = bool(a.measures) or any("measures" in rec for _, j in runs for rec in j["layers"])
    Xs, Ps = forward(model, X0, want, keep_P=with_measures)
    stats = [layer_stats(X, "mean" if a.center == "optimal" else a.center) for X in Xs]
    measures = {}        # layer -> the reference's measures, computed when a run prints them

    def ref_measures(l):
        if l not in measures:
            measures[l] = layer_measures(Xs[l], Ps[l - 1] if l >= 1 else None)
        return measures[l]

    for path, j in runs:
        tag = f"{path} ({j['precision']})"
        for rec in j["layers"]:
            l = rec["layer"]
            dq = rec["digits_by_quantity"]
            # the layer's digits: the least over its quantities (with or without the measures': math.md
            # section 9 does not say whether they count)
            base = [v for k, v in dq.items() if k not in MEASURE_KEYS]
            every = [v for v in dq.values() if v is not None]
            if rec["digits"] not in ({min(base), min(every)} if base and None not in base else set()):
                ck.fail(f"{tag} layer {l}: digits {rec['digits']} is not the least of digits_by_quantity {dq}")
            if with_measures:
                _check_layer_measures(ck, f"{tag} layer {l}", rec, l, a.measures, ref_measures)
            printed = {"residual_composite": rec["residual"]["composite"], "residual_one": rec["residual"]["one"],
                       "residual_inf": rec["residual"]["inf"], "residual_frobenius": rec["residual"]["frobenius"],
                       "norm_composite": rec["norm"]["composite"], "norm_frobenius": rec["norm"]["frobenius"],
                       "relative_residual": rec["relative_residual"]}
            if a.center == "optimal":
                for q in ("norm_composite", "norm_frobenius"):   # the only centre-free numbers
                    ck.number(f"{tag} layer {l} {q}", printed[q], dq[q], stats[l][q])
                ck.checked += _check_optimal(f"{tag} layer {l}", rec, Xs[l], ck.fail)
                if j.get("check_method") == "certified" or a.check == "certified":
                    _check_optimal_intervals(ck, f"{tag} layer {l}", rec, printed, Xs[l], stats[l])
                continue
            for q, pv in printed.items():
                ck.number(f"{tag} layer {l} {q}", pv, dq[q], stats[l][q])
            # certified runs (math.md section 10): every quantity's enclosure contains the exact value
            if (j.get("check_method") == "certified" or a.check == "certified") and \
                    set(rec.get("intervals", {})) != set(printed):
                ck.fail(f"{tag} layer {l}: a certified run without an interval for every quantity: "
                        f"{sorted(rec.get('intervals', {}))}")
            for q, (lo, hi) in rec.get("intervals", {}).items():
                ck.interval(f"{tag} layer {l} {q}", lo, hi, stats[l][q])
    return ck.summary(bits)


def _check_layer_measures(ck, where, rec, l, spec, ref_measures):
    """A layer's "measures" (math.md section 9) against the reference: the keys `--measures SPEC` asks for
    (when SPEC is given), each value to its confirmed digits (digits_by_quantity under the same name, null:
    unconfirmed, not checked), "< 1e-N" as an upper bound."""
    ms = rec.get("measures")
    if ms is None:
        if spec:
            ck.fail(f"{where}: no \"measures\" object (--measures {spec})")
        return
    ref = ref_measures(l)
    if spec:
        required, allowed = expected_measure_keys(spec, l)
        if "cosine" not in ref:          # undefined (n = 1 or a zero row): not reported
            required -= {"cosine", "one_minus_cosine"}
        if not required <= set(ms) <= allowed:
            ck.fail(f"{where}: measures {sorted(ms)}, expected {sorted(required)}"
                    + (f" (optionally {sorted(allowed - required)})" if allowed != required else ""))
    dq = rec["digits_by_quantity"]
    for name, printed in ms.items():
        if name not in MEASURE_KEYS:
            ck.fail(f"{where}: unknown measure {name!r}")
            continue
        if name in ATTENTION_MEASURES and l == 0:
            ck.fail(f"{where}: {name} printed at layer 0 (math.md: layers >= 1)")
            continue
        if name not in ref:
            ck.fail(f"{where}: {name} = {printed}, undefined here (n = 1: no pairs of rows)")
            continue
        if name not in dq:
            ck.fail(f"{where}: {name} has no entry in digits_by_quantity")
            continue
        digits = dq[name]
        if digits is not None and (isinstance(digits, bool) or not isinstance(digits, int) or digits < 0):
            ck.fail(f"{where}: digits_by_quantity[{name!r}] = {digits!r}, not an int or null")
            continue
        if not isinstance(printed, str):
            ck.fail(f"{where}: {name} = {printed!r}, not a decimal string")
            continue
        ck.number(f"{where} {name}", printed, digits, ref[name])


def _residual_norms(a):
    """Frobenius norms of X^l and of its mean residual, every layer, at a.bits bits, as JSON on stdout.

    `resolved_digits` is what the cancellation X - 1 mean(X)^T leaves of the
    working precision: bits*log10(2) + log10(|R|_F / |X|_F).
    """
    model = load_model(a.model)
    want = dict(model.own)
    for k in ("skip", "mlp", "layernorm", "mask"):
        if getattr(a, k):
            want[k] = getattr(a, k)
    mp.prec = a.bits
    X0 = _load_input(model, a)
    Xs, _ = forward(model, X0, want)
    out = []
    for l, X in enumerate(Xs):
        r, x = norm_frobenius(residual(X, "mean")), norm_frobenius(X)
        resolved = a.bits * math.log10(2) + (float(mp.log10(r / x)) if r else -math.inf)
        rec = {"layer": l, "residual_frobenius": mp.nstr(r, a.digits, min_fixed=1, max_fixed=0),
               "norm_frobenius": mp.nstr(x, a.digits, min_fixed=1, max_fixed=0),
               "resolved_digits": math.floor(resolved) if resolved > -math.inf else 0}
        if a.all_norms:
            for k, v in layer_stats(X, "mean").items():
                rec[k] = mp.nstr(v, a.digits, min_fixed=1, max_fixed=0)
        out.append(rec)
    print(json.dumps({"bits": a.bits, "variant": want, "layers": out}))
    return 0


def _path_counts(L, H, skip):
    """Exact number of paths of each length k = 0..L and in total."""
    if skip:
        counts = [math.comb(L, k) * H ** k for k in range(L + 1)]
    else:
        counts = [0] * L + [H ** L]
    return counts, sum(counts)


def _forward_only(path):
    cfg = os.path.join(path, "config.json")
    if os.path.isdir(path) and json.load(open(cfg, encoding="utf-8")).get("model_type") in FAMILY_LOADERS:
        raise ValueError(f"{path}: the reference checks no bounds or sub-network re-runs for this layout")


def _check_paths(a):
    """Length sums (Theorem 2.1) and enumerated path terms, for every layout (the families' attention through
    family_forward: each layer X' = [skip]X + sum_h P_h X W_h + 1 c^T once the P_h are frozen)."""
    if a.effectiveness and not a.rerun:
        return _check_effectiveness(a)
    if a.effectiveness and a.rerun:
        return _check_rerun(a)
    model, want, runs, bits = _setup(a)
    ck = _Checker(a.verbose)
    for path, j in runs:
        ck.header(path, j, model, want)
    if ck.failures:
        return 1
    mp.prec = bits
    X0 = _load_input(model, a)
    mpw = FamilyMpWeights(model) if isinstance(model, FamilyModel) else MpWeights(model)
    skip = want["skip"] == "on"
    counts, total = _path_counts(model.L, model.H, skip)
    S, b, XL = length_sums(model, X0, want, mpw)
    # the reference's own check of Theorem 2.1 at its precision
    err = max(abs(mp.fsum(Sk[i][j] for Sk in S) + b[j] - XL[i][j]) for i in range(len(X0)) for j in range(model.d))
    scale = max(abs(x) for row in XL for x in row)
    if err > scale * mpf(2) ** (-bits // 2):
        ck.fail(f"reference: Theorem 2.1 reconstruction error {mp.nstr(err / scale, 3)} at {bits} bits")
    sums = length_sum_stats(S, XL)
    nX = norm_frobenius(XL)
    Ps = Whs = None
    for path, j in runs:
        tag = f"{path} ({j['precision']})"
        if "total_paths" in j and int(j["total_paths"]) != total:
            ck.fail(f"{tag}: total_paths {j['total_paths']}, exact count {total}")
        if "output_norm" in j:
            ck.number(f"{tag} output_norm.frobenius", j["output_norm"]["frobenius"], _digits_of_run(j), nX,
                      counted=False)
        if "decomposition_holds" in j and j["decomposition_holds"] is not True:
            ck.fail(f"{tag}: decomposition_holds = {j.get('decomposition_holds')}")
        if "decomposition_error" in j and "decomposition_tolerance" in j:
            kind, v, _ = parse_printed(j["decomposition_error"])
            if v > mpf(j["decomposition_tolerance"]):
                ck.fail(f"{tag}: decomposition_error {j['decomposition_error']} above its tolerance "
                        f"{j['decomposition_tolerance']}")
        if "length_sums" in j:
            recs = j["length_sums"]
            if [r["length"] for r in recs] != list(range(model.L + 1)):
                ck.fail(f"{tag}: lengths {[r['length'] for r in recs]}, expected 0..{model.L}")
                continue
            for r in recs:
                k = r["length"]
                where = f"{tag} length {k}"
                if int(r["count"]) != counts[k]:
                    ck.fail(f"{where}: count {r['count']}, exact C(L,k) H^k = {counts[k]}")
                dq = r["digits_by_quantity"]
                if r["digits"] != min(dq.values(), key=lambda x: x or 0):
                    ck.fail(f"{where}: digits {r['digits']} is not the least of digits_by_quantity {dq}")
                ck.number(f"{where} frobenius", r["norm"]["frobenius"], dq["frobenius"], sums[k]["frobenius"])
                ck.number(f"{where} residual", r["residual"]["composite"], dq["residual"],
                          sums[k]["residual_composite"])
                ck.number(f"{where} share", r["share"], dq["share"], sums[k]["share"])
                # certified runs (math.md section 10): every quantity's enclosure contains the exact value
                iv = r.get("intervals", {})
                if (j.get("check_method") == "certified" or a.check == "certified") and \
                        set(iv) != {"frobenius", "residual", "share"}:
                    ck.fail(f"{where}: a certified run without an interval for every quantity: {sorted(iv)}")
                exact = {"frobenius": sums[k]["frobenius"], "residual": sums[k]["residual_composite"],
                         "share": sums[k]["share"]}
                for q, (lo, hi) in iv.items():
                    ck.interval(f"{where} {q}", lo, hi, exact[q])
            if j.get("check_method") == "certified" or a.check == "certified":
                iv = j.get("intervals", {})
                if set(iv) != {"decomposition_error", "output_frobenius"}:
                    ck.fail(f"{tag}: a certified run without the intervals of decomposition_error and "
                            f"output_frobenius: {sorted(iv)}")
                else:
                    ck.interval(f"{tag} output_frobenius", *iv["output_frobenius"], nX)
                    ck.interval(f"{tag} decomposition_error", *iv["decomposition_error"], mpf(0))  # Theorem 2.1
        if "paths" in j:
            if Ps is None:
                _, Ps = forward(model, X0, want, mpw, keep_P=True)
                Whs = [head_products(lw)[0] for lw in mpw.layers]
                # every path passing --length, with its term, P_path and ||T||_{1,inf}
                choices = ([None] if skip else []) + list(range(model.H))
                terms = {}
                for heads in itertools.product(choices, repeat=model.L):
                    if a.length is not None and sum(h is not None for h in heads) != a.length:
                        continue
                    T, P = path_term(Ps, Whs, X0, heads)
                    terms[heads] = (T, P, norm_composite(T))
            listed = [tuple(r["heads"]) for r in j["paths"]]
            if "walked_paths" in j and int(j["walked_paths"]) != len(terms):
                ck.fail(f"{tag}: walked_paths {j['walked_paths']}, {len(terms)} paths pass the filters")
            if a.top:
                ranked = sorted(terms, key=lambda h: terms[h][2], reverse=True)
                want_set = ranked[:a.top]
                if set(listed) != set(want_set) or listed != sorted(listed, key=lambda h: terms[h][2], reverse=True):
                    ck.fail(f"{tag}: top {a.top} by ||T||_(1,inf) listed {listed}, reference (descending) {want_set}")
            elif set(listed) != set(terms):
                ck.fail(f"{tag}: {len(listed)} paths listed, reference has {len(terms)} passing the filters")
            for r in j["paths"]:
                heads = tuple(r["heads"])
                where = f"{tag} path {list(heads)}"
                if r["length"] != sum(h is not None for h in heads):
                    ck.fail(f"{where}: length {r['length']}")
                if heads not in terms:
                    ck.fail(f"{where}: not a path passing the filters")
                    continue
                T, P, _ = terms[heads]
                D = r["digits"]
                ck.number(f"{where} term_norm.frobenius", r["term_norm"]["frobenius"], D, norm_frobenius(T))
                ck.number(f"{where} term_norm.composite", r["term_norm"]["composite"], D, norm_composite(T))
                ck.number(f"{where} term_residual", r["term_residual"]["composite"], D,
                          norm_composite(residual(T, "mean")))
                ck.number(f"{where} stochastic_residual", r["stochastic_residual"]["composite"], D,
                          norm_composite(residual(P, "mean")))
                # certified runs (math.md section 10): every quantity's enclosure contains the exact value
                iv = r.get("intervals", {})
                exact = {"term_norm_frobenius": norm_frobenius(T), "term_norm_composite": norm_composite(T),
                         "term_residual_composite": norm_composite(residual(T, "mean")),
                         "stochastic_residual_composite": norm_composite(residual(P, "mean"))}
                if (j.get("check_method") == "certified" or a.check == "certified") and set(iv) != set(exact):
                    ck.fail(f"{where}: a certified run without an interval for every quantity: {sorted(iv)}")
                for q, (lo, hi) in iv.items():
                    ck.interval(f"{where} {q}", lo, hi, exact[q])
            if (j.get("check_method") == "certified" or a.check == "certified") and "decomposition_error" in j:
                iv = j.get("intervals", {})
                if set(iv) != {"decomposition_error"}:
                    ck.fail(f"{tag}: a certified run without the interval of decomposition_error: {sorted(iv)}")
                else:
                    ck.interval(f"{tag} decomposition_error", *iv["decomposition_error"], mpf(0))  # Theorem 2.1
    return ck.summary(bits)


def _digits_of_run(j):
    """Digits to check for run-level numbers that carry no digit count of their own."""
    return 15 if j.get("precision_bits") == 53 else 17


def path_term(Ps, Whs, X, heads):
    """T = P_path X W_path and P_path for heads[l] in 0..H-1 or None (skip), l = 0..L-1."""
    n, d = len(X), len(X[0])
    P = identity(n)
    W = identity(d)
    for l, h in enumerate(heads):
        if h is None:
            continue
        P = matmul(Ps[l][h], P)
        W = matmul(W, Whs[l][h])
    return matmul(matmul(P, X), W), P


def _check_enclosures(ck, tag, records, Xs, D):
    """Measured r_l = ||X^l - 1c^T||_{1,inf} at the optimal centre, printed as [lower, upper].

    records: [(l, {lower, upper, below_resolution, relative, digits})]. Certified facts: upper lies in
    [lo_lo, min(mean, median composite)] and lower, math.md's sqrt(min_c||.||_1 min_c||.||_inf), in
    [lo_lo, lo_hi] (see optimal_enclosure_checks); relative = upper / ||X^l||_{1,inf}.
    """
    for l, m in records:
        lo_lo, lo_hi, up_hi = optimal_enclosure_checks(Xs[l])
        where = f"{tag} r_{l}"
        ck.checked += 1
        if m.get("below_resolution"):
            if lo_lo > parse_printed(m["upper"])[1]:
                ck.fail(f"{where}: printed upper {m['upper']} below the certified {mp.nstr(lo_lo, 17)}")
            continue
        md = m.get("digits") or 0
        slack = mpf(10) ** (1 - min(md, D)) if md else mpf(1)
        up, lo = parse_printed(m["upper"])[1], parse_printed(m["lower"])[1]
        ck.checked += 1
        if not lo_lo * (1 - slack) <= up <= up_hi * (1 + slack):
            ck.fail(f"{where}: upper {m['upper']} outside [{mp.nstr(lo_lo, 17)}, min(mean, median composite) "
                    f"= {mp.nstr(up_hi, 17)}]")
        if not lo_lo * (1 - slack) <= lo <= lo_hi * (1 + slack):
            ck.fail(f"{where}: lower {m['lower']} ({md} digits) is not math.md's sqrt(min_c||.||_1 "
                    f"min_c||.||_inf), which lies in [{mp.nstr(lo_lo, 17)}, {mp.nstr(lo_hi, 17)}]")
        if "relative" in m:
            ck.close_to(f"{where} relative", m["relative"], up / norm_composite(Xs[l]), 2 * slack,
                        "printed upper / ||X^l||_(1,inf)")


def _check_depth_ratios(ck, tag, r0, depths, D):
    """cubic constant r_l / r_{l-1}^3 and order log r_l / log r_{l-1} from the printed upper ends."""
    prev = r0
    for dep in depths:
        m = dep["measured"]
        if not m.get("below_resolution") and not prev.get("below_resolution"):
            ru, rp = mpf(m["upper"]), mpf(prev["upper"])
            rel = 5 * mpf(10) ** (1 - D)
            if dep.get("cubic_constant") is not None:
                ck.close_to(f"{tag} depth {dep['layer']} cubic_constant", dep["cubic_constant"], ru / rp ** 3, rel,
                            "r_l/r_(l-1)^3 of the printed upper ends")
            if dep.get("order") is not None:
                q = mp.log(ru) / mp.log(rp)
                # printed r's carry a relative error ~ rel; log r near 0 amplifies it by 1/|log r|
                amp = 1 + 1 / abs(mp.log(ru)) + 1 / abs(mp.log(rp))
                ck.close_to(f"{tag} depth {dep['layer']} order", dep["order"], q, rel * amp,
                            "log r_l / log r_(l-1) of the printed upper ends")
        prev = m


def _check_bounds(a):
    _forward_only(a.model)
    model, want, runs, bits = _setup(a)
    ck = _Checker(a.verbose)
    for path, j in runs:
        ck.header(path, j, model, want)
    if ck.failures:
        return 1
    mp.prec = bits
    X0 = _load_input(model, a)
    mpw = MpWeights(model)
    Xs, _ = forward(model, X0, want, mpw)
    Xs_noskip = None
    parts = [beta_parts(layer) for layer in model.layers]
    san = want["skip"] == "off" and want["layernorm"] == "none"
    expect = ("2.2" if model.H == 1 else "2.3") if san and want["mlp"] == "none" else (
        "3.2" if san and want["mlp"] == "plain" else None)
    for path, j in runs:
        tag = f"{path} ({j['precision']})"
        D = _digits_of_run(j)
        gamma = j.get("gamma", "1")
        if mpf(gamma) != mpf(a.gamma):
            ck.fail(f"{tag}: gamma {gamma}, requested {a.gamma}")
        beta, a_l, a_ref = bound_constants(model, want if j.get("theorem") == "3.2" else dict(want, mlp="none"),
                                           gamma, mpw, parts)
        # beta per head: ||W_Q W_K^T||_1 and ||W_V W_O||_{1,inf}; lambda per layer
        for l, pl in enumerate(parts):
            for h, (qk, vo) in enumerate(pl):
                rec = j["beta_heads"][l][h]
                ck.number(f"{tag} layer {l + 1} head {h} qk_norm_1", rec["qk_norm_1"], D, qk, counted=False)
                ck.number(f"{tag} layer {l + 1} head {h} vo_composite", rec["vo_composite"], D, vo, counted=False)
                ck.number(f"{tag} layer {l + 1} head {h} beta", rec["beta"], D, beta[l][h], counted=False)
            ck.number(f"{tag} beta_{l + 1}", j["beta"][l], D, max(beta[l]), counted=False)
        ck.number(f"{tag} beta_max", j["beta_max"], D, max(max(bl) for bl in beta), counted=False)
        if model.d_ff and j.get("lambda"):
            for l, lw in enumerate(mpw.layers):
                lam = mpf(LIPSCHITZ[model.activation]) * norm_composite(lw["W_1"]) * norm_composite(lw["W_2"])
                ck.number(f"{tag} lambda_{l + 1}", j["lambda"][l], D, lam, counted=False)
        if j.get("theorem_requested", "auto") == "auto":
            ck.checked += 1
            if bool(j.get("applicable")) != (expect is not None) or (expect and j.get("theorem") != expect):
                ck.fail(f"{tag}: theorem {j.get('theorem')} (applicable {j.get('applicable')}) for variant {want}, "
                        f"H = {model.H}; math.md section 5 gives {expect or 'none'}")
        # measured enclosures, cubic constants and orders (also when no theorem applies)
        _check_enclosures(ck, tag, [(0, j["r0"])] + [(d["layer"], d["measured"]) for d in j["depths"]], Xs, D)
        _check_depth_ratios(ck, tag, j["r0"], j["depths"], D)
        if j.get("without_skip"):
            ws = j["without_skip"]
            if ws.get("variant") != dict(want, skip="off"):
                ck.fail(f"{tag}: without_skip.variant {ws.get('variant')}")
            if Xs_noskip is None:
                Xs_noskip, _ = forward(model, X0, dict(want, skip="off"), mpw)
            _check_enclosures(ck, f"{tag} without_skip", [(d["layer"], d["measured"]) for d in ws["depths"]],
                              Xs_noskip, D)
        if not j.get("applicable"):
            continue
        ck.number(f"{tag} a", j["a"], D, a_ref, counted=False)
        ck.number(f"{tag} contraction_radius", j["contraction_radius"], D, 1 / mp.sqrt(a_ref), counted=False)
        if "vacuous" in j:
            ck.checked += 1
            if j["vacuous"] != bool(mp.sqrt(a_ref) * mpf(j["r0"]["upper"]) >= 1):
                ck.fail(f"{tag}: vacuous = {j['vacuous']}, sqrt(a) r_0 = "
                        f"{mp.nstr(mp.sqrt(a_ref) * mpf(j['r0']['upper']), 10)}")
        # the uniform and layerwise bounds in log10, from the printed r_0 ends and the reference's a, a_l:
        # the printed r_0 (D digits) is raised to 3^L, hence a tolerance of 3^L units of its last digit
        r0u, r0l = mpf(j["r0"]["upper"]), mpf(j["r0"]["lower"])
        u = mpf(10) ** (1 - D)
        for dep in j["depths"]:
            L = dep["layer"]
            tol = 2 * 3 ** L * u / mp.log(10)
            checks = [("log10_bound", dep.get("log10_bound"), uniform_bound_log10(a_ref, r0u, L)),
                      ("log10_layerwise_bound", dep.get("log10_layerwise_bound"), layerwise_bound_log10(a_l, r0u, L))]
            if dep.get("bound_lower") is not None:
                checks.append(("log10(bound_lower)", mp.log10(parse_printed(dep["bound_lower"])[1]),
                               uniform_bound_log10(a_ref, r0l, L)))
            for key, got, ref in checks:
                if got is None:
                    continue
                ck.checked += 1
                if abs(mpf(got) - ref) > tol + (abs(ref) + 1) * u:
                    ck.fail(f"{tag} depth {L} {key}: printed {mp.nstr(mpf(got), 20)}, reference {mp.nstr(ref, 20)} "
                            f"(a = {mp.nstr(a_ref, 20)}, printed r_0 [{j['r0']['lower']}, {j['r0']['upper']}])")
            if dep.get("a_layer") is not None:
                ck.number(f"{tag} depth {L} a_layer", dep["a_layer"], D, a_l[L - 1], counted=False)
            m = dep["measured"]
            if dep.get("slack_log10") is not None and not m.get("below_resolution"):
                ref = mpf(dep["log10_bound"]) - mp.log10(mpf(m["upper"]))
                ck.close_to(f"{tag} depth {L} slack_log10", dep["slack_log10"], ref, 5 * u * (1 + abs(ref)),
                            "log10(bound / measured upper)")
            # verdict from the printed enclosures (math.md section 5)
            mu, ml = parse_printed(m["upper"])[1], parse_printed(m["lower"])[1]
            blo = parse_printed(dep.get("bound_lower") or dep["bound"])[1]
            bup = parse_printed(dep.get("bound_upper") or dep["bound"])[1]
            verdict = "HOLDS" if mu <= blo else ("VIOLATED" if ml > bup else "UNDECIDED")
            ck.checked += 1
            if dep["verdict"] != verdict:
                ck.fail(f"{tag} depth {L}: verdict {dep['verdict']}, but measured [{m['lower']}, {m['upper']}] "
                        f"vs bound [{dep.get('bound_lower')}, {dep.get('bound_upper')}] gives {verdict}")
            if getattr(a, "check", None) == "certified":
                _check_proven_verdict(ck, f"{tag} depth {L}", dep, Xs[0], Xs[L], a_ref, L)
        if getattr(a, "check", None) == "certified":
            ck.checked += 1
            if j.get("verdicts_proven") is not True:
                ck.fail(f"{tag}: a certified run with verdicts_proven {j.get('verdicts_proven')!r}")
    return ck.summary(bits)


def _check_proven_verdict(ck, where, dep, X0, XL, a_ref, L):
    """A certified verdict (math.md section 10) against what the reference knows of the exact values: the
    true r_0 and r_L lie in [lower_lo, upper_hi] of optimal_enclosure_checks, and the bound is increasing in
    r_0. A proven HOLDS claims r_L <= bound(r_0): false if r_L's least possible value exceeds the bound's
    greatest; a proven VIOLATED claims r_L > bound(r_0): false if r_L's greatest possible value is at most
    the bound's least. verdict_proven must be set exactly for HOLDS and VIOLATED."""
    decided = dep["verdict"] in ("HOLDS", "VIOLATED")
    ck.checked += 1
    if dep.get("verdict_proven") is not decided:
        ck.fail(f"{where}: verdict {dep['verdict']} with verdict_proven {dep.get('verdict_proven')!r}")
    if not decided:
        return
    r0_lo, _, r0_hi = optimal_enclosure_checks(X0)
    rL_lo, _, rL_hi = optimal_enclosure_checks(XL)
    ck.checked += 1
    top = uniform_bound_log10(a_ref, r0_hi, L)
    if dep["verdict"] == "HOLDS" and rL_lo > 0 and mp.log10(rL_lo) > top + mpf(10) ** -25 * (1 + abs(top)):
        ck.fail(f"{where}: proven HOLDS, but r_L >= {mp.nstr(rL_lo, 17)} exceeds the bound at r_0 <= "
                f"{mp.nstr(r0_hi, 17)} (log10 {mp.nstr(uniform_bound_log10(a_ref, r0_hi, L), 17)})")
    if dep["verdict"] == "VIOLATED" and r0_lo > 0 and \
            mp.log10(rL_hi) <= uniform_bound_log10(a_ref, r0_lo, L):
        ck.fail(f"{where}: proven VIOLATED, but r_L <= {mp.nstr(rL_hi, 17)} is within the bound at r_0 >= "
                f"{mp.nstr(r0_lo, 17)} (log10 {mp.nstr(uniform_bound_log10(a_ref, r0_lo, L), 17)})")


def task_head(path):
    """The task head of a HuggingFace folder, or None, from families.md and HF's conventions (torch Linear
    weights [out, in]). A head reads row 0 (classifier) or every row (language model) and applies, each map
    only where the family has it,
        logits = cap(W P pool(N(x)) + c)
    N the final norm (LayerNorm g, b; RMSNorm g; Gemma's RMSNorm with gain 1 + w; eps the model's),
    pool the pooler map a(W_p x + b_p) (a = tanh; DistilBERT's ReLU), P OPT's project_out, W the classifier or
    LM head (the tied token table, as stored, where the file has no lm_head), c its bias, cap Gemma 2's
    c tanh(z / c):
      bert: bert.pooler.dense, classifier;  roberta: classifier.dense, classifier.out_proj;
      distilbert: pre_classifier (ReLU), classifier;  albert: albert.pooler, classifier;
      vit: vit.layernorm, classifier (on CLS);
      gpt2: transformer.ln_f, lm_head or wte;  gpt_neox: final_layer_norm, embed_out;
      opt: final_layer_norm (if stored), project_out (if stored), lm_head or embed_tokens (tie default true);
      phi: final_layernorm, lm_head with its bias;  llama, mistral, qwen2: model.norm, lm_head or embed_tokens
      (tie default false);  qwen3 likewise;  gemma, gemma2, gemma3_text: model.norm (1 + w), lm_head or
      embed_tokens (tie default true), gemma2 final_logit_softcapping (default 30, null none), gemma3_text's
      (default null);  xlnet: word_embedding (tied), lm_loss.bias;
      t5: none (its lm_head reads the decoder)."""
    if not os.path.isdir(path):
        return None
    cfg = json.load(open(os.path.join(path, "config.json"), encoding="utf-8"))
    mt = cfg.get("model_type")
    _, t = read_safetensors(os.path.join(path, "model.safetensors"))
    first = lambda *names: next((n for n in names if n in t), None)
    tie = lambda default: cfg.get("tie_word_embeddings", default) if cfg.get("tie_word_embeddings") is not None \
        else default
    ln = lambda name: ("ln", _vector(t[name + ".weight"]), _vector(t[name + ".bias"]))
    head = {"kind": "language model", "norm": None, "Wp": None, "P": None, "c": None, "cap": None}
    if mt == "t5":
        return None
    if mt == "vit":
        if "classifier.weight" not in t:
            return None
        head.update(kind="classifier", norm=ln("vit.layernorm" if "vit.layernorm.weight" in t else "layernorm"),
                    W=_matrix(t["classifier.weight"]), c=_vector(t["classifier.bias"]))
        return head
    # The BERT family's sequence classifiers (HF's ...ForSequenceClassification) on the first row: RoBERTa's
    # RobertaClassificationHead dense + tanh, out_proj; DistilBERT's pre_classifier + ReLU, classifier;
    # ALBERT's pooler (Linear + tanh), classifier (dropout is the identity at inference).
    seq = {"roberta": ("classifier.dense", "tanh", "classifier.out_proj"),
           "distilbert": ("pre_classifier", "relu", "classifier"),
           "albert": ("albert.pooler", "tanh", "classifier")}
    if mt in seq and seq[mt][2] + ".weight" in t:
        pooler, act, out = seq[mt]
        head.update(kind="classifier", Wp=_matrix(t[pooler + ".weight"]), bp=_vector(t[pooler + ".bias"]),
                    act=act, W=_matrix(t[out + ".weight"]), c=_vector(t[out + ".bias"]))
        return head
    if "classifier.weight" in t:
        head.update(kind="classifier", Wp=_matrix(t["bert.pooler.dense.weight"]),
                    bp=_vector(t["bert.pooler.dense.bias"]), W=_matrix(t["classifier.weight"]),
                    c=_vector(t["classifier.bias"]))
        return head
    if mt == "xlnet":
        if "lm_loss.bias" not in t:
            return None
        head.update(W=_matrix(t[first("lm_loss.weight", "transformer.word_embedding.weight",
                                      "word_embedding.weight")]), c=_vector(t["lm_loss.bias"]))
        return head
    if "transformer.ln_f.weight" in t:
        E = t["lm_head.weight"] if "lm_head.weight" in t else t["transformer.wte.weight"]
        head.update(norm=ln("transformer.ln_f"), W=_matrix(E))
        return head
    if mt == "gpt_neox":
        n = first("gpt_neox.final_layer_norm.weight", "final_layer_norm.weight")
        if n is None or "embed_out.weight" not in t:
            return None
        head.update(norm=ln(n[:-len(".weight")]), W=_matrix(t["embed_out.weight"]))
        return head
    if mt == "opt":
        p = "model.decoder." if "model.decoder.embed_tokens.weight" in t else "decoder."
        E = first("lm_head.weight", *([p + "embed_tokens.weight"] if tie(True) else []))
        if E is None:
            return None
        if p + "final_layer_norm.weight" in t:
            head["norm"] = ln(p + "final_layer_norm")
        if p + "project_out.weight" in t:
            head["P"] = _matrix(t[p + "project_out.weight"])
        head["W"] = _matrix(t[E])
        return head
    if mt == "phi":
        n = first("model.final_layernorm.weight", "final_layernorm.weight")
        E = first("lm_head.weight", *(["model.embed_tokens.weight", "embed_tokens.weight"] if tie(False) else []))
        if n is None or E is None:
            return None
        head.update(norm=ln(n[:-len(".weight")]), W=_matrix(t[E]),
                    c=_vector(t["lm_head.bias"]) if "lm_head.bias" in t else None)
        return head
    if mt in ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text"):
        gemma = mt in ("gemma", "gemma2", "gemma3_text")
        n = first("model.norm.weight", "norm.weight")
        E = first("lm_head.weight", *(["model.embed_tokens.weight", "embed_tokens.weight"] if tie(gemma) else []))
        if n is None or E is None:
            return None
        head.update(norm=("rms1p" if gemma else "rms", _vector(t[n]), None), W=_matrix(t[E]))
        if mt in ("gemma2", "gemma3_text"):
            cap = cfg.get("final_logit_softcapping", 30.0 if mt == "gemma2" else None)
            head["cap"] = None if cap is None else _dec(cap)
        return head
    return None


def head_logits(head, X, eps):
    """The chain of task_head on the rows it reads of X."""
    rows = X[:1] if head["kind"] == "classifier" else X
    if head["norm"]:
        kind, g, b = head["norm"]
        if kind == "ln":
            rows = layernorm(rows, vec_mp(g), vec_mp(b), eps)
        else:
            gain = [1 + mpf(w) for w in g] if kind == "rms1p" else vec_mp(g)
            rows = [[x / mp.sqrt(mp.fsum(y * y for y in row) / len(row) + eps) * gi for x, gi in zip(row, gain)]
                    for row in rows]
    if head["Wp"]:
        act = (lambda z: max(z, mpf(0))) if head.get("act") == "relu" else mp.tanh
        rows = [[act(mp.fdot(w, r) + b) for w, b in zip(head["Wp"], head["bp"])] for r in rows]
    if head["P"]:
        rows = [[mp.fdot(w, r) for w in head["P"]] for r in rows]
    c = head["c"] or [0] * len(head["W"])
    out = [[mp.fdot(w, r) + ci for w, ci in zip(head["W"], c)] for r in rows]
    if head["cap"] is not None:
        cap = mpf(head["cap"])
        out = [[cap * mp.tanh(z / cap) for z in row] for row in out]
    return out


def log_softmax(row):
    m = max(row)
    ls = mp.log(mp.fsum(mp.exp(x - m) for x in row))
    return [x - m - ls for x in row]


def head_agreement(head, ref_logits, X, eps):
    """The head's predictions on X against ref_logits: agreement count (argmax, first on ties) and mean KL."""
    argmax = lambda row: max(range(len(row)), key=lambda i: (row[i], -i))
    lg = head_logits(head, X, eps)
    kl = [mp.fsum(mp.exp(lp) * (lp - lq) for lp, lq in zip(log_softmax(p), log_softmax(q)))
          for p, q in zip(ref_logits, lg)]
    return {"agree": sum(argmax(p) == argmax(q) for p, q in zip(ref_logits, lg)), "kl": mp.fsum(kl) / len(kl)}


def _check_effectiveness(a):
    """X_{<=k} = sum_{j<=k} S_j + 1b^T: distance to X^L, head agreement (argmax, first on ties) and mean KL
    (every layout: the families' attention through family_forward)."""
    model, want, runs, bits = _setup(a)
    ck = _Checker(a.verbose)
    for path, j in runs:
        ck.header(path, j, model, want)
    if ck.failures:
        return 1
    mp.prec = bits
    X0 = _load_input(model, a)
    S, b, XL = length_sums(model, X0, want)
    head = task_head(a.model)
    eps = mpf(model.eps)
    nX = norm_frobenius(XL)
    ref_logits = head_logits(head, XL, eps) if head else None
    Xk = [b[:] for _ in XL]
    rows = []
    for k in range(model.L + 1):
        Xk = madd(Xk, S[k])
        r = {"distance": norm_frobenius([[x - y for x, y in zip(ra, rb)] for ra, rb in zip(Xk, XL)]) / nX}
        if head:
            r.update(head_agreement(head, ref_logits, Xk, eps))
        rows.append(r)
    for path, j in runs:
        tag = f"{path} ({j['precision']})"
        if (j["head"] is None) != (head is None) or (head and j["head"]["kind"] != head["kind"]):
            ck.fail(f"{tag}: head {j['head']}, reference {head and head['kind']}")
            continue
        ck.number(f"{tag} output_norm.frobenius", j["output_norm"]["frobenius"], _digits_of_run(j), nX,
                      counted=False)
        certified = j.get("check_method") == "certified" or a.check == "certified"
        for k, (e, r) in enumerate(zip(j["effectiveness"], rows)):
            ck.number(f"{tag} k={k} distance", e["distance"], e["digits"], r["distance"])
            if head:
                ck.number(f"{tag} k={k} kl", e["kl"], e["digits"], r["kl"])
                ck.checked += 1
                if certified:
                    # proven to agree: e["agree"]; may agree: e["agree_most"]; the truth lies between
                    if not (e["agree"] <= r["agree"] <= e["agree_most"]):
                        ck.fail(f"{tag} k={k}: agree {e['agree']} to {e['agree_most']}, reference {r['agree']}")
                elif e["agree"] != r["agree"]:
                    ck.fail(f"{tag} k={k}: agree {e['agree']}, reference {r['agree']}")
            if certified:
                # math.md section 10: each enclosure contains the exact value (the distance at k = L is 0)
                iv = e.get("intervals", {})
                want = {"distance", "kl"} if head else {"distance"}
                if set(iv) != want:
                    ck.fail(f"{tag} k={k}: a certified run with intervals {sorted(iv)}, expected {sorted(want)}")
                    continue
                ck.interval(f"{tag} k={k} distance", *iv["distance"], mpf(0) if k == model.L else r["distance"])
                if head:  # at k = L the KL is 0 exactly (X_{<=L} = X^L), the reference's value rounding
                    ck.interval(f"{tag} k={k} kl", *iv["kl"], mpf(0) if k == model.L else r["kl"])
    return ck.summary(bits)


def subnetwork(model, mpw, X0, variant, path):
    """The sub-network of a path (compute/rerun.hpp): a layer where the path takes head h runs head h alone,
    its attention recomputed from the sub-network's own state, then the variant's LayerNorm and MLP without the
    skip term; a skipped layer (-1) is the identity. Value and output biases only outside attention-only variants."""
    eps = mpf(model.eps)
    act = activation(model.activation)
    ln, mlp, causal = variant["layernorm"], variant["mlp"], variant["mask"] == "causal"
    beta = not (mlp == "none" and ln == "none")
    scale = mp.sqrt(model.d_qk)
    Y = X0
    for lw, h in zip(mpw.layers, path):
        if h < 0:
            continue
        hd = lw["heads"][h]
        Xin = layernorm(Y, lw["ln1_g"], lw["ln1_b"], eps) if ln == "pre" else Y
        Q = add_bias(matmul(Xin, hd["W_Q"]), hd["b_Q"])
        K = add_bias(matmul(Xin, hd["W_K"]), hd["b_K"])
        V = matmul(Xin, hd["W_V"])
        if beta:
            V = add_bias(V, hd["b_V"])
        P = softmax_rows([[mp.fdot(Q[i], K[j]) / scale for j in range(len(Xin))] for i in range(len(Xin))], causal)
        Z = matmul(matmul(P, V), hd["W_O"])
        if beta:
            Z = add_bias(Z, lw["b_O"])
        if ln == "post":
            Z = layernorm(Z, lw["ln1_g"], lw["ln1_b"], eps)
        if mlp == "none":
            Y = Z
            continue
        f = mlp_f(layernorm(Z, lw["ln2_g"], lw["ln2_b"], eps) if ln == "pre" else Z, lw, act)
        Y = madd(Z, f) if mlp == "residual" else f
        if ln == "post":
            Y = layernorm(Y, lw["ln2_g"], lw["ln2_b"], eps)
    return Y


def _check_rerun(a):
    _forward_only(a.model)
    """`paths --effectiveness --rerun N` with N >= every count_k (every path once, no random draw): the re-run
    truncation sum_{j<=k} sum_{|path|=j} F_path(X) [+ 1b^T for attention-only variants], its distance to X^L, the
    head's agreement and mean KL, and the gap to the exact X_{<=k}."""
    model, want, runs, bits = _setup(a)
    ck = _Checker(a.verbose)
    for path, j in runs:
        ck.header(path, j, model, want)
    counts, _ = _path_counts(model.L, model.H, want["skip"] == "on")
    if max(counts) > a.rerun:
        raise ValueError(f"--rerun {a.rerun} is below the largest count_k {max(counts)}: the reference needs every path")
    if ck.failures:
        return 1
    mp.prec = bits
    X0 = _load_input(model, a)
    mpw = MpWeights(model)
    attention_only = want["mlp"] == "none" and want["layernorm"] == "none"
    if attention_only:
        S, b, XL = length_sums(model, X0, want, mpw)
    else:
        XL = forward(model, X0, want, mpw)[0][-1]
    head = task_head(a.model)
    eps = mpf(model.eps)
    nX = norm_frobenius(XL)
    ref_logits = head_logits(head, XL, eps) if head else None
    diff = lambda A, B: [[x - y for x, y in zip(ra, rb)] for ra, rb in zip(A, B)]
    choices = ([-1] if want["skip"] == "on" else []) + list(range(model.H))
    by_length = [[] for _ in range(model.L + 1)]
    for path in itertools.product(choices, repeat=model.L):
        by_length[sum(h >= 0 for h in path)].append(path)
    Xk = [b[:] for _ in XL] if attention_only else [[mpf(0)] * model.d for _ in XL]
    exact = [b[:] for _ in XL] if attention_only else None
    rows = []
    for k in range(model.L + 1):
        for path in by_length[k]:
            Xk = madd(Xk, subnetwork(model, mpw, X0, want, path))
        r = {"distance": norm_frobenius(diff(Xk, XL)) / nX}
        if attention_only:
            exact = madd(exact, S[k])
            r["gap"] = norm_frobenius(diff(Xk, exact)) / nX
        if head:
            r.update(head_agreement(head, ref_logits, Xk, eps))
        rows.append(r)
    for path, j in runs:
        tag = f"{path} ({j['precision']})"
        certified = j.get("check_method") == "certified" or a.check == "certified"
        if j["rerun"]["samples"] != a.rerun or j["rerun"]["repeats"] != a.repeats:
            ck.fail(f"{tag}: rerun {j['rerun']}, requested --rerun {a.rerun} --repeats {a.repeats}")
        if j["exact"] != attention_only:
            ck.fail(f"{tag}: exact {j['exact']}, expected {attention_only}")
        ck.number(f"{tag} output_norm.frobenius", j["output_norm"]["frobenius"], _digits_of_run(j), nX,
                      counted=False)
        for k, (e, r) in enumerate(zip(j["effectiveness"], rows)):
            re = e["rerun"]
            ck.checked += 1
            if not e["all_paths"] or e["paths_run"] != counts[k] or e["paths"] != str(counts[k]):
                ck.fail(f"{tag} k={k}: all_paths {e['all_paths']}, paths_run {e['paths_run']}, paths {e['paths']}, "
                        f"expected every one of {counts[k]}")
            ck.number(f"{tag} k={k} rerun distance", re["distance"]["mean"], re["distance"]["digits"]["mean"],
                      r["distance"])
            if attention_only:
                ck.number(f"{tag} k={k} gap", re["gap"]["mean"], re["gap"]["digits"]["mean"], r["gap"])
            if head:
                ck.number(f"{tag} k={k} rerun kl", re["kl"]["mean"], re["kl"]["digits"]["mean"], r["kl"])
                ck.checked += 1
                if certified:
                    # proven to agree: agree[i]; may agree: agree_most[i]; the truth lies between
                    if not all(lo <= r["agree"] <= hi for lo, hi in zip(re["agree"], re["agree_most"])):
                        ck.fail(f"{tag} k={k}: rerun agree {re['agree']} to {re['agree_most']}, "
                                f"reference {r['agree']}")
                elif re["agree"] != [r["agree"]]:
                    ck.fail(f"{tag} k={k}: rerun agree {re['agree']}, reference {r['agree']}")
            if certified:
                # every repetition's enclosure contains the reference (all paths run: the repetitions coincide)
                iv = re["intervals"]
                for q in ("distance", "gap", "kl"):
                    if q not in r:
                        continue
                    if not iv[q]:
                        ck.fail(f"{tag} k={k}: no {q} intervals")
                        continue
                    for i, (lo, hi) in enumerate(iv[q]):
                        ck.interval(f"{tag} k={k} rerun {q} repetition {i}", lo, hi, r[q])
    return ck.summary(bits)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen-input", help="write a random X = 1c^T + R as a safetensors file")
    g.add_argument("--out", required=True)
    g.add_argument("--tokens", type=int, required=True)
    g.add_argument("--d-model", type=int, required=True)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--spread", type=float, default=1.0)
    g.add_argument("--dtype", default="F64", choices=["F64", "F32", "F16", "BF16"])
    g = sub.add_parser("gen-pixels", help="write a random image pixel_values [C, S, S] (ViT input)")
    g.add_argument("--out", required=True)
    g.add_argument("--channels", type=int, default=3)
    g.add_argument("--size", type=int, required=True)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--dtype", default="F32", choices=["F64", "F32", "F16", "BF16"])
    g = sub.add_parser("gen-head", help="test fixture: draw the task head's tensors of an `init --layout` folder")
    g.add_argument("--model", required=True)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--softcap", type=float, default=0.75, help="Gemma 2's and 3's final_logit_softcapping")
    r = sub.add_parser("residual-norms", help="print |X^l|_F and |X^l - 1 mean(X^l)^T|_F of every layer as JSON")
    r.add_argument("--model", required=True)
    r.add_argument("--input")
    r.add_argument("--tokens")
    r.add_argument("--pixels")
    r.add_argument("--bits", type=int, required=True)
    r.add_argument("--digits", type=int, default=80)
    r.add_argument("--all-norms", action="store_true",
                   help="also every quantity `sanpath forward` reports per layer (mean centre)")
    for k, choices in (("skip", ["on", "off"]), ("mlp", ["none", "plain", "residual"]),
                       ("layernorm", ["none", "pre", "post"]), ("mask", ["none", "causal"])):
        r.add_argument("--" + k, choices=choices)
    for name, text in (("check-forward", "check `sanpath forward --format json` results"),
                       ("check-paths", "check `sanpath paths --sums|--enumerate --format json` results"),
                       ("check-bounds", "check `sanpath bounds --format json` results")):
        c = sub.add_parser(name, help=text)
        c.add_argument("--model", required=True)
        src = c.add_mutually_exclusive_group(required=True)
        src.add_argument("--tokens")
        src.add_argument("--input")
        src.add_argument("--pixels")
        c.add_argument("--skip", choices=["on", "off"])
        c.add_argument("--mlp", choices=["none", "plain", "residual"])
        c.add_argument("--layernorm", choices=["none", "pre", "post"])
        c.add_argument("--mask", choices=["none", "causal"])
        if name == "check-forward":
            c.add_argument("--center", default="mean", choices=["mean", "median", "optimal"])
            c.add_argument("--measures", help="all|LIST: the measures given to `sanpath forward` (math.md section 9); "
                           "every layer must print exactly these (measures printed without it are checked too)")
            c.add_argument("--check", choices=["auto", "rounding", "mpfr", "certified"],
                           help="the --check given to `sanpath forward`: certified runs must print an interval "
                                "for every quantity, each containing the reference value (math.md section 10)")
            c.add_argument("--digits", type=int, help="the --digits given to `sanpath forward` (JSON prints every "
                           "confirmed digit whatever it asks: each number is checked to the digits it counts)")
            c.add_argument("--method", choices=["direct", "centred"],
                           help="the --method given to `sanpath forward`: the exact values do not depend on it; "
                                "each JSON's \"method\" must be this one")
        if name == "check-paths":   # the mode and filters given to `sanpath paths` (the JSON does not echo them)
            c.add_argument("--sums", action="store_true")
            c.add_argument("--effectiveness", action="store_true")
            c.add_argument("--rerun", type=int, default=0)
            c.add_argument("--repeats", type=int, default=5)
            c.add_argument("--enumerate", action="store_true")
            c.add_argument("--length", type=int)
            c.add_argument("--top", type=int, default=0)
            c.add_argument("--check", choices=["certified"],
                           help="`sanpath paths --sums|--enumerate|--effectiveness --check certified`: every "
                                "length's or path's quantities, ||X^L||_F, the decomposition error and the "
                                "distance at k = L (exactly 0) must come with intervals containing the reference "
                                "values; an agreement count, the range [agree, agree_most] its reference")
        if name == "check-bounds":
            c.add_argument("--gamma", default="1")
            c.add_argument("--check", choices=["auto", "mpfr", "certified"],
                           help="the --check given to `sanpath bounds`: certified runs must call their HOLDS and "
                                "VIOLATED proven, and none may contradict the reference's facts on r_0 and r_l")
        c.add_argument("--max-ref-bits", type=int, default=4400)
        c.add_argument("--verbose", action="store_true")
        c.add_argument("json", nargs="+")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "gen-input":
            return _gen_input(a)
        if a.cmd == "gen-pixels":
            return _gen_pixels(a)
        if a.cmd == "gen-head":
            return _gen_head(a)
        if a.cmd == "residual-norms":
            if not (a.input or a.tokens or a.pixels):
                raise ValueError("residual-norms needs --input, --tokens or --pixels")
            return _residual_norms(a)
        return {"check-forward": _check_forward, "check-paths": _check_paths, "check-bounds": _check_bounds}[a.cmd](a)
    except (ValueError, KeyError, OSError) as e:
        print(f"ERROR {type(e).__name__}: {e}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
