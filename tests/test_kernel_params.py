"""Parameter checks and bookkeeping of the kernel experiments (no GPU)."""

import numpy as np
import pytest

from gpu.core.limits import Limits
from gpu.experiments import coalescing, occupancy_sweep, reduction

GiB = 1024**3
H200 = Limits(139 * GiB, 140 * GiB, 16 * GiB, 120 * GiB, 1024, 32)


@pytest.mark.parametrize("module,raw,message", [
    (coalescing, {"block_sizes": [1025]}, "block size 1025 must be from 32 to 1024"),
    (coalescing, {"block_sizes": [0]}, "block size 0 must be from 32 to 1024"),
    (coalescing, {"block_sizes": [100]}, "block size 100 is not a multiple of 32 (the warp size)"),
    (coalescing, {"elements": 1000}, "elements 1000 must be a power of two"),
    (coalescing, {"strides": [3]}, "stride 3 must be a power of two from 1 to 64"),
    (coalescing, {"offsets": [33]}, "offset 33 must be from 0 to 32"),
    (coalescing, {"groups": ["diagonal"]}, "unknown group 'diagonal'"),
    (reduction, {"sizes": [1 << 29]}, "vector size 536870912 must be a power of two from 1024 to 268435456"),
    (reduction, {"block_sizes": [96]}, "needs a power of two"),
    (reduction, {"variants": ["magic"]}, "unknown variant 'magic'"),
    (occupancy_sweep, {"extra_registers": 7}, "unknown register pressure '7' (known: 0, 32, 64, 128)"),
    (occupancy_sweep, {"dynamic_shared_bytes": 300 * 1024}, "must be 0 … 232448 B"),
    (occupancy_sweep, {"kernels": []}, "choose at least one kernel"),
])
def test_bad_parameters_are_explained(module, raw, message):
    reasons = module.invalid_reasons(module.parse_params(raw), H200)
    assert any(message in r for r in reasons), reasons


def test_device_memory_limit_names_the_numbers():
    small = Limits(2 * GiB, 4 * GiB, 16 * GiB, 120 * GiB, 1024, 32)
    [reason] = coalescing.invalid_reasons(coalescing.parse_params({"elements": 1 << 28}), small)
    assert "needs 6.25 GiB of device memory" in reason and "2 GiB is free" in reason


def test_shared_tree_block_rule_only_applies_when_it_runs():
    params = reduction.parse_params({"block_sizes": [96], "variants": ["grid_stride"]})
    assert reduction.invalid_reasons(params, H200) == []


def test_unknown_parameters_and_non_numbers_are_refused():
    from gpu.core.errors import ValidationError

    with pytest.raises(ValidationError, match="unknown parameter"):
        coalescing.parse_params({"blocks": [256]})
    with pytest.raises(ValidationError, match="whole numbers"):
        reduction.parse_params({"sizes": ["big"]})


def test_coalescing_always_measures_the_device_copy_reference():
    params = coalescing.parse_params({"groups": ["strided"], "strides": [1, 64], "elements": 1 << 20})
    variants = [p[0] for p in params.points()]
    assert variants[:3] == ["memcpy_dtod", "copy_f32", "copy_f4"] and variants.count("strided") == 2


def test_strided_permutation_reads_every_element_once_with_warp_neighbours_apart():
    perm = coalescing.strided_permutation(1 << 12, 8)
    assert sorted(perm) == list(range(1 << 12))
    assert perm[1] - perm[0] == 8


def test_bytes_count_useful_reads_and_writes():
    assert coalescing.bytes_moved("copy_f4", 1 << 20, 1024) == 8 << 20
    assert coalescing.bytes_moved("aos_sum", 1 << 20, 1024) == 20 << 20
    assert coalescing.bytes_moved("transpose_padded", 1 << 20, 1024) == 8 << 20
    assert reduction.bytes_moved(1 << 28) == 2 << 30


