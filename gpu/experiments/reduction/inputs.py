"""The dot products' input vectors as the generator kernel writes them (``reduction_inputs.cu`` beside this file), in
NumPy: the host's side of the check that the device's data is what the formula says.

Element ``i`` of vector ``v`` (0 and 1: the -1/0/1 pair; 2 and 3: the uniform pair) under a run's 64-bit ``seed`` comes
from splitmix64's output number ``k = v * 2^40 + i + 1`` for that seed (Steele, Lea and Flood, "Fast splittable
pseudorandom number generators", 2014; Vigna's splitmix64.c): ``mix64(seed + k * GAMMA)`` modulo 2^64, a counter-based
hash, so any element can be computed on its own. Its bits become:

* -1/0/1: ``((h >> 32) * 3 >> 32) - 1``, each of -1, 0 and 1 with probability 1/3 (within 2^-32);
* uniform: ``((h >> 40) - 2^23) * 2^-23``, a value of [-1, 1) on a grid of 2^-23, exact in float32.
"""

from __future__ import annotations

import numpy as np

GAMMA = 0x9E3779B97F4A7C15  # splitmix64's increment (the golden ratio's 64-bit fraction)
MIX_1, MIX_2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB  # splitmix64's finaliser (Stafford's Mix13)
VECTOR_SHIFT = 40  # each vector's counters start at v * 2^40: vectors of up to 2^40 elements never overlap
TERNARY, UNIFORM = (0, 1), (2, 3)  # the vectors of each pair; the kernel's ``pair`` argument is 0 or 1
SEED_BITS = 64
# The elements the host checks of each vector: the first and last EDGE, and SPREAD runs of RUN elements spread evenly
# between them (6,144 elements a vector, in 18 copies of a few microseconds each, and the hash in NumPy).
EDGE, SPREAD, RUN = 2048, 16, 128

_U64 = np.uint64


def mix64(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser of each 64-bit word of ``z`` (uint64, arithmetic modulo 2^64)."""
    z = np.array(z, dtype=_U64, ndmin=1)  # arrays wrap modulo 2^64 silently; NumPy scalars would warn
    z = (z ^ (z >> _U64(30))) * _U64(MIX_1)
    z = (z ^ (z >> _U64(27))) * _U64(MIX_2)
    return z ^ (z >> _U64(31))


def hash_bits(seed: int, vector: int, index) -> np.ndarray:
    """The 64 bits element ``index`` (an array of indices) of ``vector`` is made from under ``seed``."""
    counters = (_U64(vector) << _U64(VECTOR_SHIFT)) + np.array(index, dtype=_U64, ndmin=1) + _U64(1)
    return mix64(_U64(seed) + counters * _U64(GAMMA))


def ternary_values(bits: np.ndarray) -> np.ndarray:
    """-1, 0 or 1 (float32) from each word of ``bits``: its top 32 bits scaled to 0, 1 or 2, minus 1."""
    return ((((bits >> _U64(32)) * _U64(3)) >> _U64(32)).astype(np.int64) - 1).astype(np.float32)


def uniform_values(bits: np.ndarray) -> np.ndarray:
    """A value of [-1, 1) (float32, exact) from each word of ``bits``: its top 24 bits less 2^23, times 2^-23."""
    return ((bits >> _U64(40)).astype(np.int64) - (1 << 23)).astype(np.float32) * np.float32(2.0 ** -23)


def values(seed: int, vector: int, index) -> np.ndarray:
    """Elements ``index`` of ``vector`` under ``seed``, as the generator kernel writes them (float32)."""
    bits = hash_bits(seed, vector, index)
    return ternary_values(bits) if vector in TERNARY else uniform_values(bits)


def draw_seed() -> int:
    """A fresh 64-bit seed from the operating system's entropy: each size of each run draws its own, and names it
    when its data fails a check (``values`` makes the same vectors from it again)."""
    return int(np.random.SeedSequence().generate_state(1, np.uint64)[0])


def checked_runs(n: int) -> list[tuple[int, int]]:
    """The (start, count) runs of elements the host checks in a vector of ``n``: the first and last ``EDGE`` and
    ``SPREAD`` runs of ``RUN`` spread evenly between them (the whole vector when it is that small), in order and
    not overlapping."""
    if n <= 2 * EDGE + SPREAD * RUN:
        return [(0, n)]
    runs = [(0, EDGE)]
    gap = (n - 2 * EDGE - SPREAD * RUN) // (SPREAD + 1)
    runs += [(EDGE + gap * (j + 1) + RUN * j, RUN) for j in range(SPREAD)]
    return [*runs, (n - EDGE, EDGE)]


def checked_indices(n: int) -> np.ndarray:
    """The indices of ``checked_runs(n)``, in order (int64)."""
    return np.concatenate([np.arange(start, start + count, dtype=np.int64) for start, count in checked_runs(n)])


def first_difference(seed: int, vector: int, index: np.ndarray, got: np.ndarray) -> str | None:
    """Where ``got`` (elements ``index`` of ``vector`` read back from the device) departs bit for bit from the formula
    under ``seed``, in words; None when every element matches."""
    expected = values(seed, vector, index)
    wrong = np.flatnonzero(expected.view(np.uint32) != np.ascontiguousarray(got, np.float32).view(np.uint32))
    if not wrong.size:
        return None
    at = int(wrong[0])
    return (f"element {int(index[at]):,} of vector {vector} is {got[at]!r}, the formula gives {expected[at]!r} "
            f"({wrong.size:,} of {got.size:,} checked elements differ)")
