#!/usr/bin/env python3
"""Independent reference of sanpath's emulated formats (`--emulate fp32|bf16|fp16`, math.md section 9).

Written from math.md section 9 and the emulation contract (the exact rules: F's
rounding, fmaf matrix products accumulated in increasing inner index, fused
softmax / LayerNorm / RMSNorm / activations computed in binary32 with one
rounding to F, rotary, overflow reporting), not from sanpath's sources, in plain
numpy float32 plus the C library's double functions:

  * rnd_F(x): round to nearest even to F from a double (weights, biases, X^0: one
    rounding double -> F) or from a binary32 value, by exponent/quantum arithmetic
    (np.frexp, np.ldexp, np.rint: exact scalings and a half-to-even rint), with
    F's subnormals and overflow to +-inf (fp16 above 65504; bf16 and fp32 at 2^128);
  * fl32(a op b): numpy float32 arithmetic (IEEE binary32, round to nearest even);
    sequential sums are explicit loops (numpy's own sums are pairwise);
  * fmaf(a, b, c): a*b is exact in double (24 + 24 bits < 53); s = a*b + c in
    double with its exact error e (TwoSum); rounding s to binary32 is then the
    correct rounding of the exact a*b + c, except when s is exactly halfway between
    two binary32 values (no double lies strictly between the exact sum and s), where
    the sign of e decides;
  * exp_d, erf_d, tanh_d, cos_d, sin_d, pow_d: the C library's double functions
    (libm through ctypes: glibc's, as sanpath calls them) on the argument widened to
    double, the result rounded once to binary32.

One piece (over 600 lines) on purpose: both passes (native/BERT/GPT-2 and the families)
run on one Emulator and its rounding, and the self-test checks that rounding; split, each
part would import the others.

Every value is held as a binary32 array whose entries lie in F. emulate() returns
X^0..X^L (float64 arrays), the attention matrices P of every layer and head, and the
first (layer, operation) whose result is not finite.

Models: the reference's loaders (sanpath_ref.load_model): native files, BERT, GPT-2,
the Llama family (llama, mistral, qwen2: RMSNorm, rotary, grouped kv heads,
SwiGLU) and every other families.md family (XLNet's terms, T5's bucket bias,
GPT-NeoX's and Phi's parallel blocks and partial rotary, Gemma's gains, Gemma 2's
soft cap, windows and sandwich norms, OPT, ViT). Command line:

  emulate_ref.py self-test            rounding against exact fractions and numpy's float16/float32
                                      conversions, fmaf against exact fractions (ties included)
  emulate_ref.py against-exact --model M (--input X.safetensors | --tokens IDS) [variant options]
                                      every format against sanpath_ref's exact pass, to loose bounds
                                      (a structure check of this reference, independent of sanpath)
"""

import ctypes
import ctypes.util
import math
import os
import sys
from fractions import Fraction

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sanpath_ref as R  # noqa: E402

F32 = np.float32
F64 = np.float64

# (significand bits incl. the hidden one, least normal exponent, largest finite value)
FORMATS = {
    "fp32": (24, -126, float(np.finfo(np.float32).max)),
    "bf16": (8, -126, float.fromhex("0x1.fep127")),
    "fp16": (11, -14, 65504.0),
}

_LIBM = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
for _name in ("exp", "erf", "tanh", "cos", "sin"):
    getattr(_LIBM, _name).restype = ctypes.c_double
    getattr(_LIBM, _name).argtypes = [ctypes.c_double]
_LIBM.pow.restype = ctypes.c_double
_LIBM.pow.argtypes = [ctypes.c_double, ctypes.c_double]


def libm(name, x):
    """fl32(name_d(x)): the C library's double function of the binary32 array x widened to double,
    each result rounded once to binary32."""
    f = getattr(_LIBM, name)
    x = np.asarray(x, dtype=F32)
    out = np.array([f(float(v)) for v in x.ravel()], dtype=F64).reshape(x.shape)
    with np.errstate(over="ignore"):
        return out.astype(F32)


# --------------------------------------------------------------------------- rounding


