"""Host↔device transfers: pageable vs pinned vs write-combined vs mapped zero-copy, H2D and D2H.

Two timing methods (``methods``; the ``timer`` column names the one a row used, and is part of the point key), the
harness's (``gpu/sweeps/timing_methods.py``):

* ``single`` (the latency view) – CUDA events around one copy (or the zero-copy kernel) on one stream, issued
  from Python, so a small copy's time includes PyCUDA's issue cost (timer ``cuda_event``). With
  ``include_alloc`` a sample also covers allocating the host buffer (host clock around the allocation call,
  plus the copy's event time), which is how naive code pays for pinned memory.
* ``batched`` (the throughput view) – N back-to-back copies of the same buffer between two events, as
  bandwidthTest and nvbandwidth time them, with N chosen per point so that one sample lasts at least
  ``BATCH_MS`` (at most ``MAX_BATCH`` copies). A sample is the batch's time ÷ N, so ``median_ms`` and GB/s
  stay per copy; N is kept in ``param_value`` (``param`` = "copies per sample"). Except for pageable memory
  the stream is held by the blocking kernel while Python queues the batch (``StreamHold``, timer
  ``cuda_event_batched_held``), so the GPU runs the copies back to back; a pageable copy waits on the host
  and cannot be held (timer ``cuda_event_batched``). Copy-only: allocation is timed by the single method.

Bytes moved: the point's size, once across the link, in either direction. Data is checked bit-exact after
sampling, in both methods.
"""

from __future__ import annotations

from gpu.core import stats
from gpu.core.units import GiB, KiB, MiB, format_bytes
from gpu.experiments import axes
from gpu.experiments.grid import Coordinate, Exclude, Grid
from gpu.experiments.page import PageEntry

NAME = "transfers"
# Registration (gpu/experiments/registry.py): the runner's subcommand, the page, the place in lists.
COMMAND, ORDER, PAGE = "transfers", 1, "pages/transfers.py"
PAGE_ENTRY = PageEntry(PAGE, "Transfers: pinned vs pageable", "transfers", ":material/swap_vert:",
                        "Transfers: pinned vs pageable memory", place=1)
HELP = "pageable vs pinned vs write-combined vs mapped copies"
MODES = ("pageable", "pinned", "pinned_wc", "mapped")
MODE_LABELS = {"pageable": "pageable (NumPy)", "pinned": "pinned", "pinned_wc": "pinned write-combined",
               "mapped": "mapped zero-copy"}
DIRECTIONS = ("h2d", "d2h")
PINNED_MODES = ("pinned", "pinned_wc", "mapped")
MIN_BYTES = 16
ALIGN_BYTES = 16  # the zero-copy kernel moves 16-byte vectors
DEVICE_RESERVE_BYTES = 256 * MiB
MAX_POINTS = 2000
DEFAULT_SIZES = [4 * KiB * 2**i for i in range(19)]  # 4 KiB … 1 GiB
KEY_COLUMNS = ["bytes", "variant", "direction", "include_alloc", "timer"]  # the order of Params.points()
METHODS = ("single", "batched")
LABELS = MODE_LABELS  # a point's variant is its memory mode
METHOD_LABELS = {"single": "latency view (single)", "batched": "throughput view (batched)"}
BATCHED_TIMERS = ("cuda_event_batched", "cuda_event_batched_held")
TITLE = "Host↔device transfers"
AXES = (
    axes.Axis("sizes", "transfer sizes", DEFAULT_SIZES, kind="sizes", one="size", low=MIN_BYTES, unit="bytes",
              multiple_of=ALIGN_BYTES, why="the zero-copy kernel moves 16-byte vectors",
              help="sizes: a list (4KiB,1MiB) and/or ranges of powers of two (4KiB:1GiB)"),
    axes.Axis("modes", "memory modes", list(MODES), values=MODES, help="comma-separated: " + ", ".join(MODES)),
    axes.Axis("directions", "directions", list(DIRECTIONS), values=DIRECTIONS, help="comma-separated: h2d, d2h"),
    axes.Axis("include_alloc", "include allocation", [False], kind="alloc", one="copy-only or including allocation",
              help="also time allocating the host buffer (yes), or measure both ways (both)"),
    axes.Axis("methods", "timing methods", ["single"], values=METHODS,
              help="comma-separated timing methods: single (one copy per sample: the latency view), batched "
                   "(back-to-back copies, >= 1 ms a sample: the throughput view, as bandwidthTest times them)"),
)


def timer_for(method: str, mode: str, include_alloc: bool) -> str:
    """The ``timer`` value of a point: what its clock covers (and, with the other key columns, which point it is)."""
    if method == "batched":
        return "cuda_event_batched" if mode == "pageable" else "cuda_event_batched_held"
    return "host_clock_alloc+cuda_event_copy" if include_alloc else "cuda_event"


