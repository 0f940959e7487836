"""Bank conflicts' point grid: the keys its declaration generates (the stride-1 reference included whichever strides and
layouts are chosen), and the points its sweep is handed, are exactly those of the hand-written loops they replaced
(copied here as the reference), over the defaults and unusual choices."""

from __future__ import annotations

import pytest

from gpu.experiments import bank_conflicts as bank
from gpu.experiments.bank_conflicts import sweep as bank_sweep
from tests.sweep_walk import StandInBoard, walked


def reference_points(params):
    """The declaration's ``Params.points()`` as it was written by hand."""
    if "strided" in params.groups:
        for word in params.word_sizes:
            for block in params.block_sizes:
                reference = (bank.variant_of("strided", "plain", word), block, 1, None, params.reads_per_thread)
                yield reference
                for layout in params.layouts:
                    for stride in params.strides:
                        point = (bank.variant_of("strided", layout, word), block, stride, None,
                                 params.reads_per_thread)
                        if point != reference:
                            yield point
    if "transpose" in params.groups:
        for word in params.word_sizes:
            for layout in params.layouts:
                yield bank.variant_of("transpose", layout, word), bank.TRANSPOSE_BLOCK, None, params.matrix_side, \
                    bank.TRANSPOSE_READS


def reference_walk(params, sm_count, threads_per_sm):
    """The sweep's ``points()`` as it was written by hand: (label, bytes, timer, columns) in measurement order."""
    for variant, block, stride, side, reads in reference_points(params):
        value = side if stride is None else stride
        word = bank.word_bytes_of(variant)
        if bank.group_of(variant) == "strided":
            threads = bank.strided_threads(sm_count, threads_per_sm, block)
            yield (f"{bank.LABELS[variant]} · stride {value} · block {block}", bank.strided_bytes(threads, reads, word),
                   "cuda_event_held",
                   {"variant": variant, "group": "strided", "direction": "shared", "block_size": block,
                    "elements": threads, "stride": value, "intensity": reads,
                    "shared_bytes_per_block": bank.SHARED_WORDS * word})
        else:
            yield (f"{bank.LABELS[variant]} · {value:,} × {value:,}", bank.transpose_bytes(value, word),
                   "cuda_event_l2_flushed_held",
                   {"variant": variant, "group": "transpose", "direction": "device", "block_size": block,
                    "elements": value * value, "matrix_side": value, "intensity": reads,
                    "shared_bytes_per_block": bank.tile_shared_bytes(variant)})


CHOICES = [
    {},
    {"strides": [32, 1, 8], "block_sizes": [1024, 32], "word_sizes": [8, 4]},  # unsorted input
    {"groups": ["strided"], "word_sizes": [8], "layouts": ["padded"], "strides": [4], "block_sizes": [64]},  # one
    {"groups": ["transpose"], "matrix_side": 1 << 10, "layouts": ["padded", "plain"]},  # transposes alone
    {"groups": ["transpose", "strided"], "layouts": ["padded"]},  # groups and layouts in the declared order
    {"strides": [2, 16], "layouts": ["plain"]},  # no stride 1 chosen: the reference is measured anyway
    {"strides": [1], "layouts": ["padded"]},  # stride 1 padded only: the reference, then the padded stride 1
    {"strides": [4, 4, 1], "word_sizes": [4, 4], "block_sizes": [128, 128], "groups": ["strided", "strided"]},
    {"strides": [], "groups": ["strided"]},  # empty (refused by the checks, still its reference points)
    {"groups": []},
    {"layouts": []},
    {"word_sizes": []},
    {"block_sizes": [], "groups": ["strided", "transpose"]},
    {"reads_per_thread": 1 << 16, "matrix_side": 1 << 14},
]


@pytest.mark.parametrize("raw", CHOICES)
def test_the_generated_keys_are_the_hand_written_loops(raw):
    params = bank.parse_params(raw)
    assert list(params.points()) == list(reference_points(params))


def test_directly_built_params_keep_their_order():
    params = bank.Params(groups=["transpose", "strided"], word_sizes=[8, 4], layouts=["padded", "plain"],
                         strides=[16, 2], block_sizes=[512, 64])
    assert list(params.points()) == list(reference_points(params))


@pytest.mark.parametrize("raw", [c for c in CHOICES if all(c.get(a, 1) for a in ("groups", "word_sizes",
                                                                                    "block_sizes"))])
def test_the_sweep_is_handed_the_points_it_built_by_hand(raw):
    params = bank.parse_params({**raw, "profile": "interactive", "matrix_side": raw.get("matrix_side", 1 << 10)})

    def timer(name):
        return type("Timer", (), {"timer_name": lambda self, hold=None: name})()

    def equip(sweep):
        sweep.reads_timer, sweep.transpose_timer = timer("cuda_event_held"), timer("cuda_event_l2_flushed_held")
        sweep.threads_per_sm, sweep.matrix = 1536, ("made",)  # the transposes' buffers: never allocated here

    got = walked(bank_sweep.BankConflictsSweep, params, equip, StandInBoard(sm_count=3, threads_per_sm=1536))
    assert got == list(reference_walk(params, 3, 1536))
