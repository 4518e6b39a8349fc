"""Type stubs of the compiled extension sanpath._sanpath (use the package `sanpath`)."""
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

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
    rows: int
    kind: str
    def describe(self) -> str: ...

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

class CollapseResult(_Formatted):
    variants: List[str]
    analyses: List[ForwardResult]

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
    notes: List[str]
    precision: str

class PathStream:
    def __iter__(self) -> Iterator[PathTerm]: ...
    def __next__(self) -> PathTerm: ...
    def close(self) -> None: ...
    precision: str
    check: Optional[str]

def load_model(path: str) -> Model: ...
def model_from_tensors(arrays: Sequence[Tuple[str, npt.ArrayLike]], config: str, source: str) -> Model: ...
def random_model(layers: int, heads: int, d_model: int, d_qk: int, d_v: int, d_ff: int, init: str, std: float,
                 bias_std: float, seed: int, shared_layers: bool, activation: str, ln_eps: float, vocab: int,
                 max_positions: int, skip: Optional[str], mlp: Optional[str], layernorm: Optional[str],
                 mask: Optional[str]) -> Model: ...
def default_collapse_model() -> Model: ...
def input_tokens(ids: Sequence[int]) -> Input: ...
def input_matrix(X: npt.NDArray[np.float64], source: str) -> Input: ...
def input_random(n: int, seed: int, spread: float, residual: Optional[float]) -> Input: ...
def default_collapse_input() -> Input: ...
def resolve_variant(model: Model, skip: Optional[str], mlp: Optional[str], layernorm: Optional[str],
                    mask: Optional[str]) -> Dict[str, object]: ...
def forward(model: Model, input: Input, name: str, skip: Optional[str], mlp: Optional[str],
            layernorm: Optional[str], mask: Optional[str], precision: str, digits: int, max_bits: Optional[int],
            confirm: bool, center: str, progress: Progress) -> ForwardResult: ...
def collapse(model: Model, input: Input, name: str, precision: str, digits: int, max_bits: Optional[int],
             confirm: bool, progress: Progress) -> CollapseResult: ...
def length_sums(model: Model, input: Input, name: str, skip: Optional[str], mlp: Optional[str],
                layernorm: Optional[str], mask: Optional[str], precision: str, digits: int,
                max_bits: Optional[int], confirm: bool, progress: Progress) -> LengthSumsResult: ...
def enumerate_paths(model: Model, input: Input, name: str, skip: Optional[str], mlp: Optional[str],
                    layernorm: Optional[str], mask: Optional[str], precision: str, digits: int,
                    max_bits: Optional[int], confirm: bool, length: Optional[int],
                    lengths: Optional[Tuple[int, int]], heads_per_layer: Optional[str], top: int, threads: int,
                    limit: int, progress: Progress) -> EnumerationResult: ...
def iter_paths(model: Model, input: Input, skip: Optional[str], mlp: Optional[str], layernorm: Optional[str],
               mask: Optional[str], precision: str, digits: int, max_bits: Optional[int], confirm: bool,
               length: Optional[int], lengths: Optional[Tuple[int, int]], heads_per_layer: Optional[str],
               limit: int) -> PathStream: ...
def sample_paths(model: Model, input: Input, name: str, skip: Optional[str], mlp: Optional[str],
                 layernorm: Optional[str], mask: Optional[str], precision: str, digits: int,
                 max_bits: Optional[int], confirm: bool, lengths: List[int], samples: int, seed: int,
                 progress: Progress) -> SampleResult: ...
def path_counts(layers: int, heads: int, skip: bool) -> GraphResult: ...
def bounds(model: Model, input: Input, name: str, skip: Optional[str], mlp: Optional[str],
           layernorm: Optional[str], mask: Optional[str], precision: str, digits: int, max_bits: Optional[int],
           confirm: bool, theorem: str, gamma: str, progress: Progress) -> BoundsResult: ...
def report_html(model: Model, input: Input, name: str, precision: str, digits: int, max_bits: Optional[int],
                confirm: bool, gamma: str, rerun: int, repeats: int, generator: str, out: Optional[str],
                progress: Progress) -> str: ...
def set_memory_budget(size: Optional[str]) -> None: ...
def memory_budget() -> int: ...
