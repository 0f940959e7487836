"""The roofline's vocabulary: measured ceilings (roofs) and where a kernel sits under them.

A roof is a measured rate: memory roofs in bytes/s (HBM, L2), compute roofs in FLOP/s (FP32 and FP64 fused
multiply-add). Experiments that measure a ceiling declare ``roofs(frame) -> list[Roof]``; experiments whose points
do arithmetic declare ``flops(row) -> float`` (the FLOPs of one execution of the point, counted as ``bytes`` is:
a fused multiply-add is 2 FLOP). Bytes always count what a kernel reads plus what it writes, once each, as
bandwidthTest's device-to-device mode does.
"""

from __future__ import annotations

from dataclasses import dataclass

MEMORY, COMPUTE = "memory", "compute"


@dataclass(frozen=True)
class Roof:
    """One measured ceiling: ``name`` ("HBM", "L2", "FP32 FMA", "FP64 FMA"), ``kind`` (``MEMORY``: bytes/s,
    ``COMPUTE``: FLOP/s), the rate, and where it was measured (``source``: the point in words, ``run_id``)."""

    name: str
    kind: str
    per_second: float
    source: str
    run_id: str = ""
    precision: str = ""  # compute roofs: "fp32" or "fp64"; a kernel sits under the roof of its precision
    cache: bool = False  # memory roofs: a cache's (L2), measured from a working set that fits it; a ceiling above
    # the DRAM roof's, so one measured at or below it bounds nothing

    def __post_init__(self):
        if self.kind not in (MEMORY, COMPUTE):
            raise ValueError(f"a roof is '{MEMORY}' or '{COMPUTE}', not '{self.kind}'")
        if not self.per_second > 0:
            raise ValueError(f"roof {self.name}: a ceiling must be a positive rate, not {self.per_second}")


def ridge_intensity(memory: Roof, compute: Roof) -> float:
    """FLOP per byte where the memory roof meets the compute roof: below it a kernel is bound by memory."""
    return compute.per_second / memory.per_second


def attainable(intensity: float, memory: Roof, compute: Roof) -> float:
    """The roofline's FLOP/s ceiling at ``intensity`` FLOP/byte: min(compute, intensity × memory)."""
    return min(compute.per_second, intensity * memory.per_second)
