"""sanpath from Python: rank collapse of self-attention networks, exactly.

Forward passes in any precision, the head-path decomposition and the bounds
of Dong, Cordonnier & Loukas (ICML 2021) on concrete weights. A thin layer
over the C++ library (the same calls as the ``sanpath`` command line tool):

>>> import sanpath
>>> r = sanpath.collapse()                       # the embedded default model
>>> print(r.to_table())                          # the CLI's table
>>> r.analyses[0].layers[5].relative_residual    # a Number: 4.7056435084530063e-498

Every computation releases the GIL and stops on Ctrl-C with
``KeyboardInterrupt``. Errors raise :class:`InputError`,
:class:`NumericalError` or :class:`ResourceError` (all :class:`Error`) with
the command line tool's one-line message. See docs/python.md.
"""

from __future__ import annotations

import csv
import html
import io
import json
import operator
import os
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _sanpath
from ._sanpath import (  # noqa: F401  (re-exported)
    Error,
    InputError,
    NumericalError,
    ResourceError,
    Model,
    Input,
    Batch,
    PathTerm,
    LengthSum,
    LayerReport,
    MeasuredDepth,
)

__version__ = "0.1.0"


def kernels() -> dict:
    """The product kernels this process uses, as `sanpath --version` names them.

    ``double_products``: the instruction-set level of the double kernel
    ("avx512", "avx2" or "generic"; every level computes the same bits), the
    CPU's best unless the environment variable SANPATH_ISA chose one before
    the first product; ``double_products_levels``: the levels this CPU runs;
    ``multiprecision_products``: "AVX-512 IFMA kernel" or "GMP kernel" (the
    same integers either way); ``multiprecision_tiers``: the tiers this build
    compiled, in bits (pip builds all of them: 65, 128, 257, 513, 1025, 2051,
    4098, 8194, 16387, 32772; a CMake build with SANPATH_TIERS fewer; a
    precision is rounded up to one of them); ``mpi``: the MPI library this build links
    ("Open MPI v4.1.4"; "" without MPI). Once mpi4py has initialised MPI
    (``from mpi4py import MPI``, then ``mpirun -np K python3 script.py``),
    every batch shares its inputs, and every path enumeration, top-K search
    and sampling its path shards, over the K ranks; every rank gets every
    result, exactly what one process computes (distribution_notes() says
    what was shared). An unknown SANPATH_ISA, or a
    level the CPU lacks, raises InputError naming the variable.
    """
    return dict(_sanpath.kernels())


def distribution_notes() -> list:
    """How this process's shared work went under MPI: one line per shared
    batch or path job so far, the lines `sanpath` prints on stderr, e.g.
    ``mpi: 2 ranks, 5 inputs round robin (rank 0: 3 in 0.8 s, rank 1: 2 in
    0.4 s), 60 KiB of results exchanged``. Empty in one process, and when
    nothing was shared (a single input without path shards)."""
    return list(_sanpath.distribution_notes())

#: How the command line tool names its embedded default model in reports.
EMBEDDED_NAME = "embedded default (random BERT-shaped, seed 0)"

ProgressCallback = Callable[[str, int, int], None]

# --------------------------------------------------------------------- numbers


class Number:
    """A high-precision result: its value, its confirmed digits, or an upper bound.

    ``str(x)`` prints the decimal with its true exponent and every confirmed
    significant digit, as the JSON does, so that ``x.digits`` counts them
    (``4.70564350845300632836578219375e-498``; ``x.decimal(n)`` rounds to at most
    n of them, as a table does to the analysis's ``digits=``), or ``< 1e-40`` when
    only a bound is known; ``float(x)`` converts when a double
    holds the value and raises ``OverflowError`` outside double's range (never
    returns 0.0 or inf for a nonzero value); ``x.log10`` is the magnitude as a float;
    ``x.mpf()`` an ``mpmath.mpf`` with the confirmed digits; ``x.digits`` the number
    of confirmed significant digits (None without a check run; with ``check="certified"``
    the digits proven by ``x.interval``, the enclosure of the exact value).
    """

    __slots__ = ("_n",)

    def __init__(self, n: "_sanpath.Number"):
        self._n = n

    def __str__(self) -> str:
        return str(self._n)

    def __repr__(self) -> str:
        return f"Number('{self._n}', digits={self._n.digits})"

    def __float__(self) -> float:
        return float(self._n)

    @property
    def digits(self) -> Optional[int]:
        return self._n.digits

    @property
    def below_resolution(self) -> bool:
        return self._n.below_resolution

    @property
    def bound(self) -> Optional[str]:
        """The power of ten above |x| when below resolution (a decimal string), else None."""
        return self._n.bound

    @property
    def log10(self) -> Optional[float]:
        """log10 |x| as a float (any magnitude); None when zero or below resolution."""
        return self._n.log10

    @property
    def interval(self) -> Optional[Tuple[str, str]]:
        """``check="certified"``: the enclosure (lo, hi) of the exact value as decimal strings rounded
        outward (docs/math.md section 10); ``digits`` are then the digits it proves. None otherwise."""
        return self._n.interval

    def decimal(self, digits: Optional[int] = None) -> str:
        """The decimal with up to ``digits`` significant digits, never more than confirmed."""
        return self._n.decimal(digits)

    def mpf(self):
        """The value as ``mpmath.mpf`` to its confirmed digits (needs mpmath)."""
        import mpmath

        text = self.decimal(None)
        with mpmath.workdps(max(len(text), 20)):
            return +mpmath.mpf(text)

    def _repr_html_(self) -> str:
        return html.escape(str(self))


def _wrap(x):
    """Wraps the extension's numbers (and dicts of them) as :class:`Number`."""
    if isinstance(x, _sanpath.Number):
        return Number(x)
    if isinstance(x, dict):
        return {k: _wrap(v) for k, v in x.items()}
    return x


class _Record:
    """A read-only view of an extension record whose numbers are :class:`Number`."""

    __slots__ = ("_r",)

    def __init__(self, r):
        self._r = r

    def __getattr__(self, name):
        return _wrap(getattr(self._r, name))

    def __repr__(self) -> str:
        fields = [f for f in dir(self._r) if not f.startswith("_")]
        return f"{type(self._r).__name__}(" + ", ".join(f"{f}={getattr(self, f)}" for f in fields) + ")"


# ---------------------------------------------------------------------- results


class Result:
    """A result of the library: the same JSON, table and CSV as the command line tool."""

    def __init__(self, r):
        self._r = r

    def to_json(self) -> str:
        """The JSON the CLI prints with ``--format json`` (byte for byte)."""
        return self._r.format("json")

    def to_dict(self) -> Any:
        """``json.loads(self.to_json())``."""
        return json.loads(self.to_json())

    def to_table(self) -> str:
        """The CLI's table (``--format table``)."""
        return self._r.format("table")

    def to_csv(self) -> str:
        """The CLI's CSV (``--format csv``)."""
        return self._r.format("csv")

    def __str__(self) -> str:
        return self.to_table()

    def _repr_html_(self) -> str:
        rows = [r for r in csv.reader(io.StringIO(self.to_csv())) if r and not r[0].startswith("#")]
        if not rows:
            return "<pre>" + html.escape(self.to_table()) + "</pre>"
        head = "".join(f"<th>{html.escape(c)}</th>" for c in rows[0])
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows[1:])
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def __getattr__(self, name):
        value = getattr(self._r, name)
        if isinstance(value, list):
            return [_Record(v) if hasattr(v, "__class__") and type(v).__module__ == _sanpath.__name__ else v
                    for v in value]
        return _wrap(value)


