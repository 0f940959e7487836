"""Managed (unified) memory: what a kernel pays when its data must first migrate from the host.

One kernel (``checksum_u32`` in ``gpu/kernels/memory_modes.cu``: reads every word once, 16-byte loads,
adds them into one 64-bit sum) reads the same bytes in five situations (variants):

* ``device`` – an ordinary ``cudaMalloc`` buffer: the reference;
* ``first_touch`` – a managed buffer the host has just written, so its pages live on the host and migrate
  on the kernel's page faults (the sample covers the kernel, faults and migration included);
* ``prefetch`` – ``cuMemPrefetchAsync`` of the host-written buffer to the device, alone: the migration cost
  done explicitly (GB/s of pages moved);
* ``after_prefetch`` – the kernel straight after that prefetch (the two are timed in one sample with an
  event between them, so each sample of ``prefetch`` has its ``after_prefetch`` partner);
* ``resident`` – the kernel again on a managed buffer already on the device.

Before every first-touch and prefetch sample the host rewrites the whole buffer (untimed), which pulls its
pages back to the host. Kernel samples flush L2 first (as the kernel pages do). Every kernel's checksum must
equal the host's exact sum of the words; a wrong sum fails the job. Bytes: the buffer's size, read once.
"""

from __future__ import annotations

import numpy as np

from gpu.core import stats
from gpu.core.errors import VerificationError
from gpu.core.units import GiB, MiB, format_bytes
from gpu.device.timing import KernelTimer
from gpu.experiments import _kernels as k
from gpu.experiments import axes, harness
from gpu.experiments.verify import pattern_for

NAME = "managed"
# Registration (gpu/experiments/registry.py): the runner's subcommand, the page, the place in lists.
COMMAND, ORDER, PAGE = "managed", 6, "pages/memory_modes.py"
HELP = "managed memory: first touch, prefetch, resident vs device memory"
BYTE_LABELS = True  # Compare writes bytes and param_value as sizes
VARIANTS = ("device", "first_touch", "prefetch", "after_prefetch", "resident")
LABELS = {"device": "device memory (cudaMalloc)", "first_touch": "managed, first touch (migrates on fault)",
          "prefetch": "managed, prefetch to device (migration alone)",
          "after_prefetch": "managed, kernel after prefetch", "resident": "managed, already resident"}
KEY_COLUMNS = ["variant", "bytes"]
SHOW_COLUMNS = ["variant", "bytes"]
MIN_SIZE, MAX_SIZE, ALIGN = 1 * MiB, 8 * GiB, 64 * 1024
BLOCK = 256
TITLE = "Managed memory: migration on first touch, prefetch, resident"
AXES = (
    axes.Axis("sizes", "buffer sizes", [256 * MiB], kind="sizes", one="size", low=MIN_SIZE, high=MAX_SIZE,
              multiple_of=ALIGN, why="managed memory migrates in such pages", unit="bytes",
              help="sizes, multiples of 64 KiB (a list or a 1MiB:1GiB range)"),
    # Measured in this order: after_prefetch needs prefetch's samples; resident needs a migrated buffer.
    axes.Axis("variants", "cases", list(VARIANTS), values=VARIANTS, order="declared"),
)


class Params(axes.parameters(AXES)):
    def points(self):
        for size in self.sizes:
            for variant in self.variants:
                yield variant, size


parse_params = axes.parser(Params)


def invalid_reasons(params: Params, limits) -> list[str]:
    reasons = axes.reasons(params, limits)
    if reasons:
        return reasons
    largest = max(params.sizes)
    # Never ask for more managed memory than the device has free: oversubscription can hang a GPU.
    reasons += k.memory_reasons(2 * largest, limits, f"{format_bytes(largest)} of managed memory plus a device copy")
    if limits is not None and limits.host_available_bytes and 3 * largest > limits.host_available_bytes:
        reasons.append(f"size {format_bytes(largest)} needs {format_bytes(3 * largest)} of host memory (pattern, "
                       f"migrated pages) but {format_bytes(limits.host_available_bytes)} is available")
    return reasons


def bytes_moved(size: int) -> int:
    return int(size)


class ManagedSweep(harness.Sweep):
    """Each size: a device buffer and a managed buffer holding the same words, then every case in order."""


    def __init__(self, params, gpu, profile):
        super().__init__(params, gpu, profile)
        self.checksum = gpu.kernel("memory_modes", "checksum_u32")

    def setup(self) -> None:
        # Not held: a prefetch inside a timed sample may wait on the stream (StreamHold's docstring).
        self.timer = KernelTimer(self.gpu, self.ledger, hold=False)
        self.total = self.ledger.device_buffer(8)
        self.mid = self.cuda.Event()

    def points(self):
        cuda, ledger = self.cuda, self.ledger
        for size in self.params.sizes:
            pattern = pattern_for(size // 4, seed=size)
            exact = int(pattern.sum(dtype=np.uint64))
            device = ledger.device_buffer(size)
            cuda.memcpy_htod(device, pattern)
            managed = ledger.managed_buffer(size)
            pointer = managed.base.get_device_pointer()
            cuda.Context.synchronize()
            group = {"size": size, "pattern": pattern, "exact": exact, "device": device, "managed": managed,
                     "pointer": pointer, "split": {}}
            for variant in self.params.variants:
                yield harness.Point({"variant": variant, "group": "managed", "direction": "device"},
                                    f"{LABELS[variant]} · {format_bytes(size)}", bytes_moved(size),
                                    "cuda_event" if variant == "prefetch" else "cuda_event_l2_flushed",
                                    (variant, group))
            ledger.free_managed(managed)
            ledger.free_device(device)

    def launch(self, stream, source, size: int) -> None:
        self.cuda.memset_d32_async(self.total, 0, 2, stream)
        self.checksum(np.uintp(int(source)), np.uint64(size // 16), self.total, block=(BLOCK, 1, 1),
                      grid=(self.gpu.sm_count * 8, 1), stream=stream)

    def host_writes(self, group) -> None:
        """The host produces the data (untimed): every page of the buffer is now on the host."""
        self.cuda.Context.synchronize()
        np.copyto(group["managed"], group["pattern"])

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
        # resident: migrate once, then time the kernel on pages already on the device
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


def noise_kind(row) -> str | None:
    """Compare's kind for a point: first touches and prefetches time page migration ("managed migration"); the
    other cases read memory already resident, which the generic rule judges."""
    return "managed migration" if row.get("variant") in ("first_touch", "prefetch") else None
