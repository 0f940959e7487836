"""Streams: hiding host↔device copies behind compute with chunks, several streams and pinned memory.

A vector of ``size_bytes`` (floats) is split into ``chunks`` equal chunks; chunk ``c`` goes H2D → kernel →
D2H on stream ``c % streams``, issued depth-first or breadth-first (``gpu.core.overlap.issue_plan``). The kernel
does ``intensity`` dependent fused multiply-adds per element (``gpu/experiments/streams/streams.cu``), so it moves from
copy-bound (0) to compute-bound.

Measured for each host memory, size, chunk count and intensity (variants):

* ``h2d_alone``, ``kernel_alone``, ``d2h_alone`` – every chunk's copy (or kernel) back to back on one
  stream: the three sums the bound is made of (``gpu.core.overlap.pipeline_bound``);
* ``serial`` – the whole workload, chunk after chunk, on one stream;
* ``pipeline`` – the workload over ``streams`` streams in the chosen issue order; a *staged* pipeline uses one
  stream per stage instead (``streams`` = 3), its stages chained by events.

Each sample is timed with CUDA events on an origin stream that every worker stream waits on, and a final
join. With pinned memory the origin stream is first held by a blocking kernel until the host has queued
every operation (as nvbench does), so a sample times the GPU, not Python's launch rate (timer
``cuda_event_held``). Pageable copies block the host thread (a D2H from pageable memory returns only when
it is done), so they cannot be held; their samples include the host's issue time, which is what pageable
code pays (timer ``cuda_event``). Pipeline and serial rows also keep the timeline of one run (``intervals``,
an event before and after every operation), which is then checked: the output must equal the kernel's exact
result word for word. The ``bidirectional`` group times one whole-size H2D and one D2H alone and both at
once on two streams (aggregate bytes). With it, the pipelines of each chunk count are followed by a
``bidir_paired`` row (group ``bound``): after each of those pipelines' samples, the whole size both ways at once,
each direction in 8 copies on its own stream with an event after each. A sample is the time both directions'
bytes take at the rate the link carried while both were busy (``gpu.core.timelines.both_busy_ms``: the tail in
which one direction runs alone is left out), so the duplex rate their bound uses was measured in the same sitting
(the link's duplex rate drifts by several per cent over seconds) and in the regime a pipeline runs in.

Bytes: copies count the bytes that cross the link; pipeline and serial count both directions (2 × size);
the kernel counts its device reads and writes (2 × size).
"""

from __future__ import annotations

import numpy as np

from gpu.core import overlap, text
from gpu.core.units import GiB, MiB, format_bytes
from gpu.experiments import _kernels as k
from gpu.experiments import axes
from gpu.experiments.grid import Coordinate, Grid
from gpu.experiments.page import PageEntry

NAME = "streams"
# Registration (gpu/experiments/registry.py): the runner's subcommand, the page, the place in lists.
COMMAND, ORDER, PAGE = "streams", 5, "pages/streams.py"
PAGE_ENTRY = PageEntry(PAGE, "Streams: overlap", "streams", ":material/view_timeline:",
                        "Streams: hiding copies behind compute, with a timeline", place=5)
HELP = "chunked H2D → kernel → D2H pipelines over several streams vs one stream"
HOST_MEMORY = ("pinned", "pageable")
ORDERS = overlap.ORDERS
ORDER_LABELS = {"depth_first": "depth-first (per chunk)", "breadth_first": "breadth-first (all H2D, kernels, D2H)",
                "staged": "one stream per stage (events chain each chunk)", "serial": "one stream",
                "concurrent": "two streams at once"}
PIPELINE_VARIANTS = ("h2d_alone", "kernel_alone", "d2h_alone", "serial", "pipeline")
BIDIRECTIONAL_VARIANTS = ("bidir_h2d", "bidir_d2h", "bidir_both")
# Both directions at once, sampled between the pipelines' samples (one both-ways copy after each of them), one row per
# chunk count: the link's duplex rate in the same sitting as those pipelines, which their bound is built from.
PAIRED_VARIANT = overlap.PAIRED_VARIANT
# Variants the runner added after the first recordings: a recording made before holds none of them, and a replay of it
# shows the rest without naming them as missing points (the pipelines' bound then comes from bidir_both). A
# recording with some of them but not all is still told what it lacks.
LATER_VARIANTS = (PAIRED_VARIANT,)
LABELS = {"h2d_alone": "all H2D copies alone", "kernel_alone": "all kernels alone", "d2h_alone": "all D2H copies alone",
          "serial": "serial (one stream)", "pipeline": "pipeline", "bidir_h2d": "H2D alone", "bidir_d2h": "D2H alone",
          "bidir_both": "H2D + D2H at once", "bidir_paired": "H2D + D2H while both run, between the pipelines' samples"}
