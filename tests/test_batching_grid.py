"""Batching's point grid: the keys its declaration generates, and the points its sweep is handed, are exactly those of
the hand-written loops they replaced (copied here as the reference), over the defaults and unusual choices."""

from __future__ import annotations

import numpy as np
import pytest

from gpu.core import stats
from gpu.core.units import KiB, MiB, format_bytes
from gpu.experiments import batching
from gpu.experiments.batching import sweep as batching_sweep
from gpu.sweeps import harness
from tests.sweep_walk import walked
from tests.test_timing_methods import Board


def reference_points(params):
    """The declaration's ``Params.points()`` as it was written by hand."""
    for size in params.piece_sizes:
        for variant in params.variants:
            yield variant, size, params.pieces


def reference_walk(params):
    """The sweep's ``points()`` as it was written by hand: (label, bytes, timer, columns) in measurement order."""
    K = params.pieces
    for piece in params.piece_sizes:
        for variant in params.variants:
            yield (f"{batching.LABELS[variant]} · {K} × {format_bytes(piece)}", batching.bytes_moved(piece, K),
                   "host_clock_pack+cuda_event_copy" if variant == "packed" else "cuda_event",
                   {"variant": variant, "group": "batching", "direction": "h2d",
                    "piece_bytes": piece, "chunks": K})


CHOICES = [
    {},
    {"piece_sizes": [4 * MiB, 4, 1 * KiB]},  # unsorted input
    {"piece_sizes": [256], "pieces": 2, "variants": ["packed"]},  # one value each, the fewest pieces
    {"variants": ["one_copy", "separate"], "pieces": 4096, "piece_sizes": [64]},  # a given order, the most pieces
    {"piece_sizes": [64, 64, 16], "variants": ["packed", "packed", "one_copy"]},  # duplicates
    {"piece_sizes": []},  # empty (refused by the checks, still no points)
    {"variants": []},
]


@pytest.mark.parametrize("raw", CHOICES)
def test_the_generated_keys_are_the_hand_written_loops(raw):
    params = batching.parse_params(raw)
    assert list(params.points()) == list(reference_points(params))


def test_directly_built_params_keep_their_order():
    params = batching.Params(piece_sizes=[1024, 64], pieces=3, variants=["one_copy", "packed"])
    assert list(params.points()) == list(reference_points(params))


SMALL = [{"piece_sizes": [64, 16, 1 * KiB]}, {"piece_sizes": [256], "pieces": 2, "variants": ["packed"]},
         {"variants": ["one_copy", "separate"], "pieces": 4096, "piece_sizes": [64, 4]}]


@pytest.mark.parametrize("raw", SMALL)
def test_the_sweep_is_handed_the_points_it_built_by_hand(raw):
    params = batching.parse_params({**raw, "profile": "interactive"})
    assert walked(batching_sweep.BatchingSweep, params, lambda sweep: None) == list(reference_walk(params))


# --- the clock: the harness's single method (gpu/sweeps/timing_methods.py) on its simulated stream board -------------
def _measured(variant, pieces=3, piece=64):
    """``variant``'s sample function on the simulated stream board (each copy costs 0.25 ms), and the board."""
    board = Board()
    board.telemetry = None
    board.cuda.memcpy_htod_async = staticmethod(lambda dst, src, stream: board.operation(0.25, "copy")(stream))
    board.cuda.memset_d32 = staticmethod(lambda *a: None)
    params = batching.parse_params({"piece_sizes": [piece], "pieces": pieces, "variants": [variant]})
    sweep = batching_sweep.BatchingSweep(params, board, stats.get_profile("interactive"))
    sweep.ledger = board.ledger
    sweep.setup()
    words = piece // 4
    region = np.zeros((pieces, 2 * words), np.uint32)
    staging = np.zeros(pieces * words, np.uint32)
    state = (variant, piece, region[:, :words], None, staging, staging.reshape(pieces, words), 0x1000, None)
    return sweep.measure(harness.Point({}, variant, 0, "", state)), board


def test_k_separate_copies_are_one_issue_between_two_events_on_one_stream():
    sample, board = _measured("separate")
    assert sample() == pytest.approx(0.75)
    assert board.log == ["event s1", "copy s1", "copy s1", "copy s1", "event s1", "synchronize s1"]


def test_one_copy_is_one_issue_and_packing_adds_the_hosts_gather_to_it():
    sample, board = _measured("one_copy")
    assert sample() == pytest.approx(0.25) and board.log == ["event s1", "copy s1", "event s1", "synchronize s1"]
    sample, board = _measured("packed")
    assert 0.25 <= sample() < 100 and board.log == ["event s1", "copy s1", "event s1", "synchronize s1"]
