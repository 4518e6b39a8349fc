"""Type stubs of the compiled extension sanpath._sanpath (use the package `sanpath`)."""
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

Progress = Optional[Callable[[str, int, int], None]]

class Error(Exception): ...
class InputError(Error, ValueError): ...
class NumericalError(Error, ArithmeticError): ...
class ResourceError(Error, MemoryError): ...

class Number:
    def __float__(self) -> float: ...
    def decimal(self, digits: Optional[int] = ...) -> str: ...
    @property
    def log10(self) -> Optional[float]: ...
    @property
    def digits(self) -> Optional[int]: ...
    @property
    def below_resolution(self) -> bool: ...
    @property
    def bound(self) -> Optional[str]: ...
    @property
    def interval(self) -> Optional[Tuple[str, str]]: ...

class Model:
    layers: int
    heads: int
    d_model: int
    d_qk: int
    d_v: int
    d_ff: int
    variant: Dict[str, object]
    activation: str
    ln_eps: float
    shared_layers: bool
    source: str
    vocab_size: Optional[int]
    def native_tensors(self) -> Dict[str, npt.NDArray[np.float64]]: ...
    def native_config(self) -> str: ...
    def save(self, path: str) -> None: ...
    def save_hf(self, folder: str, layout: str, dtype: str) -> None: ...

class Input:
    rows: Optional[int]  # None for an image (the token count depends on the model)
    kind: str
    pixel_values: Optional[npt.NDArray[np.float64]]  # an image's [C, H, W] as fed to the model; None otherwise
    def describe(self) -> str: ...

class FamilyOptions:
    rotary_fraction: Optional[float]
    parallel_residual: Optional[bool]
    sliding_window: Optional[int]
    softcap: Optional[float]
    query_pre_attn_scalar: Optional[float]
    rel_buckets: Optional[int]
    rel_max_distance: Optional[int]
    gated: Optional[bool]
    clamp_len: Optional[int]
    causal: Optional[bool]
    image_size: Optional[int]
    patch_size: Optional[int]
    channels: Optional[int]
    embed_dim: Optional[int]
    pre_norm: Optional[bool]
    layer_pattern: Optional[int]
    rope_local_base: Optional[float]
    rope_linear_factor: Optional[float]
    def __init__(self) -> None: ...

class LayerReport:
    layer: int
    relative_residual: Number
    residual: Number
    residual_lower: Optional[Number]
    residual_one: Number
    residual_inf: Number
    residual_frobenius: Number
    norm: Number
    norm_frobenius: Number
    measures: Dict[str, Number]
    digits: Optional[int]

class LengthSum:
    length: int
    count: int
    frobenius: Number
    residual: Number
    share: Number
    digits: Optional[int]

class PathTerm:
    heads: List[int]
    length: int
    norm: Number
    norm_frobenius: Number
    residual: Number
    stochastic_residual: Number
    digits: Optional[int]

class MeasuredDepth:
    layer: int
    lower: Number
    upper: Number
    relative: Number
    digits: Optional[int]

class _Formatted:
    def format(self, format: str) -> str: ...

class ForwardResult(_Formatted):
    layers: List[LayerReport]
    variant: Dict[str, object]
    precision: str
    check: Optional[str]
    tried_bits: List[int]
    ceiling_reached: bool
    emulation: Optional[Dict[str, object]]

class CollapseResult(_Formatted):
    variants: List[str]
    analyses: List[ForwardResult]
    conventions: str

class LengthSumsResult(_Formatted):
    lengths: List[LengthSum]
    total: int
    decomposition_error: Number
    output_frobenius: Number
    precision: str
    check: Optional[str]
    decomposition_holds: bool

class EnumerationResult(_Formatted):
    paths: List[PathTerm]
    walked: int
    total: int
    decomposition_error: Optional[Number]
    precision: str
    selected_at_bits: Optional[int]

class SampleResult(_Formatted): ...

class GraphResult(_Formatted):
    total: int
    by_length: List[int]
    vertices: int
    edges: int
    def dot(self) -> str: ...

class BoundsResult(_Formatted):
    applicable: bool
    theorem: str
    measured: List[MeasuredDepth]
    verdicts: List[str]
    verdicts_proven: bool
    notes: List[str]
    precision: str

class PathStream:
    def __iter__(self) -> Iterator[PathTerm]: ...
    def __next__(self) -> PathTerm: ...
    def close(self) -> None: ...
    precision: str
    check: Optional[str]

class PrecisionRequest:
    def describe(self) -> str: ...

class Batch:
    inputs: List[Input]
    def __len__(self) -> int: ...
    def describe(self) -> str: ...

class BatchStatistic:
    count: int
    mean: Number
    stddev: Optional[Number]
    min: Number
    median: Number
    max: Number

class ForwardBatchResult(_Formatted):
    layers: List[BatchStatistic]
    measures: List[Dict[str, BatchStatistic]]
    runs: List[ForwardResult]
    inputs: List[str]

