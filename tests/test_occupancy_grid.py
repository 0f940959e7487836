"""Occupancy's point grid: the keys its declaration generates, and the points its sweep is handed (block sizes coarse
first, both kernels at each), are exactly those of the hand-written loops they replaced (copied here as the
reference), over the defaults and unusual choices."""

from __future__ import annotations

import pytest

from gpu.experiments import occupancy_sweep as occupancy
from gpu.experiments.occupancy_sweep import sweep as occupancy_sweep
from gpu.experiments.order import coarse_first
from tests.sweep_walk import walked


def reference_points(params):
    """The declaration's ``Params.points()`` as it was written by hand."""
    for kernel in params.kernels:
        extra = params.extra_registers if kernel == "chase" else 0
        for block in params.block_sizes:
            yield kernel, block, extra, params.dynamic_shared_bytes


def reference_walk(params, timer):
    """The sweep's ``points()`` as it was written by hand: (label, bytes, timer, columns) in measurement order."""
    points = list(reference_points(params))
    kernels = list(dict.fromkeys(p[0] for p in points))
    rank = {b: r for r, b in enumerate(coarse_first(params.block_sizes))}
    for kernel, block, extra, _ in sorted(points, key=lambda p: (rank[p[1]], kernels.index(p[0]))):
        stream = kernel == "stream"
        yield (f"{occupancy.LABELS[kernel]} · block {block}",
               2 * occupancy.STREAM_ELEMENTS * 4 if stream else
               occupancy.CHASE_THREADS * occupancy.CHASE_STEPS * 4, timer,
               {"variant": kernel, "group": "occupancy", "direction": "device", "block_size": block,
                "elements": occupancy.STREAM_ELEMENTS if stream else occupancy.CHASE_THREADS,
                "extra_registers": extra, "registers_per_thread": None,
                "shared_bytes_per_block": None, "theoretical_occupancy": None})


CHOICES = [
    {},
    {"block_sizes": [1024, 32, 512, 96], "kernels": ["chase", "stream"]},  # unsorted input, a given kernel order
    {"block_sizes": [64], "kernels": ["chase"], "extra_registers": 128, "dynamic_shared_bytes": 48 * 1024},  # one
    {"kernels": ["stream"], "extra_registers": 64},  # register pressure asked for, only the copy (which takes none)
    {"block_sizes": [128, 128, 64], "kernels": ["stream", "stream", "chase"], "extra_registers": 32},  # duplicates
    {"block_sizes": [32, 64, 96, 128, 160, 192, 224, 256, 288]},  # coarse first over an odd count
    {"kernels": []},  # empty (refused by the checks, still no points)
    {"block_sizes": []},
]


@pytest.mark.parametrize("raw", CHOICES)
def test_the_generated_keys_are_the_hand_written_loops(raw):
    params = occupancy.parse_params(raw)
    assert list(params.points()) == list(reference_points(params))


def test_directly_built_params_keep_their_order():
    params = occupancy.Params(block_sizes=[256, 64, 1024], kernels=["chase", "stream"], extra_registers=32)
    assert list(params.points()) == list(reference_points(params))


@pytest.mark.parametrize("raw", [c for c in CHOICES if c.get("kernels", 1) and c.get("block_sizes", 1)])
def test_the_sweep_is_handed_the_points_it_built_by_hand_block_sizes_coarse_first(raw):
    params = occupancy.parse_params({**raw, "profile": "interactive"})

    def equip(sweep):
        sweep.timer = type("Timer", (), {"timer_name": lambda self, hold=None: "cuda_event_l2_flushed_held"})()

    def measured(point):  # the sweep's measure reads the kernel's static shared memory (none) and adds the spoiler's
        point.columns["shared_bytes_per_block"] = params.dynamic_shared_bytes

    got = walked(occupancy_sweep.OccupancySweep, params, equip, measured=measured)
    assert got == list(reference_walk(params, "cuda_event_l2_flushed_held"))
    if len(params.block_sizes) > 2:  # the two ends first: both curves take shape together
        assert [label.rsplit(" ", 1)[1] for label, *_ in got[:2 * len(params.kernels)]] == \
            [str(b) for b in (params.block_sizes[0], params.block_sizes[-1]) for _ in params.kernels]
