"""Memory pools vs allocating per call: allocate → copy → free, again and again, both ways.

Variants (one sample = one iteration, host clock, allocation + copy + free; filling the host buffer with the
iteration's data is left out of the time, since both ways must do it):

* ``device_per_call`` – ``mem_alloc`` and ``free`` of the device buffer every iteration; the pinned source
  is allocated once;
* ``device_pooled`` – the same through PyCUDA's ``DeviceMemoryPool`` (a freed block goes back to the pool);
* ``pinned_per_call`` – ``pagelocked_empty`` and ``mem_alloc`` every iteration, as code that allocates
  its staging buffer per transfer does;
* ``pinned_pooled`` – both from ``PageLockedMemoryPool`` and ``DeviceMemoryPool``.

The copy is a synchronous ``memcpy_htod``. Every iteration copies one of two alternating patterns and reads
the device buffer back (untimed): a pool that handed out a block still in use, or a stale block, fails
verification. Bytes: the buffer's size, copied once.
"""

from __future__ import annotations

import time

import numpy as np

from gpu.core.units import KiB, MiB, format_bytes
from gpu.experiments import _kernels as k
from gpu.experiments import axes, harness
from gpu.experiments.verify import pattern_for, verify_equal

NAME = "pools"
# Registration (gpu/experiments/registry.py): the runner's subcommand, the page, the place in lists.
COMMAND, ORDER, PAGE = "pools", 7, "pages/memory_modes.py"
HELP = "allocate → copy → free per call vs DeviceMemoryPool/PageLockedMemoryPool"
BYTE_LABELS = True  # Compare writes bytes and param_value as sizes
VARIANTS = ("device_per_call", "device_pooled", "pinned_per_call", "pinned_pooled")
LABELS = {"device_per_call": "device: mem_alloc per call", "device_pooled": "device: DeviceMemoryPool",
          "pinned_per_call": "pinned + device: allocate per call",
          "pinned_pooled": "pinned + device: PageLockedMemoryPool + DeviceMemoryPool"}
KEY_COLUMNS = ["variant", "bytes"]
SHOW_COLUMNS = ["variant", "bytes"]
DEFAULT_SIZES = [4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB, 256 * MiB]
MAX_SIZE = 1024 * MiB
TITLE = "Memory pools vs allocating per call"
AXES = (
    axes.Axis("sizes", "buffer sizes", DEFAULT_SIZES, kind="sizes", one="size", low=4, high=MAX_SIZE, multiple_of=4,
              unit="bytes"),
    axes.Axis("variants", "ways to allocate", list(VARIANTS), values=VARIANTS, one="variant"),
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
    # Per-call and pooled blocks can coexist with the pool's held block for a moment.
    reasons += k.memory_reasons(3 * largest, limits, f"{format_bytes(largest)} buffers (per call and pooled)")
    if limits is not None and 4 * largest > limits.pinned_budget_bytes:
        reasons.append(f"size {format_bytes(largest)} needs {format_bytes(4 * largest)} of pinned memory (two sources, "
                       f"a per-call and a pooled buffer) over the budget of {format_bytes(limits.pinned_budget_bytes)} "
                       "(PINPOINT_PINNED_BUDGET_BYTES sets it)")
    return reasons


def bytes_moved(size: int) -> int:
    return int(size)


class PoolsSweep(harness.Sweep):
    """Each size: two pinned sources filled with alternating patterns, then every variant's iterations."""


    def __init__(self, params, gpu, profile):
        super().__init__(params, gpu, profile)
        self.device_pool, self.pinned_pool = gpu.memory_pools()

    def points(self):
        ledger = self.ledger
        for size in self.params.sizes:
            count = size // 4
            patterns = [pattern_for(count, seed=size + i) for i in range(2)]
            sources = [ledger.host_buffer(size, "pinned") for _ in range(2)]
            for source, pattern in zip(sources, patterns, strict=True):
                np.copyto(source, pattern)
            readback = np.empty(count, np.uint32)
            for variant in self.params.variants:
                yield harness.Point({"variant": variant, "group": "pools", "direction": "h2d"},
                                    f"{LABELS[variant]} · {format_bytes(size)}", bytes_moved(size),
                                    "host_clock_alloc+copy+free",
                                    (variant, size, count, patterns, sources, readback))
            for source in sources:
                ledger.free_host(source)

    def measure(self, point):
        variant, size, count, patterns, sources, readback = point.state
        cuda, device_pool, pinned_pool = self.cuda, self.device_pool, self.pinned_pool
        state = {"i": 0}

        def iteration() -> float:
            i = state["i"] = state["i"] + 1
            pattern = patterns[i % 2]
            started = time.perf_counter()
            if variant.startswith("pinned"):
                host = (pinned_pool.allocate((count,), np.uint32) if variant == "pinned_pooled"
                        else cuda.pagelocked_empty(count, np.uint32))
            else:
                host = sources[i % 2]
            device = device_pool.allocate(size) if variant.endswith("pooled") else cuda.mem_alloc(size)
            allocated = time.perf_counter()
            if variant.startswith("pinned"):
                np.copyto(host, pattern)  # the data every iteration must produce: not timed
            filled = time.perf_counter()
            cuda.memcpy_htod(device, host)
            copied = time.perf_counter()
            cuda.memcpy_dtoh(readback, device)  # verification (every iteration): not timed
            checked = time.perf_counter()
            device.free()
            if variant.startswith("pinned"):
                host.base.free()
            freed = time.perf_counter()
            verify_equal(pattern, readback, f"{LABELS[variant]}, {format_bytes(size)}, iteration {i}")
            return ((allocated - started) + (copied - filled) + (freed - checked)) * 1e3

        return iteration

    def close(self) -> None:
        self.device_pool.stop_holding()
        self.pinned_pool.stop_holding()


run = harness.runner(PoolsSweep)