def round_to(x, fmt):
    """rnd_F of a float64 array (or binary32 values widened): round to nearest, ties to even, to F, in one
    rounding; F's subnormals kept; beyond F's range +-inf; NaN and inf pass. Returns float64 values in F."""
    p, emin, fmax = FORMATS[fmt]
    x = np.asarray(x, dtype=F64)
    out = x.copy()
    fin = np.isfinite(x) & (x != 0)
    if fin.any():
        v = x[fin]
        _, e = np.frexp(v)                        # v = m 2^e, 0.5 <= |m| < 1: 2^(e-1) <= |v| < 2^e
        q = np.maximum(e - 1, emin) - (p - 1)     # F's quantum at v (subnormals: 2^(emin - p + 1))
        r = np.ldexp(np.rint(np.ldexp(v, -q)), q)  # exact scalings; rint: half to even
        r = np.where(np.abs(r) > fmax, np.copysign(np.inf, v), r)
        out[fin] = r
    return out


def rnd(x, fmt):
    """rnd_F of binary32 values (one rounding binary32 -> F; the identity for fp32), as binary32."""
    x = np.asarray(x, dtype=F32)
    if fmt == "fp32":
        return x
    return round_to(x.astype(F64), fmt).astype(F32)


_MID_OVERFLOW = float.fromhex("0x1.ffffffp127")    # halfway between FLT_MAX and 2^128


def fma32(a, b, c):
    """fmaf(a, b, c) elementwise on binary32 arrays (broadcasting): a*b + c exact, rounded once to binary32."""
    a64, b64, c64 = (np.asarray(t, dtype=F32).astype(F64) for t in (a, b, c))
    with np.errstate(invalid="ignore", over="ignore"):
        prod = a64 * b64                                    # exact: 48 significand bits
        s = prod + c64
        bb = s - prod
        err = (prod - (s - bb)) + (c64 - bb)                # TwoSum: prod + c = s + err exactly
        err = np.where(np.isfinite(s), err, 0.0)
        r = s.astype(F32)
        rd = r.astype(F64)
        look = (err != 0) & (rd != s) & np.isfinite(rd)
        if look.any():
            up = s > rd
            other = np.nextafter(r, np.where(up, F32(np.inf), F32(-np.inf))).astype(F64)
            mid = look & ((s - rd) == (other - s))          # s exactly halfway: the sign of err decides
            flip = mid & ((err > 0) == (other > rd))
            r = np.where(flip, other.astype(F32), r)
        # halfway between FLT_MAX and 2^128 rounds to inf (even); below it by err: FLT_MAX
        back = np.isinf(r) & (np.abs(s) == _MID_OVERFLOW) & (err * s < 0)
        if back.any():
            r = np.where(back, np.copysign(F32(np.finfo(F32).max), s).astype(F32), r)
    return r.astype(F32)


# --------------------------------------------------------------------------- the emulated model