class ForwardResult(Result):
    """``forward``: every layer's residual. ``layers[l].relative_residual`` etc. are Numbers."""

    @property
    def layers(self):
        return [_Record(x) for x in self._r.layers]

    @property
    def emulation(self):
        """With ``emulate=``: the emulated model beside the exact one (see :func:`forward`); else None."""
        e = self._r.emulation
        if e is None:
            return None
        for layer in e["layers"]:
            layer["relative_residual"] = _wrap(layer["relative_residual"])
            layer["measures"] = _wrap(layer["measures"])
        return e


class CollapseResult(Result):
    """``collapse``: the four variants; ``analyses[i]`` is the ForwardResult of ``variants[i]``.

    ``conventions`` is "theory" or "paper" (which four curves, docs/math.md §2).
    """

    @property
    def analyses(self):
        return [ForwardResult(a) for a in self._r.analyses]

    def relative_residuals(self):
        """{variant name: [Number per layer]}."""
        return {name: [x.relative_residual for x in a.layers] for name, a in zip(self.variants, self.analyses)}


class ForwardBatchResult(Result):
    """``forward`` on a batch of b inputs (the CLI's batch output).

    ``layers[l]`` holds the statistics of the relative residual of layer l over
    the batch — ``count`` (b), ``mean``, ``stddev`` (sample standard deviation,
    ddof=1; None for b = 1 or when a value is only an upper bound), ``min``,
    ``median``, ``max``, each a :class:`Number` with its confirmed digits;
    ``runs[i]`` is input i's own :class:`ForwardResult` (its own precision and
    check run); ``inputs[i]`` describes input i. ``to_json()`` is the CLI's
    batch JSON byte for byte (statistics and every input's own values).
    """

    @property
    def layers(self):
        return [_Record(s) for s in self._r.layers]

    @property
    def runs(self):
        return [ForwardResult(r) for r in self._r.runs]

    @property
    def measures(self):
        """[{measure name: statistics} per layer] (with ``measures=``)."""
        return [{k: _Record(v) for k, v in layer.items()} for layer in self._r.measures]

    def relative_residuals(self):
        """[[Number per input] per layer]: each input's own relative residual."""
        runs = self.runs
        return [[run.layers[l].relative_residual for run in runs] for l in range(len(self._r.layers))]


class CollapseBatchResult(Result):
    """``collapse`` on a batch of b inputs: the paper's Figure 2 (mean ± std per variant and layer).

    ``layers[v][l]`` holds the statistics (``count``, ``mean``, ``stddev``,
    ``min``, ``median``, ``max``; see :class:`ForwardBatchResult`) of the relative
    residual of ``variants[v]`` at layer l; ``runs[i]`` is input i's own
    :class:`CollapseResult`; ``conventions`` is "theory" or "paper".
    """

    @property
    def layers(self):
        return [[_Record(s) for s in variant] for variant in self._r.layers]

    @property
    def runs(self):
        return [CollapseResult(r) for r in self._r.runs]

    @property
    def measures(self):
        """[[{measure name: statistics} per layer] per variant] (with ``measures=``)."""
        return [[{k: _Record(v) for k, v in layer.items()} for layer in variant] for variant in self._r.measures]

    def statistics(self):
        """{variant name: [statistics per layer]}."""
        return dict(zip(self.variants, self.layers))


class EffectivenessResult(Result):
    """``paths --effectiveness``: the network truncated to its paths of length ≤ k, k = 0..L.

    ``lengths[k]`` has ``length`` (k), ``count`` (paths of length ≤ k, a Python
    int), ``distance`` (‖X_{≤k} − X^L‖_F / ‖X^L‖_F, a Number) and, with a task
    head, ``agree`` (predictions equal to those on X^L, out of ``predictions``),
    ``agree_check`` (the check run's count; a count the runs disagree on is not
    confirmed) and ``kl`` (mean KL(p(X^L) ‖ p(X_{≤k})) of the head's softmax, in
    nats, a Number); without a head these are None. ``head`` is "classifier",
    "language model" or None; ``outputs`` the head's classes or vocabulary size;
    ``output_frobenius`` ‖X^L‖_F.
    """


class _ByLength(Result):
    """A result whose ``lengths[k]`` are effectiveness rows (:class:`_Row`)."""

    @property
    def lengths(self):
        return [_Row(e) for e in self._r.lengths]


class EffectivenessBatchResult(_ByLength):
    """``paths --effectiveness`` on a batch of b inputs (the CLI's batch output).

    ``lengths[k]`` has ``length`` (k), ``count`` (paths of length ≤ k),
    ``distance`` (statistics over the inputs of ‖X_{≤k} − X^L‖_F / ‖X^L‖_F:
    ``count``, ``mean``, ``stddev``, ``min``, ``median``, ``max``, see
    :class:`ForwardBatchResult`) and ``head`` (None without a task head): the
    predictions pooled over the batch — ``agree`` (equal to those on X^L),
    ``agree_check`` (the check runs' count; None when an input had no check run),
    ``predictions`` (b for a classifier, Σ n_i for an LM head) and ``kl`` (mean
    KL over those predictions, nats, a Number). ``runs[i]`` is input i's own
    :class:`EffectivenessResult`; ``inputs[i]`` describes input i.
    """

    @property
    def runs(self):
        return [EffectivenessResult(r) for r in self._r.runs]


class _Row(_Record):
    """One length of an effectiveness table: its statistics and pooled head are records too."""

    __slots__ = ()

    def __getattr__(self, name):
        value = getattr(self._r, name)
        if isinstance(value, (_sanpath.BatchStatistic, _sanpath.PooledAgreement)):
            return _Record(value)
        return _wrap(value)


class RerunResult(_ByLength):
    """``paths --effectiveness --rerun N``: path effectiveness in both senses on one input.

    The paper's own procedure: for each length k, N paths of length k (every
    path when there are no more than N) re-run as sub-networks with their own
    attention and summed as count_k/N · Σ (an unbiased estimate of the paths
    of length k), repeated ``repeats`` times with different draws (seeded by
    ``seed``; the same at any ``threads``); for attention-only variants also
    the exact sense (attention frozen) and the gap between the two.

    ``lengths[k]`` has ``length`` (k), ``count`` (paths of length exactly k, a
    Python int), ``evaluated`` (sub-networks run per repetition), ``all_paths``
    (every path of length k was run once: one value, no spread), ``distance``
    (statistics over the repetitions of ‖X̂_{≤k} − X^L‖_F / ‖X^L‖_F: ``count``,
    ``mean``, ``stddev``, ``min``, ``median``, ``max``, each a :class:`Number`),
    ``gap`` (the same of ‖X̂_{≤k} − X_{≤k}‖_F / ‖X^L‖_F; None without the exact
    sense) and, with a task head, ``agree`` (per repetition: predictions equal
    to those on X^L, out of ``predictions``), ``agree_check`` (the check run's
    counts) and ``kl`` (statistics over the repetitions of the mean KL, nats);
    without a head these are None. With ``check="certified"`` the re-runs run
    in ball arithmetic: ``agree`` counts the predictions proven to agree and
    ``agree_most`` those that may, and ``distance_each``, ``kl_each``,
    ``gap_each`` hold each repetition's value with its ``interval`` (the
    statistics are taken over them as for a batch); None otherwise. ``exact`` is the exact sense's
    :class:`EffectivenessResult` (None unless ``mlp="none", layernorm="none"``);
    ``head``, ``outputs``, ``output_frobenius`` as there; ``samples`` (N),
    ``repeats`` (R), ``seed``.
    """

    @property
    def exact(self):
        e = self._r.exact
        return None if e is None else EffectivenessResult(e)