class CollapseBatchResult(_Formatted):
    variants: List[str]
    layers: List[List[BatchStatistic]]
    measures: List[List[Dict[str, BatchStatistic]]]
    runs: List[CollapseResult]
    conventions: str
    inputs: List[str]

class EffectivenessEntry:
    length: int
    count: int
    distance: Number
    agree: Optional[int]
    agree_check: Optional[int]
    agree_most: Optional[int]
    kl: Optional[Number]
    digits: Optional[int]

class EffectivenessResult(_Formatted):
    lengths: List[EffectivenessEntry]
    head: Optional[str]
    head_note: Optional[str]
    outputs: int
    predictions: int
    output_frobenius: Number
    variant: Dict[str, object]
    precision: str
    check: Optional[str]

class PooledAgreement:
    agree: int
    agree_check: Optional[int]
    agree_most: Optional[int]
    predictions: int
    kl: Number

class BatchEffectivenessEntry:
    length: int
    count: int
    distance: BatchStatistic
    head: Optional[PooledAgreement]

class EffectivenessBatchResult(_Formatted):
    lengths: List[BatchEffectivenessEntry]
    runs: List[EffectivenessResult]
    inputs: List[str]

class RerunEntry:
    length: int
    count: int
    all_paths: bool
    evaluated: int
    distance: BatchStatistic
    gap: Optional[BatchStatistic]
    agree: Optional[List[int]]
    agree_check: Optional[List[int]]
    agree_most: Optional[List[int]]
    distance_each: Optional[List[Number]]
    kl_each: Optional[List[Number]]
    gap_each: Optional[List[Number]]
    kl: Optional[BatchStatistic]

class RerunResult(_Formatted):
    lengths: List[RerunEntry]
    exact: Optional[EffectivenessResult]
    head: Optional[str]
    head_note: Optional[str]
    outputs: int
    predictions: int
    output_frobenius: Number
    samples: int
    repeats: int
    seed: int
    variant: Dict[str, object]
    precision: str
    check: Optional[str]

class BatchRerunEntry:
    length: int
    count: int
    all_paths: bool
    evaluated: int
    distance: BatchStatistic
    gap: Optional[BatchStatistic]
    head: Optional[PooledAgreement]

class RerunBatchResult(_Formatted):
    lengths: List[BatchRerunEntry]
    exact: Optional[List[BatchEffectivenessEntry]]
    runs: List[RerunResult]
    seeds: List[int]
    samples: int
    repeats: int
    seed: int
    inputs: List[str]

class SearchStep:
    iteration: int
    log10_ratio: float
    depth: int

class BoundsSearchResult(_Formatted):
    model: Optional[Model]
    X: npt.NDArray[np.float64]
    log10_ratio: float
    depth: int
    evaluations: int
    improvements: List[SearchStep]
    recheck: Optional[BoundsResult]
    recheck_log10_ratio: Optional[float]
    recheck_depth: int
    violated: bool
    model_path: str
    input_path: str
    def save(self, path: str) -> None: ...

def load_model(path: str, first_layers: Optional[int] = None, stream_layers: str = "off") -> Model: ...
def model_from_tensors(arrays: Sequence[Tuple[str, npt.ArrayLike]], config: str, source: str) -> Model: ...
def random_model(layers: int, heads: int, d_model: int, d_qk: Optional[int], d_v: Optional[int],
                 head_dim: Optional[int], d_ff: Optional[int], init: str, std: float, bias_std: float, seed: int, shared_layers: bool,
                 activation: Optional[str], ln_eps: Optional[float], vocab: int, max_positions: int,
                 skip: Optional[str], mlp: Optional[str], layernorm: Optional[str], mask: Optional[str],
                 layout: Optional[str], family: Optional[str], kv_heads: Optional[int], rope_theta: float,
                 family_options: FamilyOptions) -> Model: ...
def kernels() -> dict: ...
def distribution_notes() -> list[str]: ...
def layout_families() -> List[Dict[str, Any]]: ...
def default_collapse_model() -> Model: ...
def input_tokens(ids: Sequence[int]) -> Input: ...
def input_matrix(X: npt.NDArray[np.float64], source: str) -> Input: ...
def input_random(n: int, seed: int, spread: float, residual: Optional[float]) -> Input: ...
def default_collapse_input() -> Input: ...
def resolve_variant(model: Model, skip: Optional[str], mlp: Optional[str], layernorm: Optional[str],
                    mask: Optional[str]) -> Dict[str, object]: ...
def forward(model: Model, input: Input, name: str, skip: Optional[str], mlp: Optional[str],
            layernorm: Optional[str], mask: Optional[str], request: PrecisionRequest, center: str,
            progress: Progress) -> ForwardResult: ...
def collapse(model: Model, input: Input, name: str, request: PrecisionRequest, conventions: str,
             progress: Progress) -> CollapseResult: ...
def length_sums(model: Model, input: Input, name: str, skip: Optional[str], mlp: Optional[str],
                layernorm: Optional[str], mask: Optional[str], request: PrecisionRequest, verify: bool,
                progress: Progress) -> LengthSumsResult: ...