BATCHED_COPY_ONLY = "batched copies reuse one buffer, so they cannot include its allocation"
# Per size and mode, each timing (method, then copy-only or including allocation), both directions; the timer names
# what the clock covers and tells the methods' points apart.
GRID = Grid(
    [Coordinate("bytes", axis="sizes"), Coordinate("variant", axis="modes"),
     Coordinate("method", axis="methods", key=False), Coordinate("include_alloc", axis="include_alloc"),
     Coordinate("direction", axis="directions"),
     Coordinate("timer", derive=lambda point: timer_for(point["method"], point["variant"], point["include_alloc"]))],
    [Exclude(lambda point: point["method"] == "batched" and point["include_alloc"], BATCHED_COPY_ONLY)])


class Params(axes.parameters(AXES, grid=GRID, key_columns=KEY_COLUMNS)):
    """The transfers' parameters; their points come from ``GRID``."""


parse_params = axes.parser(Params)


def invalid_reasons(params: Params, limits) -> list[str]:
    """Why these parameters cannot run on a device with ``limits`` (empty when they can)."""
    reasons = axes.reasons(params, limits)
    if params.methods == ["batched"] and params.include_alloc == [True]:
        reasons.append(f"{BATCHED_COPY_ONLY}: time allocation with the single method")
    largest = max(params.sizes, default=0)
    if largest >= MIN_BYTES:
        reasons += memory_reasons(params, limits)
    n_points = len(params.points())
    if n_points > MAX_POINTS:
        reasons.append(f"{n_points} points requested; at most {MAX_POINTS} per run")
    return reasons


def memory_reasons(params: Params, limits) -> list[str]:
    """What can change between the check and the run: whether the buffers fit in the memory free now."""
    reasons, largest = [], max(params.sizes, default=0)
    if limits is not None:
        device_room = limits.free_device_bytes - DEVICE_RESERVE_BYTES
        if largest > device_room:
            reasons.append(f"size {format_bytes(largest)} does not fit in device memory: "
                           f"{format_bytes(limits.free_device_bytes)} free, {format_bytes(DEVICE_RESERVE_BYTES)} "
                           f"kept in reserve, so at most {format_bytes(max(device_room, 0))}")
        if any(m in PINNED_MODES for m in params.modes) and largest > limits.pinned_budget_bytes:
            reasons.append(f"size {format_bytes(largest)} exceeds the pinned-memory budget of "
                           f"{format_bytes(limits.pinned_budget_bytes)} (PINPOINT_PINNED_BUDGET_BYTES sets it)")
        # A point holds the reference pattern, the mode's buffer and a read-back copy on the host.
        if limits.host_available_bytes and 3 * largest > limits.host_available_bytes:
            reasons.append(f"size {format_bytes(largest)} needs {format_bytes(3 * largest)} of host memory "
                           f"(pattern, buffer, read-back) but {format_bytes(limits.host_available_bytes)} is available")
    return reasons


def bytes_moved(size: int, mode: str, direction: str) -> int:
    """Bytes that cross the host↔device link for one point (each byte once)."""
    return int(size)


def max_size(limits) -> int:
    """The largest power-of-two size every mode can run on this device (the slider's upper end)."""
    room = min(limits.free_device_bytes - DEVICE_RESERVE_BYTES, limits.pinned_budget_bytes,
               (limits.host_available_bytes or 3 * 64 * GiB) // 3)
    size = 4 * KiB
    while size * 2 <= room:
        size *= 2
    return size


SHOW_COLUMNS = ["variant", "direction", "bytes", "include_alloc", "timer"]  # the runner's printed table
SIZE_COLUMN = "bytes"  # the key column that tells the points apart by size (replay names the sizes it lacks)
# Single copies (one event pair each) of 256 KiB up to this size still carry a share of issue time: between H100
# runs a day apart, 256–512 KiB pinned copies moved ±10 %, while 4 MiB and more moved ≤ 1.5 %. Batched copies
# (the throughput view) keep their host memory's kind at every size of 256 KiB and more. Compare's floors call
# such a point a "medium copy".
MEDIUM_COPY_BYTES = 4 * MiB


def point_label(row) -> str:
    """A point in words, for Compare and the runs: '64 KiB pageable D2H', '1 GiB pinned H2D batched'."""
    return (f"{format_bytes(row['bytes'])} {row['variant']} {str(row['direction']).upper()}"
            + (" incl. allocation" if bool(row.get("include_alloc")) else "")
            + (" batched" if str(row.get("timer", "")).startswith("cuda_event_batched") else ""))


def noise_kind(row) -> str | None:
    """Compare's kind for a single pinned, write-combined or mapped copy of a medium size; None: the generic rule."""
    single = "batched" not in str(row.get("timer") or "")
    pinned = row.get("variant") in PINNED_MODES
    if single and pinned and stats.SMALL_COPY_BYTES <= int(row.get("bytes") or 0) < MEDIUM_COPY_BYTES:
        return "medium copy"
    return None
