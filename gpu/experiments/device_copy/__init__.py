"""Device-to-device copies: the driver's copy engine against an SM copy kernel, from 4 KiB to 4 GiB.

Variants: ``copy_engine`` – ``cuMemcpyDtoDAsync`` (PyCUDA's ``memcpy_dtod_async``), the driver's device copy, which
runs on a copy engine; ``sm_copy`` – ``copy_bytes`` in device_copy.cu, a grid-stride copy of 16-byte vectors
(four loads in flight per thread) whose last ``size % 16`` bytes go one per thread, on the SMs.

Two timing methods (``methods``; the ``timer`` column names the one a row used, and is part of the point key), as
the Transfers experiment has them:

* ``single`` (the latency view) – CUDA events around one copy issued from Python (timer ``cuda_event``): a small
  copy's time is PyCUDA's and the driver's issue cost, not the memory's.
* ``batched`` (the throughput view) – N back-to-back copies between two events, the stream held by the blocking
  kernel while Python queues them (``StreamHold``, timer ``cuda_event_batched_held``), as bandwidthTest ``--dtod``
  times 100 back-to-back copies (cuda-samples 12.8 ``testDeviceToDeviceTransfer``). N is chosen per point so that
  one sample lasts at least ``harness.BATCH_MS`` (at most ``harness.MAX_BATCH`` copies); a sample is the batch's
  time ÷ N, and N is kept in ``copies_per_sample``.

Caches: nothing is flushed between copies. A batched copy whose working set (source + destination, 2 × size) fits in
the L2 cache copies within L2 after the first one: those points measure the **L2 ceiling**, not HBM (``roofs`` names
it). From 256 MiB on, the working set is far larger than any L2 and the copies measure HBM.

Byte convention: ``bytes`` = 2 × size, the read plus the write, as bandwidthTest's device-to-device mode and
coalescing's ``memcpy_dtod`` count it (nvbandwidth's ``device_local_copy`` counts each byte once: half these GB/s).
The copy's own size is in ``elements`` (one element = one byte).

Every point is verified on the GPU: the source holds a position-dependent pattern (transfers.cu ``pattern_fill``);
before each point the destination and a guard after it are poisoned with another seed's pattern, which differs in
every word; after sampling, ``pattern_mismatches`` counts the destination's wrong words (all of them, even at 4 GiB)
and the guard's, so a short, long, shifted or partial copy raises ``VerificationError``. Sizes are whole 4-byte
words, as the pattern is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpu.core.roofline import MEMORY, Roof
from gpu.core.units import GiB, KiB, MiB, format_bytes
from gpu.experiments import _kernels as k
from gpu.experiments import axes, grid
from gpu.experiments.page import PageEntry

if TYPE_CHECKING:  # frames are passed in only: a declaration loads no pandas
    import pandas as pd

NAME = "device_copy"
# Registration (gpu/experiments/registry.py): the runner's subcommand, the page, the place in lists (after the
# kernel experiments: coalescing 2, reduction 3, occupancy 4).
COMMAND, ORDER, PAGE = "device-copy", 4.5, "pages/roofline.py"
PAGE_ENTRY = PageEntry(PAGE, "Roofline", "roofline", ":material/roofing:",
                        "Roofline: every kernel under the measured memory and compute ceilings", place=6)
HELP = "device-to-device copies: the copy engine (cuMemcpyDtoDAsync) vs an SM copy kernel, 4 KiB to 4 GiB"
TITLE = "Device-to-device copies: copy engine vs SM copy"
VARIANTS = ("copy_engine", "sm_copy", "l2_copy")
LABELS = {"copy_engine": "copy engine (cuMemcpyDtoDAsync)", "sm_copy": "SM copy kernel (16-byte vectors)",
          "l2_copy": "SM copy, many passes in the L2"}
# l2_copy: the SM copy repeated in one launch, where source and destination fit in a quarter of the L2 and are large
# enough to keep every SM busy; a launch moves about L2_LAUNCH_BYTES. Single method only (a launch is its own batch).
L2_MIN_BYTES = 1 << 20
L2_LAUNCH_BYTES = 4 << 30
METHODS = ("single", "batched")
METHOD_LABELS = {"single": "single copy", "batched": "batched"}
TIMERS = {"single": "cuda_event", "batched": "cuda_event_batched_held"}
METHOD_OF_TIMER = {timer: method for method, timer in TIMERS.items()}
KEY_COLUMNS = ["variant", "elements", "timer"]  # the order of a key in Params.points()
# What rows recorded before schema version 11 named in ``param`` (a detail of how samples were made, or no
# axis), and its column now.
LEGACY_PARAMS = {"passes per launch": "passes_per_launch", "copies per sample": "copies_per_sample"}
# elements: the copy's size in bytes
SHOW_COLUMNS = ["variant", "elements", "timer", "copies_per_sample", "passes_per_launch"]
MIN_BYTES, MAX_BYTES, WORD_BYTES = 4, 4 * GiB, 4
DEFAULT_SIZES = [4 * KiB * 4**i for i in range(10)]  # 4 KiB … 1 GiB in ×4 steps: the live page's quick sweep
FULL_RANGE = "4KiB:4GiB"  # the recording's sizes: every power of two (python -m gpu.bench device-copy --sizes …)
MAX_POINTS = 2000
GUARD_BYTES = 256  # poisoned bytes after the destination: a copy that writes past its end fails
BLOCK = 256
SHORT_COPY_MS = 0.02  # below ~20 µs a copy's time is its issue and launch cost, not the memory's
HBM_MIN_BYTES = 256 * MiB  # the HBM roof: a copy far larger than any L2
AXES = (
    axes.Axis("sizes", "copy sizes", DEFAULT_SIZES, kind="sizes", one="size", low=MIN_BYTES, high=MAX_BYTES,
              multiple_of=WORD_BYTES, why="the check pattern is made of 4-byte words; the copy itself takes any size",
              unit="bytes", help=f"sizes: a list (4KiB,1MiB) and/or ranges of powers of two ({FULL_RANGE}); whole "
                                 "4-byte words, at most 4 GiB"),
    axes.Axis("variants", "copies", list(VARIANTS), values=VARIANTS, one="copy",
              help="comma-separated: " + ", ".join(VARIANTS)),
    axes.Axis("methods", "timing methods", list(METHODS), values=METHODS,
              help="comma-separated timing methods: single (one copy per sample), batched (back-to-back copies, "
                   ">= 1 ms a sample, as bandwidthTest --dtod times them)"),
)


# Every size, every copy at it, every method; a method is a key by its timer. The l2_copy runs only at L2-resident
# sizes of the device, single method: its other points are measured as no row (the sweep's measure says why).
GRID = grid.Grid([
    grid.Coordinate("elements", axis="sizes"),
    grid.Coordinate("variant", axis="variants"),
    grid.Coordinate("method", axis="methods", key=False),
    grid.Coordinate("timer", derive=lambda point: TIMERS.get(point["method"], point["method"])),
])


class Params(axes.parameters(AXES, grid=GRID, key_columns=KEY_COLUMNS)):
    pass


parse_params = axes.parser(Params)


def device_bytes_needed(params: Params) -> int:
    """Source and destination of the largest size, and the guard after the destination."""
    return 2 * max(params.sizes, default=0) + GUARD_BYTES


def invalid_reasons(params: Params, limits) -> list[str]:
    """Why these parameters cannot run on a device with ``limits`` (empty when they can)."""
    reasons = axes.reasons(params, limits)
    n_points = GRID.count(params)
    if n_points > MAX_POINTS:
        reasons.append(f"{n_points} points requested; at most {MAX_POINTS} per run")
    return reasons or memory_reasons(params, limits)


def memory_reasons(params: Params, limits) -> list[str]:
    """What can change between the check and the run: whether the buffers fit in the memory free now."""
    return k.memory_reasons(device_bytes_needed(params), limits, "these copies (source and destination)")


def bytes_moved(size: int, passes: int = 1) -> int:
    """A copy reads ``size`` bytes and writes ``size`` bytes: both counted, as bandwidthTest --dtod does (``passes``
    copies of them in one launch for l2_copy)."""
    return 2 * int(size) * int(passes)


def l2_passes(size: int, l2_bytes: int) -> int | None:
    """Passes per launch of l2_copy at ``size``, or None where it does not run: the working set (2 × size) must fit
    in half the L2 (the H100's and H200's L2 is two partitions), and the size must fill the SMs (≥ 1 MiB)."""
    if size < L2_MIN_BYTES or size % 16 or 4 * size > l2_bytes:
        return None
    return max(1, L2_LAUNCH_BYTES // (2 * size))


def noise_kind(row) -> str | None:
    """Compare's kind for a point: under ``SHORT_COPY_MS`` a copy is its issue and launch cost (``small copy``, as
    any copy whose issue time dominates), longer ones are device-only memory work (``kernel``)."""
    return "small copy" if float(row.get("median_ms") or 0) < SHORT_COPY_MS else "kernel"


def _batched(frame: pd.DataFrame, variant: str) -> pd.DataFrame:
    return frame[(frame["variant"] == variant) & (frame["timer"] == TIMERS["batched"])]


def roofs(frame: pd.DataFrame) -> list[Roof]:
    """The ceilings this run measured (bytes/s, read + write counted: 2 × size): ``HBM`` – the batched copy-engine
    copy at the largest size of at least 256 MiB; ``L2`` – the best l2_copy (many passes over a working set inside
    the L2 in one launch: back-to-back launches of an L2-sized copy measure the launch rate, about 3.8 TB/s on an
    H200, below its HBM). A roof the run has no point for is left out."""
    found = []
    if frame.empty or not {"variant", "timer", "elements", "gbps"} <= set(frame.columns):
        return found
    frame = frame[frame["gbps"] > 0]
    hbm = _batched(frame, "copy_engine")
    hbm = hbm[hbm["elements"] >= HBM_MIN_BYTES]
    if not hbm.empty:
        row = hbm.sort_values("elements").iloc[-1]
        found.append(Roof("HBM", MEMORY, float(row["gbps"]) * 1e9, _roof_source(row, "copy engine (cuMemcpyDtoDAsync)"),
                          str(row.get("run_id") or "")))
    l2 = frame[frame["variant"] == "l2_copy"]
    if not l2.empty:
        row = l2.loc[l2["gbps"].idxmax()]
        found.append(Roof("L2", MEMORY, float(row["gbps"]) * 1e9,
                          f"SM copy of {format_bytes(row['elements'])} kept in the L2, "
                          f"{int(row['passes_per_launch']):,} "
                          f"passes in one launch, median {row['gbps']:,.0f} GB/s; bytes counted as read + write "
                          "(2 × size per pass), as bandwidthTest --dtod counts them",
                          str(row.get("run_id") or ""), cache=True))
    return found


def _roof_source(row, what: str) -> str:
    return (f"{what}, {format_bytes(row['elements'])} batched, median {row['gbps']:,.0f} GB/s; bytes counted as "
            "read + write (2 × size), as bandwidthTest --dtod counts them (nvbandwidth counts them once)")