KEY_COLUMNS = ["variant", "host_memory", "elements", "chunks", "streams", "issue_order", "intensity"]
SHOW_COLUMNS = ["variant", "host_memory", "chunks", "streams", "issue_order", "intensity"]
MAX_CHUNKS, MAX_STREAMS, MAX_INTENSITY = 64, 16, 1 << 16
MIN_SIZE, MAX_SIZE = 64 * 1024, 16 * GiB
MAX_POINTS = 2000
FMA_A, FMA_B = np.float32(-1.0), np.float32(3.0)
BLOCK = 256
DEFAULT_SIZE = 256 * MiB
DEFAULT_CHUNKS, DEFAULT_STREAMS = [4, 16, 64], [1, 2, 4, 8, 16]
LESSON_CHUNKS, LESSON_STREAMS = 16, 4
POISON = np.uint32(0xFFFFFFFF)  # a NaN pattern no result can have
TITLE = "Streams: hiding copies behind compute"
AXES = (
    axes.Axis("size_bytes", "vector size", DEFAULT_SIZE, kind="size", low=MIN_SIZE, high=MAX_SIZE, unit="bytes",
              multiple_of=4, why="a whole number of floats", help="the vector's total size, e.g. 256MiB",
              cli_flag="--size"),
    axes.Axis("chunks", "chunks", DEFAULT_CHUNKS, kind="ints", one="chunk count", low=1, high=MAX_CHUNKS,
              help="comma-separated chunk counts (1 … 64, dividing the size)"),
    axes.Axis("streams", "streams", DEFAULT_STREAMS, kind="ints", one="stream count", low=1, high=MAX_STREAMS,
              help="comma-separated stream counts (1 … 16)"),
    axes.Axis("host_memory", "host memory", list(HOST_MEMORY), values=HOST_MEMORY, one="host memory",
              order="declared", help="comma-separated: pinned, pageable"),
    axes.Axis("issue_orders", "issue orders", ["depth_first", "staged"], values=ORDERS,
              help="comma-separated: depth_first, breadth_first, staged (one stream per stage; measured once per "
                   "chunk count, on 3 streams)", cli_flag="--orders"),
    axes.Axis("intensities", "kernel intensities", [0], kind="ints", one="kernel intensity", low=0, high=MAX_INTENSITY,
              steps=(0, 1, 4, 16, 64, 256, 1024, 2048, 4096, 8192, 16384),  # the page's choices
              unit="fused multiply-adds per element", help="comma-separated fused multiply-adds per element"),
    axes.Axis("bidirectional", "bidirectional copies", True, kind="off_switch",
              help="skip the bidirectional-copy points", cli_flag="--no-bidirectional"),
    axes.Axis("pageable_grid", "pageable memory at every chunk and stream count", False, kind="bool",
              help="pageable memory at every chunk and stream count, with its bidirectional copies (--pageable-grid, "
                   "for recordings), or only at the configuration nearest 16 chunks × 4 streams (the page's "
                   "default)"),
)


def closest(values: list[int], target: int) -> int:
    """The value nearest ``target`` among those ≥ 2 (that can overlap), else the largest."""
    useful = [v for v in values if v >= 2] or values
    return min(useful, key=lambda v: (abs(v - target), v))


def _parts(params, point) -> list[str]:
    """A host memory's pipelines, then (when they are measured: ``Params.bidirectional_for``) its bidirectional
    copies."""
    return ["pipeline"] + (["bidirectional"] if params.bidirectional_for(point["host_memory"]) else [])


