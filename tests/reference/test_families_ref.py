#!/usr/bin/env python3
"""Self-test of sanpath_ref.py's layout families (shared/docs/families.md), no sanpath binary needed.

Builds tiny HuggingFace folders with the reference's write_safetensors and checks
hand-computed facts: T5 buckets (families.md's examples and its three off-by-one
pairs), XLNet logits against a direct formula, GPT-NeoX's interleaved fused QKV,
OPT's position offset 2 and project_in, Gemma's sqrt(d) and (1 + w), Gemma 2's
softcap and sliding window, ViT's patch order, RoBERTa's, DistilBERT's and
ALBERT's embeddings and sequence classifiers; and each family's whole forward
pass (own variant and others) against a plain numpy float64 transcription of
families.md. Run: /usr/bin/python3 tests/reference/test_families_ref.py
(exit 0 when every check passes).
"""

import json
import math
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sanpath_ref as R  # noqa: E402
from mpmath import mp, mpf  # noqa: E402
from selftest import run_tests  # noqa: E402

CHECKS = [0]
TMP = tempfile.mkdtemp(prefix="famref.")


def ok(cond, what):
    CHECKS[0] += 1
    assert cond, what


def close(a, b, what, tol=1e-11):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    err = np.max(np.abs(a - b)) / max(1.0, np.max(np.abs(b)))
    ok(a.shape == b.shape and err < tol, f"{what}: relative error {err:.3g} (shapes {a.shape} {b.shape})")


class Ckpt:
    """Random tensors (values rounded to the file's dtype) for one folder."""

    def __init__(self, seed, dtype="F64", std=0.4):
        self.rng = np.random.default_rng(seed)
        self.dtype, self.std = dtype, std
        self.t = {}

    def add(self, name, shape, value=None, std=None):
        if value is None:
            value = self.rng.normal(0, std or self.std, size=shape)
        value = np.asarray(value, dtype=float).reshape(shape)
        flat = [R.round_to_dtype(float(x), self.dtype) for x in value.ravel()]
        self.t[name] = (list(shape), flat)
        return np.array(flat).reshape(shape)

    def write(self, name, cfg):
        d = os.path.join(TMP, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f)
        R.write_safetensors(os.path.join(d, "model.safetensors"), self.t, dtype=self.dtype)
        return d


def run(path, tokens=None, variant=None, pixels=None, bits=120):
    m = R.load_model(path)
    mp.prec = bits
    want = dict(m.own)
    want.update(variant or {})
    X0 = R.vit_embed(m, pixels) if pixels else R.embed(m, tokens)
    Xs, Ps = R.forward(m, X0, want, keep_P=True)
    return m, [np.array([[float(x) for x in r] for r in X]) for X in Xs], Ps


# ---- numpy transcription of families.md ----------------------------------------------------

def ln(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def rms(x, g, eps):
    return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps) * g


ERF = np.vectorize(math.erf)


def act(name, x):
    if name == "gelu":
        return 0.5 * x * (1 + ERF(x / math.sqrt(2)))
    if name == "gelu_tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    if name == "relu":
        return np.maximum(x, 0)
    raise ValueError(name)


def rope(M, r, base):
    """rotate half inside the first r columns, row p at position p, theta_i = base^(-2i/r)."""
    out = M.copy()
    h = r // 2
    for p in range(M.shape[0]):
        for i in range(h):
            a = p * base ** (-2 * i / r)
            out[p, i] = M[p, i] * math.cos(a) - M[p, i + h] * math.sin(a)
            out[p, i + h] = M[p, i + h] * math.cos(a) + M[p, i] * math.sin(a)
    return out


def softmax_vis(A, vis):
    P = np.zeros_like(A)
    for i in range(A.shape[0]):
        js = [j for j in range(A.shape[1]) if vis(i, j)]
        e = np.exp(A[i, js] - A[i, js].max())
        P[i, js] = e / e.sum()
    return P


CAUSAL = lambda i, j: j <= i  # noqa: E731
ALL = lambda i, j: True  # noqa: E731


# ---- T5 buckets ---------------------------------------------------------------------------

def test_t5_buckets():
    b = lambda d, nb=32, md=128: R.t5_bucket(d, nb, md)  # noqa: E731
    expect = {}
    for d in range(8):
        expect[d] = d
    for lo, hi, v in ((-11, -8, 8), (-15, -12, 9), (-22, -16, 10), (-31, -23, 11)):
        for d in range(lo, hi + 1):
            expect[d] = v
    expect.update({-32: 12, -64: 14, -91: 15, -92: 15, -500: 15, -90: 14})
    for d in range(1, 8):
        expect[d] = 16 + d
    for d in range(8, 12):
        expect[d] = 24
    expect.update({16: 26, 32: 28, 64: 30, 91: 31, 1000: 31, 90: 30})
    for d, v in expect.items():
        ok(b(d) == v, f"T5 bucket({d}) nb 32 md 128 = {b(d)}, families.md says {v}")
    # the float formula agrees for nb 32 / md 128 (families.md)
    for d in range(-300, 301):
        a = abs(d)
        k = a if a < 8 else min(15, 8 + int(math.log(a / 8) / math.log(128 / 8) * 8))
        ok(b(d) == (16 if d > 0 else 0) + k, f"T5 bucket({d}) vs the logarithm")
    # the three off-by-one pairs: exact k = 3, 5, 4
    ok(b(-12, 34, 27) == 8 + 3 and b(12, 34, 27) == 17 + 8 + 3, "nb 34 md 27 |d| 12: k = 3")
    ok(b(-206, 30, 636) == 7 + 5 and b(206, 30, 636) == 15 + 7 + 5, "nb 30 md 636 |d| 206: k = 5")
    ok(b(-20, 32, 50) == 8 + 4 and b(20, 32, 50) == 16 + 8 + 4, "nb 32 md 50 |d| 20: k = 4")
    for nb, md in ((2, 8), (32, 8), (8, 2)):
        try:
            R.t5_bucket(5, nb, md)
            ok(False, f"nb {nb} md {md} not refused")
        except ValueError:
            ok(True, "")


def test_t5_forward():
    d, H, dkv, L, f, V, nb, md = 6, 2, 4, 2, 5, 11, 8, 16
    for gated in (False, True):
        c = Ckpt(3 + gated)
        E = c.add("shared.weight", [V, d])
        T = c.add("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", [nb, H], std=1.0)
        Ls = []
        for l in range(L):
            p = f"encoder.block.{l}.layer."
            w = {k: c.add(p + f"0.SelfAttention.{k}.weight", [H * dkv, d]) for k in "qkv"}
            w["o"] = c.add(p + "0.SelfAttention.o.weight", [d, H * dkv])
            w["g1"] = c.add(p + "0.layer_norm.weight", [d], 1 + 0.2 * c.rng.normal(size=d))
            w["g2"] = c.add(p + "1.layer_norm.weight", [d], 1 + 0.2 * c.rng.normal(size=d))
            for k in (("wi_0", "wi_1") if gated else ("wi",)):
                w[k] = c.add(p + f"1.DenseReluDense.{k}.weight", [f, d])
            w["wo"] = c.add(p + "1.DenseReluDense.wo.weight", [d, f])
            Ls.append(w)
        path = c.write(f"t5g{int(gated)}", {"model_type": "t5", "d_model": d, "num_heads": H, "d_kv": dkv,
                                           "num_layers": L, "d_ff": f, "relative_attention_num_buckets": nb,
                                           "relative_attention_max_distance": md, "layer_norm_epsilon": 1e-6,
                                           "feed_forward_proj": "gated-gelu" if gated else "relu"})
        toks = [1, 5, 7, 3, 10]
        n = len(toks)
        for variant in ({}, {"skip": "off", "mlp": "none", "layernorm": "none"}, {"mask": "causal", "mlp": "plain"}):
            m, Xs, _ = run(path, toks, variant)
            ok(m.own == {"skip": "on", "mlp": "residual", "layernorm": "pre", "mask": "none"}, "t5 own variant")
            v = dict(m.own, **variant)
            X = E[toks]
            for l, w in enumerate(Ls):
                N = (lambda x, g: rms(x, g, 1e-6)) if v["layernorm"] == "pre" else (lambda x, g: x)
                Y = N(X, w["g1"])
                att = np.zeros((n, d))
                for h in range(H):
                    s = slice(h * dkv, (h + 1) * dkv)
                    Q, K, Vv = Y @ w["q"][s].T, Y @ w["k"][s].T, Y @ w["v"][s].T
                    B = np.array([[T[R.t5_bucket(j - i, nb, md), h] for j in range(n)] for i in range(n)])
                    P = softmax_vis(Q @ K.T + B, CAUSAL if v["mask"] == "causal" else ALL)   # no 1/sqrt(d_kv)
                    att += P @ Vv @ w["o"][:, s].T
                Z = X + att if v["skip"] == "on" else att
                if v["mlp"] != "none":
                    Y2 = N(Z, w["g2"])
                    if gated:
                        F = (act("gelu_tanh", Y2 @ w["wi_0"].T) * (Y2 @ w["wi_1"].T)) @ w["wo"].T
                    else:
                        F = act("relu", Y2 @ w["wi"].T) @ w["wo"].T
                    Z = Z + F if v["mlp"] == "residual" else F
                X = Z
                close(Xs[l + 1], X, f"t5 gated={gated} {variant} layer {l + 1}")


