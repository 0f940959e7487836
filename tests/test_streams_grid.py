"""Streams' point grid: the keys its declaration generates (pageable memory at its one lesson configuration unless
asked for everywhere, the paired both-ways rows, the bidirectional copies), and the points its sweep is handed, are
exactly those of the hand-written loops they replaced (copied here as the reference), over the defaults and unusual
choices."""

from __future__ import annotations

import numpy as np
import pytest

from gpu.core import overlap, text
from gpu.core.units import KiB, MiB, format_bytes
from gpu.experiments import streams
from gpu.experiments.streams import sweep as streams_sweep
from tests.sweep_walk import walked
from tests.test_timing_methods import Board


def reference_points(params):
    """The declaration's ``Params.points()`` as it was written by hand."""
    n = params.elements
    for host in params.host_memory:
        chunk_counts, stream_counts = params.counts(host)
        for intensity in params.intensities:
            for chunks in chunk_counts:
                for variant in ("h2d_alone", "kernel_alone", "d2h_alone", "serial"):
                    yield variant, host, n, chunks, 1, "serial", intensity
                for count, order in overlap.pipeline_configs(stream_counts, params.orders(host)):
                    yield "pipeline", host, n, chunks, count, order, intensity
                if params.bidirectional_for(host):
                    yield "bidir_paired", host, n, chunks, 2, "concurrent", intensity
        if params.bidirectional_for(host):
            yield "bidir_h2d", host, n, 1, 1, "serial", 0
            yield "bidir_d2h", host, n, 1, 1, "serial", 0
            yield "bidir_both", host, n, 1, 2, "concurrent", 0


def _columns(variant, group, direction, host, size, chunks, count, order, intensity):
    return {"variant": variant, "group": group, "direction": direction, "elements": size // 4, "host_memory": host,
            "chunks": chunks, "streams": count, "issue_order": order, "intensity": intensity, "intervals": None}


def reference_walk(params):
    """The sweep's ``points()`` as it was written by hand: (label, bytes, timer, columns) in measurement order."""
    size, labels = params.size_bytes, streams.LABELS
    for host in params.host_memory:
        chunk_counts, stream_counts = params.counts(host)
        timer = "cuda_event_held" if host == "pinned" else "cuda_event"
        for intensity in params.intensities:
            for chunks in chunk_counts:
                where = (f"{format_bytes(size)}, {text.count(chunks, 'chunk')}, intensity {intensity}, "
                         f"{host} host memory")
                for variant, direction in (("h2d_alone", "h2d"), ("kernel_alone", "device"), ("d2h_alone", "d2h")):
                    yield (f"{labels[variant]} · {where}", size * (2 if variant == "kernel_alone" else 1), timer,
                           _columns(variant, "pipeline", direction, host, size, chunks, 1, "serial", intensity))
                configs = [("serial", 1, "depth_first")] + [
                    ("pipeline", s, o) for s, o in overlap.pipeline_configs(stream_counts, params.orders(host))]
                for variant, count, order in configs:
                    yield (f"{labels[variant]} · {text.count(count, 'stream')} · {streams.ORDER_LABELS[order]} · "
                           f"{where}", 2 * size, timer,
                           _columns(variant, "pipeline", "round_trip", host, size, chunks, count,
                                    "serial" if variant == "serial" else order, intensity))
                if params.bidirectional_for(host):
                    yield (f"{labels['bidir_paired']} · {where}", 2 * size, timer,
                           _columns("bidir_paired", "bound", "both", host, size, chunks, 2, "concurrent", intensity))
        if params.bidirectional_for(host):
            for variant, count, order, direction in (("bidir_h2d", 1, "serial", "h2d"),
                                                     ("bidir_d2h", 1, "serial", "d2h"),
                                                     ("bidir_both", 2, "concurrent", "both")):
                yield (f"bidirectional · {labels[variant]} · {format_bytes(size)} · {host} host memory",
                       size * (2 if variant == "bidir_both" else 1), timer,
                       _columns(variant, "bidirectional", direction, host, size, 1, count, order, 0))


CHOICES = [
    {},
    {"pageable_grid": True},  # pageable at every chunk and stream count, with its bidirectional copies
    {"host_memory": ["pageable"]},  # pageable alone: its lesson configuration and its bidirectional copies
    {"host_memory": ["pageable", "pinned"], "chunks": [64, 1, 8], "streams": [16, 1, 3]},  # unsorted input
    {"chunks": [1], "streams": [1], "issue_orders": ["breadth_first"], "intensities": [7]},  # one value each
    {"issue_orders": ["staged", "breadth_first", "depth_first"], "intensities": [64, 0, 3]},  # every order
    {"issue_orders": ["staged"], "streams": [3, 2]},  # staged alone: one pipeline per chunk count
    {"chunks": [2, 3], "streams": [5], "host_memory": ["pageable"], "size_bytes": 3 * 64 * KiB},  # odd counts
    {"chunks": [4, 4, 16], "streams": [2, 2], "host_memory": ["pinned", "pinned"],  # duplicates
     "issue_orders": ["staged", "staged"]},
    {"bidirectional": False},  # no bidirectional copies, no paired rows
    {"bidirectional": False, "pageable_grid": True, "host_memory": ["pageable"]},
    {"chunks": [], "host_memory": ["pageable"]},  # empty (refused by the checks, still its bidirectional copies)
    {"streams": []},
    {"intensities": []},
    {"issue_orders": []},
    {"host_memory": []},
]


