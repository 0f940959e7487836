"""What the kernel experiments' declarations share: the block-size axis and the device-memory check."""

from __future__ import annotations

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