# ---- XLNet --------------------------------------------------------------------------------

def xlnet_ckpt(seed, d=4, H=2, L=1, f=6, V=9, prefix="transformer."):
    dh = d // H
    c = Ckpt(seed)
    c.add(prefix + "word_embedding.weight", [V, d], std=1.0)
    c.add(prefix + "mask_emb", [1, 1, d])
    for l in range(L):
        a = f"{prefix}layer.{l}.rel_attn."
        for k in "qkvro":
            c.add(a + k, [d, H, dh])
        for k in ("r_w_bias", "r_r_bias", "r_s_bias"):
            c.add(a + k, [H, dh])
        c.add(a + "seg_embed", [2, H, dh])
        c.add(a + "layer_norm.weight", [d], 1 + 0.1 * c.rng.normal(size=d))
        c.add(a + "layer_norm.bias", [d], std=0.1)
        p = f"{prefix}layer.{l}.ff."
        c.add(p + "layer_1.weight", [f, d])
        c.add(p + "layer_1.bias", [f], std=0.1)
        c.add(p + "layer_2.weight", [d, f])
        c.add(p + "layer_2.bias", [d], std=0.1)
        c.add(p + "layer_norm.weight", [d], 1 + 0.1 * c.rng.normal(size=d))
        c.add(p + "layer_norm.bias", [d], std=0.1)
    c.add("lm_loss.bias", [V])
    return c


