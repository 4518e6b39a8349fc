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
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _sanpath
from ._sanpath import (  # noqa: F401  (re-exported)
    Error,
    InputError,
    NumericalError,
    ResourceError,
    Model,
    Input,
    PathTerm,
    LengthSum,
    LayerReport,
    MeasuredDepth,
)

__version__ = "0.1.0"

#: How the command line tool names its embedded default model in reports.
EMBEDDED_NAME = "embedded default (random BERT-shaped, seed 0)"

ProgressCallback = Callable[[str, int, int], None]

# --------------------------------------------------------------------- numbers


class Number:
    """A high-precision result: its value, its confirmed digits, or an upper bound.

    ``str(x)`` prints the decimal with its true exponent (``4.7056435084530063e-498``,
    or ``< 1e-40`` when only a bound is known); ``float(x)`` converts when a double
    holds the value and raises ``OverflowError`` outside double's range (never
    returns 0.0 or inf for a nonzero value); ``x.log10`` is the magnitude as a float;
    ``x.mpf()`` an ``mpmath.mpf`` with the confirmed digits; ``x.digits`` the number
    of confirmed significant digits (None without a check run).
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
    """Wraps the extension's numbers (and lists of them) as :class:`Number`."""
    if isinstance(x, _sanpath.Number):
        return Number(x)
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


class CollapseResult(Result):
    """``collapse``: the four variants; ``analyses[i]`` is the ForwardResult of ``variants[i]``."""

    @property
    def analyses(self):
        return [ForwardResult(a) for a in self._r.analyses]

    def relative_residuals(self):
        """{variant name: [Number per layer]}."""
        return {name: [x.relative_residual for x in a.layers] for name, a in zip(self.variants, self.analyses)}


# ----------------------------------------------------------------------- models


def load(path: str) -> Model:
    """Loads a HuggingFace folder (BERT, GPT-2, ALBERT) or a native ``.safetensors`` file."""
    return _sanpath.load_model(str(path))


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


def random_model(
    layers: int = 6,
    heads: int = 4,
    d_model: int = 64,
    *,
    d_qk: Optional[int] = None,
    d_v: Optional[int] = None,
    d_ff: Optional[int] = None,
    init: str = "gaussian",
    std: float = 0.02,
    bias_std: float = 0.0,
    seed: int = 0,
    shared_layers: bool = False,
    activation: str = "gelu",
    ln_eps: float = 1e-12,
    vocab: int = 0,
    max_positions: int = 512,
    skip: Union[bool, str, None] = None,
    mlp: Optional[str] = None,
    layernorm: Optional[str] = None,
    mask: Optional[str] = None,
) -> Model:
    """A seeded random model, exactly as ``sanpath init`` makes it (same options, same weights).

    Defaults as the CLI: d_qk = d_v = d_model / heads, d_ff = 4·d_model, BERT's
    structure (skip on, mlp residual, layernorm post, mask none) unless overridden.
    """
    if (d_qk is None or d_v is None) and d_model % heads != 0:
        raise InputError(f"d_model: {d_model} is not divisible by heads {heads} (give d_qk and d_v)")
    return _sanpath.random_model(
        layers, heads, d_model,
        d_qk if d_qk is not None else d_model // heads,
        d_v if d_v is not None else d_model // heads,
        d_ff if d_ff is not None else 4 * d_model,
        init, std, bias_std, seed, shared_layers, activation, ln_eps, vocab, max_positions,
        *_variant_args(skip, mlp, layernorm, mask))


def default_model() -> Model:
    """The embedded default model of ``sanpath collapse`` (random BERT-shaped, L=5, H=4, d=32, seed 0)."""
    return _sanpath.default_collapse_model()


# ----------------------------------------------------------------------- inputs

InputLike = Union[Input, Sequence[int], np.ndarray, Any]


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


def _input(x: InputLike) -> Input:
    if isinstance(x, Input):
        return x
    if isinstance(x, np.ndarray) or hasattr(x, "__array__"):
        a = np.asarray(x)
        if a.ndim == 1 and np.issubdtype(a.dtype, np.integer):
            return tokens(a.tolist())
        return matrix(a)
    if isinstance(x, (list, tuple)):
        if x and isinstance(x[0], (list, tuple)):
            return matrix(x)
        return tokens(x)
    raise TypeError("input: expected token ids, an array [n, d_model] or a sanpath.Input")