class RerunBatchResult(_ByLength):
    """``paths --effectiveness --rerun N`` on a batch of b inputs (the CLI's batch output).

    Input i draws its paths with the seed ``seeds[i]`` = seed + i·0xD1B54A32D192ED03
    (mod 2^64) and enters the statistics with its mean over its repetitions.
    ``lengths[k]`` has ``length``, ``count`` (paths of length k), ``evaluated``,
    ``all_paths``, ``distance`` and ``gap`` (statistics over the inputs, see
    :class:`ForwardBatchResult`; ``gap`` None without the exact sense) and
    ``head`` (None without a task head): ``agree``, ``agree_check``,
    ``predictions`` and ``kl`` pooled over inputs × repetitions (see
    :class:`EffectivenessBatchResult`). ``exact[k]`` is the exact sense over the
    batch (entries as :attr:`EffectivenessBatchResult.lengths`; None unless
    attention-only); ``runs[i]`` input i's own :class:`RerunResult`;
    ``inputs[i]`` describes input i; ``samples``, ``repeats``, ``seed``.
    """

    @property
    def exact(self):
        e = self._r.exact
        return None if e is None else [_Row(x) for x in e]

    @property
    def runs(self):
        return [RerunResult(r) for r in self._r.runs]


class BoundsSearchResult(Result):
    """``bounds --search``: the best small SAN found, its input and the re-check.

    ``model`` (a :class:`Model`, skip off, mlp none, layernorm none), ``X`` (its
    input, a float64 array [tokens, d_model]); ``log10_ratio`` max_l
    log10(r_l / bound_l) at the search precision (> 0 would be measured above the
    bound) and ``depth`` l; ``improvements`` (``iteration``, ``log10_ratio``,
    ``depth``); ``recheck`` the :class:`Result` of ``bounds`` on the best at the
    requested precision (``verdicts``), ``recheck_log10_ratio``, ``violated``.
    ``save(path)`` writes the model (native) and its input (``<stem>.input.safetensors``,
    tensor X) as ``--save`` does; ``model_path``/``input_path`` then name them (also in
    ``to_json()``).
    """

    @property
    def recheck(self):
        r = self._r.recheck
        return None if r is None else Result(r)


# ----------------------------------------------------------------------- models


def load(path: str, first_layers: Optional[int] = None, stream_layers: str = "off") -> Model:
    """Loads a HuggingFace folder or a native ``.safetensors`` file.

    Every family of :data:`FAMILIES` (single or sharded safetensors; those whose ``input`` is "pixels" take
    images: :func:`pixels`, :func:`load_pixels`); the family is recognised from config.json (docs/families.md).

    ``first_layers=N``: the checkpoint's first N layers only, as a model of N layers (``sanpath ... --first-layers
    N``), for checkpoints whose weights as doubles exceed the memory; the other layers are neither read nor checked
    and the model's name says so. Weights above the memory budget (:func:`set_memory_budget`) raise
    :class:`ResourceError` before any is decoded.

    ``stream_layers``: ``"off"`` (the default) holds every layer in memory as doubles. ``"on"`` leaves the layers
    in the checkpoint: each forward pass reads a layer when it reaches it (``sanpath forward --stream-layers``), so
    memory holds the embeddings and about 3 layers (a Llama-7B: 4.4 GB instead of 49 GiB); passes in double
    multiply by the weights where they lie in the file (F64, F32, F16 or BF16), never decoded. Only :func:`forward`
    and :func:`collapse` run on such a model; the analyses that need every layer at once (paths, bounds,
    effectiveness, report, saving) raise :class:`InputError` saying so. ``"auto"``: streamed only when the layers
    held whole would exceed the memory budget. HuggingFace folders only (native files and ALBERT are held whole).
    """
    if first_layers is not None and (isinstance(first_layers, bool) or not isinstance(first_layers, int)
                                     or first_layers < 1):
        raise InputError(f"first_layers: {first_layers!r} is not a number of layers (1, 2, ...)")
    if stream_layers not in ("off", "on", "auto"):
        raise InputError(f"stream_layers: {stream_layers!r} is not one of 'off', 'on', 'auto'")
    return _sanpath.load_model(str(path), first_layers, stream_layers)


def from_arrays(tensors: Mapping[str, Any], config: Union[Mapping[str, Any], str], name: str = "arrays") -> Model:
    """A model from named arrays (numpy arrays or anything with ``__array__``) and a config.

    ``tensors`` maps names to arrays in any layout sanpath reads: a HuggingFace
    state dict of BERT, GPT-2 or ALBERT (with or without the ``bert.`` /
    ``transformer.`` / ``albert.`` prefix) with its ``config.json`` as a dict, or
    the native naming of :meth:`Model.native_tensors` with
    :meth:`Model.native_config`. The arrays go through the same mapping as a file
    (sanpath's io layer). Errors name ``name``. C-contiguous float64 arrays are
    read in place; other dtypes are converted (float32/16 are exact in double).
    """
    if not isinstance(config, str):
        config = json.dumps(config)
    items = []
    for key, value in tensors.items():
        if not isinstance(value, np.ndarray):
            value = np.asarray(value)
        items.append((str(key), value))
    return _sanpath.model_from_tensors(items, config, name)


#: The layout families, from the library's registry (``sanpath init --help`` lists the same): one dict per
#: family with ``name`` (its layout), ``display`` (its name in prose), ``model_types`` (the config.json
#: ``model_type`` values :func:`load` recognises), ``input`` ("tokens" or "pixels"), ``key_value_heads``
#: (``random_model(kv_heads=...)`` applies), ``own_structure`` and ``options`` (its family options).
FAMILIES: Tuple[Dict[str, Any], ...] = tuple(_sanpath.layout_families())

#: The HuggingFace layouts (``random_model(layout=...)``, :meth:`Model.save_hf`, ``sanpath init --layout``);
#: :func:`load` reads the folders of every one of them.
LAYOUTS: Tuple[str, ...] = tuple(f["name"] for f in FAMILIES)

#: The family options of :func:`random_model` (``init --layout X``'s family options), by parameter name.
_FAMILY_OPTIONS = ("rotary_fraction", "parallel_residual", "sliding_window", "softcap", "query_pre_attn_scalar",
                   "rel_buckets", "rel_max_distance", "gated", "clamp_len", "causal", "image_size", "patch_size",
                   "channels", "embed_dim", "pre_norm", "layer_pattern", "rope_local_base", "rope_linear_factor")


