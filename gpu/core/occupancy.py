"""Theoretical occupancy, computed exactly as the CUDA driver does (no GPU needed).

Follows the rules of the CUDA toolkit's ``cuda_occupancy.h`` for compute capability 7.0 and newer:
blocks per SM are the minimum of the limits set by warps, the per-SM block cap, registers (allocated
per warp in units of 256, and warps spread over 4 sub-partitions' register files) and shared memory
(static + dynamic + the driver's reserved 1 KiB per block, rounded to the allocation granularity, against
the largest shared-memory carveout). ``pycuda.tools.OccupancyRecord`` predates these rules and disagrees
with the driver on Hopper; tests/fixtures/occupancy_driver_*.json holds driver answers this must match.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from gpu.core import paths

PROFILE_DIR = paths.asset("occupancy")

# Shared-memory carveouts a kernel's SM can be configured to, in KiB, by architecture (cuda_occupancy.h).
_CARVEOUTS_KIB = {
    (7, 0): [0, 8, 16, 32, 64, 96], (7, 2): [0, 8, 16, 32, 64, 96], (7, 5): [32, 64],
    (8, 0): [0, 8, 16, 32, 64, 100, 132, 164], (8, 7): [0, 8, 16, 32, 64, 100, 132, 164],
    (8, 6): [0, 8, 16, 32, 64, 100], (8, 9): [0, 8, 16, 32, 64, 100],
    (9, 0): [0, 8, 16, 32, 64, 100, 132, 164, 196, 228],
}
_BLOCKS_PER_SM = {(7, 5): 16, (8, 0): 32, (8, 9): 24}
LIMITERS = ("warps", "blocks", "registers", "shared memory")


@dataclass(frozen=True)
class DeviceLimits:
    """A device's occupancy-relevant facts (CUDA device attributes) and its architecture's granularities."""

    name: str
    compute_capability: tuple[int, int]
    max_threads_per_block: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    warp_size: int
    regs_per_sm: int
    regs_per_block: int
    shared_per_sm: int
    shared_per_block: int
    shared_per_block_optin: int
    reserved_shared_per_block: int
    reg_alloc_unit: int = 256
    max_regs_per_thread: int = 255
    sub_partitions: int = 4
    shared_granularity: int = 128

    @classmethod
    def from_attributes(cls, name: str, cc: tuple[int, int], attrs: dict) -> DeviceLimits:
        """From CUDA device attributes keyed by their names (as in the recorded fixtures)."""
        major, minor = cc
        if major < 7:
            raise ValueError(f"compute capability {major}.{minor}: PinPoint's calculator covers 7.0 and newer")
        blocks = _BLOCKS_PER_SM.get((major, minor), 16 if major == 8 else 32)
        return cls(name=name, compute_capability=(major, minor),
                   max_threads_per_block=attrs["MAX_THREADS_PER_BLOCK"],
                   max_threads_per_sm=attrs["MAX_THREADS_PER_MULTIPROCESSOR"],
                   max_blocks_per_sm=attrs.get("MAX_BLOCKS_PER_MULTIPROCESSOR", blocks),
                   warp_size=attrs["WARP_SIZE"], regs_per_sm=attrs["MAX_REGISTERS_PER_MULTIPROCESSOR"],
                   regs_per_block=attrs["MAX_REGISTERS_PER_BLOCK"],
                   shared_per_sm=attrs["MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"],
                   shared_per_block=attrs["MAX_SHARED_MEMORY_PER_BLOCK"],
                   shared_per_block_optin=attrs["MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"],
                   reserved_shared_per_block=attrs["RESERVED_SHARED_MEMORY_PER_BLOCK"],
                   max_regs_per_thread=255 if major < 7 else 256,
                   shared_granularity=256 if major < 8 else 128)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class KernelResources:
    """What a compiled kernel needs: registers per thread, static shared memory, its dynamic-smem cap."""

    registers_per_thread: int
    static_shared_bytes: int = 0
    max_dynamic_shared_bytes: int = 48 * 1024


@dataclass(frozen=True)
class Occupancy:
    block_size: int
    dynamic_shared_bytes: int
    blocks_per_sm: int
    warps_per_sm: int
    occupancy: float  # active warps / maximum warps per SM
    limiter: str  # the binding limit (first of LIMITERS on ties), or "invalid"
    limits: dict  # blocks allowed by each resource
    reason: str = ""  # why no block fits, when blocks_per_sm == 0


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def _carveout_for(device: DeviceLimits, needed: int) -> int | None:
    """Smallest carveout (bytes) holding ``needed`` bytes, as the driver would configure the SM."""
    for kib in _CARVEOUTS_KIB.get(device.compute_capability, [device.shared_per_sm // 1024]):
        if needed <= kib * 1024:
            return kib * 1024
    return None


def occupancy(device: DeviceLimits, kernel: KernelResources, block_size: int,
              dynamic_shared_bytes: int = 0) -> Occupancy:
    """Blocks per SM for one launch configuration, as ``cuOccupancyMaxActiveBlocksPerMultiprocessor``."""
    warps_per_block = -(-block_size // device.warp_size)
    max_warps = device.max_threads_per_sm // device.warp_size
    limits: dict[str, int] = {}
    reason = ""

    # Warps and threads.
    if block_size <= 0 or block_size > device.max_threads_per_block:
        return Occupancy(block_size, dynamic_shared_bytes, 0, 0, 0.0, "invalid", {k: 0 for k in LIMITERS},
                         f"block size {block_size} is outside 1…{device.max_threads_per_block} threads")
    limits["warps"] = max_warps // warps_per_block
    limits["blocks"] = device.max_blocks_per_sm

    # Registers: allocated per warp, warps spread evenly over the sub-partitions' register files.
    regs = kernel.registers_per_thread
    regs_per_warp = _round_up(regs * device.warp_size, device.reg_alloc_unit)
    regs_per_block = regs_per_warp * warps_per_block
    regs_assumed = regs_per_warp * _round_up(warps_per_block, device.sub_partitions)
    if regs_assumed > device.regs_per_block or regs_per_block > device.regs_per_block \
            or regs > device.max_regs_per_thread:
        limits["registers"] = 0
        reason = reason or (f"{regs} registers × {warps_per_block * device.warp_size} threads exceed the "
                            f"{device.regs_per_block} registers a block may use")
    elif regs_per_warp == 0:
        limits["registers"] = 1 << 30
    else:
        warps_per_partition = (device.regs_per_sm // device.sub_partitions) // regs_per_warp
        limits["registers"] = warps_per_partition * device.sub_partitions // warps_per_block

    # Shared memory: static + dynamic + reserved, rounded; checked against the per-block limit.
    static = kernel.static_shared_bytes + device.reserved_shared_per_block
    allocated = _round_up(static + dynamic_shared_bytes, device.shared_granularity)
    optin = static + kernel.max_dynamic_shared_bytes > device.shared_per_block
    per_block_limit = (device.shared_per_block_optin if optin else device.shared_per_block) \
        + device.reserved_shared_per_block
    if (optin and dynamic_shared_bytes > kernel.max_dynamic_shared_bytes) or allocated > per_block_limit:
        limits["shared memory"] = 0
        reason = reason or (f"{allocated} bytes of shared memory per block (with the driver's reserve) exceed "
                            f"the {per_block_limit}-byte per-block limit")
    else:
        preferred = _carveout_for(device, device.shared_per_sm) or device.shared_per_sm
        per_sm = preferred if preferred >= allocated else (_carveout_for(device, allocated) or 0)
        limits["shared memory"] = per_sm // allocated if allocated else 1 << 30

    blocks = min(limits[k] for k in LIMITERS)
    limiter = next(k for k in LIMITERS if limits[k] == blocks) if blocks > 0 else "invalid"
    warps = blocks * warps_per_block
    return Occupancy(block_size, dynamic_shared_bytes, blocks, warps, warps / max_warps, limiter,
                     {k: (v if v < 1 << 30 else None) for k, v in limits.items()}, reason if not blocks else "")


def load_driver_table(path) -> tuple[DeviceLimits, list[dict], dict]:
    """A recorded driver table (``python -m gpu.bench occupancy-driver``): device, answers, metadata."""
    table = json.loads(Path(path).read_text())
    device = dict(table["device"])
    device["compute_capability"] = tuple(device["compute_capability"])
    meta = {"driver_version": table.get("driver_version"), "recorded": table.get("recorded")}
    return DeviceLimits(**device), table["answers"], meta


def recorded_profiles(directory=PROFILE_DIR) -> dict[str, tuple[DeviceLimits, dict]]:
    """Device profiles whose driver answers are committed: name → (limits, {driver_version, recorded, checked})."""
    profiles = {}
    for path in sorted(Path(directory).glob("*.json")):
        device, answers, meta = load_driver_table(path)
        profiles[device.name] = (device, {**meta, "checked": sum(a["blocks_per_sm"] is not None for a in answers)})
    return profiles