def _runs(params, point) -> list[tuple[str, int, str]]:
    """(variant, streams, issue_order) of one chunk count's runs: the three sums (each stage alone) and serial on one
    stream, the pipelines (``overlap.pipeline_configs``), then the both-ways copies sampled between those pipelines'
    samples (when the bidirectional copies are measured); or the bidirectional copies."""
    host = point["host_memory"]
    if point["part"] == "bidirectional":
        return [(variant, streams, order) for variant, _, streams, order, _ in BIDIRECTIONAL_CASES]
    runs = [(variant, 1, "serial") for variant in ("h2d_alone", "kernel_alone", "d2h_alone", "serial")]
    runs += [("pipeline", streams, order)
             for streams, order in overlap.pipeline_configs(params.counts(host)[1], params.orders(host))]
    return runs + ([(PAIRED_VARIANT, 2, "concurrent")] if params.bidirectional_for(host) else [])


# Each host memory: per intensity and chunk count its runs, then its bidirectional copies (one whole-size chunk,
# intensity 0). Pageable memory's chunk and stream counts are its lesson's unless asked for everywhere (``Params``).
GRID = Grid([
    Coordinate("host_memory", axis="host_memory"),
    Coordinate("part", values=_parts, key=False),
    Coordinate("intensity", values=lambda params, point: params.intensities if point["part"] == "pipeline" else [0]),
    Coordinate("chunks", values=lambda params, point: params.counts(point["host_memory"])[0]
               if point["part"] == "pipeline" else [1]),
    Coordinate(("variant", "streams", "issue_order"), values=_runs),
    Coordinate("elements", values=lambda params, point: [params.elements]),
])


class Params(axes.parameters(AXES, grid=GRID, key_columns=KEY_COLUMNS)):
    """``pageable_grid``: measure pageable memory at every chunk and stream count too, and its bidirectional
    copies. Off (the default), pageable is measured at one configuration that can overlap (16 chunks × 4 streams,
    or the nearest chosen), with its serial run and sums: a pageable pipeline costs ~50 ms a sample on an H200
    against ~6 ms pinned, and one configuration already shows that it does not overlap. Its bidirectional copies
    (~1 s of a default request) are then measured only when pageable is the only host memory."""

    @property
    def elements(self) -> int:
        return self.size_bytes // 4

    def counts(self, host: str) -> tuple[list[int], list[int]]:
        """The chunk and stream counts measured for ``host`` memory."""
        if host != "pageable" or self.pageable_grid or not self.chunks or not self.streams:
            return self.chunks, self.streams
        return [closest(self.chunks, LESSON_CHUNKS)], [closest(self.streams, LESSON_STREAMS)]

    def orders(self, host: str) -> list[str]:
        """The issue orders measured for ``host`` memory: pageable's one lesson configuration in the first order."""
        if host != "pageable" or self.pageable_grid:
            return self.issue_orders
        return self.issue_orders[:1]

    def bidirectional_for(self, host: str) -> bool:
        """Whether ``host`` memory's bidirectional copies are measured (see the class docstring)."""
        return self.bidirectional and (host != "pageable" or self.pageable_grid or self.host_memory == ["pageable"])


parse_params = axes.parser(Params)


def host_bytes_needed(params: Params) -> int:
    """Input and output buffers in the chosen host memory, the expected result and a read-back copy."""
    return 4 * params.size_bytes


def invalid_reasons(params: Params, limits) -> list[str]:
    """Why these parameters cannot run on a device with ``limits`` (empty when they can)."""
    reasons = axes.reasons(params, limits)
    size = params.size_bytes
    for chunks in params.chunks:
        if not reasons and size % (4 * chunks):
            reasons.append(f"{chunks} chunks do not divide {format_bytes(size)} into equal chunks of whole floats "
                           f"({size} B / {chunks} = {size / chunks:,.2f} B); pick a chunk count that divides the size")
    if reasons:
        return reasons
    n_points = len(params.points())
    if n_points > MAX_POINTS:
        reasons.append(f"{n_points} points requested; at most {MAX_POINTS} per run")
    return reasons + memory_reasons(params, limits)


def memory_reasons(params: Params, limits) -> list[str]:
    """What can change between the check and the run: whether the buffers fit in the memory free now."""
    size = params.size_bytes
    reasons = k.memory_reasons(2 * size, limits, f"a {format_bytes(size)} pipeline (input and output)")
    if limits is not None:
        if "pinned" in params.host_memory and 2 * size > limits.pinned_budget_bytes:
            reasons.append(f"pinned input and output need {format_bytes(2 * size)}, over the pinned-memory budget of "
                           f"{format_bytes(limits.pinned_budget_bytes)} (PINPOINT_PINNED_BUDGET_BYTES sets it)")
        needed = host_bytes_needed(params)
        if limits.host_available_bytes and needed > limits.host_available_bytes:
            reasons.append(f"a {format_bytes(size)} pipeline needs {format_bytes(needed)} of host memory (input, "
                           f"output, expected result, read-back) but {format_bytes(limits.host_available_bytes)} "
                           "is available")
    return reasons


