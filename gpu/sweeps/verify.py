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


def verify_pool() -> ThreadPoolExecutor:
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
        equal = list(verify_pool().map(slice_equal, starts))
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



PATTERN_SLICE_WORDS = 1 << 20  # 4 MiB of words: a slice's pattern and the words compared with it stay in cache
_PATTERN_BASE: list[np.ndarray] = []


def _pattern_base() -> np.ndarray:
    """``i × PATTERN_MULTIPLIER`` for the first PATTERN_SLICE_WORDS words (made once): word ``lo + i``'s pattern is
    then this plus ``lo × PATTERN_MULTIPLIER``, xor the seed, all modulo 2^32."""
    if not _PATTERN_BASE:
        _PATTERN_BASE.append(np.arange(PATTERN_SLICE_WORDS, dtype=np.uint32) * np.uint32(PATTERN_MULTIPLIER))
    return _PATTERN_BASE[0]


def _slice_pattern(lo: int, hi: int, seed: int, out: np.ndarray) -> np.ndarray:
    """``out`` := the pattern of ``seed`` at words ``lo`` to ``hi`` (as ``pattern_for`` gives them there)."""
    np.add(_pattern_base()[:hi - lo], np.uint32((lo * PATTERN_MULTIPLIER) & 0xFFFFFFFF), out=out)
    np.bitwise_xor(out, np.uint32(seed & 0xFFFFFFFF), out=out)
    return out


def write_pattern(host: np.ndarray, seed: int) -> None:
    """``host`` (uint32 words) := the pattern of ``seed``, written by the CPU in slices on the verify pool: for a
    pageable buffer, where the GPU's fill and a copy down would cross the link at pageable speed (about 80 ms a GiB
    on an H200 host). Every page of ``host`` is written, so none faults during a later sample."""
    flat = host.reshape(-1)
    in_slices(flat.size, lambda lo, hi: _slice_pattern(lo, hi, seed, flat[lo:hi]), PATTERN_SLICE_WORDS)


def check_pattern(host: np.ndarray, seed: int, label: str) -> None:
    """Raise ``VerificationError`` unless ``host`` (uint32 words) is the pattern of ``seed``, compared by the CPU in
    slices on the verify pool, bit-exact, naming the first wrong word as ``PatternChecker.check`` does. For a pageable
    destination: copying it back to the GPU to check it there crosses the link at pageable speed (170 ms a GiB on an
    H200 host)."""
    flat = host.reshape(-1)

    def slice_equal(lo: int, hi: int) -> bool:
        return bool(np.array_equal(_slice_pattern(lo, hi, seed, np.empty(hi - lo, np.uint32)), flat[lo:hi]))

    starts = range(0, flat.size, PATTERN_SLICE_WORDS)
    ends = [min(lo + PATTERN_SLICE_WORDS, flat.size) for lo in starts]
    equal = list(verify_pool().map(slice_equal, starts, ends)) if len(starts) > 1 else [
        slice_equal(lo, hi) for lo, hi in zip(starts, ends, strict=True)]
    if all(equal):
        return
    wrong = first = 0
    for lo, hi, same in zip(starts, ends, equal, strict=True):
        if same:
            continue
        bad = np.flatnonzero(_slice_pattern(lo, hi, seed, np.empty(hi - lo, np.uint32)) != flat[lo:hi])
        first = first if wrong else lo + int(bad[0])
        wrong += bad.size
    expected = ((first * PATTERN_MULTIPLIER) & 0xFFFFFFFF) ^ (seed & 0xFFFFFFFF)
    raise VerificationError(f"{label}: {wrong} of {flat.size} words wrong, first at word {first} "
                            f"(expected 0x{expected:08x}, got 0x{int(flat[first]):08x})")


def in_slices(count: int, fill, step: int = 1 << 20) -> None:
    """Call ``fill(lo, hi)`` over ``range(count)`` in slices of ``step``, on the verify pool (NumPy releases the GIL):
    an expected result of 2^26 elements is then computed on several cores (0.32 s on one core for a four-field sum
    on an H100's host)."""
    starts = range(0, count, step)
    list(verify_pool().map(lambda lo: fill(lo, min(lo + step, count)), starts))


