"""The point grids of device_copy, host_latency, managed and pools, generated from their declared axes, against the
loops each declaration wrote by hand before (copied here as the reference): the same keys in the same order for the
defaults and for unusual choices (one value, unsorted input, duplicates, every variant, empty lists)."""

from __future__ import annotations

import pytest

from gpu.core.units import GiB, KiB, MiB
from gpu.experiments import device_copy, host_latency, managed, pools


# --- the hand-written loops, as the declarations had them -----------------------------------------------------------
def device_copy_points(params):
    for size in params.sizes:
        for variant in params.variants:
            for method in params.methods:
                yield variant, size, device_copy.TIMERS.get(method, method)


def host_latency_points(params):
    for variant in params.variants:
        for size in params.sizes:
            yield variant, size


def managed_points(params):
    for size in params.sizes:
        for variant in params.variants:
            yield variant, size


def pools_points(params):
    for size in params.sizes:
        for variant in params.variants:
            yield variant, size


CASES = {
    device_copy: (device_copy_points, [
        {}, {"sizes": [4 * KiB]}, {"sizes": [GiB, 4 * KiB, 64 * KiB, 4 * KiB]},
        {"variants": ["l2_copy", "copy_engine"]},
        {"variants": ["sm_copy", "sm_copy", "l2_copy"], "methods": ["batched", "single"]}, {"methods": ["batched"]},
        {"sizes": [4 * GiB, 4], "variants": ["l2_copy"], "methods": ["single"]}, {"sizes": []}, {"variants": []},
        {"methods": []}]),
    host_latency: (host_latency_points, [
        {}, {"sizes": [512]}, {"variants": ["device", "mapped"]}, {"sizes": [GiB, 4 * KiB, 4 * KiB, 256 * KiB]},
        {"variants": ["device"], "sizes": [1024, 512]}, {"variants": []}, {"sizes": []}]),
    managed: (managed_points, [
        {}, {"sizes": [MiB]}, {"variants": ["resident", "device", "first_touch"]},
        {"sizes": [8 * GiB, MiB, 64 * MiB, MiB], "variants": ["after_prefetch", "prefetch"]}, {"variants": []},
        {"sizes": []}]),
    pools: (pools_points, [
        {}, {"sizes": [4]}, {"variants": ["pinned_pooled", "device_per_call"]},
        {"sizes": [MiB, 4 * KiB, MiB, 16], "variants": ["device_pooled", "device_pooled"]}, {"variants": []},
        {"sizes": []}]),
}
PARAMETERS = [(module, raw) for module, (_, raws) in CASES.items() for raw in raws]


@pytest.mark.parametrize("module,raw", PARAMETERS, ids=[f"{m.NAME}-{i}" for i, (m, _) in enumerate(PARAMETERS)])
def test_the_generated_grid_is_the_hand_written_loop_key_for_key(module, raw):
    params = module.parse_params(raw)
    reference = list(CASES[module][0](params))
    assert list(params.points()) == reference
    assert len(reference) == len(set(reference))  # no key twice: a row is matched to its point by its key


@pytest.mark.parametrize("module", list(CASES))
def test_every_key_names_the_declared_key_columns(module):
    for point in module.parse_params({}).points():
        assert len(point) == len(module.KEY_COLUMNS)


def test_device_copys_point_count_check_counts_the_grid():
    params = device_copy.parse_params({"sizes": list(range(4, 4 * 401, 4)), "variants": list(device_copy.VARIANTS),
                                       "methods": list(device_copy.METHODS)})
    assert len(list(params.points())) == 400 * 3 * 2
    assert any(f"{400 * 3 * 2} points requested; at most {device_copy.MAX_POINTS}" in r
               for r in device_copy.invalid_reasons(params, None))
    fits = device_copy.parse_params({"sizes": list(range(4, 4 * 334, 4)), "variants": ["sm_copy", "copy_engine"]})
    assert len(list(fits.points())) == 333 * 2 * 2 and device_copy.invalid_reasons(fits, None) == []