def random_model(
    layers: int = 6,
    heads: int = 4,
    d_model: int = 64,
    *,
    d_qk: Optional[int] = None,
    d_v: Optional[int] = None,
    d_ff: Optional[int] = None,
    head_dim: Optional[int] = None,
    init: str = "gaussian",
    std: float = 0.02,
    bias_std: float = 0.0,
    seed: int = 0,
    shared_layers: bool = False,
    activation: Optional[str] = None,
    ln_eps: Optional[float] = None,
    vocab: int = 0,
    max_positions: int = 512,
    skip: Union[bool, str, None] = None,
    mlp: Optional[str] = None,
    layernorm: Optional[str] = None,
    mask: Optional[str] = None,
    layout: Optional[str] = None,
    kv_heads: Optional[int] = None,
    rope_theta: float = 10000.0,
    rotary_fraction: Optional[float] = None,
    parallel_residual: Optional[bool] = None,
    sliding_window: Optional[int] = None,
    softcap: Optional[float] = None,
    query_pre_attn_scalar: Optional[float] = None,
    rel_buckets: Optional[int] = None,
    rel_max_distance: Optional[int] = None,
    gated: Optional[bool] = None,
    clamp_len: Optional[int] = None,
    causal: Optional[bool] = None,
    image_size: Optional[int] = None,
    patch_size: Optional[int] = None,
    channels: Optional[int] = None,
    embed_dim: Optional[int] = None,
    pre_norm: Optional[bool] = None,
    layer_pattern: Optional[int] = None,
    rope_local_base: Optional[float] = None,
    rope_linear_factor: Optional[float] = None,
) -> Model:
    """A seeded random model, exactly as ``sanpath init`` makes it (same options, same weights).

    Defaults as the CLI: d_qk = d_v = d_model / heads (``head_dim`` sets both), d_ff = 4·d_model, BERT's
    structure (skip on, mlp residual, layernorm post, mask none) unless overridden,
    activation "gelu", ln_eps 1e-12.

    ``layout`` (one of :data:`LAYOUTS`): the model of ``sanpath init --layout X`` with
    the same options, so that ``random_model(..., layout=X).save_hf(folder, X)``
    writes the same checkpoint. llama, mistral, qwen2: the Llama family's structure
    (RMSNorm, rotary with ``rope_theta``, ``kv_heads`` key/value heads, SwiGLU,
    pre-norm, causal; activation silu, ln_eps default 1e-5). xlnet, t5, gpt_neox,
    phi, opt, gemma, gemma2, vit, qwen3, gemma3: the family's own structure (docs/families.md);
    ``activation`` and ``ln_eps`` default to the family's (None), the variant
    options ``skip``/``mlp``/``layernorm``/``mask`` are refused (choose variants
    when running the model), ``kv_heads`` (phi, gemma, gemma2, qwen3, gemma3; None: H) and
    ``rope_theta`` apply (gemma3: the full-attention layers' base), and the family
    options set what its config.json would: ``rotary_fraction`` (gpt_neox 0.25, phi
    0.5), ``parallel_residual`` (gpt_neox, True), ``sliding_window`` (gemma2, gemma3,
    4096; 0: none), ``softcap`` (gemma2, 50; 0: none), ``query_pre_attn_scalar``
    (gemma2, gemma3, head_dim), ``layer_pattern`` (gemma3 sliding_window_pattern, 6),
    ``rope_local_base`` (gemma3 rope_local_base_freq, 10000), ``rope_linear_factor``
    (gemma3 linear rope_scaling of the full-attention layers, 1: none), ``rel_buckets`` /
    ``rel_max_distance`` (t5, 32 / 128), ``gated`` (t5 gated-gelu, False: relu),
    ``clamp_len`` (xlnet, none), ``causal`` (xlnet attn_type "uni", False: "bi"),
    ``image_size`` / ``patch_size`` / ``channels`` (vit, 224 / 16 / 3; a vit model
    takes images, :func:`pixels`, and no ``vocab``), ``embed_dim`` (opt
    word_embed_proj_dim, d; e ≠ d adds project_in), ``pre_norm`` (opt
    do_layer_norm_before, True). An option of another family, or any family option
    without such a layout, raises :class:`InputError` naming it.
    """
    if head_dim is not None:
        if d_qk is not None or d_v is not None:
            raise InputError("head_dim: give it or d_qk/d_v, not both")
        d_qk = d_v = head_dim
    if (d_qk is None or d_v is None) and d_model % heads != 0:
        raise InputError(f"d_model: {d_model} is not divisible by heads {heads} (give d_qk and d_v)")
    family = _sanpath.FamilyOptions()
    given = locals()
    for option in _FAMILY_OPTIONS:
        value = given[option]
        if value is not None:
            setattr(family, option, value)
    return _sanpath.random_model(
        layers, heads, d_model,
        d_qk if d_qk is not None else d_model // heads,
        d_v if d_v is not None else d_model // heads,
        d_ff if d_ff is not None else 4 * d_model,
        init, std, bias_std, seed, shared_layers, activation, ln_eps, vocab, max_positions,
        *_variant_args(skip, mlp, layernorm, mask),
        layout, 0 if kv_heads is None else kv_heads, float(rope_theta), family)


def default_model() -> Model:
    """The embedded default model of ``sanpath collapse`` (random BERT-shaped, L=5, H=4, d=32, seed 0)."""
    return _sanpath.default_collapse_model()


# ----------------------------------------------------------------------- inputs

#: One input: token ids, a float array X^0 [n, d_model], or an :class:`Input` (images: :func:`pixels`).
InputLike = Union[Input, Sequence[int], np.ndarray, Any]
#: One input, or a batch: a list of token sequences (lengths may differ), an
#: integer array [b, n] of token ids, a float array [b, n, d_model], or a :class:`Batch`.
BatchLike = Union[InputLike, Batch, Sequence[Sequence[int]]]


def tokens(ids: Sequence[int]) -> Input:
    """Token ids, embedded with the model's own embeddings."""
    return _sanpath.input_tokens([int(i) for i in ids])


def matrix(X, name: str = "X") -> Input:
    """An input matrix X^0 of shape [n, d_model] (anything with ``__array__``)."""
    a = np.asarray(X, dtype=np.float64)
    if a.ndim != 2:
        raise InputError(f"{name}: X: shape has {a.ndim} dimensions, expected [n, d_model]")
    return _sanpath.input_matrix(a, name)


def random_input(n: int, seed: int = 0, spread: float = 1.0, residual: Optional[float] = None) -> Input:
    """A seeded random input X = 1cᵀ + R of n tokens (as ``--random-input N --seed S``)."""
    return _sanpath.input_random(n, seed, spread, residual)


def default_input() -> Input:
    """The default input of ``sanpath collapse``: 8 random tokens, seed 1."""
    return _sanpath.default_collapse_input()


