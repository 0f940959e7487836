"""The peers experiment's point grid, generated from its declared axes, against the loop its declaration wrote by hand
before (copied here as the reference): the same keys in the same order for every variant alone and all together, on
sets of 2, 4 and 8 GPUs (the whole matrix and the sampled plan), the latency chase under each method, the host
variants, named pairs and unusual choices."""

from __future__ import annotations

import pytest

from gpu.core.units import KiB, MiB
from gpu.experiments import peers


def hand_written_points(params):
    """``Params.points()`` as the declaration wrote it."""
    for variant in params.variants:
        if variant in peers.HOST_VARIANTS:
            for gpu in params.gpu_list():
                for size in params.sizes:
                    for method in params.methods:
                        yield variant, gpu, None, size, peers.TIMERS[method]
            continue
        for source, destination in params.pairs_for(variant):
            for size in params.sizes:
                if variant == "latency":
                    yield variant, source, destination, size, peers.LATENCY_TIMER
                    continue
                for method in params.methods:
                    yield variant, source, destination, size, peers.TIMERS[method]


def resolved(raw: dict, gpus: int):
    return peers.with_devices(peers.parse_params(raw), list(range(gpus)))


ONE_BY_ONE = [({"variants": [v], "methods": m, "sizes": [4 * KiB, MiB]}, n)
              for v in peers.VARIANTS for m in (["single"], ["batched"], ["batched", "single"]) for n in (2, 4, 8)]
UNUSUAL = [
    ({}, 2), ({}, 4), ({}, 8), (peers.FULL_SWEEP, 2), (peers.FULL_SWEEP, 8),
    ({"variants": list(peers.VARIANTS), "methods": ["single", "batched"], "sizes": [MiB, 4 * KiB, MiB]}, 4),
    ({"variants": ["latency"], "methods": ["batched"]}, 2),  # the chase is one launch a sample whatever the method
    ({"variants": ["latency", "ce_read"], "methods": ["single", "batched"]}, 8),
    ({"variants": list(peers.HOST_VARIANTS), "methods": ["batched", "single"]}, 4),
    ({"variants": ["d2h_alone", "ce_write", "h2d_all"]}, 8),  # declared order, whatever the order asked
    ({"pairs": ["1-0", "0-2", "1-0", "2>2", "bad"], "variants": list(peers.VARIANTS)}, 8),  # named: measured whole
    ({"pairs": ["3-1"], "variants": ["latency", "h2d_alone"], "methods": ["single"]}, 4),
    ({"gpus": [3, 1, 2], "variants": list(peers.VARIANTS)}, 4),
    ({"gpus": [5, 0, 7, 2, 6], "variants": ["sm_read", "ce_read"]}, 8),  # 5 GPUs: sampled, in the given order
    ({"whole_matrix_gpus": 8, "variants": ["ce_bidir", "sm_write"]}, 8),
    ({"whole_matrix_gpus": 2, "variants": ["ce_write", "ce_read"]}, 4),
    ({"gpus": [1], "variants": list(peers.VARIANTS)}, 4),  # one GPU: no pair, host rows only
    ({"variants": []}, 2), ({"sizes": []}, 2), ({"methods": []}, 2),
]


@pytest.mark.parametrize("raw,gpus", ONE_BY_ONE + UNUSUAL)
def test_the_generated_grid_is_the_hand_written_loop_key_for_key(raw, gpus):
    params = resolved(raw, gpus)
    reference = list(hand_written_points(params))
    assert list(params.points()) == reference
    assert len(reference) == len(set(reference))


def test_the_point_count_check_counts_the_grid():
    params = resolved({**peers.FULL_SWEEP, "sizes": [4 * KiB * 2**i for i in range(16)]}, 8)
    count = len(list(hand_written_points(params)))
    assert count > peers.MAX_POINTS
    reasons = peers.invalid_reasons(params, None)
    assert any(f"{count} points requested; at most {peers.MAX_POINTS}" in r for r in reasons)
