"""What the kernel sweeps share: launch shapes, exact inputs and result rows (the declarations' shared checks are in
``gpu/experiments/_kernels.py``)."""

from __future__ import annotations

import numpy as np

from gpu.core import stats


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