def batch(x, name: str = "batch") -> Batch:
    """A batch of inputs analysed together (``forward``, ``collapse``, ``report``).

    ``x``: a list of token-id sequences (lengths may differ), an integer array
    [b, n] of token ids (e.g. a tokenizer's ``input_ids``), or a float array
    [b, n, d_model] of inputs X^0. ``name`` names the batch in results
    ("3 inputs from <name>, n = 4..6 tokens") and input i in error messages
    (``<name>[i]``); for a [b, n, d] array the description is that of the CLI's
    ``--input FILE`` with ``name`` in place of FILE.
    """
    if isinstance(x, Batch):
        return x
    if isinstance(x, np.ndarray) or hasattr(x, "__array__"):
        a = np.asarray(x)
        if a.ndim == 2 and np.issubdtype(a.dtype, np.integer):
            return _sanpath.batch_tokens(a.tolist(), name)
        if a.ndim == 3:
            return _sanpath.batch_matrices(np.asarray(a, dtype=np.float64), name)
        raise InputError(f"{name}: X: shape has {a.ndim} dimensions, expected [b, n] token ids or [b, n, d_model]")
    return _sanpath.batch_tokens([[_token_id(i) for i in seq] for seq in x], name)


def pixels(x, name: str = "pixels") -> Union[Input, Batch]:
    """Images for a ViT model (as ``--pixels``): a float array [C, S, S] is one :class:`Input`
    (``kind`` "pixels"), [b, C, S, S] a :class:`Batch` of b images named ``<name>[i]``.

    The values are channel-first and already normalised by the model's image
    processor (nothing is normalised again); they are converted to float64.
    Another rank, an empty axis, NaN or Inf raise :class:`InputError` naming
    ``name`` and pixel_values, as the CLI names the file; the channels and the
    size are checked against the model when it runs. A 3-D or 4-D array given
    directly to :func:`forward` etc. is a matrix batch, never an image: images
    go through this function (or :func:`load_pixels`). With ``name`` the path of
    a file holding the same values, results equal ``--pixels FILE``'s byte for byte.
    """
    return _sanpath.input_pixels(np.asarray(x, dtype=np.float64), name)


def load_pixels(path: str) -> Union[Input, Batch]:
    """The tensor ``pixel_values`` of a safetensors file (F32, F64, F16 or BF16), as ``--pixels FILE``:
    [C, S, S] is one :class:`Input`, [b, C, S, S] a :class:`Batch` (images named ``<path>[i]``)."""
    return _sanpath.pixels_file(str(path))


def image(path, model) -> Union[Input, Batch]:
    """A PNG or JPEG image for a ViT model (as ``--image``), preprocessed as the checkpoint's
    ``preprocessor_config.json`` says, to the bit as HuggingFace's ViTImageProcessor computes it: RGB as PIL's
    ``convert("RGB")``, PIL's ``resize`` with the ``resample`` filter, ``rescale_factor``, then
    ``(x - image_mean) / image_std`` in float32; channels first.

    ``path``: one file (one :class:`Input`, ``kind`` "pixels", named by the path), or a folder (its ``*.png``,
    ``*.jpg``, ``*.jpeg`` in name order) or a list of files and folders (a :class:`Batch`). ``model``: a
    :class:`Model` loaded from the checkpoint's folder (a model that takes no images raises :class:`InputError`)
    or that folder's path. The values are ``Input.pixel_values`` ([3, H, W], float64 holding the float32 values);
    the result goes wherever :func:`pixels` does, with the same results as :func:`pixels` of those values.
    Unreadable files, other formats and a ``preprocessor_config.json`` missing or lacking a key raise
    :class:`InputError` naming the file and the key.
    """
    paths = [os.fspath(p) for p in path] if isinstance(path, (list, tuple)) else [os.fspath(path)]
    if isinstance(model, Model):
        # The checkpoint's folder: the model's source, without load(first_layers=N)'s note.
        folder = model.source.split(" (first ")[0]
        return _sanpath.images_file(paths, folder, model)
    return _sanpath.images_file(paths, os.fspath(model))


def token_file(path: str) -> Batch:
    """The batch of a token file, as ``--tokens-file``: one sequence of comma-separated ids per line
    (lengths may differ; blank lines and '#' comments skipped)."""
    return _sanpath.batch_token_file(str(path))


def input_file(path: str) -> Union[Input, Batch]:
    """The tensor X of a safetensors file, as ``--input``: [n, d_model] is one Input, [b, n, d_model] a Batch."""
    return _sanpath.input_file(str(path))


def random_batch(n: int, count: int, seed: int = 0, spread: float = 1.0, residual: Optional[float] = None) -> Batch:
    """``count`` seeded random inputs of n tokens, seeds seed..seed+count-1 (as ``--random-input N --batch B``)."""
    return _sanpath.batch_random(n, count, seed, spread, residual)


def _token_id(i) -> int:
    if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
        raise TypeError(f"input: token ids must be integers, got {type(i).__name__}")
    return int(i)


def _is_token_sequences(x) -> bool:
    """A list of sequences of integers (token ids), as opposed to a matrix given as nested lists of floats."""
    return bool(x) and all(isinstance(s, (list, tuple, np.ndarray)) and len(s) > 0 and
                           all(isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)) for i in s)
                           for s in x)


def _input_or_batch(x: BatchLike) -> Union[Input, Batch]:
    if isinstance(x, (Input, Batch)):
        return x
    if isinstance(x, np.ndarray) or hasattr(x, "__array__"):
        a = np.asarray(x)
        if a.ndim == 1 and np.issubdtype(a.dtype, np.integer):
            return tokens(a.tolist())
        if a.ndim == 3 or (a.ndim == 2 and np.issubdtype(a.dtype, np.integer)):
            return batch(a)
        return matrix(a)
    if isinstance(x, (list, tuple)):
        if x and isinstance(x[0], (list, tuple, np.ndarray)):
            return batch(x) if _is_token_sequences(x) else matrix(x)
        return tokens(x)
    raise TypeError("input: expected token ids, an array [n, d_model], a batch or a sanpath.Input")


def _input(x: InputLike) -> Input:
    """One input; a batch is refused as the CLI refuses it for commands without batches."""
    inp = _input_or_batch(x)
    if isinstance(inp, Batch):
        raise InputError(f"input: a batch of {len(inp)} inputs; this function analyses one input "
                         "(batches: forward, collapse, effectiveness, report)")
    return inp


def _variant_args(skip, mlp, layernorm, mask):
    if isinstance(skip, bool):
        skip = "on" if skip else "off"
    return skip, mlp, layernorm, mask


def _measures_text(measures) -> str:
    """None/"none", "all", "mu,cosine" or a list of names, as the CLI's --measures."""
    if measures is None:
        return "none"
    if isinstance(measures, str):
        return measures
    return ",".join(str(m) for m in measures)


def _request(precision, digits, max_bits, confirm, method=None, check="auto", measures=None, emulate=None):
    """The CLI's --precision, --digits, --max-bits, --no-confirm, --method, --check, --measures and --emulate
    as one request."""
    return _sanpath.precision_request(str(precision), int(digits), max_bits, bool(confirm), method, str(check),
                                      _measures_text(measures), None if emulate is None else str(emulate))


def _name(model: Optional[Model], name: Optional[str]) -> Tuple[Model, str]:
    if model is None:
        return default_model(), name or EMBEDDED_NAME
    return model, name if name is not None else model.source


