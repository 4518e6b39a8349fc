"""The entry points: one function per command of the command line tool, with its options as keywords."""

from __future__ import annotations

import os
from typing import Callable, Iterator, Optional, Sequence, Tuple, Union

from . import _sanpath
from ._sanpath import Batch, InputError, Model, PathTerm
from .inputs import BatchLike, InputLike, _input, _input_or_batch, default_input
from .models import EMBEDDED_NAME, _variant_args, default_model
from .results import (BoundsSearchResult, CollapseBatchResult, CollapseResult, EffectivenessBatchResult,
                      EffectivenessResult, ForwardBatchResult, ForwardResult, RerunBatchResult, RerunResult, Result,
                      _Record)
from .settings import __version__

ProgressCallback = Callable[[str, int, int], None]


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
                    limit: int = 1_000_000, check: str = "auto", verify_decomposition: bool = False,
                    name: Optional[str] = None, progress=None) -> Result:
    """``sanpath paths --enumerate``: every path term (or the ``top`` K largest), kept in one result.

    For many paths prefer :func:`iter_paths`, which streams.

    ``verify_decomposition=True`` (``paths --enumerate --verify-decomposition``, Theorem 2.1):
    raises :class:`NumericalError` unless the sum of every path term reconstructs the output
    (``decomposition_error`` at most the tolerance of the precision); with ``length``,
    ``lengths`` or ``heads_per_layer`` (not every path) it raises :class:`InputError`.

    ``check="certified"`` (``paths --enumerate --check certified``): every
    digit of every path's norms proven by ball arithmetic (docs/math.md §10),
    each Number's ``interval`` the enclosure of its exact value. The paths
    (a ``top`` selection and its order) are chosen at the tier the enclosures
    start at, ``selected_at_bits`` in the JSON.
    """
    model, name = _name(model, name)
    return Result(_sanpath.enumerate_paths(model, _input(input), name, *_variant_args(skip, mlp, layernorm, mask),
                                           _request(precision, digits, max_bits, confirm, method, check), length,
                                           lengths, heads_per_layer, top, threads, limit,
                                           bool(verify_decomposition), _progress(progress)))


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
    from a checkpoint with a task head (docs/families.md: the BERT family's
    sequence classifiers, ViT's classifier, the decoders' final norm + LM head)
    and ``head`` is True, the agreement of the head's predictions with those on
    X^L and the mean KL divergence (nats). See :class:`EffectivenessResult`.

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
        rr = (rerun, repeats, seed, int(threads), _progress(progress))  # their ranges: the library's
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
