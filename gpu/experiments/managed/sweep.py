"""How the worker measures the managed experiment, declared in this package's ``__init__.py``
(its docstring says what is measured, how it is timed and how it is checked)."""

from __future__ import annotations

import numpy as np

from gpu.core import stats
from gpu.core.errors import VerificationError
from gpu.core.units import format_bytes
from gpu.device.timing import KernelTimer
from gpu.experiments.managed import BLOCK, LABELS, bytes_moved
from gpu.sweeps import harness
from gpu.sweeps.verify import pattern_for


class ManagedSweep(harness.Sweep):
    """Each size: a device buffer and a managed buffer holding the same words, then every case in order. Timed by the
    ``KernelTimer`` (L2 flushed, unheld), not a harness timing method: the host rewrites the managed buffer before
    some samples, and a prefetch and its kernel are one sample split by an event (``once_split``)."""

    def __init__(self, params, gpu, profile):
        super().__init__(params, gpu, profile)
        self.checksum = gpu.kernel("memory_modes", "checksum_u32")

    def setup(self) -> None:
        # Not held: a prefetch inside a timed sample may wait on the stream (StreamHold's docstring).
        self.timer = KernelTimer(self.gpu, self.ledger, hold=False)
        self.total = self.ledger.device_buffer(8)
        self.mid = self.cuda.Event()

    def group_of(self, grid_point):
        return grid_point["bytes"]

    def enter_group(self, size) -> None:
        """A device buffer and a managed buffer of ``size``, and the words every case's checksum must add up to."""
        cuda, ledger = self.cuda, self.ledger
        pattern = pattern_for(size // 4, seed=size)
        exact = int(pattern.sum(dtype=np.uint64))
        device = ledger.device_buffer(size)
        cuda.memcpy_htod(device, pattern)
        managed = ledger.managed_buffer(size)
        pointer = managed.base.get_device_pointer()
        cuda.Context.synchronize()
        self.group = {"size": size, "pattern": pattern, "exact": exact, "device": device, "managed": managed,
                      "pointer": pointer, "split": {}}

    def leave_group(self, size) -> None:
        self.ledger.free_managed(self.group["managed"])
        self.ledger.free_device(self.group["device"])
        self.group = None

    def point(self, grid_point):
        variant, size = grid_point["variant"], grid_point["bytes"]
        return harness.Point({"variant": variant, "group": "managed", "direction": "device"},
                             f"{LABELS[variant]} · {format_bytes(size)}", bytes_moved(size),
                             "cuda_event" if variant == "prefetch" else "cuda_event_l2_flushed", (variant, self.group))

    def launch(self, stream, source, size: int) -> None:
        self.cuda.memset_d32_async(self.total, 0, 2, stream)
        self.checksum(np.uintp(int(source)), np.uint64(size // 16), self.total, block=(BLOCK, 1, 1),
                      grid=(self.gpu.sm_count * 8, 1), stream=stream)

    def host_writes(self, group) -> None:
        """The host produces the data (untimed): every page of the buffer is now on the host."""
        self.cuda.Context.synchronize()
        np.copyto(group["managed"], group["pattern"])
        group["written"] = True

    def measure(self, point):
        variant, group = point.state
        size, pointer, timer = group["size"], group["pointer"], self.timer
        if variant == "device":
            return lambda: timer.once(lambda s: self.launch(s, group["device"], size))
        if variant == "first_touch":
            def sample() -> float:
                self.host_writes(group)
                self.telemetry.sample()
                return timer.once(lambda s: self.launch(s, pointer, size))

            return stats.sample_until_stable(sample, self.profile)
        if variant in ("prefetch", "after_prefetch"):
            if "prefetch" not in group["split"]:
                group["split"] = self._prefetch_samples(group)
            return group["split"][variant]
        # resident: migrate once, then time the kernel on pages already on the device. The host writes the data first
        # where no earlier case has (resident asked alone, or after device only): a buffer never written sums to 0.
        if not group.get("written"):
            self.host_writes(group)
        self.gpu.prefetch(pointer, size, None)
        self.cuda.Context.synchronize()
        return lambda: timer.once(lambda s: self.launch(s, pointer, size))

    def _prefetch_samples(self, group) -> dict:
        """Prefetch, then the kernel, in one sample with an event between them; split into two summaries."""
        size, pointer = group["size"], group["pointer"]
        prefetch_ms: list[float] = []
        kernel_ms: list[float] = []

        def sample() -> float:
            self.host_writes(group)
            self.telemetry.sample()
            first, second = self.timer.once_split(lambda s: self.gpu.prefetch(pointer, size, s),
                                                  lambda s: self.launch(s, pointer, size), self.mid)
            prefetch_ms.append(first)
            kernel_ms.append(second)
            return prefetch_ms[-1] + kernel_ms[-1]

        both = stats.sample_until_stable(sample, self.profile)
        # Warm-up samples are not kept: keep the last ``samples`` of each.
        count = both.samples
        return {"prefetch": stats.summarize(prefetch_ms[-count:], both.stop_reason),
                "after_prefetch": stats.summarize(kernel_ms[-count:], both.stop_reason)}

    def verify(self, point) -> None:
        variant, group = point.state
        self.cuda.Context.synchronize()
        got = np.zeros(1, np.uint64)
        self.cuda.memcpy_dtoh(got, self.total)
        if int(got[0]) != group["exact"]:
            raise VerificationError(f"{LABELS[variant]}, {format_bytes(group['size'])}: checksum {int(got[0])}, the "
                                    f"host's sum is {group['exact']}: the kernel read wrong data")


run = harness.runner(ManagedSweep)
