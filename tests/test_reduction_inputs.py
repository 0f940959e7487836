"""The reduction's input formula on the host (gpu/experiments/reduction/inputs.py), the one the generator kernel
(reduction_inputs.cu) implements and the host's cross-check computes: splitmix64 against its published outputs and a
plain Python splitmix64 written here from its definition, the float mappings exact, and the check's sample of elements.
The kernels themselves are compared with this formula, whole vectors at 2^20 and 2^24, on the GPU
(tests/gpu/test_reduction_inputs_gpu.py)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from gpu.experiments.reduction import inputs

MASK = (1 << 64) - 1
SOURCE = Path(inputs.__file__).with_name("reduction_inputs.cu")


def splitmix64_outputs(seed: int, count: int) -> list[int]:
    """splitmix64 as Vigna's splitmix64.c writes it, in Python integers: the state advances by the golden gamma and
    each output is the state's mix."""
    state, out = seed & MASK, []
    for _ in range(count):
        state = (state + 0x9E3779B97F4A7C15) & MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        out.append(z ^ (z >> 31))
    return out


def test_the_hash_is_splitmix64_with_its_published_outputs():
    # The first five outputs for seed 1234567 (Rosetta Code, "Pseudo-random numbers/Splitmix64") and the first for
    # seed 0: vector 0's elements 0 to 4 are the generator's outputs 1 to 5.
    published = [6457827717110365317, 3203168211198807973, 9817491932198370423, 4593380528125082431,
                 16408922859458223821]
    assert splitmix64_outputs(1234567, 5) == published
    assert inputs.hash_bits(1234567, 0, np.arange(5)).tolist() == published
    assert inputs.hash_bits(0, 0, [0]).tolist() == [0xE220A8397B1DCDAF]


@pytest.mark.parametrize("seed", [0, 1, 0xDEADBEEF, MASK])
@pytest.mark.parametrize("vector", [0, 1, 2, 3])
def test_each_element_is_its_counters_splitmix64_output(seed, vector):
    """Element i of vector v is output v * 2^40 + i + 1 of splitmix64 seeded with the seed: checked by stepping a
    plain splitmix64 from the output just before the vector's first, and at a far index directly."""
    start = vector << inputs.VECTOR_SHIFT
    stepped = splitmix64_outputs((seed + start * 0x9E3779B97F4A7C15) & MASK, 64)
    assert inputs.hash_bits(seed, vector, np.arange(64)).tolist() == stepped
    far = (1 << 28) - 1
    assert inputs.hash_bits(seed, vector, [far]).tolist() == \
        splitmix64_outputs((seed + (start + far) * 0x9E3779B97F4A7C15) & MASK, 1)


def test_the_kernel_source_uses_the_same_constants():
    """The .cu's hash and mappings name the constants this module uses (the GPU test compares their outputs)."""
    text = SOURCE.read_text().lower()
    for constant in (inputs.GAMMA, inputs.MIX_1, inputs.MIX_2):
        assert f"0x{constant:016x}ull" in text
    assert re.search(rf"#define reduction_vector_shift {inputs.VECTOR_SHIFT}\b", text)
    assert "z >> 30" in text and "z >> 27" in text and "z >> 31" in text


def test_uniform_values_are_exact_float32_of_minus_one_to_one():
    bits = inputs.hash_bits(7, 2, np.arange(1 << 20))
    values = inputs.uniform_values(bits)
    assert values.dtype == np.float32 and values.min() >= -1.0 and values.max() < 1.0
    scaled = values.astype(np.float64) * 2.0**23  # exact: a float32 times a power of two
    assert (scaled == np.round(scaled)).all()  # on the grid of 2^-23
    assert np.array_equal(scaled.astype(np.int64), (bits >> np.uint64(40)).astype(np.int64) - (1 << 23))
    # The ends of the range, from the top 24 bits all 0 and all 1; every product of two is exact in float64.
    ends = inputs.uniform_values(np.array([0, MASK, 1 << 63], np.uint64))
    assert ends.tolist() == [-1.0, 1.0 - 2.0**-23, 0.0]
    other = inputs.uniform_values(inputs.hash_bits(7, 3, np.arange(1 << 20)))
    products = values.astype(np.float64) * other.astype(np.float64)
    assert np.array_equal(products * 2.0**46, scaled.astype(np.int64) * (other.astype(np.float64) * 2.0**23)
                          .astype(np.int64))