def notes(params: Params) -> list[str]:
    """Settings that are allowed but say little, worth telling the user about."""
    out = []
    pointless = sorted(s for s in params.streams if params.chunks and s > max(params.chunks))
    if pointless:
        out.append(f"{', '.join(map(str, pointless))} {text.plural('stream', pointless[-1])} for at most "
                   f"{text.count(max(params.chunks), 'chunk')}: chunks go "
                   "round-robin to streams, so streams beyond the chunk count get no work and change nothing")
    if 1 in params.chunks and any(s > 1 for s in params.streams):
        out.append("1 chunk cannot overlap anything: its kernel waits for its whole H2D and its D2H for the kernel")
    return out


def max_size(limits) -> int:
    """The largest power-of-two size every setting can run on this device (the slider's upper end)."""
    room = min((limits.free_device_bytes - k.DEVICE_RESERVE_BYTES) // 2, limits.pinned_budget_bytes // 2,
               (limits.host_available_bytes or 64 * GiB) // 4, MAX_SIZE)
    size = MIN_SIZE
    while size * 2 <= room:
        size *= 2
    return size


def expected_output(inputs: np.ndarray, intensity: int) -> np.ndarray:
    """fma_chain's exact result: with a = -1, x → b − x each step, so x (even: ``inputs`` itself, to be read only)
    or b − x (odd)."""
    return inputs if intensity % 2 == 0 else (FMA_B - inputs).astype(np.float32)


def bytes_moved(variant: str, size: int) -> int:
    return 2 * size if variant in ("serial", "pipeline", "kernel_alone", "bidir_both", PAIRED_VARIANT) else size


BIDIRECTIONAL_CASES = (("bidir_h2d", ((0, "h2d", 0),), 1, "serial", "h2d"),
                       ("bidir_d2h", ((1, "d2h", 0),), 1, "serial", "d2h"),
                       ("bidir_both", ((0, "h2d", 0), (1, "d2h", 0)), 2, "concurrent", "both"))


def _columns(variant, host, size, chunks, streams, order, intensity, direction="round_trip") -> dict:
    group = "bound" if variant == PAIRED_VARIANT else "bidirectional" if variant.startswith("bidir") else "pipeline"
    return {"variant": variant, "group": group,
            "direction": direction, "elements": size // 4, "host_memory": host, "chunks": chunks,
            "streams": streams, "issue_order": order, "intensity": intensity, "intervals": None}


def flops(row) -> float:
    """FLOPs of one execution of the point (``gpu.core.roofline``), counted from gpu/experiments/streams/streams.cu: the
    ``fma_chain`` kernel does ``intensity`` dependent fused multiply-adds per element, 2 FLOP each, over the whole
    vector (all chunks), so 2 × intensity × elements for every point that runs it (``kernel_alone``, ``serial``,
    ``pipeline``); the copies alone and the bidirectional copies do no arithmetic: 0. With ``bytes`` = 8 per
    element (a float read and one written), a kernel sits at intensity / 4 FLOP per byte."""
    if row["variant"] not in ("kernel_alone", "serial", "pipeline"):
        return 0.0
    return 2.0 * float(row["intensity"]) * float(row["elements"])


def short_point_label(row) -> str:
    """A point in a few words, for the line that names noisy points (Compare's label carries all seven key
    columns)."""
    variant, where = str(row["variant"]), f"{row['host_memory']}, {format_bytes(int(row['elements']) * 4)}"
    if int(row.get("intensity") or 0):
        where += f", intensity {int(row['intensity'])}"
    if variant == "pipeline":
        if row["issue_order"] == "staged":
            return f"pipeline {int(row['chunks'])} chunks, one stream per stage ({where})"
        order = str(row["issue_order"]).replace("_", "-")
        return f"pipeline {int(row['chunks'])} chunks × {text.count(int(row['streams']), 'stream')} {order} ({where})"
    if variant.startswith("bidir"):
        return f"{LABELS.get(variant, variant)} ({where})"
    return f"{LABELS.get(variant, variant)}, {text.count(int(row['chunks']), 'chunk')} ({where})"