class Emulator:
    """One emulated forward pass: every operation of the contract, with the first non-finite value rounded
    to F noted as (layer, operation): operations "input" (layer 0), then per layer "weights", "LayerNorm" or
    "RMSNorm", "attention" (Q, K, V, biases, rotation, scores, P, P V, output, b_O), "residual" (the skip
    and MLP residual additions), "MLP" (first product to b_2)."""

    def __init__(self, fmt):
        if fmt not in FORMATS:
            raise ValueError(f"format {fmt!r}: one of {', '.join(FORMATS)}")
        self.fmt = fmt
        self.layer = 0
        self.overflow = None          # (layer, operation)

    def note(self, what, x):
        if self.overflow is None and not np.all(np.isfinite(x)):
            self.overflow = (self.layer, what)
        return x

    def w(self, v):
        """A weight, bias, gain or X^0 from its double value: rnd_F(w), one rounding double -> F."""
        return None if v is None else round_to(np.asarray(v, dtype=F64), self.fmt).astype(F32)

    def matmul(self, A, B, what):
        """C = A B: acc = +0.0f; acc = fmaf(a_ip, b_pj, acc) for p ascending; c_ij = rnd_F(acc).
        what None: not watched here (the caller watches what it keeps)."""
        A, B = np.asarray(A, dtype=F32), np.asarray(B, dtype=F32)
        acc = np.zeros((A.shape[0], B.shape[1]), dtype=F32)
        for p in range(A.shape[1]):
            acc = fma32(A[:, p:p + 1], B[p:p + 1, :], acc)
        C = rnd(acc, self.fmt)
        return C if what is None else self.note(what, C)

    def add(self, a, b, what):
        with np.errstate(over="ignore", invalid="ignore"):
            return self.note(what, rnd(F32(a) + F32(b) if np.isscalar(a) else a + b, self.fmt))

    def scores(self, Qh, Kh, s, causal, what):
        """rnd_F(fl32(a s)) of a = rnd_F(Q_h K_h^T) (rule 2); entries a causal mask hides are neither formed
        nor watched (set to 0 here; the softmax never reads them)."""
        with np.errstate(over="ignore", invalid="ignore"):
            A = rnd(self.matmul(Qh, Kh.T, None) * F32(s), self.fmt)
        if causal:
            A = np.where(np.tril(np.ones(A.shape, dtype=bool)), A, F32(0.0)).astype(F32)
        return self.note(what, A)

    def softmax(self, A, causal, what):
        """Per row, over the visible keys j ascending (masked entries exactly 0): m = max; e_j =
        fl32(exp_d(fl32(a_j - m))); S = sequential fl32 sum from 0.0f; p_j = rnd_F(fl32(e_j / S))."""
        n = A.shape[0]
        P = np.zeros_like(A, dtype=F32)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            for i in range(n):
                vis = A[i, : i + 1] if causal else A[i]
                m = F32(np.max(vis))
                e = libm("exp", (vis - m).astype(F32))
                S = F32(0.0)
                for x in e:
                    S = F32(S + x)
                P[i, : len(vis)] = rnd((e / S).astype(F32), self.fmt)
        return self.note(what, P)

    @staticmethod
    def _seq_sum(M):
        """Row sums of a binary32 matrix, sequential in the column index, from 0.0f."""
        acc = np.zeros(M.shape[0], dtype=F32)
        for j in range(M.shape[1]):
            acc = (acc + M[:, j]).astype(F32)
        return acc

    def layernorm(self, X, g, b, eps, what):
        d = F32(X.shape[1])
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            mu = (self._seq_sum(X) / d).astype(F32)
            delta = (X - mu[:, None]).astype(F32)
            var = (self._seq_sum((delta * delta).astype(F32)) / d).astype(F32)
            inv = (F32(1.0) / np.sqrt((var + F32(eps)).astype(F32))).astype(F32)
            y = ((delta * inv[:, None]).astype(F32) * g).astype(F32)
            y = (y + b).astype(F32)
        return self.note(what, rnd(y, self.fmt))

    def rmsnorm(self, X, g, eps, what):
        d = F32(X.shape[1])
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            ms = (self._seq_sum((X * X).astype(F32)) / d).astype(F32)
            inv = (F32(1.0) / np.sqrt((ms + F32(eps)).astype(F32))).astype(F32)
            y = ((X * inv[:, None]).astype(F32) * g).astype(F32)
        return self.note(what, rnd(y, self.fmt))

    def act(self, name, x, what):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            if name == "relu":
                y = np.where(x > 0, x, F32(0.0)).astype(F32)
            elif name == "gelu":
                t = (x * F32(0.70710678118654752440)).astype(F32)
                y = ((F32(0.5) * x).astype(F32) * (F32(1.0) + libm("erf", t)).astype(F32)).astype(F32)
            elif name == "gelu_tanh":
                u = ((x * x).astype(F32) * x).astype(F32)
                inner = (F32(0.79788456080286535588) * (x + (F32(0.044715) * u).astype(F32)).astype(F32))
                y = ((F32(0.5) * x).astype(F32) * (F32(1.0) + libm("tanh", inner.astype(F32))).astype(F32))
            elif name == "gelu_fast":  # HF's order: x 0.7978845608 (1 + 0.044715 x x)
                k = (F32(1.0) + ((F32(0.044715) * x).astype(F32) * x).astype(F32)).astype(F32)
                inner = ((x * F32(0.7978845608)).astype(F32) * k).astype(F32)
                y = ((F32(0.5) * x).astype(F32) * (F32(1.0) + libm("tanh", inner)).astype(F32))
            elif name == "silu":
                y = (x / (F32(1.0) + libm("exp", (-x).astype(F32))).astype(F32)).astype(F32)
            else:
                raise ValueError(f"activation {name!r} not emulated")
        return self.note(what, rnd(y.astype(F32), self.fmt))

    def attention_output(self, Pl, V, W_O, b_O):
        """The heads' P_h V_h (V's columns split evenly over the heads) concatenated, times W_O, then b_O."""
        dv = V.shape[1] // len(Pl)
        outs = [self.matmul(P, V[:, h * dv:(h + 1) * dv], "attention") for h, P in enumerate(Pl)]
        out = self.matmul(np.concatenate(outs, axis=1), W_O, "attention")
        return out if b_O is None else self.add(out, b_O, "attention")

    def mul(self, a, b, what):
        with np.errstate(over="ignore", invalid="ignore"):
            return self.note(what, rnd((a * b).astype(F32), self.fmt))

    def rotary(self, M, theta, what):
        """Rotate-half rotary on the rows (positions 0..n-1) of one head's n x d_h block: inv_i =
        (float)pow_d(theta, -2i/d_h); angle = fl32((float)p * inv_i); cos_F = rnd_F(fl32(cos_d(angle))),
        sin_F likewise; q'_i = rnd_F(fl32(rnd_F(fl32(q_i cos_F)) + rnd_F(fl32(rot_i sin_F)))),
        rot = (-q_{i+h}, q_{i-h})."""
        n, dh = M.shape
        h = dh // 2
        inv = np.array([_LIBM.pow(float(theta), (-2.0 * i) / dh) for i in range(h)], dtype=F64).astype(F32)
        inv = np.concatenate([inv, inv])
        pos = np.arange(n, dtype=F32)[:, None]
        angle = (pos * inv[None, :]).astype(F32)
        c = rnd(libm("cos", angle), self.fmt)
        s = rnd(libm("sin", angle), self.fmt)
        rot = np.concatenate([-M[:, h:], M[:, :h]], axis=1).astype(F32)
        with np.errstate(over="ignore", invalid="ignore"):
            a = rnd((M * c).astype(F32), self.fmt)
            b = rnd((rot * s).astype(F32), self.fmt)
            return self.note(what, rnd((a + b).astype(F32), self.fmt))


