"""What a job may ask for on a device. The worker reads it (``GpuRuntime.limits``), the app keeps the copy the
worker reported, and the declarations check parameters against it: plain data, no CUDA."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Limits:
    """What a job may ask for on this device, read just before it runs."""

    free_device_bytes: int
    total_device_bytes: int
    pinned_budget_bytes: int
    host_available_bytes: int
    max_threads_per_block: int
    warp_size: int

    def as_dict(self) -> dict:
        return asdict(self)