def transposed_equal(out: np.ndarray, src: np.ndarray, band: int) -> bool:
    """Whether ``out`` (rows × cols) equals ``src`` (cols × rows) transposed, compared a band of ``band`` columns of
    ``out`` at a time on the verify pool: each band of ``src`` is first transposed into a buffer, so both sides of the
    comparison are read in order (against the transposed view itself it was 4-5× slower: 0.66 s for 256 MiB at a
    stride of 64, on one core)."""
    rows, cols = out.shape

    def band_equal(c0: int) -> bool:
        block = src[c0:c0 + band]
        want = np.empty((rows, block.shape[0]), out.dtype)
        np.copyto(want, block.T)
        return bool(np.array_equal(out[:, c0:c0 + band], want))

    starts = range(0, cols, max(1, band))
    return all(verify_pool().map(band_equal, starts)) if len(starts) >= 8 else all(map(band_equal, starts))


class PatternChecker:
    """The check pattern on one GPU, written and counted by kernels there (transfers.cu ``pattern_fill`` and
    ``pattern_mismatches``: the words of ``pattern_for``), so a 1 GiB destination is checked whole in milliseconds.

    A sweep fills its source with one seed's pattern, poisons the destination (and a guard after it) with another
    seed's before each copy (two seeds differ in every word, so a word the copy did not write never passes), then
    ``check``s the destination whole and the guard: a short, long, shifted or partial copy raises
    ``VerificationError`` naming the first wrong word. Pointers are device addresses of memory this GPU can read:
    its own, a peer's over peer access, or mapped pinned host memory. Runs with this GPU's context current."""

    BLOCK = 256

    def __init__(self, gpu, ledger):
        self.gpu, self.cuda = gpu, gpu.cuda
        self.fill_kernel = gpu.kernel("transfers", "pattern_fill")
        self.fill_kernel.prepare("PQI")
        self.count_kernel = gpu.kernel("transfers", "pattern_mismatches")
        self.count_kernel.prepare("PQIP")
        self.found = ledger.device_buffer(16)

    def _grid(self, words: int) -> tuple[int, int]:
        return (max(1, min(-(-words // self.BLOCK), self.gpu.sm_count * 16)), 1)

    def fill(self, pointer: int, words: int, seed: int) -> None:
        """``words`` words at ``pointer`` := the pattern of ``seed`` (queued on the default stream)."""
        self.fill_kernel.prepared_call(self._grid(words), (self.BLOCK, 1, 1), int(pointer), np.uint64(words),
                                       np.uint32(seed))

    def poison(self, pointer: int, words: int, guard_words: int, seed: int) -> None:
        """A destination of ``words`` words and the ``guard_words`` after it := the pattern of ``seed``, each from its
        own start (as ``check`` reads them)."""
        self.fill(pointer, words, seed)
        if guard_words:
            self.fill(int(pointer) + 4 * words, guard_words, seed)

    def mismatches(self, pointer: int, words: int, seed: int) -> tuple[int, int]:
        """(wrong words, the first of them) of ``words`` words at ``pointer`` against the pattern of ``seed``."""
        self.cuda.memcpy_htod(self.found, np.array([0, np.iinfo(np.uint64).max], dtype=np.uint64))
        self.count_kernel.prepared_call(self._grid(words), (self.BLOCK, 1, 1), int(pointer), np.uint64(words),
                                        np.uint32(seed), self.found)
        found = np.empty(2, dtype=np.uint64)
        self.cuda.memcpy_dtoh(found, self.found)
        return int(found[0]), int(found[1])

    def check(self, pointer: int, words: int, seed: int, label: str, guard_words: int = 0,
              guard_seed: int | None = None) -> None:
        """Raise ``VerificationError`` unless the ``words`` words at ``pointer`` are the pattern of ``seed`` and the
        ``guard_words`` after them still hold the poison of ``guard_seed`` (as ``poison`` wrote it)."""
        wrong, first = self.mismatches(pointer, words, seed)
        if wrong:
            got = np.empty(1, dtype=np.uint32)
            self.cuda.memcpy_dtoh(got, int(pointer) + 4 * first)
            expected = ((first * PATTERN_MULTIPLIER) & 0xFFFFFFFF) ^ (seed & 0xFFFFFFFF)
            raise VerificationError(f"{label}: {wrong} of {words} words wrong, first at word {first} "
                                    f"(expected 0x{expected:08x}, got 0x{int(got[0]):08x})")
        if guard_words:
            wrong, first = self.mismatches(int(pointer) + 4 * words, guard_words, guard_seed)
            if wrong:
                raise VerificationError(f"{label}: the copy wrote past its end ({wrong} of the {guard_words} words "
                                        f"after it changed, first at word {words + first})")