def _family_emulate(model, X0, fmt, variant, record_attention):
    """emulate() for a families.md model (every FamilyModel): the layer of sanpath_ref.family_layer in the
    arithmetic of math.md section 9, rules 1-13 -- partial rotary (the first r entries of a head), XLNet's
    sinusoid and terms (rule 10), T5's bucket bias (11), the soft cap and the sliding window (12), the
    parallel block's sums (A + M) + X and Gemma 2's sandwich norms (13)."""
    R.check_family_variant(model, variant)
    skip, mlp, ln = variant["skip"] == "on", variant["mlp"], variant["layernorm"]
    causal = variant["mask"] == "causal"
    em = Emulator(fmt)
    eps32 = F32(float(model.eps))
    H, dqk, dv, d = model.H, model.d_qk, model.d_v, model.d
    if model.scale is None:
        s = F32(1.0 / math.sqrt(float(dqk)))
    elif model.scale == "1":
        s = F32(1.0)
    else:
        s = F32(1.0 / math.sqrt(float(model.scale)))
    X = em.note("input", em.w(np.asarray(X0, dtype=F64)))
    n = X.shape[0]
    Xs, Ps = [X.astype(F64)], []
    T = em.w(model.t5["table"]) if model.t5 else None
    sinusoid = None
    if model.xlnet:
        c = model.clamp_len
        ps = [max(-c, min(c, r - (n - 1))) if c > 0 else r - (n - 1) for r in range(2 * n - 1)]
        f = np.array([_LIBM.pow(10000.0, (-2.0 * k) / d) for k in range(d // 2)], dtype=F64).astype(F32)
        angle = (np.array(ps, dtype=F32)[:, None] * f[None, :]).astype(F32)
        sinusoid = np.concatenate([rnd(libm("sin", angle), fmt), rnd(libm("cos", angle), fmt)], axis=1)
    cache = {}
    for l, lw in enumerate(model.layers, start=1):
        em.layer = l
        heads = lw["heads"]
        if id(lw) not in cache:
            w = {k: em.w(_stack(heads, k, 1)) for k in ("W_Q", "W_K", "W_V", "W_R")}
            w.update({k: em.w(_stack(heads, k, 0)) for k in ("b_Q", "b_K", "b_V", "W_O", "r_w", "r_r")})
            w["b_O"] = em.w(lw.get("b_O"))
            for k in ("n1", "n2", "n3", "n4"):
                if lw.get(k) is not None:
                    w[k] = {"g": em.w(lw[k]["g"]), "b": em.w(lw[k].get("b"))}
            w["mlp"] = {k: (em.w(v) if k != "kind" else v) for k, v in lw["mlp"].items()} if lw.get("mlp") else None
            used = [w[k] for k in ("W_Q", "W_K", "W_V", "b_Q", "b_K", "b_V", "W_O", "b_O", "W_R", "r_w", "r_r")]
            used += [T] if T is not None else []
            if ln != "none":
                used += [v for k in ("n1", "n2", "n3", "n4") if k in w for v in w[k].values()]
            if mlp != "none":
                used += [v for k, v in w["mlp"].items() if k != "kind"]
            for v in used:
                if v is not None:
                    em.note("weights", v)
            cache[id(lw)] = w
        w = cache[id(lw)]

        def norm(key, Y):
            nw = w[key]
            if model.norm == "ln":
                return em.layernorm(Y, nw["g"], nw["b"], eps32, "LayerNorm")
            g = (F32(1.0) + nw["g"]).astype(F32) if model.norm == "rms1p" else nw["g"]
            return em.rmsnorm(Y, g, eps32, "RMSNorm")

        def attention(Y):
            Q = em.matmul(Y, w["W_Q"], "attention")
            K = em.matmul(Y, w["W_K"], "attention")
            V = em.matmul(Y, w["W_V"], "attention")
            for M, b in ((Q, "b_Q"), (K, "b_K"), (V, "b_V")):
                if w[b] is not None:
                    M[...] = em.add(M, w[b], "attention")
            if model.xlnet:
                Qr = em.add(Q, w["r_r"], "attention")
                Q = em.add(Q, w["r_w"], "attention")
                RK = em.matmul(sinusoid, w["W_R"], "attention")
            vis = R.visible_keys(model, l - 1, n, causal)
            Pl = []
            for h in range(H):
                Qh, Kh = Q[:, h * dqk:(h + 1) * dqk].copy(), K[:, h * dqk:(h + 1) * dqk].copy()
                r = model.rotary
                if r:
                    Qh[:, :r] = em.rotary(Qh[:, :r], R._dec(model.theta), "attention")
                    Kh[:, :r] = em.rotary(Kh[:, :r], R._dec(model.theta), "attention")
                A = em.matmul(Qh, Kh.T, None)
                with np.errstate(over="ignore", invalid="ignore"):
                    if model.xlnet:
                        B = em.matmul(Qr[:, h * dqk:(h + 1) * dqk], RK[:, h * dqk:(h + 1) * dqk].T, None)
                        idx = np.arange(n)[:, None] - np.arange(n)[None, :] + n - 1
                        A = rnd((A + np.take_along_axis(B, idx, axis=1)).astype(F32), fmt)
                    if T is not None:
                        bias = np.array([[T[R.t5_bucket(j - i, model.t5["nb"], model.t5["md"]), h]
                                          for j in range(n)] for i in range(n)], dtype=F32)
                        A = rnd((A + bias).astype(F32), fmt)
                    A = rnd((A * s).astype(F32), fmt)
                    if model.softcap is not None:
                        c = F32(float(model.softcap))
                        t = rnd((A / c).astype(F32), fmt)
                        A = rnd((c * rnd(libm("tanh", t), fmt)).astype(F32), fmt)
                P = np.zeros((n, n), dtype=F32)
                with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                    for i in range(n):
                        keys = vis[i]
                        a = A[i, keys]
                        em.note("attention", a)
                        m = F32(np.max(a))
                        e = libm("exp", (a - m).astype(F32))
                        S = F32(0.0)
                        for x in e:
                            S = F32(S + x)
                        P[i, keys] = rnd((e / S).astype(F32), fmt)
                Pl.append(em.note("attention", P))
            if record_attention:
                Ps.append([P.astype(F64) for P in Pl])
            return em.attention_output(Pl, V, w["W_O"], w["b_O"])

        def f(Z):
            m = w["mlp"]
            if m["kind"] == "gated":
                G = em.matmul(Z, m["W_gate"], "MLP")
                U = em.matmul(Z, m["W_up"], "MLP")
                return em.matmul(em.mul(em.act(model.activation, G, "MLP"), U, "MLP"), m["W_down"], "MLP")
            Hd = em.matmul(Z, m["W_1"], "MLP")
            if m.get("b_1") is not None:
                Hd = em.add(Hd, m["b_1"], "MLP")
            out = em.matmul(em.act(model.activation, Hd, "MLP"), m["W_2"], "MLP")
            return em.add(out, m["b_2"], "MLP") if m.get("b_2") is not None else out

        N = (lambda key, Y: norm(key, Y)) if ln != "none" else (lambda key, Y: Y)
        sandwich = model.sandwich and ln != "none"
        if model.parallel:  # ((A + M) + X), each sum rounded (rule 13)
            Xn = attention(N("n1", X))
            if mlp == "residual":
                Xn = em.add(Xn, f(N("n2", X)), "residual")
            if skip:
                Xn = em.add(Xn, X, "residual")
        elif ln == "post":
            a = attention(X)
            Z = norm("n1", em.add(a, X, "residual") if skip else a)
            if mlp == "none":
                Xn = Z
            else:
                fz = f(Z)
                Xn = norm("n2", em.add(fz, Z, "residual") if mlp == "residual" else fz)
        else:
            a = attention(N("n1", X))
            if sandwich:
                a = norm("n3", a)
            Z = em.add(a, X, "residual") if skip else a
            if mlp == "none":
                Xn = Z
            else:
                fz = f(N("n2", Z))
                if sandwich:
                    fz = norm("n4", fz)
                Xn = em.add(fz, Z, "residual") if mlp == "residual" else fz
        X = Xn
        Xs.append(X.astype(F64))
    return {"X": Xs, "P": Ps, "overflow": em.overflow}


def _stack(heads, key, axis):
    parts = [np.asarray(hd[key], dtype=F64) if hd.get(key) is not None else None for hd in heads]
    if any(p is None for p in parts):
        return None
    return np.concatenate(parts, axis=axis)


def _layer_weights(em, model, lw, variant):
    """A layer's weights rounded to F, the heads stacked: W_Q, W_K (d x H d_qk), W_V (d x H d_v), b_*,
    W_O (H d_v x d), b_O; MLP, norms. Those the variant uses are watched ("weights")."""
    heads = lw["heads"]
    w = {k: em.w(_stack(heads, k, 1)) for k in ("W_Q", "W_K", "W_V")}
    w.update({k: em.w(_stack(heads, k, 0)) for k in ("b_Q", "b_K", "b_V")})
    w["W_O"] = em.w(_stack(heads, "W_O", 0))
    w["b_O"] = em.w(lw.get("b_O"))
    for k in ("W_1", "b_1", "W_2", "b_2", "ln1_g", "ln1_b", "ln2_g", "ln2_b"):
        w[k] = em.w(lw.get(k))
    used = {"W_Q", "W_K", "W_V", "b_Q", "b_K", "b_V", "W_O", "b_O"}
    mlp, ln = variant["mlp"] != "none", variant["layernorm"] != "none"
    if mlp:
        used |= {"W_1", "b_1", "W_2", "b_2"}
    if ln:
        used |= {"ln1_g", "ln1_b"} | ({"ln2_g", "ln2_b"} if mlp else set())
    for k, v in w.items():
        if v is not None and k in used:
            em.note("weights", v)
    return w


def emulate(model, X0, fmt, variant=None, record_attention=True):
    """The emulated forward pass of a reference model (sanpath_ref.load_model) on the double input X0 (n x d).

    variant: dict skip (on/off), mlp (none/plain/residual), layernorm (none/pre/post), mask (none/causal);
    default the model's own. Returns {"X": [X^0..X^L as float64 arrays, values in F], "P": [per layer 1..L,
    per head, n x n float64], "overflow": (layer, operation) of the first non-finite result or None}.
    """
    variant = dict(model.own, **(variant or {}))
    if isinstance(model, R.FamilyModel):
        return _family_emulate(model, X0, fmt, variant, record_attention)
    skip, mlp, ln = variant["skip"] == "on", variant["mlp"], variant["layernorm"]
    causal = variant["mask"] == "causal"
    em = Emulator(fmt)
    eps = float(R._dec(model.eps)) if not isinstance(model.eps, float) else model.eps
    eps32 = F32(eps)
    H, dqk, dv = model.H, model.d_qk, model.d_v
    s = F32(1.0 / math.sqrt(float(dqk)))
    X = em.note("input", em.w(np.asarray(X0, dtype=F64)))
    Xs, Ps = [X.astype(F64)], []
    cache = {}
    for l, lw in enumerate(model.layers, start=1):
        em.layer = l
        if id(lw) not in cache:
            cache[id(lw)] = _layer_weights(em, model, lw, variant)
        w = cache[id(lw)]

        def norm(which, Y):
            return em.layernorm(Y, w[f"ln{which}_g"], w[f"ln{which}_b"], eps32, "LayerNorm")

        def attention(Y):
            Q = em.matmul(Y, w["W_Q"], "attention")
            K = em.matmul(Y, w["W_K"], "attention")
            V = em.matmul(Y, w["W_V"], "attention")
            if w["b_Q"] is not None:
                Q = em.add(Q, w["b_Q"], "attention")
            if w["b_K"] is not None:
                K = em.add(K, w["b_K"], "attention")
            if w["b_V"] is not None:
                V = em.add(V, w["b_V"], "attention")
            Pl = []
            for h in range(H):
                A = em.scores(Q[:, h * dqk:(h + 1) * dqk], K[:, h * dqk:(h + 1) * dqk], s, causal, "attention")
                Pl.append(em.softmax(A, causal, "attention"))
            if record_attention:
                Ps.append([P.astype(F64) for P in Pl])
            return em.attention_output(Pl, V, w["W_O"], w["b_O"])

        def f(Z):
            Hd = em.add(em.matmul(Z, w["W_1"], "MLP"), w["b_1"], "MLP")
            return em.add(em.matmul(em.act(model.activation, Hd, "MLP"), w["W_2"], "MLP"), w["b_2"], "MLP")

        if ln == "pre":
            att = attention(norm(1, X))
        else:
            att = attention(X)
        Z = em.add(X, att, "residual") if skip else att
        if ln == "post":
            Z = norm(1, Z)
        if mlp == "none":
            Xn = Z
        else:
            fz = f(norm(2, Z) if ln == "pre" else Z)
            Xn = em.add(Z, fz, "residual") if mlp == "residual" else fz
            if ln == "post":
                Xn = norm(2, Xn)
        X = Xn
        Xs.append(X.astype(F64))
    return {"X": Xs, "P": Ps, "overflow": em.overflow}


# --------------------------------------------------------------------------- self-test


def _exact_round(q, fmt):
    """Correct rounding of the Fraction q to F (ties to even), as a float; the slow, obvious way."""
    p, emin, fmax = FORMATS[fmt]
    if q == 0:
        return 0.0
    sign = -1 if q < 0 else 1
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1                                          # 2^e <= a < 2^(e+1)
    quantum = Fraction(2) ** (max(e, emin) - (p - 1))
    k = a / quantum
    fl = k.numerator // k.denominator
    rem = k - fl
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl % 2 == 1):
        fl += 1
    v = fl * quantum
    if v > Fraction(fmax):
        return sign * math.inf
    return sign * float(v)


def self_test():
    rng = np.random.default_rng(7)
    checks = 0
    # doubles around every format's range: against exact fractions, and numpy's own conversions
    xs = np.concatenate([rng.normal(size=2000) * 10.0 ** rng.integers(-45, 40, size=2000),
                         [65504.0, 65519.99, 65520.0, 6.1e-5, 5.96e-8, 2.98e-8, 2.99e-8, 1e-46, 1.4e-45,
                          float.fromhex("0x1.fep127"), float.fromhex("0x1.ff0001p127"), float.fromhex("0x1.ffp127"),
                          float.fromhex("0x1.0101p0"), float.fromhex("0x1.0180p0"), float.fromhex("0x1.0080p0"),
                          -0.0, 3.4028235677973366e38, 3.4028234663852886e38]])
    for fmt in FORMATS:
        got = round_to(xs, fmt)
        for x, g in zip(xs, got):
            want = _exact_round(Fraction(float(x)), fmt)
            assert g == want or (math.isinf(g) and g == want), (fmt, x.hex(), g, want)
            checks += 1
    with np.errstate(over="ignore"):
        assert np.array_equal(round_to(xs, "fp16"), xs.astype(np.float16).astype(F64))
        assert np.array_equal(round_to(xs, "fp32"), xs.astype(F32).astype(F64))
    checks += 2
    # fmaf: random binary32 triples, including exact ties of a*b + c, against exact fractions
    a = rng.normal(size=3000).astype(F32)
    b = (rng.normal(size=3000) * 10.0 ** rng.integers(-3, 3, size=3000)).astype(F32)
    c = (rng.normal(size=3000) * 10.0 ** rng.integers(-6, 6, size=3000)).astype(F32)
    got = fma32(a, b, c)
    for x, y, z, g in zip(a, b, c, got):
        want = _exact_round(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)), "fp32")
        assert float(g) == want, (float(x), float(y), float(z), float(g), want)
        checks += 1
    # exact ties lost in the double sum: a*b = 2^6 - 2^-24 ((1 + 2^-15)(1 - 2^-15) 2^6), added to c near 2^30
    # (binary32 spacing 2^7, double spacing 2^-22): the double sum lands on a binary32 midpoint and the
    # tail -2^-24 (or +2^-24) decides; a plain double -> float conversion would round the tie to even
    x, y = F32(2.0 ** 6 * (1 + 2.0 ** -15)), F32(1 - 2.0 ** -15)
    naive_wrong = 0
    for cv in (2.0 ** 30 + 2.0 ** 7, 2.0 ** 30 + 2.0 ** 8, 2.0 ** 30 + 384, 1.5 * 2.0 ** 30 + 2.0 ** 7):
        for sx, sc in ((1, 1), (-1, 1), (1, -1), (-1, -1)):
            xx, cc = F32(sx * x), F32(sc * cv)
            exact = _exact_round(Fraction(float(xx)) * Fraction(float(y)) + Fraction(float(cc)), "fp32")
            got = float(fma32(xx, y, cc))
            assert got == exact, (float(xx), float(cc), got, exact)
            naive_wrong += float(F32(float(xx) * float(y) + float(cc))) != exact
            checks += 1
    assert naive_wrong >= 4, naive_wrong        # the cases do test the tie rule (a double sum then a cast fails)
    # overflow: FLT_MAX + half its ulp rounds to inf; just below, to FLT_MAX
    fm = F32(np.finfo(F32).max)
    assert np.isinf(fma32(F32(2.0 ** 103), F32(1.0), fm)) and fma32(F32(2.0 ** 102), F32(1.0), fm) == fm
    checks += 1
    # the C library: libm("exp") equals glibc's exp rounded once
    assert libm("exp", np.array([0.5], dtype=F32))[0] == F32(math.exp(0.5))
    checks += 1
    print(f"ok emulate_ref self-test: {checks} checks")
    return 0


