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
from .analyses import (  # noqa: F401  (re-exported)
    ProgressCallback,
    bounds,
    bounds_search,
    collapse,
    effectiveness,
    enumerate_paths,
    forward,
    iter_paths,
    length_sums,
    path_counts,
    report,
    sample_paths,
)
from .inputs import (  # noqa: F401  (re-exported)
    BatchLike,
    InputLike,
    batch,
    default_input,
    image,
    input_file,
    load_pixels,
    matrix,
    pixels,
    random_batch,
    random_input,
    token_file,
    tokens,
)
from .models import (  # noqa: F401  (re-exported)
    EMBEDDED_NAME,
    FAMILIES,
    LAYOUTS,
    FamilyOptions,
    default_model,
    from_arrays,
    load,
    random_model,
)
from .results import (  # noqa: F401  (re-exported)
    BoundsSearchResult,
    CollapseBatchResult,
    CollapseResult,
    EffectivenessBatchResult,
    EffectivenessResult,
    ForwardBatchResult,
    ForwardResult,
    Number,
    RerunBatchResult,
    RerunResult,
    Result,
)
from .settings import __version__, distribution_notes, kernels, set_memory_budget, set_threads, threads  # noqa: F401

__all__ = [
    "Error", "InputError", "NumericalError", "ResourceError", "Model", "Input", "Number", "Result",
    "ForwardResult", "CollapseResult", "load", "from_arrays", "random_model", "default_model", "tokens", "matrix",
    "random_input", "default_input", "forward", "collapse", "length_sums", "enumerate_paths", "iter_paths",
    "sample_paths", "path_counts", "distribution_notes", "bounds", "report", "set_memory_budget", "set_threads", "threads", "Batch", "ForwardBatchResult",
    "CollapseBatchResult", "EffectivenessResult", "EffectivenessBatchResult", "BoundsSearchResult", "batch", "token_file", "input_file",
    "random_batch", "effectiveness", "bounds_search", "RerunResult", "RerunBatchResult", "pixels", "load_pixels", "image",
    "LAYOUTS", "FAMILIES", "FamilyOptions", "kernels",
]
