"""How the worker measures the streams experiment, declared in this package's ``__init__.py``
(its docstring says what is measured, how it is timed and how it is checked)."""

from __future__ import annotations

import time

import numpy as np

from gpu.core import overlap, stats, text, timelines
from gpu.core.units import format_bytes
from gpu.experiments.streams import (
    BIDIRECTIONAL_CASES,
    BIDIRECTIONAL_VARIANTS,
    BLOCK,
    FMA_A,
    FMA_B,
    LABELS,
    MAX_CHUNKS,
    MAX_STREAMS,
    ORDER_LABELS,
    PAIRED_VARIANT,
    POISON,
    _columns,
    bytes_moved,
    expected_output,
)
from gpu.sweeps import _kernels as k
from gpu.sweeps import harness
from gpu.sweeps.timing_methods import StreamClock
from gpu.sweeps.verify import verify_equal

STAGES_ALONE = {"h2d_alone": "h2d", "kernel_alone": "kernel", "d2h_alone": "d2h"}  # the three sums' stages


def paired_plan(elements: int) -> tuple[list, int]:
    """The both-ways copies sampled between the pipelines' samples: each direction in up to 8 equal copies on its own
    stream, an event after each, so the phase in which both directions are busy can be timed
    (``timelines.both_busy_ms``). Returns (plan, chunks)."""
    chunks = next(c for c in (8, 4, 2, 1) if elements % c == 0)
    return [(s, op, c) for c in range(chunks) for s, op in ((0, "h2d"), (1, "d2h"))], chunks


