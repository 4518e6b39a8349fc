"""Models: loaded from checkpoints or arrays, or drawn at random as ``sanpath init`` draws them."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, Mapping, Optional, Tuple, Union

import numpy as np

from . import _sanpath
from ._sanpath import Model

#: How the command line tool names its embedded default model in reports.
EMBEDDED_NAME = "embedded default (random BERT-shaped, seed 0)"

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

def _variant_args(skip, mlp, layernorm, mask):
    """The variant keywords as the CLI's --skip/--mlp/--layernorm/--mask texts (skip may be a bool)."""
    if isinstance(skip, bool):
        skip = "on" if skip else "off"
    return skip, mlp, layernorm, mask


@dataclasses.dataclass
class FamilyOptions:
    """The options of a family with its own structure (``sanpath init --layout X``'s family options,
    docs/families.md); None: the family's default. Each family takes those :data:`FAMILIES` lists under
    ``options``; the library refuses any other, naming it.

    >>> sanpath.random_model(2, 4, 32, vocab=64, layout="gpt_neox",
    ...                      family_options=sanpath.FamilyOptions(rotary_fraction=0.5))
    """

    rotary_fraction: Optional[float] = None  #: gpt_neox rotary_pct (0.25), phi partial_rotary_factor (0.5)
    parallel_residual: Optional[bool] = None  #: gpt_neox use_parallel_residual (True)
    sliding_window: Optional[int] = None  #: gemma2, gemma3 (4096; 0: none)
    softcap: Optional[float] = None  #: gemma2 attn_logit_softcapping (50; 0: none)
    query_pre_attn_scalar: Optional[float] = None  #: gemma2, gemma3 (head_dim)
    layer_pattern: Optional[int] = None  #: gemma3 sliding_window_pattern (6)
    rope_local_base: Optional[float] = None  #: gemma3 rope_local_base_freq (10000)
    rope_linear_factor: Optional[float] = None  #: gemma3 linear rope_scaling of the full-attention layers (1: none)
    rel_buckets: Optional[int] = None  #: t5 relative_attention_num_buckets (32)
    rel_max_distance: Optional[int] = None  #: t5 relative_attention_max_distance (128)
    gated: Optional[bool] = None  #: t5 gated-gelu (False: relu)
    clamp_len: Optional[int] = None  #: xlnet (none)
    causal: Optional[bool] = None  #: xlnet attn_type "uni" (False: "bi")
    image_size: Optional[int] = None  #: vit (224)
    patch_size: Optional[int] = None  #: vit (16)
    channels: Optional[int] = None  #: vit (3)
    embed_dim: Optional[int] = None  #: opt word_embed_proj_dim (d; e != d adds project_in)
    pre_norm: Optional[bool] = None  #: opt do_layer_norm_before (True)

    def _library(self) -> "_sanpath.FamilyOptions":
        o = _sanpath.FamilyOptions()
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None:
                setattr(o, f.name, value)
        return o


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
    family: Optional[str] = None,
    kv_heads: Optional[int] = None,
    rope_theta: float = 10000.0,
    family_options: Optional[FamilyOptions] = None,
    **options: Any,
) -> Model:
    """A seeded random model, exactly as ``sanpath init`` makes it (same options, same weights, same refusals:
    both ask the library, io/random_checkpoint.hpp).

    Defaults as the CLI: d_qk = d_v = d_model / heads (``head_dim`` sets both), d_ff = 4·d_model, BERT's
    structure (skip on, mlp residual, layernorm post, mask none) unless overridden,
    activation "gelu", ln_eps 1e-12.

    ``layout`` (one of :data:`LAYOUTS`): the model of ``sanpath init --layout X`` with
    the same options, so that ``random_model(..., layout=X).save_hf(folder, X)``
    writes the same checkpoint (``save_hf`` refuses, naming the field, a model the layout's files would
    hold as another model). With a layout the variant options ``skip``/``mlp``/``layernorm``/``mask`` are
    refused: the model's own variant is what its files are read with (GPT-2 pre-LN and causal, the BERT
    family post-LN unmasked). llama, mistral, qwen2 (and ``family="llama"``
    without a layout, ``init --family llama``): the Llama family's structure
    (RMSNorm, rotary with ``rope_theta``, ``kv_heads`` key/value heads, SwiGLU,
    pre-norm, causal; activation silu, ln_eps default 1e-5). xlnet, t5, gpt_neox,
    phi, opt, gemma, gemma2, vit, qwen3, gemma3: the family's own structure (docs/families.md);
    ``activation`` and ``ln_eps`` default to the family's (None), ``kv_heads`` (phi, gemma, gemma2, qwen3, gemma3; None: H)
    and ``rope_theta`` (gemma3: the full-attention layers' base) apply, and
    ``family_options`` (a :class:`FamilyOptions`) sets what its config.json would;
    each of its fields may be given as a keyword instead (``rotary_fraction=0.5``).
    A vit model takes images (:func:`pixels`) and no ``vocab``. An option of
    another family, or any family option without such a layout, raises
    :class:`InputError` naming it.
    """
    fields = {f.name for f in dataclasses.fields(FamilyOptions)}
    for name in options:
        if name not in fields:
            raise TypeError(f"random_model() got an unexpected keyword argument '{name}'")
    if options:
        given = dataclasses.asdict(family_options) if family_options is not None else {}
        given.update({k: v for k, v in options.items() if v is not None})
        family_options = FamilyOptions(**given)
    family_options = family_options if family_options is not None else FamilyOptions()
    return _sanpath.random_model(
        layers, heads, d_model, d_qk, d_v, head_dim, d_ff, init, std, bias_std, seed, shared_layers, activation,
        ln_eps, vocab, max_positions, *_variant_args(skip, mlp, layernorm, mask), layout, family, kv_heads,
        float(rope_theta), family_options._library())


def default_model() -> Model:
    """The embedded default model of ``sanpath collapse`` (random BERT-shaped, L=5, H=4, d=32, seed 0)."""
    return _sanpath.default_collapse_model()
