"""The theoretical fused multiply-add rate of an NVIDIA GPU: SMs × FMA lanes per SM × 2 FLOP × SM clock.

Lanes per SM are the "results per clock cycle per multiprocessor" of 32-bit and 64-bit floating-point add,
multiply and multiply-add in the "Throughput of Native Arithmetic Instructions" table of NVIDIA's CUDA C++
Programming Guide (section "Arithmetic Instructions", CUDA 12.x; the 7.x column gives 32 FP64 results, 2 for 7.5).
A compute capability the table does not list has no theoretical figure here: ``None``, never a guess.

The clock is the one the run recorded (a row's ``sm_clock_mhz``: NVML's median SM clock while the point was
measured), so a GPU that lowered its clock under load is judged against what it could do at that clock.
"""

from __future__ import annotations

import math

FP32, FP64 = "fp32", "fp64"
PRECISIONS = (FP32, FP64)
FLOP_PER_FMA = 2

# (major, minor) -> (FP32, FP64) FMA results per clock per SM, from the Programming Guide's table (see above).
FMA_LANES_PER_SM: dict[tuple[int, int], tuple[int, int]] = {
    (6, 0): (64, 32),   # P100
    (6, 1): (128, 4),
    (6, 2): (128, 4),
    (7, 0): (64, 32),   # V100
    (7, 5): (64, 2),    # Turing
    (8, 0): (64, 32),   # A100
    (8, 6): (128, 2),   # GA10x
    (8, 9): (128, 2),   # Ada
    (9, 0): (128, 64),  # H100, H200
}


def capability(value) -> tuple[int, int] | None:
    """A compute capability as (major, minor) from "9.0", (9, 0) or 9.0; None when it is not one."""
    if isinstance(value, tuple | list) and len(value) == 2:
        try:
            return int(value[0]), int(value[1])
        except (TypeError, ValueError):
            return None
    major, dot, minor = str(value).strip().partition(".")
    if not (dot and major.isdigit() and minor.isdigit()):
        return None
    return int(major), int(minor)


def fma_lanes(compute_capability, precision: str) -> int | None:
    """FMA results per clock per SM of ``precision`` ("fp32" or "fp64"), or None for a capability the table
    does not list."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision is {' or '.join(PRECISIONS)}, not {precision!r}")
    lanes = FMA_LANES_PER_SM.get(capability(compute_capability))
    return None if lanes is None else lanes[PRECISIONS.index(precision)]


def theoretical_flops(sm_count, compute_capability, precision: str, clock_mhz) -> float | None:
    """FLOP/s of ``precision`` FMAs at ``clock_mhz``: SMs × lanes × 2 × clock; None when the capability is not in
    the table or the SM count or clock is missing."""
    lanes = fma_lanes(compute_capability, precision)
    try:
        sms, clock = float(sm_count), float(clock_mhz)
    except (TypeError, ValueError):
        return None
    if lanes is None or not (math.isfinite(sms) and math.isfinite(clock)) or sms <= 0 or clock <= 0:
        return None
    return sms * lanes * FLOP_PER_FMA * clock * 1e6


def row_theoretical_flops(row) -> float | None:
    """A measured row's theoretical rate: its device (``sm_count``, ``compute_capability``), its precision
    (``variant``) and the clock it recorded (``sm_clock_mhz``)."""
    return theoretical_flops(row.get("sm_count"), row.get("compute_capability"), str(row.get("variant")),
                             row.get("sm_clock_mhz")) if row.get("variant") in PRECISIONS else None
