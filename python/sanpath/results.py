"""Results: high-precision numbers (:class:`Number`) and the results of the analyses, each formatting
itself as the command line tool does (JSON, table, CSV)."""

from __future__ import annotations

import csv
import html
import io
import json
from typing import Any, Optional, Tuple

from . import _sanpath

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

    def __repr__(self) -> str:
        """At a prompt, the CLI's table (as in a notebook, whose _repr_html_ shows it as HTML)."""
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
    "language model" or None, and then ``head_note`` says why in one line (as the
    table and JSON's "head_note" do; None with a head); ``outputs`` the head's
    classes or vocabulary size; ``output_frobenius`` ‖X^L‖_F.
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
