"""Compute ceiling: fused multiply-add throughput in FP32 and FP64, against the theoretical rate at the run's clock.

Each thread runs ``chains`` independent FMA chains (``fma.cu`` beside this file), ``fmas_per_thread`` FMAs in all, and
writes the sum of its chains. One chain leaves every FMA waiting for the previous one, and only other warps can
keep the pipe busy; more independent chains per thread (instruction-level parallelism) let each warp issue
back to back. The grid fills every SM ``WAVES`` times at the most threads an SM holds, so the launch's ramp and
tail are a small part of a sample, and the default work (2^14 FMAs per thread) makes a sample last milliseconds
(about 2 ms in FP32 and 4 ms in FP64 on an H200).

Timing: CUDA events around one launch, the stream held while it is queued (``KernelTimer``). No L2 flush: the
kernel reads no memory, and its one store per thread at the end is a few MB written once, which no cache
state before the sample can speed up or slow down.

Correctness: ``a`` = 1 and ``b`` = 1 arrive at run time, so nothing folds; every value stays a whole number far
below 2^24, so each thread's sum is exact and counts the FMAs done: (i mod 1024) · chains + chains · (chains − 1)/2
+ fmas_per_thread · b. Every element is compared with that on the host after the point's samples; the output
is poisoned (NaN) before each point, so a thread that wrote nothing fails too.

Rates: FLOP = 2 × FMAs (``flops``); ``gpu.core.compute`` gives the theoretical rate (SMs × FMA lanes per SM × 2 ×
``sm_clock_mhz``, NVML's median SM clock while the point ran). Bytes: the result each thread writes (4 or 8 B);
it reads nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from gpu.core import compute
from gpu.core.errors import VerificationError
from gpu.core.roofline import COMPUTE, Roof
from gpu.experiments import _kernels as k
from gpu.experiments import axes
from gpu.experiments.grid import Coordinate, Grid

if TYPE_CHECKING:  # frames are passed in only: a declaration loads no pandas
    import pandas as pd

NAME = "fma"
# Registration (gpu/experiments/registry.py): the runner's subcommand, the page, the place in lists.
COMMAND, ORDER, PAGE = "fma", 11, "pages/roofline.py"
HELP = "FP32 and FP64 fused multiply-add throughput vs the theoretical rate at the measured clock"
TITLE = "Compute ceiling: FMA throughput"
PRECISIONS = compute.PRECISIONS
LABELS = {compute.FP32: "FP32 FMA", compute.FP64: "FP64 FMA"}
CHAINS = (1, 2, 4, 8, 16)  # one kernel each in fma.cu
FMAS_PER_TRIP = 256  # the kernel's unrolled inner loop: fmas_per_thread is a multiple of it
DEFAULT_FMAS_PER_THREAD = 1 << 14
WAVES = 16  # the grid holds every SM full this many times over
A, B = 1.0, 1.0  # the chains' coefficients, passed at run time
ITEM_BYTES = {compute.FP32: 4, compute.FP64: 8}
KEY_COLUMNS = ["variant", "block_size", "param_value", "intensity"]
SHOW_COLUMNS = ["variant", "block_size", "param_value", "intensity", "elements", "sm_clock_mhz"]
AXES = (
    axes.Axis("precisions", "precisions", list(PRECISIONS), values=PRECISIONS),
    axes.Axis("chains", "independent chains per thread", list(CHAINS), kind="ints", one="chain count",
              values=CHAINS, help="comma-separated, each of 1, 2, 4, 8, 16"),
    k.block_sizes_axis(),
    axes.Axis("fmas_per_thread", "FMAs per thread", DEFAULT_FMAS_PER_THREAD, kind="int", low=1 << 10, high=1 << 20,
              power_of_two=True, multiple_of=FMAS_PER_TRIP,
              help="FMAs each thread runs, a power of two (2^10 … 2^20): the length of a sample"),
)


# Each precision, each block size, each chain count (param_value), at the one FMAs per thread (intensity).
GRID = Grid([Coordinate("variant", axis="precisions"), Coordinate("block_size", axis="block_sizes"),
             Coordinate("param_value", axis="chains"), Coordinate("intensity", axis="fmas_per_thread")])


class Params(axes.parameters(AXES, grid=GRID, key_columns=KEY_COLUMNS)):
    pass


parse_params = axes.parser(Params)


def invalid_reasons(params: Params, limits) -> list[str]:
    return axes.reasons(params, limits)


def grid_blocks(sm_count: int, threads_per_sm: int, block: int) -> int:
    """Blocks that fill every SM ``WAVES`` times at the most threads it holds (fewer run at once where registers
    limit residency; the grid is still many times the device)."""
    return sm_count * max(1, threads_per_sm // block) * WAVES


def expected_sums(threads: int, chains: int, fmas_per_thread: int, precision: str, b: float = B) -> np.ndarray:
    """What each thread must write (a = 1): chain c of thread i starts at (i mod 1024) + c and adds b once per FMA,
    fmas_per_thread / chains times; the thread writes the sum of its chains. Whole numbers, exact in both
    precisions (below 2^24 for the axis' largest values)."""
    start = np.arange(threads, dtype=np.int64) & 1023
    total = start * chains + chains * (chains - 1) // 2 + int(fmas_per_thread * b)
    return total.astype(np.float32 if precision == compute.FP32 else np.float64)


def check_sums(expected: np.ndarray, got: np.ndarray, what: str) -> None:
    """Every thread's sum exactly as expected (a NaN, the poison, never is); VerificationError names the first wrong
    thread and the number of wrong ones."""
    if got.shape == expected.shape and np.array_equal(expected, got):
        return
    if got.shape != expected.shape:
        raise VerificationError(f"{what}: got {got.size:,} results, expected {expected.size:,}")
    wrong = np.flatnonzero(expected != got)
    first = int(wrong[0])
    raise VerificationError(f"{what}: {wrong.size:,} of {expected.size:,} threads wrote a wrong sum, first thread "
                            f"{first:,} (expected {expected[first]:g}, got {got[first]:g})")


def precision(row) -> str:
    """The precision a point computes in ("fp32", "fp64"): the Roofline page judges it against that compute roof."""
    return str(row["variant"])


def flops(row) -> float:
    """FLOPs of one execution of the point: 2 × the FMAs run (threads × FMAs per thread). The chains' final sum
    (chains − 1 adds per thread, under 0.1 % of the work) is not counted."""
    return compute.FLOP_PER_FMA * float(row["elements"]) * float(row["intensity"])


def flops_per_second(row) -> float:
    return flops(row) / (float(row["median_ms"]) / 1e3)


def roofs(frame: pd.DataFrame) -> list[Roof]:
    """The compute roofs this run measured: per precision, its best point's median rate ("FP32 FMA",
    "FP64 FMA"), with where it was measured and its share of the theoretical rate at the clock recorded."""
    found = []
    for precision in PRECISIONS:
        rows = frame[frame["variant"] == precision]
        if rows.empty:
            continue
        rates = np.array([flops_per_second(row) for row in rows.to_dict("records")])
        if not np.isfinite(rates).any():
            continue
        best = rows.iloc[int(np.nanargmax(rates))].to_dict()
        rate = float(np.nanmax(rates))
        found.append(Roof(LABELS[precision], COMPUTE, rate, roof_source(best, rate), str(best.get("run_id") or ""),
                          precision))
    return found


def roof_source(row: dict, rate: float) -> str:
    """Where a compute roof was measured, in one sentence."""
    where = (f"{LABELS[row['variant']]} with {int(row['param_value'])} independent chains per thread, block "
             f"{int(row['block_size'])}, {int(row['intensity']):,} FMAs per thread × {int(row['elements']):,} threads: "
             f"{rate / 1e12:,.1f} TFLOP/s (2 FLOP per FMA; the kernel reads nothing and writes one "
             f"{ITEM_BYTES[row['variant']]}-byte result per thread)")
    theoretical = compute.row_theoretical_flops(row)
    if theoretical is None:
        return where + "; no theoretical figure for compute capability " + str(row.get("compute_capability"))
    return (where + f", {rate / theoretical:.0%} of the theoretical {theoretical / 1e12:,.1f} TFLOP/s at the "
            f"{float(row['sm_clock_mhz']):,.0f} MHz recorded")
