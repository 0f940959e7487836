"""FMA's point grid: the keys its declaration generates, and the points its sweep is handed, are exactly those of the
hand-written loops they replaced (copied here as the reference), over the defaults and unusual choices."""

from __future__ import annotations

import pytest

from gpu.experiments import fma
from gpu.experiments.fma import sweep as fma_sweep
from tests.sweep_walk import StandInBoard, walked


def reference_points(params):
    """The declaration's ``Params.points()`` as it was written by hand."""
    for precision in params.precisions:
        for block in params.block_sizes:
            for chains in params.chains:
                yield precision, block, chains, params.fmas_per_thread


def reference_walk(params, sm_count, threads_per_sm, timer):
    """The sweep's ``points()`` as it was written by hand: (label, bytes, timer, columns) in measurement order."""
    for precision, block, chains, fmas in reference_points(params):
        threads = fma.grid_blocks(sm_count, threads_per_sm, block) * block
        yield (f"{fma.LABELS[precision]} · {chains} chains · block {block}", threads * fma.ITEM_BYTES[precision],
               timer, {"variant": precision, "group": "fma", "direction": "device", "block_size": block,
                       "elements": threads, "chains": chains, "intensity": fmas})


CHOICES = [
    {},
    {"precisions": ["fp64", "fp32"], "chains": [16, 1, 4], "block_sizes": [1024, 32, 96]},  # unsorted input
    {"precisions": ["fp64"], "chains": [8], "block_sizes": [64], "fmas_per_thread": 1 << 20},  # one value each
    {"precisions": ["fp32", "fp32", "fp64"], "chains": [2, 2, 1], "block_sizes": [128, 128]},  # duplicates
    {"precisions": [], "chains": [1]},  # empty (refused by the checks, still no points)
    {"chains": []},
    {"block_sizes": []},
]


@pytest.mark.parametrize("raw", CHOICES)
def test_the_generated_keys_are_the_hand_written_loops(raw):
    params = fma.parse_params(raw)
    assert list(params.points()) == list(reference_points(params))


def test_directly_built_params_keep_their_order():
    params = fma.Params(precisions=["fp64", "fp32"], chains=[4, 1], block_sizes=[512, 256])
    assert list(params.points()) == list(reference_points(params))


@pytest.mark.parametrize("raw", [c for c in CHOICES if all(c.get(a, 1) for a in ("precisions", "chains",
                                                                                    "block_sizes"))])
def test_the_sweep_is_handed_the_points_it_built_by_hand(raw):
    params = fma.parse_params({**raw, "profile": "interactive"})
    board = StandInBoard(sm_count=3, threads_per_sm=1536)

    def equip(sweep):
        sweep.timer = type("Timer", (), {"timer_name": lambda self, hold=None: "cuda_event_held"})()
        sweep.threads_per_sm = 1536

    got = walked(fma_sweep.FmaSweep, params, equip, board)
    assert got == list(reference_walk(params, 3, 1536, "cuda_event_held"))