def _variant_args(skip, mlp, layernorm, mask):
    if isinstance(skip, bool):
        skip = "on" if skip else "off"
    return skip, mlp, layernorm, mask


def _precision_args(precision, digits, max_bits, confirm):
    return str(precision), int(digits), max_bits, bool(confirm)


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


def forward(model: Model, input: InputLike, *, skip=None, mlp=None, layernorm=None, mask=None,
            precision: Union[str, int] = "auto", digits: int = 20, max_bits: Optional[int] = None,
            confirm: bool = True, center: str = "mean", name: Optional[str] = None,
            progress=None) -> ForwardResult:
    """``sanpath forward``: every layer's residual, every number confirmed by a run one tier up.

    ``precision``: "auto", "double" or bits; ``center``: mean|median|optimal;
    ``skip``/``mlp``/``layernorm``/``mask`` override the model's own structure.
    """
    model, name = _name(model, name)
    return ForwardResult(_sanpath.forward(model, _input(input), name, *_variant_args(skip, mlp, layernorm, mask),
                                          *_precision_args(precision, digits, max_bits, confirm), center,
                                          _progress(progress)))


def collapse(model: Optional[Model] = None, input: Optional[InputLike] = None, *,
             precision: Union[str, int] = "auto", digits: int = 20, max_bits: Optional[int] = None,
             confirm: bool = True, name: Optional[str] = None, progress=None) -> CollapseResult:
    """``sanpath collapse``: the relative residual per layer of SAN, SAN+MLP, SAN+skip and the full model.

    Without ``model``: the embedded default model; without ``input``: its default input.
    """
    model, name = _name(model, name)
    inp = default_input() if input is None else _input(input)
    return CollapseResult(_sanpath.collapse(model, inp, name, *_precision_args(precision, digits, max_bits, confirm),
                                            _progress(progress)))


def length_sums(model: Model, input: InputLike, *, skip=None, mlp=None, layernorm=None, mask=None,
                precision: Union[str, int] = "auto", digits: int = 20, max_bits: Optional[int] = None,
                confirm: bool = True, name: Optional[str] = None, progress=None) -> Result:
    """``sanpath paths --sums``: the sum S_k of all path terms of each length (no enumeration)."""
    model, name = _name(model, name)
    return Result(_sanpath.length_sums(model, _input(input), name, *_variant_args(skip, mlp, layernorm, mask),
                                       *_precision_args(precision, digits, max_bits, confirm), _progress(progress)))


def enumerate_paths(model: Model, input: InputLike, *, skip=None, mlp=None, layernorm=None, mask=None,
                    precision: Union[str, int] = "auto", digits: int = 20, max_bits: Optional[int] = None,
                    confirm: bool = True, length: Optional[int] = None, lengths: Optional[Tuple[int, int]] = None,
                    heads_per_layer: Optional[str] = None, top: int = 0, threads: int = 1,
                    limit: int = 1_000_000, name: Optional[str] = None, progress=None) -> Result:
    """``sanpath paths --enumerate``: every path term (or the ``top`` K largest), kept in one result.

    For many paths prefer :func:`iter_paths`, which streams.
    """
    model, name = _name(model, name)
    return Result(_sanpath.enumerate_paths(model, _input(input), name, *_variant_args(skip, mlp, layernorm, mask),
                                           *_precision_args(precision, digits, max_bits, confirm), length, lengths,
                                           heads_per_layer, top, threads, limit, _progress(progress)))


