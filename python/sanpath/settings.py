"""The process-wide settings of sanpath: threads, the memory budget, the product kernels, MPI notes."""

from __future__ import annotations

from typing import Optional

from . import _sanpath

__version__ = "0.1.0"  # as pyproject.toml


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