def _progress(progress):
    """None (silent), a callable(stage, done, total), or True for a tqdm bar when tqdm is installed."""
    if progress is True:
        try:
            from tqdm import tqdm
        except ImportError:
            return None
        bars = {}

        def show(stage, done, total):
            bar = bars.get(stage)
            if bar is None:
                for b in bars.values():
                    b.close()
                bars.clear()
                bar = bars[stage] = tqdm(total=total or None, desc=stage, leave=False)
            bar.n = done
            bar.refresh()

        return show
    return progress


# -------------------------------------------------------------------- analyses


def forward(model: Model, input: BatchLike, *, skip=None, mlp=None, layernorm=None, mask=None,
            precision: Union[str, int] = "auto", digits: int = 20, max_bits: Optional[int] = None,
            confirm: bool = True, method: Optional[str] = None, check: str = "auto", center: str = "mean",
            measures=None, emulate: Optional[str] = None, threads: int = 0, name: Optional[str] = None,
            progress=None) -> Union[ForwardResult, ForwardBatchResult]:
    """``sanpath forward``: every layer's residual, every number confirmed by a second run.

    ``input``: one input (token ids, X^0 [n, d_model], an Input — images for a
    ViT model: :func:`pixels`, :func:`load_pixels`) or a batch (a list of token
    sequences, int array [b, n], float array [b, n, d_model], a Batch — also
    images [b, C, S, S] through :func:`pixels`): a batch gives a :class:`ForwardBatchResult` with per-layer statistics
    over the inputs, each input at its own precision; the inputs run in
    parallel and share ``threads`` threads with their products (0: the
    :func:`set_threads` setting, all cores by default; the result does not
    depend on it).
    ``precision``: "auto", "double" or bits; ``method``: "centred" (default with
    auto) or "direct" (default at a fixed precision); ``check``: "auto" (the
    rounding check for double with centre mean/median, else mpfr), "rounding",
    "mpfr" or "certified" (every digit proven by ball arithmetic, docs/math.md
    §10: each Number's ``interval`` is then the enclosure (lo, hi) of the
    exact value and ``digits`` the digits it proves; the centred pass with
    auto where its enclosure covers the family (docs/families.md), the direct one with
    ``method="direct"``, a fixed precision or a family it does not cover;
    every family, token ids or pixels through its embeddings or X^0
    given as numbers, centre mean or optimal);
    ``center``: mean|median|optimal; ``skip``/``mlp``/``layernorm``/
    ``mask`` override the model's own structure.
    ``measures``: "all", a list of names or "mu,cosine" (the CLI's
    ``--measures``, docs/math.md §8): each layer's ``measures`` is then a dict
    {name: Number}, with the companions ``one_minus_cosine``,
    ``stable_rank_minus_one`` and ``effective_rank_minus_one`` that keep the
    digits of collapsed layers; a batch's ``measures[l]`` holds their statistics.
    ``emulate``: "fp32", "bf16" or "fp16" (the CLI's ``--emulate``, docs/math.md §9):
    the result's ``emulation`` is then a dict with the emulated model's relative
    residual and measures per layer (Numbers, measured exactly), their digits that
    agree with the exact model (``correct_digits``), the first layer without one
    and the overflow, if any.
    """
    model, name = _name(model, name)
    inp = _input_or_batch(input)
    req = _request(precision, digits, max_bits, confirm, method, check, measures, emulate)
    variant = _variant_args(skip, mlp, layernorm, mask)
    if isinstance(inp, Batch):
        return ForwardBatchResult(_sanpath.forward_batch(model, inp, name, *variant, req, center, int(threads),
                                                         _progress(progress)))
    return ForwardResult(_sanpath.forward(model, inp, name, *variant, req, center, _progress(progress)))


def collapse(model: Optional[Model] = None, input: Optional[BatchLike] = None, *,
             conventions: str = "theory", precision: Union[str, int] = "auto", digits: int = 20,
             max_bits: Optional[int] = None, confirm: bool = True, method: Optional[str] = None,
             check: str = "auto", measures=None, emulate: Optional[str] = None, threads: int = 0,
             name: Optional[str] = None, progress=None) -> Union[CollapseResult, CollapseBatchResult]:
    """``sanpath collapse``: the relative residual per layer of SAN, SAN+MLP, SAN+skip and the full model.

    Without ``model``: the embedded default model; without ``input``: its default input.
    ``conventions``: "theory" (the theorems' SAN, without LayerNorm) or "paper"
    (Figure 2's curves). A batch ``input`` (see :func:`forward`) gives a
    :class:`CollapseBatchResult`, mean ± std per variant and layer; ``threads``
    as in :func:`forward`. ``method``/``check``/``measures`` as in :func:`forward`
    (a batch's ``measures[v][l]``: the statistics of variant v's measures at layer l).
    ``emulate`` as in :func:`forward`: every variant's analysis carries its ``emulation``.
    """
    model, name = _name(model, name)
    inp = default_input() if input is None else _input_or_batch(input)
    req = _request(precision, digits, max_bits, confirm, method, check, measures, emulate)
    if isinstance(inp, Batch):
        return CollapseBatchResult(_sanpath.collapse_batch(model, inp, name, req, conventions, int(threads),
                                                           _progress(progress)))
    return CollapseResult(_sanpath.collapse(model, inp, name, req, conventions, _progress(progress)))


def length_sums(model: Model, input: InputLike, *, skip=None, mlp=None, layernorm=None, mask=None,
                precision: Union[str, int] = "auto", digits: int = 20, max_bits: Optional[int] = None,
                confirm: bool = True, method: Optional[str] = None, check: str = "auto", name: Optional[str] = None,
                verify_decomposition: bool = False, progress=None) -> Result:
    """``sanpath paths --sums``: the sum S_k of all path terms of each length (no enumeration).

    ``check`` ("auto", "mpfr" or "certified", as ``paths --check``; "rounding" raises
    :class:`InputError`: a path analysis is no double forward pass). ``check="certified"``
    (``paths --sums --check certified``): every digit proven by ball arithmetic (docs/math.md §10),
    each Number's ``interval`` the enclosure of its exact value; the decomposition error is then the
    bound its enclosure proves (its exact value is 0). ``verify_decomposition=True``
    (``paths --sums --verify-decomposition``): raises :class:`NumericalError` unless Theorem 2.1's
    reconstruction error is at most 2^-(bits/2) (``.decomposition_holds`` says the same without raising)."""
    model, name = _name(model, name)
    return Result(_sanpath.length_sums(model, _input(input), name, *_variant_args(skip, mlp, layernorm, mask),
                                       _request(precision, digits, max_bits, confirm, method, check),
                                       bool(verify_decomposition), _progress(progress)))