def test_register_pressure_applies_to_the_latency_bound_kernel_only():
    points = list(occupancy_sweep.parse_params({"block_sizes": [256], "extra_registers": 64}).points())
    assert ("stream", 256, 0, 0) in points and ("chase", 256, 64, 0) in points


@pytest.mark.parametrize("nodes", [1 << 10, (1 << 22) + 17, 3 << 22])
def test_chase_cycle_visits_every_node_and_is_the_permutation_of_its_seed(nodes):
    """One cycle through every node, linked in slices (the last slice wraps to the start), in the order of
    ``rng.permutation`` of its seed: the chase the recordings measured (before it was linked in slices)."""
    from gpu.experiments.occupancy_sweep.sweep import chase_cycle

    nxt = chase_cycle(nodes, seed=1)
    order = np.random.default_rng(1).permutation(nodes)
    assert (nxt[order] == np.roll(order, -1)).all()
    node, seen = 0, set()
    for _ in range(min(nodes, 1 << 10)):
        seen.add(node)
        node = int(nxt[node])
    assert len(seen) == min(nodes, 1 << 10)
    assert np.unique(nxt).size == nodes


@pytest.mark.parametrize("stride", [1, 2, 8, 64])
def test_strided_check_matches_the_gather_without_an_index_array_and_names_a_wrong_word(stride):
    from gpu.core.errors import VerificationError
    from gpu.experiments.coalescing import strided_permutation
    from gpu.experiments.coalescing.sweep import verify_strided

    n = 1 << 20
    source = np.random.default_rng(stride).integers(0, 4096, n).astype(np.float32)
    got = source[strided_permutation(n, stride)]  # what the kernel must write
    verify_strided(source, got.copy(), stride, "strided")
    got[n - 3] += 1
    with pytest.raises(VerificationError, match=f"1 of {n} words wrong, first at word {n - 3}"):
        verify_strided(source, got, stride, "strided")


def test_transpose_check_compares_tile_by_tile_and_names_a_wrong_word():
    from gpu.core.errors import VerificationError
    from gpu.experiments.coalescing.sweep import verify_transpose

    side = 1024
    matrix = np.arange(side * side, dtype=np.float32).reshape(side, side)
    got = np.ascontiguousarray(matrix.T).ravel()
    verify_transpose(matrix, got.copy(), "transpose")
    got[5 * side + 700] = -1
    with pytest.raises(VerificationError, match=f"first at word {5 * side + 700}"):
        verify_transpose(matrix, got, "transpose")


def test_exact_inputs_are_small_integers_the_same_for_a_seed_across_slices():
    from gpu.sweeps._kernels import SLICE, small_int_floats

    count = 2 * SLICE + 3  # three slices, the last one short
    values = small_int_floats(count, seed=11)
    assert values.dtype == np.float32 and values.size == count
    assert values.min() >= 0 and values.max() <= 4095 and (values == np.round(values)).all()
    assert np.array_equal(values, small_int_floats(count, seed=11))
    assert not np.array_equal(values, small_int_floats(count, seed=12))
    assert not np.array_equal(values[:SLICE], values[SLICE:2 * SLICE])  # each slice draws its own values
    assert small_int_floats(0, seed=1).size == 0


@pytest.mark.parametrize("variant", ["aos_sum", "aos_x", "soa_sum", "soa_x"])
def test_layout_expectations_match_the_fields_laid_out_one_after_another(variant):
    from gpu.experiments.coalescing import four_field_sum
    from gpu.experiments.coalescing.sweep import layout_expected

    n = 1 << 20
    host = np.random.default_rng(3).integers(0, 4096, n + 32).astype(np.float32)
    fields = np.concatenate([host[i:i + n] for i in range(4)])  # the device's x|y|z|w, built the slow way
    structs, arrays = fields.reshape(n, 4), fields.reshape(4, n)
    want = {"aos_sum": four_field_sum(*(structs[:, i] for i in range(4))), "aos_x": 2 * structs[:, 0],
            "soa_sum": four_field_sum(*arrays), "soa_x": 2 * arrays[0]}[variant]
    assert np.array_equal(layout_expected(host, n, variant), want)
