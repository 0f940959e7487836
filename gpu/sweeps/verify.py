"""How experiments check their outputs: a position-dependent pattern, a poison value, and a bit-exact comparison
that names the first wrong word. A wrong output raises ``VerificationError``: never a row."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from gpu.core.errors import VerificationError

POISON = np.uint32(0xDEADBEEF)  # written over an output before it is measured: a word left unwritten never passes

PATTERN_MULTIPLIER = 2654435761  # the same constant as pattern_word() in kernels/transfers.cu


def pattern_for(count: int, seed: int) -> np.ndarray:
    """A cheap, position-dependent pattern: a dropped, repeated or swapped chunk never verifies."""
    return (np.arange(count, dtype=np.uint32) * np.uint32(PATTERN_MULTIPLIER)) ^ np.uint32(seed & 0xFFFFFFFF)


_POOL: list[ThreadPoolExecutor] = []


def _verify_pool() -> ThreadPoolExecutor:
    """One small thread pool per process for verify_equal (created on first use; NumPy work only, no CUDA)."""
    if not _POOL:
        _POOL.append(ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1)),
                                        thread_name_prefix="verify"))
    return _POOL[0]


def verify_equal(expected: np.ndarray, actual: np.ndarray, what: str) -> None:
    """Bit-exact comparison; raises VerificationError naming the first wrong element.

    Compared in 4 MiB slices (as 64-bit words where both arrays allow it), so the comparison stays in cache
    and a correct 256 MiB result costs tens of milliseconds; only a wrong slice is searched word by word."""
    if expected.shape != actual.shape:
        raise VerificationError(f"{what}: got {actual.size} elements, expected {expected.size}")
    flat_e, flat_a = expected.reshape(-1), actual.reshape(-1)
    wide = (flat_e.dtype.itemsize == 4 and flat_e.size % 2 == 0 and flat_e.flags.c_contiguous
            and flat_a.flags.c_contiguous and flat_e.ctypes.data % 8 == 0 and flat_a.ctypes.data % 8 == 0)
    fast_e, fast_a = (flat_e.view(np.uint64), flat_a.view(np.uint64)) if wide else (flat_e, flat_a)
    step = (4 << 20) // fast_e.itemsize
    starts = range(0, fast_e.size, step)

    def slice_equal(start: int) -> bool:
        return bool(np.array_equal(fast_e[start:start + step], fast_a[start:start + step]))

    # NumPy releases the GIL while it compares, so large results are compared on several cores: a 256 MiB check
    # is then bound by host memory bandwidth, not one core (it runs after every Streams point).
    if len(starts) >= 8:
        equal = list(_verify_pool().map(slice_equal, starts))
    else:
        equal = [slice_equal(start) for start in starts]
    for start, same in zip(starts, equal, strict=True):
        if same:
            continue
        scale = 2 if wide else 1
        base = start * scale
        part_e, part_a = flat_e[base:base + step * scale], flat_a[base:base + step * scale]
        wrong = np.flatnonzero(part_e != part_a)
        total = int(np.count_nonzero(flat_e != flat_a))
        first = base + int(wrong[0])
        raise VerificationError(f"{what}: {total} of {expected.size} words wrong, first at word {first} "
                                f"(expected 0x{int(flat_e[first]):08x}, got 0x{int(flat_a[first]):08x})")