def xlnet_np(c, toks, L, H, d, clamp, causal, variant, prefix):
    dh = d // H
    t = {k[len(prefix):] if k.startswith(prefix) else k: np.array(v[1]).reshape(v[0]) for k, v in c.t.items()}
    X = t["word_embedding.weight"][toks]
    n = len(toks)
    th = np.array([10000.0 ** (-2 * k / d) for k in range(d // 2)])
    Rp = lambda p: np.concatenate([np.sin(p * th), np.cos(p * th)])  # noqa: E731
    pos = lambda i, j: max(-clamp, min(clamp, i - j)) if clamp > 0 else i - j  # noqa: E731
    out, scores = [X], []
    for l in range(L):
        a = f"layer.{l}.rel_attn."
        att = np.zeros((n, d))
        for h in range(H):
            q, k, v = X @ t[a + "q"][:, h, :], X @ t[a + "k"][:, h, :], X @ t[a + "v"][:, h, :]
            rw, rr, rs, s0 = t[a + "r_w_bias"][h], t[a + "r_r_bias"][h], t[a + "r_s_bias"][h], t[a + "seg_embed"][0, h]
            A = np.zeros((n, n))
            for i in range(n):
                for j in range(n):
                    r = Rp(pos(i, j)) @ t[a + "r"][:, h, :]
                    # with the (row-constant) segment term of one segment: it must not change P
                    A[i, j] = ((q[i] + rw) @ k[j] + (q[i] + rr) @ r + (q[i] + rs) @ s0) / math.sqrt(dh)
            scores.append(A)
            P = softmax_vis(A, CAUSAL if causal else ALL)
            att += P @ v @ t[a + "o"][:, h, :].T
        g1, b1 = t[a + "layer_norm.weight"], t[a + "layer_norm.bias"]
        p = f"layer.{l}.ff."
        skip = variant.get("skip", "on") == "on"
        lnon = variant.get("layernorm", "post") == "post"
        N1 = (lambda x: ln(x, g1, b1, 1e-12)) if lnon else (lambda x: x)
        Z = N1(X + att if skip else att)
        if variant.get("mlp", "residual") != "none":
            F = act("gelu", Z @ t[p + "layer_1.weight"].T + t[p + "layer_1.bias"]) @ t[p + "layer_2.weight"].T \
                + t[p + "layer_2.bias"]
            Y = Z + F if variant.get("mlp", "residual") == "residual" else F
            Z = ln(Y, t[p + "layer_norm.weight"], t[p + "layer_norm.bias"], 1e-12) if lnon else Y
        X = Z
        out.append(X)
    return out, scores


def test_xlnet():
    d, H, L = 4, 2, 1
    for clamp, attn, prefix in ((-1, "bi", "transformer."), (1, "bi", ""), (2, "uni", "transformer.")):
        c = xlnet_ckpt(7 + clamp, d, H, L, prefix=prefix)
        path = c.write(f"xlnet{clamp}{attn}", {"model_type": "xlnet", "d_model": d, "n_head": H, "d_head": d // H,
                                               "n_layer": L, "d_inner": 6, "ff_activation": "gelu",
                                               "attn_type": attn, "clamp_len": clamp, "vocab_size": 9})
        toks = [3, 0, 8]
        m, Xs, _ = run(path, toks)
        ok(m.own["mask"] == ("causal" if attn == "uni" else "none") and m.own["layernorm"] == "post", "xlnet own")
        want, scores = xlnet_np(c, toks, L, H, d, clamp, attn == "uni", {}, prefix)
        # the logits, head by head, against the direct formula (the segment term is a row constant)
        mpw = R.FamilyMpWeights(m)
        X0 = R.embed(m, toks)
        for h in range(H):
            A = np.array([[float(x) for x in r] for r in R.family_scores(m, mpw, mpw.layers[0], 0, X0, h)])
            a = f"{prefix}layer.0.rel_attn."
            rs = np.array(c.t[a + "r_s_bias"][1]).reshape(H, d // H)[h]
            s0 = np.array(c.t[a + "seg_embed"][1]).reshape(2, H, d // H)[0, h]
            q = np.array(X0, dtype=float) @ np.array(c.t[a + "q"][1]).reshape(d, H, d // H)[:, h, :]
            seg = ((q + rs) @ s0) / math.sqrt(d // H)
            close(A + seg[:, None], scores[h], f"xlnet clamp {clamp} head {h} logits")
        close(Xs[1], want[1], f"xlnet clamp {clamp} {attn} own forward")
        for variant in ({"skip": "off", "mlp": "none", "layernorm": "none"}, {"mlp": "plain", "mask": "causal"}):
            _, Xs, _ = run(path, toks, variant)
            want, _ = xlnet_np(c, toks, L, H, d, clamp, variant.get("mask", m.own["mask"]) == "causal", variant,
                               prefix)
            close(Xs[1], want[1], f"xlnet clamp {clamp} {variant}")
    try:
        run(path, toks, {"layernorm": "pre"})
        ok(False, "xlnet layernorm pre not refused")
    except ValueError:
        ok(True, "")


# ---- GPT-NeoX and Phi ---------------------------------------------------------------------

def neox_ckpt(seed, d, H, L, f, V, prefix="gpt_neox."):
    c = Ckpt(seed)
    c.add(prefix + "embed_in.weight", [V, d], std=1.0)
    for l in range(L):
        p = f"{prefix}layers.{l}."
        for n in ("input_layernorm", "post_attention_layernorm"):
            c.add(p + n + ".weight", [d], 1 + 0.1 * c.rng.normal(size=d))
            c.add(p + n + ".bias", [d], std=0.1)
        c.add(p + "attention.query_key_value.weight", [3 * d, d])
        c.add(p + "attention.query_key_value.bias", [3 * d], std=0.1)
        c.add(p + "attention.dense.weight", [d, d])
        c.add(p + "attention.dense.bias", [d], std=0.1)
        c.add(p + "mlp.dense_h_to_4h.weight", [f, d])
        c.add(p + "mlp.dense_h_to_4h.bias", [f], std=0.1)
        c.add(p + "mlp.dense_4h_to_h.weight", [d, f])
        c.add(p + "mlp.dense_4h_to_h.bias", [d], std=0.1)
    c.add("embed_out.weight", [V, d])
    return c


def neox_np(c, toks, d, H, L, r, base, parallel, v, prefix):
    dh = d // H
    t = {k[len(prefix):] if k.startswith(prefix) else k: np.array(x[1]).reshape(x[0]) for k, x in c.t.items()}
    X = t["embed_in.weight"][toks]
    n = len(toks)
    out = [X]
    for l in range(L):
        p = f"layers.{l}."
        N1 = (lambda x: ln(x, t[p + "input_layernorm.weight"], t[p + "input_layernorm.bias"], 1e-5))
        N2 = (lambda x: ln(x, t[p + "post_attention_layernorm.weight"], t[p + "post_attention_layernorm.bias"], 1e-5))
        if v["layernorm"] == "none":
            N1 = N2 = (lambda x: x)
        W, b = t[p + "attention.query_key_value.weight"], t[p + "attention.query_key_value.bias"]

        def attn(Y):
            acc = np.zeros((n, d))
            for h in range(H):
                rows = lambda cc: slice(h * 3 * dh + cc * dh, h * 3 * dh + (cc + 1) * dh)  # noqa: E731
                Q, K, Vv = (Y @ W[rows(cc)].T + b[rows(cc)] for cc in range(3))
                Q, K = rope(Q, r, base), rope(K, r, base)
                P = softmax_vis(Q @ K.T / math.sqrt(dh), CAUSAL if v["mask"] == "causal" else ALL)
                acc += P @ Vv @ t[p + "attention.dense.weight"][:, h * dh:(h + 1) * dh].T
            return acc + t[p + "attention.dense.bias"]

        f = lambda Y: act("gelu", Y @ t[p + "mlp.dense_h_to_4h.weight"].T + t[p + "mlp.dense_h_to_4h.bias"]) \
            @ t[p + "mlp.dense_4h_to_h.weight"].T + t[p + "mlp.dense_4h_to_h.bias"]  # noqa: E731
        sk = X if v["skip"] == "on" else 0
        if parallel:
            X = sk + attn(N1(X)) + (f(N2(X)) if v["mlp"] == "residual" else 0)
        else:
            Z = sk + attn(N1(X))
            if v["mlp"] != "none":
                Z = (Z if v["mlp"] == "residual" else 0) + f(N2(Z))
            X = Z
        out.append(X)
    return out


def test_gpt_neox():
    d, H, L, f, V = 8, 2, 2, 6, 12
    # fused QKV interleaving: row h*3dh + c*dh + j is head h, component c, entry j
    c = neox_ckpt(1, d, H, 1, f, V)
    coded = np.array([[r * 100.0 + col for col in range(d)] for r in range(3 * d)])
    c.add("gpt_neox.layers.0.attention.query_key_value.weight", [3 * d, d], coded)
    c.add("gpt_neox.layers.0.attention.query_key_value.bias", [3 * d], np.arange(3 * d) * 1000.0)
    path = c.write("neox_coded", {"model_type": "gpt_neox", "hidden_size": d, "num_attention_heads": H,
                                  "num_hidden_layers": 1, "intermediate_size": f, "vocab_size": V,
                                  "rotary_pct": 0.5})
    m = R.load_model(path)
    ok(m.rotary == 2 and m.parallel and m.activation == "gelu" and m.eps == "1e-5" and mpf(m.theta) == 10000,
       f"gpt_neox defaults (r = int(4 * 0.5) = 2, parallel, gelu, 1e-5, 10000): r {m.rotary}")
    dh = d // H
    for h in range(H):
        hd = m.layers[0]["heads"][h]
        for cc, (wk, bk) in enumerate((("W_Q", "b_Q"), ("W_K", "b_K"), ("W_V", "b_V"))):
            for j in range(dh):
                row = h * 3 * dh + cc * dh + j
                ok([hd[wk][col][j] for col in range(d)] == [row * 100.0 + col for col in range(d)],
                   f"gpt_neox head {h} {wk} column {j} = fused row {row}")
                ok(hd[bk][j] == row * 1000.0, f"gpt_neox head {h} {bk}[{j}]")
    # forward: partial rotary (d_h 8, pct 0.5 -> r 4: theta_1 = base^(-2/r)), parallel and sequential,
    # bare-model prefix
    d = 16
    dh = d // H
    for parallel, prefix, pct in ((True, "gpt_neox.", 0.5), (False, "", 1.0)):
        c = neox_ckpt(2 + parallel, d, H, L, f, V, prefix)
        path = c.write(f"neox{int(parallel)}", {"model_type": "gpt_neox", "hidden_size": d, "num_attention_heads": H,
                                                "num_hidden_layers": L, "intermediate_size": f, "vocab_size": V,
                                                "rotary_pct": pct, "rotary_emb_base": 100.0,
                                                "use_parallel_residual": parallel, "hidden_act": "gelu"})
        toks = [1, 5, 7, 3]
        for variant in ({}, {"skip": "off", "mlp": "none", "layernorm": "none"}, {"mask": "none", "skip": "off"}):
            m, Xs, _ = run(path, toks, variant)
            want = neox_np(c, toks, d, H, L, int(dh * pct), 100.0, parallel, dict(m.own, **variant), prefix)
            for l in range(L + 1):
                close(Xs[l], want[l], f"gpt_neox parallel={parallel} {variant} layer {l}")
        try:
            run(path, toks, {"mlp": "plain"})
            ok(not parallel, "gpt_neox parallel mlp plain not refused")
        except ValueError:
            ok(parallel, "gpt_neox sequential mlp plain refused")
    # odd rotary dimension refused: d_h 4 * 0.25 = 1 (the default rotary_pct)
    c = neox_ckpt(4, d, H, 1, f, V)
    path = c.write("neox_odd", {"model_type": "gpt_neox", "hidden_size": d, "num_attention_heads": 4,
                                "num_hidden_layers": 1, "intermediate_size": f, "vocab_size": V})
    try:
        R.load_model(path)
        ok(False, "gpt_neox odd r not refused")
    except ValueError:
        ok(True, "")


def test_phi():
    d, H, Hkv, L, f, V = 16, 2, 1, 2, 6, 10
    dh = d // H                         # 8; partial_rotary_factor 0.5 -> r = 4
    c = Ckpt(21)
    E = c.add("model.embed_tokens.weight", [V, d], std=1.0)
    Ls = []
    for l in range(L):
        p = f"model.layers.{l}."
        w = {"g": c.add(p + "input_layernorm.weight", [d], 1 + 0.1 * c.rng.normal(size=d)),
             "b": c.add(p + "input_layernorm.bias", [d], std=0.1)}
        for k, rows in (("q_proj", H * dh), ("k_proj", Hkv * dh), ("v_proj", Hkv * dh)):
            w[k] = c.add(p + f"self_attn.{k}.weight", [rows, d])
            w[k + "b"] = c.add(p + f"self_attn.{k}.bias", [rows], std=0.1)
        w["o"] = c.add(p + "self_attn.dense.weight", [d, H * dh])
        w["ob"] = c.add(p + "self_attn.dense.bias", [d], std=0.1)
        w["fc1"], w["fc1b"] = c.add(p + "mlp.fc1.weight", [f, d]), c.add(p + "mlp.fc1.bias", [f], std=0.1)
        w["fc2"], w["fc2b"] = c.add(p + "mlp.fc2.weight", [d, f]), c.add(p + "mlp.fc2.bias", [d], std=0.1)
        Ls.append(w)
    path = c.write("phi", {"model_type": "phi", "hidden_size": d, "num_attention_heads": H,
                           "num_key_value_heads": Hkv, "num_hidden_layers": L, "intermediate_size": f,
                           "vocab_size": V, "partial_rotary_factor": 0.5, "rope_theta": 10000.0})
    toks = [2, 9, 4, 4]
    n = len(toks)
    for variant in ({}, {"skip": "off", "mlp": "none", "layernorm": "none"}):
        m, Xs, _ = run(path, toks, variant)
        v = dict(m.own, **variant)
        X = E[toks]
        for l, w in enumerate(Ls):
            Y = ln(X, w["g"], w["b"], 1e-5) if v["layernorm"] == "pre" else X
            att = np.zeros((n, d)) + w["ob"]
            for h in range(H):
                g = h * Hkv // H
                s, sk = slice(h * dh, (h + 1) * dh), slice(g * dh, (g + 1) * dh)
                Q = rope(Y @ w["q_proj"][s].T + w["q_projb"][s], 4, 10000.0)
                K = rope(Y @ w["k_proj"][sk].T + w["k_projb"][sk], 4, 10000.0)
                Vv = Y @ w["v_proj"][sk].T + w["v_projb"][sk]
                att += softmax_vis(Q @ K.T / math.sqrt(dh), CAUSAL) @ Vv @ w["o"][:, s].T
            F = act("gelu_tanh", Y @ w["fc1"].T + w["fc1b"]) @ w["fc2"].T + w["fc2b"]
            X = (X if v["skip"] == "on" else 0) + att + (F if v["mlp"] == "residual" else 0)
            close(Xs[l + 1], X, f"phi {variant} layer {l + 1}")


# ---- OPT ----------------------------------------------------------------------------------

def test_opt():
    d, e, H, L, f, V, P = 8, 6, 2, 2, 10, 12, 6
    dh = d // H
    for pre, e_ in ((False, e), (True, d)):
        c = Ckpt(31 + pre)
        pref = "model.decoder." if pre else "decoder."
        Et = c.add(pref + "embed_tokens.weight", [V, e_], std=1.0)
        pos = c.add(pref + "embed_positions.weight", [P + 2, d], std=1.0)
        proj = c.add(pref + "project_in.weight", [d, e_]) if e_ != d else None
        if e_ != d:
            c.add(pref + "project_out.weight", [e_, d])
        Ls = []
        for l in range(L):
            p = f"{pref}layers.{l}."
            w = {}
            for k in ("q_proj", "k_proj", "v_proj", "out_proj"):
                w[k] = c.add(p + f"self_attn.{k}.weight", [d, d])
                w[k + "b"] = c.add(p + f"self_attn.{k}.bias", [d], std=0.1)
            for k in ("self_attn_layer_norm", "final_layer_norm"):
                w[k] = (c.add(p + k + ".weight", [d], 1 + 0.1 * c.rng.normal(size=d)),
                        c.add(p + k + ".bias", [d], std=0.1))
            w["fc1"], w["fc1b"] = c.add(p + "fc1.weight", [f, d]), c.add(p + "fc1.bias", [f], std=0.1)
            w["fc2"], w["fc2b"] = c.add(p + "fc2.weight", [d, f]), c.add(p + "fc2.bias", [d], std=0.1)
            Ls.append(w)
        path = c.write(f"opt{int(pre)}", {"model_type": "opt", "hidden_size": d, "num_attention_heads": H,
                                          "num_hidden_layers": L, "ffn_dim": f, "word_embed_proj_dim": e_,
                                          "max_position_embeddings": P, "do_layer_norm_before": pre,
                                          "vocab_size": V})
        toks = [0, 11, 3, 3, 6]
        n = len(toks)
        X0 = (Et[toks] @ proj.T if proj is not None else Et[toks]) + pos[2:2 + n]     # offset 2
        for variant in ({}, {"skip": "off", "mlp": "none", "layernorm": "none"}, {"mlp": "plain", "mask": "none"}):
            m, Xs, _ = run(path, toks, variant)
            v = dict(m.own, **variant)
            ok(m.own["layernorm"] == ("pre" if pre else "post"), "opt own placement")
            close(Xs[0], X0, f"opt X^0 = E[t] project_in^T + positions[i + 2] (pre={pre})")
            X = X0
            for l, w in enumerate(Ls):
                N1 = lambda x: ln(x, *w["self_attn_layer_norm"], 1e-5)  # noqa: E731
                N2 = lambda x: ln(x, *w["final_layer_norm"], 1e-5)  # noqa: E731

                def attn(Y):
                    acc = np.zeros((n, d)) + w["out_projb"]
                    for h in range(H):
                        s = slice(h * dh, (h + 1) * dh)
                        Q = (Y @ w["q_proj"][s].T + w["q_projb"][s]) * dh ** -0.5
                        K, Vv = Y @ w["k_proj"][s].T + w["k_projb"][s], Y @ w["v_proj"][s].T + w["v_projb"][s]
                        P = softmax_vis(Q @ K.T, CAUSAL if v["mask"] == "causal" else ALL)
                        acc += P @ Vv @ w["out_proj"][:, s].T
                    return acc

                fm = lambda Y: act("relu", Y @ w["fc1"].T + w["fc1b"]) @ w["fc2"].T + w["fc2b"]  # noqa: E731
                sk = X if v["skip"] == "on" else 0
                if v["layernorm"] == "post":
                    Z = N1(sk + attn(X))
                    if v["mlp"] != "none":
                        Z = N2((Z if v["mlp"] == "residual" else 0) + fm(Z))
                else:
                    pn = v["layernorm"] == "pre"
                    Z = sk + attn(N1(X) if pn else X)
                    if v["mlp"] != "none":
                        Z = (Z if v["mlp"] == "residual" else 0) + fm(N2(Z) if pn else Z)
                X = Z
                close(Xs[l + 1], X, f"opt pre={pre} {variant} layer {l + 1}")
        try:
            run(path, list(range(P + 1)))
            ok(False, "opt: n > max_position_embeddings not refused")
        except ValueError:
            ok(True, "")


# ---- Gemma and Gemma 2 --------------------------------------------------------------------

def gemma_ckpt(seed, d, H, Hkv, dh, L, f, V, two, prefix="model.", dtype="F64"):
    c = Ckpt(seed, dtype)
    c.add(prefix + "embed_tokens.weight", [V, d], std=0.5)
    norms = ["input_layernorm", "post_attention_layernorm"]
    if two:
        norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
    for l in range(L):
        p = f"{prefix}layers.{l}."
        for k in norms:
            c.add(p + k + ".weight", [d], std=0.3)
        c.add(p + "self_attn.q_proj.weight", [H * dh, d])
        c.add(p + "self_attn.k_proj.weight", [Hkv * dh, d])
        c.add(p + "self_attn.v_proj.weight", [Hkv * dh, d])
        c.add(p + "self_attn.o_proj.weight", [d, H * dh])
        c.add(p + "mlp.gate_proj.weight", [f, d])
        c.add(p + "mlp.up_proj.weight", [f, d])
        c.add(p + "mlp.down_proj.weight", [d, f])
    c.add(prefix + "norm.weight", [d])
    return c


def gemma_np(c, toks, d, H, Hkv, dh, L, two, v, scale, cap, window, prefix, theta=10000.0):
    t = {k[len(prefix):] if k.startswith(prefix) else k: np.array(x[1]).reshape(x[0]) for k, x in c.t.items()}
    n = len(toks)
    X = math.sqrt(d) * t["embed_tokens.weight"][toks]
    out = [X]
    for l in range(L):
        p = f"layers.{l}."
        on = v["layernorm"] == "pre"
        N = lambda x, k: rms(x, 1 + t[p + k + ".weight"], 1e-6) if on else x  # noqa: E731
        Y = N(X, "input_layernorm")
        att = np.zeros((n, d))
        for h in range(H):
            g = h // (H // Hkv)
            s, sk = slice(h * dh, (h + 1) * dh), slice(g * dh, (g + 1) * dh)
            Q = rope(Y @ t[p + "self_attn.q_proj.weight"][s].T, dh, theta)
            K = rope(Y @ t[p + "self_attn.k_proj.weight"][sk].T, dh, theta)
            S = Q @ K.T * scale
            if cap:
                S = cap * np.tanh(S / cap)
            if v["mask"] == "causal":
                slide = window and two and l % 2 == 0
                vis = (lambda i, j: j <= i and i - j < window) if slide else CAUSAL
            else:
                vis = ALL
            att += softmax_vis(S, vis) @ (Y @ t[p + "self_attn.v_proj.weight"][sk].T) \
                @ t[p + "self_attn.o_proj.weight"][:, s].T
        if two:
            att = N(att, "post_attention_layernorm")
        Z = (X if v["skip"] == "on" else 0) + att
        if v["mlp"] != "none":
            Y2 = N(Z, "pre_feedforward_layernorm" if two else "post_attention_layernorm")
            F = (act("gelu_tanh", Y2 @ t[p + "mlp.gate_proj.weight"].T) * (Y2 @ t[p + "mlp.up_proj.weight"].T)) \
                @ t[p + "mlp.down_proj.weight"].T
            if two:
                F = N(F, "post_feedforward_layernorm")
            Z = (Z if v["mlp"] == "residual" else 0) + F
        X = Z
        out.append(X)
    return out


def test_gemma():
    d, H, Hkv, dh, L, f, V = 6, 4, 2, 4, 2, 8, 10
    c = gemma_ckpt(41, d, H, Hkv, dh, L, f, V, False, dtype="BF16")
    path = c.write("gemma", {"model_type": "gemma", "hidden_size": d, "num_attention_heads": H,
                             "num_key_value_heads": Hkv, "head_dim": dh, "num_hidden_layers": L,
                             "intermediate_size": f, "vocab_size": V, "hidden_act": "gelu"})
    toks = [1, 5, 7, 3]
    m, Xs, _ = run(path, toks)
    ok(m.activation == "gelu_tanh", "gemma: hidden_activation absent -> tanh GELU whatever hidden_act says")
    # BF16 values decoded exactly; X^0 = sqrt(d) E[ids] with sqrt(d) at the working precision
    E = m.emb["word"]
    ok(E == [[R.round_to_dtype(x, "BF16") for x in row] for row in E], "gemma BF16 decoding")
    mp.prec = 200
    X0 = R.embed(m, toks)
    ok(all(X0[i][k] == mp.sqrt(d) * mpf(E[t][k]) for i, t in enumerate(toks) for k in range(d)),
       "gemma X^0 = sqrt(d) E[ids] exactly at the working precision")
    # (1 + w) gains
    w = [0.5, -0.25, 0.0, 1.0, 2.0, -1.0]
    x = [mpf(v) for v in (1, 2, -3, 0.5, 4, -1)]
    got = R.family_norm(m, {"g": [mpf(v) for v in w], "b": None}, [x])[0]
    s = mp.sqrt(mp.fsum(v * v for v in x) / 6 + mpf("1e-6"))
    ok(all(abs(gv - xv / s * (1 + wv)) < mpf(2) ** -190 for gv, xv, wv in zip(got, x, w)), "gemma RMS (1 + w)")
    for variant in ({}, {"skip": "off", "mlp": "none", "layernorm": "none"}, {"mask": "none", "mlp": "plain"}):
        m, Xs, _ = run(path, toks, variant)
        want = gemma_np(c, toks, d, H, Hkv, dh, L, False, dict(m.own, **variant), dh ** -0.5, None, None, "model.")
        for l in range(L + 1):
            close(Xs[l], want[l], f"gemma {variant} layer {l}", 1e-10)
    try:
        run(path, toks, {"layernorm": "post"})
        ok(False, "gemma layernorm post not refused")
    except ValueError:
        ok(True, "")


def test_gemma2():
    d, H, Hkv, dh, L, f, V = 6, 2, 1, 4, 2, 8, 10
    qpas, cap, W = 9, 0.75, 2
    c = gemma_ckpt(51, d, H, Hkv, dh, L, f, V, True, prefix="")
    c.std = 1.0
    for l in range(L):
        c.add(f"layers.{l}.self_attn.q_proj.weight", [H * dh, d], std=1.5)   # large logits: the cap bites
    path = c.write("gemma2", {"model_type": "gemma2", "hidden_size": d, "num_attention_heads": H,
                              "num_key_value_heads": Hkv, "head_dim": dh, "num_hidden_layers": L,
                              "intermediate_size": f, "vocab_size": V, "query_pre_attn_scalar": qpas,
                              "attn_logit_softcapping": cap, "sliding_window": W})
    toks = [1, 5, 7, 3]
    n = len(toks)
    m, Xs, Ps = run(path, toks)
    ok(m.sliding == {0} and m.window == W, "gemma2: layer 0 slides, layer 1 is full")
    # window: layer 0 rows see j <= i, i - j < 2; layer 1 every j <= i; all within the cap
    for h in range(H):
        for i in range(n):
            for j in range(n):
                ok((Ps[0][h][i][j] != 0) == (j <= i and i - j < W), f"gemma2 layer 1 window P[{i}][{j}]")
                ok((Ps[1][h][i][j] != 0) == (j <= i), f"gemma2 layer 2 causal P[{i}][{j}]")
    mpw = R.FamilyMpWeights(m)
    mp.prec = 120
    X0 = R.embed(m, toks)
    raw = R.FamilyModel("x")
    raw.__dict__.update(m.__dict__)
    raw.softcap = None
    for h in range(H):
        A = R.family_scores(m, mpw, mpw.layers[0], 0, X0, h)
        B = R.family_scores(raw, mpw, mpw.layers[0], 0, X0, h)
        ok(all(abs(a - cap * mp.tanh(b / cap)) < mpf(2) ** -110 for ra, rb in zip(A, B) for a, b in zip(ra, rb)),
           "gemma2 softcap c tanh(S / c)")
        ok(max(abs(b) for rb in B for b in rb) > 2 * cap, "gemma2 test logits exceed the cap")
    for variant in ({}, {"skip": "off", "mlp": "none", "layernorm": "none"}, {"mask": "none"}):
        m, Xs, Ps = run(path, toks, variant)
        want = gemma_np(c, toks, d, H, Hkv, dh, L, True, dict(m.own, **variant), qpas ** -0.5, cap, W, "")
        for l in range(L + 1):
            close(Xs[l], want[l], f"gemma2 {variant} layer {l}", 1e-10)
    ok(all(x != 0 for x in Ps[0][0][n - 1]), "gemma2 mask none: no window either")
    # null softcap / window
    cfg = json.load(open(os.path.join(path, "config.json")))
    cfg.update({"attn_logit_softcapping": None, "sliding_window": None, "layer_types": ["full_attention"] * L})
    json.dump(cfg, open(os.path.join(path, "config.json"), "w"))
    m = R.load_model(path)
    ok(m.softcap is None and m.window is None and not m.sliding, "gemma2 nulls")
    del cfg["attn_logit_softcapping"], cfg["sliding_window"], cfg["layer_types"]
    json.dump(cfg, open(os.path.join(path, "config.json"), "w"))
    m = R.load_model(path)
    ok(mpf(m.softcap) == 50 and m.window == 4096 and m.sliding == {0}, "gemma2 defaults")


# ---- ViT ----------------------------------------------------------------------------------

def test_vit():
    C, p, S, H, L, f = 2, 2, 4, 2, 2, 6
    g, d = S // p, C * p * p           # d = 8: the identity patch map below
    c = Ckpt(61)
    W = np.eye(d).reshape(d, C, p, p)  # e_k[o] = x[c, r p + i, s p + j] with o = c p^2 + i p + j
    c.add("vit.embeddings.patch_embeddings.projection.weight", [d, C, p, p], W)
    c.add("vit.embeddings.patch_embeddings.projection.bias", [d], np.zeros(d))
    c.add("vit.embeddings.cls_token", [1, 1, d], np.zeros(d))
    c.add("vit.embeddings.position_embeddings", [1, g * g + 1, d], np.zeros((g * g + 1, d)))
    Ls = []
    for l in range(L):
        q = f"vit.encoder.layer.{l}."
        w = {}
        for k in ("query", "key", "value"):
            w[k] = c.add(q + f"attention.attention.{k}.weight", [d, d])
            w[k + "b"] = c.add(q + f"attention.attention.{k}.bias", [d], std=0.1)
        w["o"], w["ob"] = c.add(q + "attention.output.dense.weight", [d, d]), \
            c.add(q + "attention.output.dense.bias", [d], std=0.1)
        for k in ("layernorm_before", "layernorm_after"):
            w[k] = (c.add(q + k + ".weight", [d], 1 + 0.1 * c.rng.normal(size=d)), c.add(q + k + ".bias", [d], std=0.1))
        w["1"], w["1b"] = c.add(q + "intermediate.dense.weight", [f, d]), c.add(q + "intermediate.dense.bias", [f])
        w["2"], w["2b"] = c.add(q + "output.dense.weight", [d, f]), c.add(q + "output.dense.bias", [d])
        Ls.append(w)
    cfg = {"model_type": "vit", "hidden_size": d, "num_hidden_layers": L, "num_attention_heads": H,
           "intermediate_size": f, "image_size": S, "patch_size": p, "num_channels": C}
    path = c.write("vit_patch", cfg)
    x = np.array([[[cc * 1000 + y * 10 + z for z in range(S)] for y in range(S)] for cc in range(C)], dtype=float)
    pix = os.path.join(TMP, "pix.safetensors")
    R.write_safetensors(pix, {"pixel_values": ([C, S, S], list(x.ravel()))}, dtype="F32")
    m = R.load_model(path)
    mp.prec = 100
    X0 = R.vit_embed(m, pix)
    ok(len(X0) == g * g + 1 and all(v == 0 for v in X0[0]), "vit: CLS is row 0")
    for r in range(g):
        for s in range(g):
            want = [x[cc, r * p + i, s * p + j] for cc in range(C) for i in range(p) for j in range(p)]
            ok([float(v) for v in X0[1 + r * g + s]] == want, f"vit patch ({r}, {s}) is row {1 + r * g + s}")
    # random embedding tensors, then the forward pass
    E = {"W": c.add("vit.embeddings.patch_embeddings.projection.weight", [d, C, p, p]),
         "b": c.add("vit.embeddings.patch_embeddings.projection.bias", [d]),
         "cls": c.add("vit.embeddings.cls_token", [1, 1, d]),
         "pos": c.add("vit.embeddings.position_embeddings", [1, g * g + 1, d])}
    path = c.write("vit", cfg)
    xs = np.random.default_rng(5).normal(size=(1, C, S, S))
    xs = np.array([R.round_to_dtype(v, "F32") for v in xs.ravel()]).reshape(1, C, S, S)
    R.write_safetensors(pix, {"pixel_values": ([1, C, S, S], list(xs.ravel()))}, dtype="F32")
    rows = [E["cls"].reshape(d)]
    for r in range(g):
        for s in range(g):
            rows.append(np.einsum("ocij,cij->o", E["W"], xs[0][:, r * p:(r + 1) * p, s * p:(s + 1) * p]) + E["b"])
    X0 = np.array(rows) + E["pos"].reshape(g * g + 1, d)
    n, dh = len(X0), d // H
    for variant in ({}, {"layernorm": "post", "mask": "causal"}, {"skip": "off", "mlp": "plain", "layernorm": "none"}):
        m, Xs, _ = run(path, variant=variant, pixels=pix)
        v = dict(m.own, **variant)
        close(Xs[0], X0, "vit X^0")
        X = X0
        for l, w in enumerate(Ls):
            N = lambda y, k: ln(y, *w[k], 1e-12)  # noqa: E731

            def attn(Y):
                acc = np.zeros((n, d)) + w["ob"]
                for h in range(H):
                    s = slice(h * dh, (h + 1) * dh)
                    Q, K, Vv = (Y @ w[k][s].T + w[k + "b"][s] for k in ("query", "key", "value"))
                    P = softmax_vis(Q @ K.T / math.sqrt(dh), CAUSAL if v["mask"] == "causal" else ALL)
                    acc += P @ Vv @ w["o"][:, s].T
                return acc

            fm = lambda Y: act("gelu", Y @ w["1"].T + w["1b"]) @ w["2"].T + w["2b"]  # noqa: E731
            sk = X if v["skip"] == "on" else 0
            res = v["mlp"] == "residual"
            if v["layernorm"] == "post":
                Z = N(sk + attn(X), "layernorm_before")
                X = N((Z if res else 0) + fm(Z), "layernorm_after")
            elif v["layernorm"] == "pre":
                Z = sk + attn(N(X, "layernorm_before"))
                X = (Z if res else 0) + fm(N(Z, "layernorm_after"))
            else:
                Z = sk + attn(X)
                X = (Z if res else 0) + fm(Z)
            close(Xs[l + 1], X, f"vit {variant} layer {l + 1}", 1e-10)
    try:
        run(path, [1, 2])
        ok(False, "vit: token input not refused")
    except ValueError:
        ok(True, "")


def test_bert_classifiers():
    """RoBERTa, DistilBERT and ALBERT ...ForSequenceClassification folders: X^0, the post-LN forward pass and
    the head's logits on the first row against numpy (HF: RoBERTa's positions from pad_token_id + 1 and
    dense + tanh, out_proj; DistilBERT without token types, pre_classifier + ReLU; ALBERT's embeddings of
    width e mapped to d, one shared layer, pooler + tanh)."""
    H, L, d, f, V, P, C, e = 2, 2, 8, 6, 10, 12, 3, 6
    dh = d // H
    tokens = [0, 4, 7, 2, 9]
    for fam in ("roberta", "distilbert", "albert"):
        c = Ckpt(71)
        x = fam + "."
        width = e if fam == "albert" else d
        E = {"word": c.add(x + "embeddings.word_embeddings.weight", [V, width]),
             "pos": c.add(x + "embeddings.position_embeddings.weight", [P, width]),
             "g": c.add(x + "embeddings.LayerNorm.weight", [width], 1 + 0.1 * c.rng.normal(size=width)),
             "b": c.add(x + "embeddings.LayerNorm.bias", [width], std=0.1)}
        if fam != "distilbert":
            E["type"] = c.add(x + "embeddings.token_type_embeddings.weight", [2, width])
        if fam == "albert":
            E["map"] = c.add(x + "encoder.embedding_hidden_mapping_in.weight", [d, e])
            E["mapb"] = c.add(x + "encoder.embedding_hidden_mapping_in.bias", [d], std=0.1)
        names = {"roberta": ("attention.self.query", "attention.self.key", "attention.self.value",
                             "attention.output.dense", "attention.output.LayerNorm", "intermediate.dense",
                             "output.dense", "output.LayerNorm"),
                 "distilbert": ("attention.q_lin", "attention.k_lin", "attention.v_lin", "attention.out_lin",
                                "sa_layer_norm", "ffn.lin1", "ffn.lin2", "output_layer_norm"),
                 "albert": ("attention.query", "attention.key", "attention.value", "attention.dense",
                            "attention.LayerNorm", "ffn", "ffn_output", "full_layer_layer_norm")}[fam]
        layer_of = {"roberta": "encoder.layer.{}.", "distilbert": "transformer.layer.{}.",
                    "albert": "encoder.albert_layer_groups.0.albert_layers.0."}[fam]
        Ls = []
        for l in range(1 if fam == "albert" else L):
            q = x + layer_of.format(l)
            w = {}
            for k, n in zip(("q", "k", "v", "o"), names[:4]):
                w[k], w[k + "b"] = c.add(q + n + ".weight", [d, d]), c.add(q + n + ".bias", [d], std=0.1)
            w["1"], w["1b"] = c.add(q + names[5] + ".weight", [f, d]), c.add(q + names[5] + ".bias", [f])
            w["2"], w["2b"] = c.add(q + names[6] + ".weight", [d, f]), c.add(q + names[6] + ".bias", [d])
            for k, n in (("ln1", names[4]), ("ln2", names[7])):
                w[k] = (c.add(q + n + ".weight", [d], 1 + 0.1 * c.rng.normal(size=d)), c.add(q + n + ".bias", [d],
                                                                                              std=0.1))
            Ls.append(w)
        pooler, out = {"roberta": ("classifier.dense", "classifier.out_proj"),
                       "distilbert": ("pre_classifier", "classifier"), "albert": ("albert.pooler", "classifier")}[fam]
        Wp, bp = c.add(pooler + ".weight", [d, d]), c.add(pooler + ".bias", [d], std=0.5)
        Wc, bc = c.add(out + ".weight", [C, d]), c.add(out + ".bias", [C], std=0.3)
        if fam == "distilbert":
            cfg = {"model_type": fam, "dim": d, "n_layers": L, "n_heads": H, "hidden_dim": f, "activation": "gelu",
                   "vocab_size": V, "max_position_embeddings": P}
        else:
            cfg = {"model_type": fam, "hidden_size": d, "num_hidden_layers": L, "num_attention_heads": H,
                   "intermediate_size": f, "hidden_act": "gelu", "layer_norm_eps": 1e-12, "vocab_size": V,
                   "max_position_embeddings": P, "type_vocab_size": 2, "pad_token_id": 1}
            if fam == "albert":
                cfg.update(embedding_size=e, num_hidden_groups=1, inner_group_num=1)
        path = c.write(fam + "_classifier", cfg)
        first = 2 if fam == "roberta" else 0  # RoBERTa: padding_idx 1, positions from 2
        X = E["word"][tokens] + E["pos"][first:first + len(tokens)] + (E["type"][0] if "type" in E else 0)
        X = ln(X, E["g"], E["b"], 1e-12)
        if fam == "albert":
            X = X @ E["map"].T + E["mapb"]
        m, Xs, _ = run(path, tokens)
        close(Xs[0], X, f"{fam} X^0")
        n = len(tokens)
        for l in range(L):
            w = Ls[0 if fam == "albert" else l]
            att = np.zeros((n, d)) + w["ob"]
            for h in range(H):
                sl = slice(h * dh, (h + 1) * dh)
                Q, K, Vv = (X @ w[k][sl].T + w[k + "b"][sl] for k in ("q", "k", "v"))
                att += softmax_vis(Q @ K.T / math.sqrt(dh), ALL) @ Vv @ w["o"][:, sl].T
            Z = ln(X + att, *w["ln1"], 1e-12)
            X = ln(Z + act("gelu", Z @ w["1"].T + w["1b"]) @ w["2"].T + w["2b"], *w["ln2"], 1e-12)
            close(Xs[l + 1], X, f"{fam} layer {l + 1}", 1e-10)
        pre = Wp @ X[0] + bp
        ok(fam != "distilbert" or (pre < 0).any(), "distilbert: the ReLU cuts nothing")
        pooled = np.maximum(pre, 0) if fam == "distilbert" else np.tanh(pre)
        head = R.task_head(path)
        ok(head is not None and head["kind"] == "classifier", f"{fam}: no classifier head")
        mp.prec = 120
        got = R.head_logits(head, [[mpf(v) for v in Xs[-1][0]]], mpf(m.eps))
        close(got, [Wc @ pooled + bc], f"{fam} logits", 1e-10)


def test_llama():
    d, H, Hkv, L, f, V = 8, 4, 2, 1, 6, 10
    dh = d // H
    c = Ckpt(71)
    E = c.add("model.embed_tokens.weight", [V, d], std=1.0)
    p = "model.layers.0."
    w = {k: c.add(p + k + ".weight", [d], 1 + 0.1 * c.rng.normal(size=d))
         for k in ("input_layernorm", "post_attention_layernorm")}
    for k, rows in (("q", H * dh), ("k", Hkv * dh), ("v", Hkv * dh)):
        w[k] = c.add(p + f"self_attn.{k}_proj.weight", [rows, d])
        w[k + "b"] = c.add(p + f"self_attn.{k}_proj.bias", [rows], std=0.1)
    w["o"] = c.add(p + "self_attn.o_proj.weight", [d, H * dh])
    for k in ("gate", "up"):
        w[k] = c.add(p + f"mlp.{k}_proj.weight", [f, d])
    w["down"] = c.add(p + "mlp.down_proj.weight", [d, f])
    path = c.write("qwen2", {"model_type": "qwen2", "hidden_size": d, "num_attention_heads": H,
                             "num_key_value_heads": Hkv, "num_hidden_layers": L, "intermediate_size": f,
                             "vocab_size": V, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "hidden_act": "silu"})
    toks = [3, 1, 4, 1]
    n = len(toks)
    _, Xs, _ = run(path, toks)
    X = E[toks]
    Y = rms(X, w["input_layernorm"], 1e-6)
    att = np.zeros((n, d))
    for h in range(H):
        g = h * Hkv // H
        s, sk = slice(h * dh, (h + 1) * dh), slice(g * dh, (g + 1) * dh)
        Q = rope(Y @ w["q"][s].T + w["qb"][s], dh, 10000.0)
        K = rope(Y @ w["k"][sk].T + w["kb"][sk], dh, 10000.0)
        att += softmax_vis(Q @ K.T / math.sqrt(dh), CAUSAL) @ (Y @ w["v"][sk].T + w["vb"][sk]) @ w["o"][:, s].T
    Z = X + att
    Y2 = rms(Z, w["post_attention_layernorm"], 1e-6)
    G = Y2 @ w["gate"].T
    close(Xs[1], Z + ((G / (1 + np.exp(-G))) * (Y2 @ w["up"].T)) @ w["down"].T, "qwen2 forward")


# ---- Qwen3 and Gemma 3 (query/key norms) ------------------------------------------------------

def qkn_ckpt(seed, d, H, Hkv, dh, L, f, V, gemma3, bias=False, prefix="model."):
    """A Qwen3 (two norms) or Gemma 3 (four) folder's tensors; q_norm / k_norm gains far from neutral."""
    c = Ckpt(seed)
    c.add(prefix + "embed_tokens.weight", [V, d], std=0.8)
    norms = ["input_layernorm", "post_attention_layernorm"]
    if gemma3:
        norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
    for l in range(L):
        p = f"{prefix}layers.{l}."
        for k in norms:
            c.add(p + k + ".weight", [d], (0 if gemma3 else 1) + 0.3 * c.rng.normal(size=d))
        for k in ("q_norm", "k_norm"):
            c.add(p + f"self_attn.{k}.weight", [dh], (0 if gemma3 else 1) + 0.8 * c.rng.normal(size=dh))
        for k, rows in (("q", H * dh), ("k", Hkv * dh), ("v", Hkv * dh)):
            c.add(p + f"self_attn.{k}_proj.weight", [rows, d])
            if bias:
                c.add(p + f"self_attn.{k}_proj.bias", [rows], std=0.2)
        c.add(p + "self_attn.o_proj.weight", [d, H * dh])
        if bias:
            c.add(p + "self_attn.o_proj.bias", [d], std=0.2)
        c.add(p + "mlp.gate_proj.weight", [f, d])
        c.add(p + "mlp.up_proj.weight", [f, d])
        c.add(p + "mlp.down_proj.weight", [d, f])
    c.add(prefix + "norm.weight", [d])
    return c


def rope_f(M, base, factor):
    """families.md's per-layer rotary: angle p theta_i / f, theta_i = base^(-2i/d_h), rotate half."""
    out = M.copy()
    h = M.shape[1] // 2
    for p in range(M.shape[0]):
        for i in range(h):
            a = p * base ** (-2 * i / M.shape[1]) / factor
            out[p, i] = M[p, i] * math.cos(a) - M[p, i + h] * math.sin(a)
            out[p, i + h] = M[p, i + h] * math.cos(a) + M[p, i] * math.sin(a)
    return out


def qkn_np(c, toks, d, H, Hkv, dh, L, v, gemma3, rope_l, scale, window=None, sliding=(), prefix="model.",
           eps=1e-6, bias=False, no_qk_norm=False):
    """families.md's Qwen3 / Gemma 3 in float64: projection, per-head view, N(.; gamma), rotation, s q.k.
    rope_l[l] = (base, factor); sliding: the layers with the window."""
    t = {k[len(prefix):] if k.startswith(prefix) else k: np.array(x[1]).reshape(x[0]) for k, x in c.t.items()}
    gain = (lambda w: 1 + w) if gemma3 else (lambda w: w)
    n = len(toks)
    X = (math.sqrt(d) if gemma3 else 1.0) * t["embed_tokens.weight"][toks]
    out = [X]
    for l in range(L):
        p = f"layers.{l}."
        a = p + "self_attn."
        on = v["layernorm"] == "pre"
        N = lambda x, k: rms(x, gain(t[p + k + ".weight"]), eps) if on else x  # noqa: E731
        Y = N(X, "input_layernorm")
        proj = lambda k: Y @ t[a + k + "_proj.weight"].T + (t[a + k + "_proj.bias"] if bias else 0)  # noqa: E731
        Qa, Ka, Va = proj("q"), proj("k"), proj("v")
        att = np.zeros((n, d))
        for h in range(H):
            g = h // (H // Hkv)
            s, sk = slice(h * dh, (h + 1) * dh), slice(g * dh, (g + 1) * dh)
            q, k = Qa[:, s], Ka[:, sk]
            if not no_qk_norm:
                q, k = rms(q, gain(t[a + "q_norm.weight"]), eps), rms(k, gain(t[a + "k_norm.weight"]), eps)
            q, k = rope_f(q, *rope_l[l]), rope_f(k, *rope_l[l])
            if v["mask"] == "causal":
                vis = (lambda i, j: j <= i and i - j < window) if l in sliding else CAUSAL
            else:
                vis = ALL
            att += softmax_vis(q @ k.T * scale, vis) @ Va[:, sk] @ t[a + "o_proj.weight"][:, s].T
        if bias:
            att = att + t[a + "o_proj.bias"]
        if gemma3:
            att = N(att, "post_attention_layernorm")
        Z = (X if v["skip"] == "on" else 0) + att
        if v["mlp"] != "none":
            Y2 = N(Z, "pre_feedforward_layernorm" if gemma3 else "post_attention_layernorm")
            G = Y2 @ t[p + "mlp.gate_proj.weight"].T
            A = act("gelu_tanh", G) if gemma3 else G / (1 + np.exp(-G))
            F = (A * (Y2 @ t[p + "mlp.up_proj.weight"].T)) @ t[p + "mlp.down_proj.weight"].T
            if gemma3:
                F = N(F, "post_feedforward_layernorm")
            Z = (Z if v["mlp"] == "residual" else 0) + F
        X = Z
        out.append(X)
    return out


def refused(path, cfg_update, what, drop=()):
    cfg_path = os.path.join(path, "config.json")
    keep = json.load(open(cfg_path))
    cfg = dict(keep, **cfg_update)
    for k in drop:
        cfg.pop(k, None)
    json.dump(cfg, open(cfg_path, "w"))
    try:
        R.load_model(path)
        ok(False, f"{what}: not refused")
    except ValueError:
        ok(True, "")
    json.dump(keep, open(cfg_path, "w"))


def test_qwen3():
    d, H, Hkv, dh, L, f, V, theta = 6, 4, 2, 4, 2, 8, 10, 100.0
    for bias in (False, True):
        c = qkn_ckpt(81 + bias, d, H, Hkv, dh, L, f, V, False, bias=bias)
        path = c.write(f"qwen3b{int(bias)}", {"model_type": "qwen3", "hidden_size": d, "num_attention_heads": H,
                                              "num_key_value_heads": Hkv, "head_dim": dh, "num_hidden_layers": L,
                                              "intermediate_size": f, "vocab_size": V, "rope_theta": theta,
                                              "attention_bias": bias, "rms_norm_eps": 1e-6})
        toks = [1, 5, 7, 3, 9]
        for variant in ({}, {"skip": "off", "mlp": "none", "layernorm": "none"}, {"mask": "none", "mlp": "plain"}):
            m, Xs, _ = run(path, toks, variant)
            v = dict(m.own, **variant)
            want = qkn_np(c, toks, d, H, Hkv, dh, L, v, False, [(theta, 1.0)] * L, dh ** -0.5, bias=bias)
            for l in range(L + 1):
                close(Xs[l], want[l], f"qwen3 bias {bias} {variant} layer {l}", 1e-10)
            # the query/key norm matters: without it the layers differ
            bare = qkn_np(c, toks, d, H, Hkv, dh, L, v, False, [(theta, 1.0)] * L, dh ** -0.5, bias=bias,
                          no_qk_norm=True)
            ok(np.max(np.abs(bare[L] - want[L])) > 1e-3, f"qwen3 {variant}: the query/key norm changes X^L")
    # norm before rotation, per head, gain w (not 1 + w): one head's logits by hand
    m = R.load_model(path)
    mp.prec = 120
    mpw = R.FamilyMpWeights(m)
    X0 = R.embed(m, toks)
    lw = mpw.layers[0]
    A = R.family_scores(m, mpw, lw, 0, X0, 3)
    hd = lw["heads"][3]
    Q = R.add_bias(R.matmul(X0, hd["W_Q"]), hd["b_Q"])
    K = R.add_bias(R.matmul(X0, hd["W_K"]), hd["b_K"])
    N = lambda u, g: [x / mp.sqrt(mp.fsum(y * y for y in u) / dh + mpf("1e-6")) * w for x, w in zip(u, g)]  # noqa
    Qn = R.rotate_half([N(u, lw["q_norm"]["g"]) for u in Q], dh, "100")
    Kn = R.rotate_half([N(u, lw["k_norm"]["g"]) for u in K], dh, "100")
    ok(all(abs(A[i][j] - mp.fdot(Qn[i], Kn[j]) / 2) < mpf(2) ** -100 for i in range(5) for j in range(5)),
       "qwen3 logits: s N(q; w) rotated . N(k; w) rotated, s = 4^(-1/2)")
    # head_dim default 128 (not d / H), num_key_value_heads null = H
    cfg = json.load(open(os.path.join(path, "config.json")))
    cfg_nodh = {k: x for k, x in cfg.items() if k != "head_dim"}
    json.dump(dict(cfg_nodh, num_key_value_heads=None, num_attention_heads=4), open(os.path.join(path, "config.json"),
                                                                                       "w"))
    try:
        R.load_model(path)
        ok(False, "qwen3 head_dim default 128 read as 4")
    except ValueError as e:
        ok("128" in str(e) or "q_proj" in str(e) or "shape" in str(e) or "length" in str(e), f"qwen3 dh 128: {e}")
    json.dump(cfg, open(os.path.join(path, "config.json"), "w"))
    for upd, what in (({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, "rope_scaling linear"),
                      ({"rope_parameters": {"rope_type": "default", "rope_theta": 7.0}}, "rope_theta disagreeing"),
                      ({"use_sliding_window": True}, "use_sliding_window"),
                      ({"layer_types": ["full_attention", "sliding_attention"]}, "layer_types sliding"),
                      ({"hidden_act": "gelu"}, "hidden_act gelu"), ({"head_dim": None}, "head_dim null"),
                      ({"head_dim": 3}, "head_dim odd"), ({"num_key_value_heads": 3}, "H_kv 3"),
                      ({"partial_rotary_factor": 0.5}, "partial rotary")):
        refused(path, upd, f"qwen3 {what}")
    m = R.load_model(path)
    ok(m.theta == "100.0" and m.rope is None, "qwen3: one base")


def test_gemma3():
    d, H, Hkv, dh, L, f, V = 6, 2, 1, 4, 3, 8, 12
    qpas, W, local, glob, fac = 5, 2, 30.0, 1000.0, 4.0
    c = qkn_ckpt(91, d, H, Hkv, dh, L, f, V, True, prefix="")
    cfg = {"model_type": "gemma3_text", "hidden_size": d, "num_attention_heads": H, "num_key_value_heads": Hkv,
           "head_dim": dh, "num_hidden_layers": L, "intermediate_size": f, "vocab_size": V,
           "query_pre_attn_scalar": qpas, "sliding_window": W, "sliding_window_pattern": 2,
           "rope_local_base_freq": local, "rope_theta": glob, "rope_scaling": {"rope_type": "linear", "factor": fac}}
    path = c.write("gemma3", cfg)
    toks = [1, 5, 7, 3, 10]
    n = len(toks)
    m, Xs, Ps = run(path, toks)
    # pattern 2: layer 1 global, layers 0 and 2 local
    ok(m.sliding == {0, 2} and m.window == W, f"gemma3 pattern 2: sliding {m.sliding}")
    ok(m.rope == [("30.0", "1"), ("1000.0", "4.0"), ("30.0", "1")], f"gemma3 rotary per layer {m.rope}")
    for h in range(H):
        for i in range(n):
            for j in range(n):
                ok((Ps[0][h][i][j] != 0) == (j <= i and i - j < W), f"gemma3 layer 0 window P[{i}][{j}]")
                ok((Ps[1][h][i][j] != 0) == (j <= i), f"gemma3 layer 1 causal P[{i}][{j}]")
    rl = [(local, 1.0), (glob, fac), (local, 1.0)]
    for variant in ({}, {"skip": "off", "mlp": "none", "layernorm": "none"}, {"mask": "none"}):
        m, Xs, Ps = run(path, toks, variant)
        v = dict(m.own, **variant)
        want = qkn_np(c, toks, d, H, Hkv, dh, L, v, True, rl, qpas ** -0.5, W, {0, 2}, prefix="")
        for l in range(L + 1):
            close(Xs[l], want[l], f"gemma3 {variant} layer {l}", 1e-10)
        # each feature matters: the query/key norm, and each layer's own base and factor
        for wrong, what in ((dict(no_qk_norm=True), "no query/key norm"),
                            (dict(rope_l=[(glob, fac)] * L), "the global rotary on every layer"),
                            (dict(rope_l=[(local, 1.0), (glob, 1.0), (local, 1.0)]), "no linear factor")):
            args = dict(rope_l=rl)
            args.update(wrong)
            bad = qkn_np(c, toks, d, H, Hkv, dh, L, v, True, args.pop("rope_l"), qpas ** -0.5, W, {0, 2},
                         prefix="", **args)
            ok(np.max(np.abs(bad[L] - want[L])) > 1e-4, f"gemma3 {variant}: {what} changes X^L")
    # layer_types decides over the pattern; defaults; the multimodal file's text model
    refused(path, {"layer_types": ["full_attention"] * 2}, "gemma3 layer_types of length 2")
    refused(path, {"rope_scaling": {"rope_type": "yarn", "factor": 8.0}}, "gemma3 yarn")
    refused(path, {"rope_scaling": {"rope_type": "linear", "factor": 0.5}}, "gemma3 factor 0.5")
    refused(path, {"attn_logit_softcapping": 50.0}, "gemma3 attention soft cap")
    refused(path, {"use_bidirectional_attention": True}, "gemma3 bidirectional")
    refused(path, {"_sliding_window_pattern": 6}, "gemma3 _sliding_window_pattern contradicting")
    refused(path, {"sliding_window": None}, "gemma3 null window with sliding layers")
    refused(path, {"head_dim": None}, "gemma3 null head_dim")
    refused(path, {"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": glob}}},
            "gemma3 rope_parameters disagreeing with rope_scaling")
    refused(path, {"rope_parameters": {"rope_type": "default"}}, "gemma3 rope_parameters not keyed by layer type")
    cfg2 = dict(cfg, layer_types=["full_attention", "sliding_attention", "sliding_attention"])
    json.dump(cfg2, open(os.path.join(path, "config.json"), "w"))
    m = R.load_model(path)
    ok(m.sliding == {1, 2} and m.rope[0] == ("1000.0", "4.0"), "gemma3 layer_types decides")
    json.dump({k: x for k, x in cfg.items() if k not in ("sliding_window_pattern", "rope_local_base_freq",
                                                         "rope_theta", "rope_scaling", "query_pre_attn_scalar",
                                                         "sliding_window")},
              open(os.path.join(path, "config.json"), "w"))
    m = R.load_model(path)
    ok(m.sliding == {0, 1, 2} and m.window == 4096 and m.scale == "256" and m.rope == [("10000", "1")] * L,
       f"gemma3 defaults (pattern 6: three local layers): {m.sliding} {m.window} {m.scale} {m.rope}")
    # a gemma3 (multimodal) file: text_config with the defaults, tensors under language_model.model.
    c.t = {"language_model.model." + k: x for k, x in c.t.items()}
    c.t["vision_tower.x.weight"] = ([2], [1.0, 2.0])
    text = {k: x for k, x in cfg.items() if k != "model_type"}
    mm = c.write("gemma3mm", {"model_type": "gemma3", "text_config": text, "image_token_index": 11})
    m2, Xs2, _ = run(mm, toks)
    want = qkn_np(Ckpt_from(c.t, "language_model.model."), toks, d, H, Hkv, dh, L, dict(m2.own), True, rl,
                  qpas ** -0.5, W, {0, 2}, prefix="")
    for l in range(L + 1):
        close(Xs2[l], want[l], f"gemma3 multimodal layer {l}", 1e-10)
    try:
        run(mm, [1, 11])
        ok(False, "gemma3 image_token_index not refused")
    except ValueError:
        ok(True, "")


def Ckpt_from(t, prefix):
    c = Ckpt(0)
    c.t = {k[len(prefix):]: x for k, x in t.items() if k.startswith(prefix)}
    return c


def main():
    tests = [test_t5_buckets, test_t5_forward, test_xlnet, test_gpt_neox, test_phi, test_opt, test_gemma,
             test_gemma2, test_vit, test_llama, test_qwen3, test_gemma3, test_bert_classifiers]
    return run_tests(tests, CHECKS, TMP)


if __name__ == "__main__":
    sys.exit(main())
