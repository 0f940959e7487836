"""What the kernel sweeps share: launch shapes, exact inputs and result rows (the declarations' shared checks are in
``gpu/experiments/_kernels.py``)."""

from __future__ import annotations

import numpy as np

from gpu.core import stats
from gpu.sweeps.verify import verify_pool


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


SLICE = 1 << 22  # values drawn per slice, each slice from its own generator of the seed's sequence


def small_int_floats(count: int, seed: int) -> np.ndarray:
    """Floats that are small integers: sums and products of a few stay exact, so outputs verify exactly. The same
    ``count`` and ``seed`` always give the same values."""
    # Random bytes masked to 12 bits (~4× faster than rng.integers, the same uniform 0 … 4095), drawn in slices on
    # several cores, each from a generator spawned from the seed: 2^26 values took 0.47 s on one core of an H100's
    # host, before the Coalescing and Streams sweeps could start.
    out = np.empty(count, np.float32)
    starts = range(0, count, SLICE)
    generators = np.random.SeedSequence(seed).spawn(len(starts))

    def fill(index: int) -> None:
        lo = starts[index]
        hi = min(lo + SLICE, count)
        words = np.frombuffer(np.random.default_rng(generators[index]).bytes(2 * (hi - lo)), np.uint16)
        out[lo:hi] = words & np.uint16(4095)  # converted to float32 as it is stored

    list(verify_pool().map(fill, range(len(starts))))
    return out