def enumerate_paths(model: Model, input: InputLike, *, skip=None, mlp=None, layernorm=None, mask=None,
                    precision: Union[str, int] = "auto", digits: int = 20, max_bits: Optional[int] = None,
                    confirm: bool = True, method: Optional[str] = None, length: Optional[int] = None,
                    lengths: Optional[Tuple[int, int]] = None, heads_per_layer: Optional[str] = None,
                    top: int = 0, threads: int = 0,
                    limit: int = 1_000_000, check: str = "auto", name: Optional[str] = None,
                    progress=None) -> Result:
    """``sanpath paths --enumerate``: every path term (or the ``top`` K largest), kept in one result.

    For many paths prefer :func:`iter_paths`, which streams.

    ``check="certified"`` (``paths --enumerate --check certified``): every
    digit of every path's norms proven by ball arithmetic (docs/math.md §10),
    each Number's ``interval`` the enclosure of its exact value. The paths
    (a ``top`` selection and its order) are chosen at the tier the enclosures
    start at, ``selected_at_bits`` in the JSON.
    """
    model, name = _name(model, name)
    return Result(_sanpath.enumerate_paths(model, _input(input), name, *_variant_args(skip, mlp, layernorm, mask),
                                           _request(precision, digits, max_bits, confirm, method, check), length,
                                           lengths, heads_per_layer, top, threads, limit, _progress(progress)))


def iter_paths(model: Model, input: InputLike, *, skip=None, mlp=None, layernorm=None, mask=None,
               precision: Union[str, int] = "auto", digits: int = 20, max_bits: Optional[int] = None,
               confirm: bool = True, method: Optional[str] = None, length: Optional[int] = None,
               lengths: Optional[Tuple[int, int]] = None, heads_per_layer: Optional[str] = None,
               limit: int = 10_000_000) -> Iterator[PathTerm]:
    """Streams path terms one by one in enumeration order (memory independent of their number).

    Each item has ``heads`` (per layer, -1 = skip), ``length`` and the Numbers ``norm``,
    ``norm_frobenius``, ``residual``, ``stochastic_residual``, each confirmed against the
    same path at the next precision tier. The walk runs in a background thread with
    the GIL released; ``close()`` (or dropping the iterator) stops it.
    """
    stream = _sanpath.iter_paths(model, _input(input), *_variant_args(skip, mlp, layernorm, mask),
                                 _request(precision, digits, max_bits, confirm, method), length, lengths,
                                 heads_per_layer, limit)
    try:
        for term in stream:
            yield _Record(term)
    finally:
        stream.close()


def sample_paths(model: Model, input: InputLike, samples: int, *, lengths: Sequence[int] = (), seed: int = 0,
                 skip=None, mlp=None, layernorm=None, mask=None, precision: Union[str, int] = "auto",
                 digits: int = 20, max_bits: Optional[int] = None, confirm: bool = True,
                 method: Optional[str] = None, name: Optional[str] = None, progress=None) -> Result:
    """``sanpath paths --sample N``: uniform random paths per length, mean and 95% CI of their norms."""
    model, name = _name(model, name)
    return Result(_sanpath.sample_paths(model, _input(input), name, *_variant_args(skip, mlp, layernorm, mask),
                                        _request(precision, digits, max_bits, confirm, method), list(lengths),
                                        samples, seed, _progress(progress)))


def path_counts(layers: int, heads: int, skip: bool) -> Result:
    """``sanpath graph``: exact path counts by length as Python ints (``.total``, ``.by_length``), ``.dot()``."""
    return Result(_sanpath.path_counts(layers, heads, skip))


def bounds(model: Model, input: InputLike, *, theorem: str = "auto", gamma: Union[str, float] = "1",
           skip=None, mlp=None, layernorm=None, mask=None, precision: Union[str, int] = "auto", digits: int = 20,
           max_bits: Optional[int] = None, confirm: bool = True, method: Optional[str] = None,
           check: str = "auto", name: Optional[str] = None, progress=None) -> Result:
    """``sanpath bounds``: Theorems 2.2/2.3 and Corollary 3.2 against measured residuals, with verdicts.

    ``check="certified"`` (``sanpath bounds --check certified``): the measured residuals are enclosed by a
    certified run, so ``verdicts_proven`` is True and every HOLDS or VIOLATED in ``verdicts`` is a proof
    (math.md §10); "auto" and "mpfr" confirm the digits by a second run one tier up."""
    model, name = _name(model, name)
    return Result(_sanpath.bounds(model, _input(input), name, *_variant_args(skip, mlp, layernorm, mask),
                                  _request(precision, digits, max_bits, confirm, method, check), theorem, str(gamma),
                                  _progress(progress)))


def bounds_search(*, layers: int = 2, heads: int = 1, d_model: int = 4, d_qk: int = 2, tokens: int = 4,
                  seed: int = 0, iterations: int = 200, search_bits: int = 128, theorem: str = "auto",
                  gamma: Union[str, float] = "1", precision: Union[str, int] = "auto", digits: int = 20,
                  max_bits: Optional[int] = None, confirm: bool = True, method: Optional[str] = None,
                  save: Optional[str] = None, progress=None) -> BoundsSearchResult:
    """``sanpath bounds --search``: a seeded search for a small SAN and input closest to the bound.

    Maximises max_l log10(r_l / bound_l) over random SANs (skip off, mlp none,
    layernorm none) with ``layers`` L, ``heads`` H, width ``d_model``, ``d_qk`` (=
    d_v) and ``tokens`` n rows of X: ``iterations`` candidate evaluations at the
    fixed precision ``search_bits`` (each checked one tier up), then the best
    re-checked by :func:`bounds` at ``precision`` (default auto). Depends only on
    ``seed``. ``save`` (as ``--save FILE``): write the best model there and its
    input beside it (``<stem>.input.safetensors``); or call ``result.save(path)``.
    """
    if save is not None:
        folder = os.path.dirname(str(save)) or "."
        if not os.path.isdir(folder):
            raise InputError(f"--save: {save}: file: directory {folder} does not exist")
    req = _request(precision, digits, max_bits, confirm, method)
    r = BoundsSearchResult(_sanpath.bounds_search(int(layers), int(heads), int(d_model), int(d_qk), int(tokens),
                                                  int(seed), int(iterations), int(search_bits), theorem, str(gamma),
                                                  req, _progress(progress)))
    if save is not None:
        r.save(str(save))
    return r