class _Streams:
    """The buffers, streams and events of one job, and the enqueueing of pipelines on them."""

    def __init__(self, gpu, ledger, size: int):
        cuda = gpu.cuda
        self.gpu, self.cuda, self.ledger, self.size = gpu, cuda, ledger, size
        self.n = size // 4
        self.d_in, self.d_out = ledger.device_buffer(size), ledger.device_buffer(size)
        self.origin = cuda.Stream()
        self.streams = [cuda.Stream() for _ in range(MAX_STREAMS)]
        # A staged pipeline's three streams are its own: on the H200 it ran 3.5 % slower (5.77 against 5.57 ms, 256
        # MiB in 32 chunks) on streams that round-robin pipelines had used in both directions earlier in the job.
        self.stage_streams = [cuda.Stream() for _ in overlap.STAGES]
        # A run is timed by the harness's clock on the origin stream (``timing_methods.StreamClock``: CUDA events
        # around the fork and join, the origin held while every operation is queued); its hold is made now, with
        # the job's other buffers.
        self.clock = StreamClock(gpu, ledger, self.origin)
        self.clock.hold()
        self.done = [cuda.Event() for _ in range(MAX_STREAMS)]
        self.marks = [cuda.Event() for _ in range(2 * 3 * MAX_CHUNKS)]
        # A staged pipeline's hand-offs between stage streams (overlap.handoffs): no timing, so recording one
        # costs the GPU next to nothing.
        self.handoff_events = [cuda.Event(cuda.event_flags.DISABLE_TIMING) for _ in range(3 * MAX_CHUNKS)]
        self.kernel = gpu.kernel("streams", "fma_chain")
        self.kernel.prepare("PPQffi")
        self.hosts: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.both_ways: tuple[np.ndarray, np.ndarray] | None = None

    def pooled(self, memory: str) -> np.ndarray:
        """A float32 host buffer of the vector's size from the worker's pool ('pinned' or 'pageable'): kept between
        jobs, since pinning 256 MiB costs 0.1-0.2 s and faulting in a fresh pageable one about as much. It holds what
        the last job left: every caller writes it before relying on it."""
        return self.ledger.host_buffer(self.size, memory, pooled=True).view(np.float32)

    def host_pair(self, memory: str, inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``memory``'s input (the inputs copied in) and output (every point writes or poisons it before reading)."""
        if memory not in self.hosts:
            pair = self.pooled(memory), self.pooled(memory)
            np.copyto(pair[0], inputs)
            self.hosts[memory] = pair
        return self.hosts[memory]

    def both_ways_buffers(self, inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The bidirectional copies' output pattern (the inputs plus one, written here) and read-back (each check
        copies the whole vector into it first), made once a job for every host memory's bidirectional copies."""
        if self.both_ways is None:
            out_pattern, readback = self.pooled("pageable"), self.pooled("pageable")
            np.add(inputs, np.float32(1.0), out=out_pattern)
            self.both_ways = out_pattern, readback
        return self.both_ways

    def enqueue(self, plan, chunks: int, host_in, host_out, intensity: int, marks: bool, pool):
        """Queue ``plan``'s operations on the streams of ``pool``; with ``marks`` an event before and after each."""
        cuda, per = self.cuda, self.n // chunks
        chunk_bytes = per * 4
        grid = (max(1, min(-(-per // BLOCK), self.gpu.sm_count * 16)), 1)
        recorded = []
        waits, records = overlap.handoffs(plan)
        for i, (s, op, c) in enumerate(plan):
            stream = pool[s]
            lo, offset = c * per, c * chunk_bytes
            if i in waits:
                stream.wait_for_event(self.handoff_events[waits[i]])
            if marks:
                self.marks[2 * i].record(stream)
            if op == "h2d":
                cuda.memcpy_htod_async(int(self.d_in) + offset, host_in[lo:lo + per], stream)
            elif op == "kernel":
                self.kernel.prepared_async_call(grid, (BLOCK, 1, 1), stream, int(self.d_in) + offset,
                                                int(self.d_out) + offset, per, FMA_A, FMA_B, intensity)
            else:
                cuda.memcpy_dtoh_async(host_out[lo:lo + per], int(self.d_out) + offset, stream)
            if marks:
                self.marks[2 * i + 1].record(stream)
                recorded.append((s, op, c, self.marks[2 * i], self.marks[2 * i + 1], chunk_bytes))
            if i in records:
                self.handoff_events[i].record(stream)
        return recorded

    def run_once(self, plan, chunks: int, host_in, host_out, intensity: int, held: bool, marks: bool = False,
                 staged: bool = False):
        """One timed run of ``plan`` (the origin stream held while it is queued, with ``held``): every worker stream
        waits on the start event, the origin on each one's last operation; returns (ms, intervals or None).
        ``staged``: on the staged pipeline's own streams."""
        used = sorted({s for s, _, _ in plan})
        pool = self.stage_streams if staged else self.streams
        start = self.clock.timer.start
        recorded = []

        def fork_and_join(origin) -> None:
            for s in used:
                pool[s].wait_for_event(start)
            recorded.extend(self.enqueue(plan, chunks, host_in, host_out, intensity, marks, pool))
            for s in used:
                self.done[s].record(pool[s])
                origin.wait_for_event(self.done[s])

        ms = self.clock.batch(fork_and_join, 1, held)  # one run between the origin's events, held or not
        intervals = None
        if marks:
            intervals = [(s, op, c, start.time_till(a), start.time_till(b), nbytes)
                         for s, op, c, a, b, nbytes in recorded]
        return ms, intervals


class StreamsSweep(harness.Sweep):
    """Each host memory: its input and output buffers, then per intensity and chunk count the three sums (each
    stage alone), serial and the pipelines; then the bidirectional copies."""

    def __init__(self, params, gpu, profile):
        super().__init__(params, gpu, profile)
        self.inputs = k.small_int_floats(params.elements, seed=time.time_ns() & 0xFFFF)

    def setup(self) -> None:
        self.bench = _Streams(self.gpu, self.ledger, self.params.size_bytes)
        self.expected_for = None  # the intensity of the expected result held (any host memory's)

    def group_of(self, grid_point):
        """A chunk count's runs share their expected result and the pipelines' both-ways samples; a host memory's
        bidirectional copies share their output pattern and read-back."""
        return grid_point["host_memory"], grid_point["part"], grid_point["intensity"], grid_point["chunks"]

    def enter_group(self, group) -> None:
        host, part, intensity, chunks = group
        params, size, inputs = self.params, self.params.size_bytes, self.inputs
        host_in, host_out = self.bench.host_pair(host, inputs)
        held = host == "pinned"
        self.host_state = {"host": host, "host_in": host_in, "host_out": host_out, "held": held}
        self.timer_column = "cuda_event_held" if held else "cuda_event"
        if part == "bidirectional":
            # One whole-size H2D and one D2H, each alone on one stream, then both at once on two streams.
            out_pattern, readback = self.bench.both_ways_buffers(inputs)
            self.shared = {"out_pattern": out_pattern, "readback": readback,
                           "out_pattern_uploaded": [False]}  # d_out holds out_pattern once the first has uploaded it
            return
        if self.expected_for != intensity:  # one intensity's result serves all its chunk counts and host memories
            self.expected, self.expected_for = expected_output(inputs, intensity), intensity
        self.shared = {"expected": self.expected, "where": f"{format_bytes(size)}, {text.count(chunks, 'chunk')}, "
                                                          f"intensity {intensity}, {host} host memory",
                       # the both-ways copies taken between this chunk count's pipelines' samples
                       "paired": [] if params.bidirectional_for(host) else None}

    def point(self, grid_point) -> harness.Point:
        variant, host, chunks = grid_point["variant"], grid_point["host_memory"], grid_point["chunks"]
        streams, intensity, size = grid_point["streams"], grid_point["intensity"], self.params.size_bytes
        run, shared, timer = self.host_state, self.shared, self.timer_column
        if variant in BIDIRECTIONAL_VARIANTS:
            _, plan, _, order, direction = next(case for case in BIDIRECTIONAL_CASES if case[0] == variant)
            return harness.Point(
                _columns(variant, host, size, 1, streams, order, 0, direction=direction),
                f"bidirectional · {LABELS[variant]} · {format_bytes(size)} · {host} host memory",
                bytes_moved(variant, size), timer,
                {**run, "kind": "bidirectional", "variant": variant, "direction": direction, "chunks": 1,
                 "intensity": 0, "plan": list(plan), **shared})
        where, expected = shared["where"], shared["expected"]
        if variant in STAGES_ALONE:
            # The three sums: each stage alone, chunk after chunk on one stream, then checked. Each stage leaves the
            # next one's source verified: H2D leaves the inputs in d_in, the kernel its exact result in d_out, so no
            # 256 MiB upload from pageable memory is needed between them. The device buffers are read back through
            # host_out, which the D2H stage poisons before it runs.
            stage = STAGES_ALONE[variant]
            return harness.Point(
                _columns(variant, host, size, chunks, 1, "serial", intensity,
                         direction={"h2d": "h2d", "d2h": "d2h"}.get(stage, "device")),
                f"{LABELS[variant]} · {where}", bytes_moved(variant, size), timer,
                {**run, "kind": "alone", "variant": variant, "stage": stage, "chunks": chunks,
                 "intensity": intensity, "expected": expected, "where": where,
                 "plan": overlap.issue_plan(chunks, 1, "depth_first", (stage,))})
        if variant == PAIRED_VARIANT:
            # The both-ways copies taken between those pipelines' samples, as their own row.
            return harness.Point(
                _columns(PAIRED_VARIANT, host, size, chunks, 2, "concurrent", intensity, direction="both"),
                f"{LABELS[PAIRED_VARIANT]} · {where}", bytes_moved(PAIRED_VARIANT, size), timer,
                {**run, "kind": "paired", "variant": PAIRED_VARIANT, "samples": shared["paired"],
                 "expected": expected, "where": where})
        # Serial and the pipelines: the whole workload, then one marked run that is verified.
        order = "depth_first" if variant == "serial" else grid_point["issue_order"]
        return harness.Point(
            _columns(variant, host, size, chunks, streams, grid_point["issue_order"], intensity),
            f"{LABELS[variant]} · {text.count(streams, 'stream')} · {ORDER_LABELS[order]} · {where}",
            bytes_moved(variant, size), timer,
            {**run, "kind": "whole", "variant": variant, "streams": streams, "order": order,
             "chunks": chunks, "intensity": intensity, "expected": expected, "where": where,
             "plan": overlap.issue_plan(chunks, streams, order),
             "paired": shared["paired"] if variant == "pipeline" else None})

    def prepare(self, point) -> None:
        """Poison what the point must write (untimed)."""
        state, bench, cuda = point.state, self.bench, self.cuda
        if state["kind"] == "alone":
            if state["stage"] == "h2d":
                cuda.memset_d32(bench.d_in, int(POISON), bench.n)
            elif state["stage"] == "kernel":
                cuda.memset_d32(bench.d_out, int(POISON), bench.n)
            else:
                # d_in is free once the kernel stage has read it (serial uploads it again).
                cuda.memset_d32(bench.d_in, int(POISON), bench.n)
                self._poison_host_out(state)
        elif state["kind"] == "bidirectional":
            cuda.memset_d32(bench.d_in, int(POISON), bench.n)
            if not state["out_pattern_uploaded"][0]:  # no bidirectional case writes d_out: upload it once
                cuda.memcpy_htod(bench.d_out, state["out_pattern"])
                state["out_pattern_uploaded"][0] = True
            self._poison_host_out(state)

    def _poison_host_out(self, state) -> None:
        """Fill host_out with POISON. Pinned: by a copy from d_in, already poisoned on the device, ~7× faster than
        NumPy writing 256 MiB."""
        if state["held"]:
            self.cuda.memcpy_dtoh(state["host_out"], self.bench.d_in)
        else:
            state["host_out"].view(np.uint32).fill(POISON)

    def measure(self, point):
        state, bench = point.state, self.bench
        if state["kind"] == "paired":
            if not state["samples"]:
                return None  # no pipeline of its chunk count was sampled: no both-ways samples, no row
            return stats.summarize(state["samples"], "paired")
        plan, chunks, host_in, host_out = state["plan"], state["chunks"], state["host_in"], state["host_out"]
        intensity, held, staged = state["intensity"], state["held"], state.get("order") == "staged"
        paired = state.get("paired")
        if paired is None:
            return lambda: bench.run_once(plan, chunks, host_in, host_out, intensity, held, staged=staged)[0]
        both_ways, both_chunks = paired_plan(bench.n)

        def pipeline_then_both_ways() -> float:
            ms = bench.run_once(plan, chunks, host_in, host_out, intensity, held, staged=staged)[0]
            both = bench.run_once(both_ways, both_chunks, host_in, host_out, 0, held, marks=True)[1]
            paired.append(timelines.both_busy_ms(both))
            return ms

        return pipeline_then_both_ways

    def verify(self, point) -> None:
        state, bench, cuda = point.state, self.bench, self.cuda
        variant, host_out = state["variant"], state["host_out"]
        if state["kind"] == "alone":
            stage = state["stage"]
            if stage != "d2h":
                cuda.memcpy_dtoh(host_out, bench.d_in if stage == "h2d" else bench.d_out)
            want = self.inputs if stage == "h2d" else state["expected"]
            verify_equal(want.view(np.uint32), host_out.view(np.uint32), f"{LABELS[variant]} ({state['where']})")
        elif state["kind"] == "whole":
            # Poison both outputs; the host's by a copy from the poisoned device buffer, which for pinned memory
            # is ~5× faster than NumPy writing 256 MiB.
            cuda.memset_d32(bench.d_out, int(POISON), bench.n)
            cuda.memcpy_dtoh(host_out, bench.d_out)
            _, intervals = bench.run_once(state["plan"], state["chunks"], state["host_in"], host_out,
                                          state["intensity"], state["held"], marks=True,
                                          staged=state["order"] == "staged")
            verify_equal(state["expected"].view(np.uint32), host_out.view(np.uint32),
                         f"{LABELS[variant]}, {text.count(state['streams'], 'stream')}, {state['order']} "
                         f"({state['where']})")
            point.columns["intervals"] = timelines.encode_intervals(intervals) if intervals else None
        elif state["kind"] == "paired":
            # One more both-ways copy into poisoned buffers: the inputs must arrive in d_in and the pipeline's
            # result (left in d_out by its verified run) in host_out.
            cuda.memset_d32(bench.d_in, int(POISON), bench.n)
            self._poison_host_out(state)
            bench.run_once(*paired_plan(bench.n), state["host_in"], host_out, 0, state["held"])
            what = f"{LABELS[variant]} ({state['where']})"
            verify_equal(state["expected"].view(np.uint32), host_out.view(np.uint32), what + ", D2H data")
            cuda.memcpy_dtoh(host_out, bench.d_in)  # host_out is checked: it takes the H2D side's read-back
            verify_equal(self.inputs.view(np.uint32), host_out.view(np.uint32), what + ", H2D data")
        else:
            what = f"{LABELS[variant]} ({format_bytes(bench.size)}, {state['host']})"
            if state["direction"] in ("h2d", "both"):
                cuda.memcpy_dtoh(state["readback"], bench.d_in)
                verify_equal(self.inputs.view(np.uint32), state["readback"].view(np.uint32), what + ", H2D data")
            if state["direction"] in ("d2h", "both"):
                verify_equal(state["out_pattern"].view(np.uint32), host_out.view(np.uint32), what + ", D2H data")


run = harness.runner(StreamsSweep)


def pooled_host_buffers(params) -> list[tuple[int, str]]:
    """The host buffers a sweep of ``params`` keeps in the worker's pool between sweeps, each of the vector's size:
    an input and an output in each host memory, and the bidirectional copies' output pattern and read-back (pageable)
    when any are measured. The app's worker pins or faults them in when it starts (``LiveBackend.warm``); page-locked
    first."""
    size = params.size_bytes
    pairs = [(size, memory) for memory in sorted(params.host_memory, key="pageable".__eq__) for _ in range(2)]
    both_ways = any(params.bidirectional_for(memory) for memory in params.host_memory)
    return pairs + ([(size, "pageable")] * 2 if both_ways else [])
