"""What the kernel experiments share: parameter checks, launch shapes and result rows."""

from __future__ import annotations

import numpy as np

from gpu.core import stats
from gpu.core.units import format_bytes
from gpu.experiments.axes import Axis

DEVICE_RESERVE_BYTES = 512 * 1024**2


def block_sizes_axis(default=(256,), **overrides) -> Axis:
    """The threads-per-block axis every kernel experiment sweeps: multiples of the warp, up to the device's limit."""
    return Axis("block_sizes", "block sizes", list(default), kind="ints", one="block size", low=32, high=1024,
                limit="max_threads_per_block", multiple_of=32, why="the warp size", unit="threads",
                **{"help": "comma-separated block sizes (multiples of 32), or start:stop:step", **overrides})


def memory_reasons(needed_bytes: int, limits, what: str) -> list[str]:
    if limits is None:
        return []
    room = limits.free_device_bytes - DEVICE_RESERVE_BYTES
    if needed_bytes > room:
        return [f"{what} needs {format_bytes(needed_bytes)} of device memory; "
                f"{format_bytes(limits.free_device_bytes)} is free and {format_bytes(DEVICE_RESERVE_BYTES)} "
                f"is kept in reserve, so at most {format_bytes(max(room, 0))}"]
    return []


def grid_for(elements: int, block: int) -> tuple[int, int]:
    """One thread per element; grids wider than 2^31-1 blocks are not needed at these sizes."""
    return (max(1, -(-elements // block)), 1)


def row(variant: str, group: str, nbytes: int, summary: stats.Summary, profile: stats.Profile, telemetry,
        timer: str, **params) -> dict:
    """A schema row for a kernel measurement (direction 'device'; bytes = useful bytes read + written); ``timer``
    is what the clock covered (``KernelTimer.timer_name``)."""
    return measured_row(summary, profile, telemetry, nbytes, timer, variant=variant, group=group,
                        direction="device", **params)


def measured_row(summary: stats.Summary, profile: stats.Profile, telemetry, nbytes: int, timer: str,
                 **point) -> dict:
    """A verified schema row: the point's own columns (``point``), then its measurement and telemetry."""
    return {
        **point, "bytes": int(nbytes), "median_ms": summary.median_ms, "min_ms": summary.min_ms,
        "max_ms": summary.max_ms, "cv": summary.cv, "samples": summary.samples,
        "gbps": stats.gbps(nbytes, summary.median_ms), "stop_reason": summary.stop_reason, "profile": profile.name,
        "timer": timer, "verified": True, "samples_ms": summary.samples_ms, **telemetry.point_summary(),
    }


def small_int_floats(count: int, seed: int) -> np.ndarray:
    """Floats that are small integers: sums and products of a few stay exact, so outputs verify exactly."""
    # Random bytes masked to 12 bits: ~4× faster than rng.integers at 2^26 values, the same uniform 0 … 4095.
    rng = np.random.default_rng(seed)
    return (np.frombuffer(rng.bytes(2 * count), np.uint16) & np.uint16(4095)).astype(np.float32)