def test_ternary_values_are_minus_one_zero_and_one_in_thirds():
    draws = 1 << 20
    values = inputs.ternary_values(inputs.hash_bits(11, 0, np.arange(draws)))
    assert values.dtype == np.float32
    counts = {v: int((values == v).sum()) for v in (-1.0, 0.0, 1.0)}
    assert sum(counts.values()) == draws
    sigma = (draws * (1 / 3) * (2 / 3)) ** 0.5
    assert all(abs(count - draws / 3) < 5 * sigma for count in counts.values()), counts
    # The thresholds: top 32 bits below ceil(2^32 / 3) give -1, below ceil(2^33 / 3) give 0, the rest 1.
    low, high = -(-(1 << 32) // 3), -(-(1 << 33) // 3)
    edges = np.array([(t << 32) | 0xFFFFFFFF for t in (0, low - 1, low, high - 1, high, (1 << 32) - 1)], np.uint64)
    assert inputs.ternary_values(edges).tolist() == [-1.0, -1.0, 0.0, 0.0, 1.0, 1.0]


def test_values_pick_the_mapping_by_vector_and_the_same_seed_gives_the_same_vectors():
    index = np.arange(1000)
    assert set(np.unique(inputs.values(5, 1, index)).tolist()) == {-1.0, 0.0, 1.0}
    assert np.array_equal(inputs.values(5, 2, index), inputs.uniform_values(inputs.hash_bits(5, 2, index)))
    assert np.array_equal(inputs.values(5, 2, index), inputs.values(5, 2, index))
    assert not np.array_equal(inputs.values(5, 2, index), inputs.values(6, 2, index))
    assert not np.array_equal(inputs.values(5, 2, index), inputs.values(5, 3, index))


def test_a_drawn_seed_is_64_bits_and_fresh():
    seeds = {inputs.draw_seed() for _ in range(8)}
    assert len(seeds) == 8 and all(0 <= s <= MASK for s in seeds)


@pytest.mark.parametrize("n", [1 << 10, 1 << 12, 6144, 6145, 1 << 20, 1 << 28])
def test_the_checked_elements_are_the_ends_and_runs_spread_between_in_order(n):
    runs = inputs.checked_runs(n)
    ends = [(start, start + count) for start, count in runs]
    assert all(0 <= a < b <= n for a, b in ends)
    assert all(b1 <= a2 for (_, b1), (a2, _) in zip(ends, ends[1:], strict=False))  # in order, not overlapping
    assert ends[0][0] == 0 and ends[-1][1] == n
    if n <= 2 * inputs.EDGE + inputs.SPREAD * inputs.RUN:
        assert runs == [(0, n)]
    else:
        checked = 2 * inputs.EDGE + inputs.SPREAD * inputs.RUN
        assert len(runs) == inputs.SPREAD + 2 and sum(c for _, c in runs) == checked
        middle = [start for start, _ in runs[1:-1]]
        assert middle[0] >= inputs.EDGE and middle[-1] + inputs.RUN <= n - inputs.EDGE
        if n == 1 << 28:  # spread over the vector, not bunched: gaps of about n / 17
            gaps = np.diff([0, *middle, n])
            assert gaps.min() > n // 20


def test_a_single_flipped_bit_is_found_and_named():
    index = inputs.checked_indices(1 << 28)
    assert index.size == 2 * inputs.EDGE + inputs.SPREAD * inputs.RUN and (np.diff(index) > 0).all()
    got = inputs.values(99, 3, index)
    assert inputs.first_difference(99, 3, index, got) is None
    got.view(np.uint32)[3000] ^= 1  # the lowest mantissa bit of one element, in a run between the ends
    found = inputs.first_difference(99, 3, index, got)
    assert found is not None and f"element {int(index[3000]):,} of vector 3" in found and "1 of 6,144" in found
    assert inputs.first_difference(98, 3, index, inputs.values(99, 3, index)) is not None