# Loose bounds on max_l |X^l_F - X^l| / max|X^l| for the small random models of the tests: a structural
# check of this reference against sanpath_ref's exact forward pass (a missing or misplaced operation
# shows up at the size of the quantity, not of F's unit roundoff).
NEAR_EXACT = {"fp32": 1e-5, "bf16": 0.1, "fp16": 0.02}


def against_exact(model_path, input_path=None, tokens=None, variant=None, bits=128):
    """Emulates the model in every format and compares with sanpath_ref's exact pass at `bits` bits.
    Returns a list of (format, worst relative error, ok) and prints one line per format."""
    from mpmath import mp
    model = R.load_model(model_path)
    want = dict(model.own, **(variant or {}))
    mp.prec = bits
    if tokens:
        X0 = R.embed(model, [int(t) for t in tokens.split(",")])
    else:
        _, t = R.read_safetensors(input_path)
        X0 = R.to_mp(R._matrix(t["X"]))
    Xs, _ = R.forward(model, X0, want)
    exact = [np.array([[float(x) for x in row] for row in X], dtype=F64) for X in Xs]
    X0d = exact[0]        # the double input (token embeddings: the exact ones rounded to double)
    out = []
    for fmt in FORMATS:
        res = emulate(model, X0d, fmt, want)
        worst = max(float(np.max(np.abs(a - b)) / np.max(np.abs(b))) for a, b in zip(res["X"], exact))
        ok = worst <= NEAR_EXACT[fmt] and res["overflow"] is None
        print(f"{'ok  ' if ok else 'FAIL'} {fmt}: max_l |X^l_F - X^l| / max|X^l| = {worst:.3g} "
              f"(bound {NEAR_EXACT[fmt]:g}), overflow {res['overflow']}")
        out.append((fmt, worst, ok))
    return out


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("self-test", help="rounding and fmaf against exact fractions")
    c = sub.add_parser("against-exact", help="every format against sanpath_ref's exact pass (structure check)")
    c.add_argument("--model", required=True)
    src = c.add_mutually_exclusive_group(required=True)
    src.add_argument("--input")
    src.add_argument("--tokens")
    for k, choices in (("skip", ["on", "off"]), ("mlp", ["none", "plain", "residual"]),
                       ("layernorm", ["none", "pre", "post"]), ("mask", ["none", "causal"])):
        c.add_argument("--" + k, choices=choices)
    a = ap.parse_args(argv)
    if a.cmd == "self-test":
        return self_test()
    variant = {k: getattr(a, k) for k in ("skip", "mlp", "layernorm", "mask") if getattr(a, k)}
    try:
        res = against_exact(a.model, a.input, a.tokens, variant)
    except (ValueError, KeyError, OSError) as e:
        print(f"ERROR {type(e).__name__}: {e}")
        return 2
    return 0 if all(ok for _, _, ok in res) else 1


if __name__ == "__main__":
    sys.exit(main())