def enumerate_paths(model: Model, input: Input, name: str, skip: Optional[str], mlp: Optional[str],
                    layernorm: Optional[str], mask: Optional[str], request: PrecisionRequest, length: Optional[int],
                    lengths: Optional[Tuple[int, int]], heads_per_layer: Optional[str], top: int, threads: int,
                    limit: int, verify: bool, progress: Progress) -> EnumerationResult: ...
def iter_paths(model: Model, input: Input, skip: Optional[str], mlp: Optional[str], layernorm: Optional[str],
               mask: Optional[str], request: PrecisionRequest, length: Optional[int], lengths: Optional[Tuple[int, int]], heads_per_layer: Optional[str],
               limit: int) -> PathStream: ...
def sample_paths(model: Model, input: Input, name: str, skip: Optional[str], mlp: Optional[str],
                 layernorm: Optional[str], mask: Optional[str], request: PrecisionRequest, lengths: List[int],
                 samples: int, seed: int,
                 progress: Progress) -> SampleResult: ...
def path_counts(layers: int, heads: int, skip: bool) -> GraphResult: ...
def bounds(model: Model, input: Input, name: str, skip: Optional[str], mlp: Optional[str],
           layernorm: Optional[str], mask: Optional[str], request: PrecisionRequest, theorem: str, gamma: str,
           progress: Progress) -> BoundsResult: ...
def report_html(model: Model, input: Union[Input, Batch], name: str, request: PrecisionRequest, gamma: str,
                conventions: str, threads: int, rerun: int, repeats: int, generator: str, out: Optional[str],
                progress: Progress) -> str: ...
def precision_request(precision: str, digits: int, max_bits: Optional[int], confirm: bool, method: Optional[str],
                      check: str, measures: str = ..., emulate: Optional[str] = ...) -> PrecisionRequest: ...
def batch_tokens(sequences: Sequence[Sequence[int]], name: str) -> Batch: ...
def batch_token_file(path: str) -> Batch: ...
def batch_matrices(X: npt.NDArray[np.float64], name: str) -> Batch: ...
def input_file(path: str) -> Union[Input, Batch]: ...
def input_pixels(x: npt.NDArray[np.float64], name: str) -> Union[Input, Batch]: ...
def pixels_file(path: str) -> Union[Input, Batch]: ...
def images_file(paths: Sequence[str], model_path: str, model: Optional[Model] = ...) -> Union[Input, Batch]: ...
def batch_random(n: int, count: int, seed: int, spread: float, residual: Optional[float]) -> Batch: ...
def forward_batch(model: Model, batch: Batch, name: str, skip: Optional[str], mlp: Optional[str],
                  layernorm: Optional[str], mask: Optional[str], request: PrecisionRequest, center: str,
                  threads: int, progress: Progress) -> ForwardBatchResult: ...
def collapse_batch(model: Model, batch: Batch, name: str, request: PrecisionRequest, conventions: str, threads: int,
                   progress: Progress) -> CollapseBatchResult: ...
def effectiveness(model: Model, input: Input, name: str, skip: Optional[str], mlp: Optional[str],
                  layernorm: Optional[str], mask: Optional[str], request: PrecisionRequest, use_head: bool,
                  progress: Progress) -> EffectivenessResult: ...
def effectiveness_batch(model: Model, batch: Batch, name: str, skip: Optional[str], mlp: Optional[str],
                        layernorm: Optional[str], mask: Optional[str], request: PrecisionRequest, use_head: bool,
                        threads: int, progress: Progress) -> EffectivenessBatchResult: ...
def effectiveness_rerun(model: Model, input: Input, name: str, skip: Optional[str], mlp: Optional[str],
                        layernorm: Optional[str], mask: Optional[str], request: PrecisionRequest, use_head: bool,
                        samples: int, repeats: int, seed: int, threads: int, progress: Progress) -> RerunResult: ...
def effectiveness_rerun_batch(model: Model, batch: Batch, name: str, skip: Optional[str], mlp: Optional[str],
                              layernorm: Optional[str], mask: Optional[str], request: PrecisionRequest,
                              use_head: bool, samples: int, repeats: int, seed: int, threads: int,
                              progress: Progress) -> RerunBatchResult: ...
def search_input_path(model_path: str) -> str: ...
def bounds_search(layers: int, heads: int, d_model: int, d_qk: int, tokens: int, seed: int, iterations: int,
                  search_bits: int, theorem: str, gamma: str, recheck: PrecisionRequest,
                  progress: Progress) -> BoundsSearchResult: ...
def emulate_trace(model: Model, input: Input, format: str, skip: Optional[str] = ..., mlp: Optional[str] = ...,
                  layernorm: Optional[str] = ..., mask: Optional[str] = ...,
                  record_attention: bool = ...) -> Dict[str, object]: ...
def set_memory_budget(size: Optional[str]) -> None: ...
def memory_budget() -> int: ...
def set_threads(threads: int) -> None: ...
def threads() -> int: ...