def effectiveness(model: Model, input: BatchLike, *, skip=None, mlp=None, layernorm=None, mask=None,
                  precision: Union[str, int] = "auto", digits: int = 20, max_bits: Optional[int] = None,
                  confirm: bool = True, method: Optional[str] = None, head: bool = True,
                  rerun: Optional[int] = None, repeats: int = 5, seed: int = 0, threads: int = 0,
                  check: str = "auto", name: Optional[str] = None, progress=None
                  ) -> Union[EffectivenessResult, EffectivenessBatchResult, RerunResult, RerunBatchResult]:
    """``sanpath paths --effectiveness [--rerun N]``: how much of the output the paths of length ≤ k carry, k = 0..L.

    X_{≤k} = Σ_{j≤k} S_j + 1bᵀ (the length sums of Theorem 2.1, exact at any size;
    an attention-only variant: ``mlp="none", layernorm="none"``). Per k: the
    relative distance ‖X_{≤k} − X^L‖_F / ‖X^L‖_F and, when the model was loaded
    from a checkpoint with a task head (BERT pooler + classifier, GPT-2 ln_f + LM
    head) and ``head`` is True, the agreement of the head's predictions with
    those on X^L and the mean KL divergence (nats). See :class:`EffectivenessResult`.

    A batch ``input`` (a list of token sequences, int array [b, n], float array
    [b, n, d_model], :func:`token_file`, :func:`random_batch`; see :func:`forward`)
    gives an :class:`EffectivenessBatchResult`: each input at its own precision,
    per k the distance's statistics over the inputs and the head's agreement and
    KL pooled over every prediction of the batch; inputs in parallel sharing
    ``threads`` as in :func:`forward` (the result does not depend on it), as ``paths --effectiveness --tokens-file``.

    ``rerun=N`` adds the paper's own procedure, for every variant (``--rerun N
    --repeats R --seed S``): per length k, N paths re-run as sub-networks with
    their own attention, ``repeats`` draws seeded by ``seed``, beside the exact
    sense where it exists; a :class:`RerunResult`, or for a batch a
    :class:`RerunBatchResult`. ``threads`` then also runs the sub-networks of
    one input in parallel (the result does not depend on it). ``rerun`` < 1,
    ``repeats`` < 1, a ``seed`` outside [0, 2^64), and ``repeats`` or ``seed``
    without ``rerun`` raise :class:`InputError` naming the parameter.

    ``check="certified"`` (``paths --effectiveness --check certified``, with or
    without ``rerun``): every digit proven by ball arithmetic (docs/math.md §10), each
    distance's and KL's ``interval`` the enclosure of its exact value (the
    distance at k = L, 0 exactly, the bound its enclosure proves); ``agree`` is
    then the count of predictions proven to agree and ``agree_most`` of those
    that may (they differ where the logits' enclosures leave an argmax undecided).
    """
    model, name = _name(model, name)
    inp = _input_or_batch(input)
    variant = _variant_args(skip, mlp, layernorm, mask)
    req = _request(precision, digits, max_bits, confirm, method, check)
    if rerun is not None:
        rr = (*_rerun_args(rerun, repeats, seed), int(threads), _progress(progress))
        if isinstance(inp, Batch):
            return RerunBatchResult(_sanpath.effectiveness_rerun_batch(model, inp, name, *variant, req, bool(head),
                                                                       *rr))
        return RerunResult(_sanpath.effectiveness_rerun(model, inp, name, *variant, req, bool(head), *rr))
    for option, value, default in (("repeats", repeats, 5), ("seed", seed, 0)):
        if value != default:
            raise InputError(f"{option}: only with rerun=N (the re-run sub-networks)")
    if isinstance(inp, Batch):
        return EffectivenessBatchResult(_sanpath.effectiveness_batch(model, inp, name, *variant, req, bool(head),
                                                                     int(threads), _progress(progress)))
    return EffectivenessResult(_sanpath.effectiveness(model, inp, name, *variant, req, bool(head),
                                                      _progress(progress)))


def _rerun_args(rerun, repeats, seed) -> Tuple[int, int, int]:
    """rerun=N, repeats=R, seed=S checked as the CLI checks --rerun, --repeats and --seed."""
    rerun, repeats, seed = operator.index(rerun), operator.index(repeats), operator.index(seed)
    if rerun < 1:
        raise InputError("rerun: at least 1 path per length")
    if repeats < 1:
        raise InputError("repeats: at least 1 repetition")
    if not 0 <= seed < 2 ** 64:
        raise InputError(f"seed: {seed} is outside [0, 2^64)")
    if rerun >= 2 ** 64:
        raise InputError(f"rerun: {rerun} is too large")
    if repeats >= 2 ** 31:
        raise InputError(f"repeats: {repeats} is too large")
    return rerun, repeats, seed


def report(model: Optional[Model] = None, input: Optional[BatchLike] = None, out: Optional[str] = None, *,
           conventions: str = "theory", precision: Union[str, int] = "auto", digits: int = 20,
           max_bits: Optional[int] = None, confirm: bool = True, method: Optional[str] = None,
           gamma: Union[str, float] = "1", measures=None, threads: int = 0, name: Optional[str] = None,
           rerun: int = 8, repeats: int = 3, check: str = "auto", progress=None) -> Optional[str]:
    """``sanpath report``: the self-contained HTML report, written to ``out`` (atomically) or returned.

    A batch ``input`` (see :func:`forward`): the collapse and effectiveness
    sections draw the mean over the inputs with ±std bands (inputs in parallel
    sharing ``threads`` as in :func:`forward`; the agreement pooled over every prediction of the batch); bounds
    and path lengths analyse the first input (the report says so). ``conventions`` as in :func:`collapse`.
    ``rerun``/``repeats``: the effectiveness section's re-run sub-networks (N paths per length, R draws, seed 0;
    ``rerun=0``: the exact sense only), as ``sanpath report --rerun N --repeats R``.
    ``measures`` (as in :func:`forward`): one chart per measure in the collapse section.
    ``check="certified"`` (``sanpath report --check certified``): every section with proven digits
    (docs/math.md §10), the bound's verdicts proofs, the re-run sub-networks of the effectiveness section
    (the default ``rerun=8``) included. ``check`` takes "auto", "mpfr" (every section confirmed one tier up)
    or "certified"; "rounding" raises :class:`InputError` (the path sections are no double forward pass).
    """
    model, name = _name(model, name)
    inp = default_input() if input is None else _input_or_batch(input)
    text = _sanpath.report_html(model, inp, name, _request(precision, digits, max_bits, confirm, method, check,
                                                           measures=measures), str(gamma),
                                conventions, int(threads), int(rerun), int(repeats), f"sanpath {__version__}",
                                None if out is None else str(out),
                                _progress(progress))
    return None if out is not None else text


def set_threads(threads: int) -> None:
    """The threads sanpath uses, as the CLI's ``--threads``: the products of a
    pass, passes run side by side, path shards and the inputs of a batch share
    them; 0 (the default) for all cores. Results never depend on it. A call's
    own ``threads=`` (batches, enumeration, re-runs) takes that many instead
    of this setting; 0 there means this setting."""
    _sanpath.set_threads(int(threads))


def threads() -> int:
    """The threads set by :func:`set_threads` (all cores by default)."""
    return _sanpath.threads()


def set_memory_budget(size: Optional[str]) -> None:
    """The memory limit for large allocations ("8G", "512MiB", "50%"); None restores the default."""
    _sanpath.set_memory_budget(size)


__all__ = [
    "Error", "InputError", "NumericalError", "ResourceError", "Model", "Input", "Number", "Result",
    "ForwardResult", "CollapseResult", "load", "from_arrays", "random_model", "default_model", "tokens", "matrix",
    "random_input", "default_input", "forward", "collapse", "length_sums", "enumerate_paths", "iter_paths",
    "sample_paths", "path_counts", "distribution_notes", "bounds", "report", "set_memory_budget", "set_threads", "threads", "Batch", "ForwardBatchResult",
    "CollapseBatchResult", "EffectivenessResult", "EffectivenessBatchResult", "BoundsSearchResult", "batch", "token_file", "input_file",
    "random_batch", "effectiveness", "bounds_search", "RerunResult", "RerunBatchResult", "pixels", "load_pixels", "image",
    "LAYOUTS", "FAMILIES", "kernels",
]