@pytest.mark.parametrize("raw", CHOICES)
def test_the_generated_keys_are_the_hand_written_loops(raw):
    params = streams.parse_params(raw)
    assert list(params.points()) == list(reference_points(params))


def test_directly_built_params_keep_their_order():
    params = streams.Params(host_memory=["pageable", "pinned"], chunks=[16, 4], streams=[4, 2], intensities=[8, 1],
                            issue_orders=["staged", "depth_first"])
    assert list(params.points()) == list(reference_points(params))


def test_the_point_count_the_checks_refuse_is_the_grid_s():
    params = streams.parse_params({"chunks": [1, 2, 4, 8, 16, 32, 64], "streams": list(range(1, 17)),
                                   "intensities": list(range(8)), "issue_orders": ["depth_first", "breadth_first"]})
    count = sum(1 for _ in reference_points(params))
    assert count > streams.MAX_POINTS
    assert f"{count} points requested; at most {streams.MAX_POINTS} per run" in streams.invalid_reasons(params, None)


class _Bench:
    def host_pair(self, memory, inputs):
        return np.zeros(4, np.float32), np.zeros(4, np.float32)

    def both_ways_buffers(self, inputs):
        return np.zeros(4, np.float32), np.zeros(4, np.float32)


@pytest.mark.parametrize("raw", [c for c in CHOICES if all(c.get(a, 1) for a in (
    "chunks", "streams", "host_memory", "issue_orders", "intensities"))])
def test_the_sweep_is_handed_the_points_it_built_by_hand(raw):
    params = streams.parse_params({"size_bytes": 1 * MiB, **raw, "profile": "interactive"})

    def equip(sweep):
        sweep.bench, sweep.inputs, sweep.expected_for = _Bench(), np.zeros(4, np.float32), None

    def measured(point):  # a pipeline's samples each take one both-ways sample: its paired row follows them
        if point.state.get("paired") is not None:
            point.state["paired"].append(1.0)

    assert walked(streams_sweep.StreamsSweep, params, equip, measured=measured) == list(reference_walk(params))


# --- the clock: a run timed by the harness's clock on the origin stream, on the timing methods' simulated board ----
COSTS = {"h2d": 1.0, "kernel": 0.5, "d2h": 1.0}  # ms of each chunk's stage on the board's stand-in clock


class PipelineBoard(Board):
    """The simulated stream board with what a pipeline issues: copies and the kernel cost ``COSTS`` on their
    stream's clock, and a stream that waits on an event starts no earlier than it."""

    sm_count = 4

    def __init__(self):
        super().__init__()
        board, cuda = self, self.cuda
        cuda.event_flags = type("EventFlags", (), {"DISABLE_TIMING": 2})
        cuda.memcpy_htod_async = staticmethod(lambda dst, src, stream: board.operation(COSTS["h2d"], "h2d")(stream))
        cuda.memcpy_dtoh_async = staticmethod(lambda dst, src, stream: board.operation(COSTS["d2h"], "d2h")(stream))

        def wait_for_event(stream, event):
            stream.clock = max(stream.clock, event.at)

        cuda.Stream.wait_for_event = wait_for_event
        self.ledger.device_buffer = lambda nbytes: 0x1000

    def kernel(self, stem, name):
        if stem == "timing":
            return super().kernel(stem, name)
        board = self

        class FmaChain:
            def prepare(self, signature):
                pass

            def prepared_async_call(self, grid, block, stream, *args):
                board.operation(COSTS["kernel"], "kernel")(stream)

        return FmaChain()


@pytest.mark.parametrize("plan,held,ms", [
    (overlap.issue_plan(2, 1), True, 5.0),  # serial: both chunks' three stages on one stream
    (overlap.issue_plan(2, 2), True, 2.5),  # two streams, a chunk each: the origin joins the later one
    (overlap.issue_plan(2, 2), False, 2.5),  # pageable: the same run, the origin never held
])
def test_a_run_is_one_issue_between_the_origin_streams_events_held_while_it_is_queued(plan, held, ms):
    board = PipelineBoard()
    bench = streams_sweep._Streams(board, board.ledger, 1 * MiB)
    host = np.zeros(1 * MiB // 4, np.float32)
    board.log.clear()
    got, intervals = bench.run_once(plan, 2, host, host, 0, held, marks=True)
    origin = bench.origin.name
    assert got == pytest.approx(ms)
    start = [f"hold {origin}", f"event {origin}"] if held else [f"event {origin}"]
    assert board.log[:len(start)] == start and board.log.count(f"hold {origin}") == held
    assert board.log[-2:] == [f"event {origin}", f"synchronize {origin}"]
    assert [i[1] for i in intervals] == [op for _, op, _ in plan]
    assert max(i[4] for i in intervals) == pytest.approx(ms)  # the timeline's marks, from the run's start event