def iter_paths(model: Model, input: InputLike, *, skip=None, mlp=None, layernorm=None, mask=None,
               precision: Union[str, int] = "auto", digits: int = 20, max_bits: Optional[int] = None,
               confirm: bool = True, length: Optional[int] = None, lengths: Optional[Tuple[int, int]] = None,
               heads_per_layer: Optional[str] = None, limit: int = 10_000_000) -> Iterator[PathTerm]:
    """Streams path terms one by one in enumeration order (memory independent of their number).

    Each item has ``heads`` (per layer, -1 = skip), ``length`` and the Numbers ``norm``,
    ``norm_frobenius``, ``residual``, ``stochastic_residual``, each confirmed against the
    same path at the next precision tier. The walk runs in a background thread with
    the GIL released; ``close()`` (or dropping the iterator) stops it.
    """
    stream = _sanpath.iter_paths(model, _input(input), *_variant_args(skip, mlp, layernorm, mask),
                                 *_precision_args(precision, digits, max_bits, confirm), length, lengths,
                                 heads_per_layer, limit)
    try:
        for term in stream:
            yield _Record(term)
    finally:
        stream.close()


def sample_paths(model: Model, input: InputLike, samples: int, *, lengths: Sequence[int] = (), seed: int = 0,
                 skip=None, mlp=None, layernorm=None, mask=None, precision: Union[str, int] = "auto",
                 digits: int = 20, max_bits: Optional[int] = None, confirm: bool = True,
                 name: Optional[str] = None, progress=None) -> Result:
    """``sanpath paths --sample N``: uniform random paths per length, mean and 95% CI of their norms."""
    model, name = _name(model, name)
    return Result(_sanpath.sample_paths(model, _input(input), name, *_variant_args(skip, mlp, layernorm, mask),
                                        *_precision_args(precision, digits, max_bits, confirm), list(lengths),
                                        samples, seed, _progress(progress)))


def path_counts(layers: int, heads: int, skip: bool) -> Result:
    """``sanpath graph``: exact path counts by length as Python ints (``.total``, ``.by_length``), ``.dot()``."""
    return Result(_sanpath.path_counts(layers, heads, skip))


def bounds(model: Model, input: InputLike, *, theorem: str = "auto", gamma: Union[str, float] = "1",
           skip=None, mlp=None, layernorm=None, mask=None, precision: Union[str, int] = "auto", digits: int = 20,
           max_bits: Optional[int] = None, confirm: bool = True, name: Optional[str] = None,
           progress=None) -> Result:
    """``sanpath bounds``: Theorems 2.2/2.3 and Corollary 3.2 against measured residuals, with verdicts."""
    model, name = _name(model, name)
    return Result(_sanpath.bounds(model, _input(input), name, *_variant_args(skip, mlp, layernorm, mask),
                                  *_precision_args(precision, digits, max_bits, confirm), theorem, str(gamma),
                                  _progress(progress)))


def report(model: Optional[Model] = None, input: Optional[InputLike] = None, out: Optional[str] = None, *,
           precision: Union[str, int] = "auto", digits: int = 20, max_bits: Optional[int] = None,
           confirm: bool = True, gamma: Union[str, float] = "1", name: Optional[str] = None,
           rerun: int = 8, repeats: int = 3, progress=None) -> Optional[str]:
    """``sanpath report``: the self-contained HTML report, written to ``out`` (atomically) or returned.
    ``rerun``/``repeats``: the effectiveness section's re-run sub-networks (N paths per length, R draws, seed 0;
    ``rerun=0``: the exact sense only), as ``sanpath report --rerun N --repeats R``."""
    model, name = _name(model, name)
    inp = default_input() if input is None else _input(input)
    text = _sanpath.report_html(model, inp, name, *_precision_args(precision, digits, max_bits, confirm), str(gamma),
                                int(rerun), int(repeats), f"sanpath {__version__}", None if out is None else str(out), _progress(progress))
    return None if out is not None else text


def set_memory_budget(size: Optional[str]) -> None:
    """The memory limit for large allocations ("8G", "512MiB", "50%"); None restores the default."""
    _sanpath.set_memory_budget(size)


__all__ = [
    "Error", "InputError", "NumericalError", "ResourceError", "Model", "Input", "Number", "Result",
    "ForwardResult", "CollapseResult", "load", "from_arrays", "random_model", "default_model", "tokens", "matrix",
    "random_input", "default_input", "forward", "collapse", "length_sums", "enumerate_paths", "iter_paths",
    "sample_paths", "path_counts", "bounds", "report", "set_memory_budget",
]
