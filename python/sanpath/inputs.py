"""Inputs: token ids, matrices X^0, images, files and batches, as the command line tool's input options."""

from __future__ import annotations

import os
from typing import Any, Optional, Sequence, Union

import numpy as np

from . import _sanpath
from ._sanpath import Batch, Input, InputError, Model

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
