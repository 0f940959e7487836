"""How the worker measures the pools experiment, declared in this package's ``__init__.py``
(its docstring says what is measured, how it is timed and how it is checked)."""

from __future__ import annotations

import time

import numpy as np

from gpu.core.units import format_bytes
from gpu.experiments.pools import LABELS, bytes_moved
from gpu.sweeps import harness
from gpu.sweeps.verify import pattern_for, verify_equal


class PoolsSweep(harness.Sweep):
    """Each size: two pinned sources filled with alternating patterns, then every variant's iterations. A sample is
    timed by the host clock, not a harness timing method: it times the allocations and the free around the copy,
    which the host does (a synchronous copy; filling and checking left out)."""

    def __init__(self, params, gpu, profile):
        super().__init__(params, gpu, profile)
        self.device_pool, self.pinned_pool = gpu.memory_pools()

    def group_of(self, grid_point):
        return grid_point["bytes"]

    def enter_group(self, size) -> None:
        """Two pinned sources of ``size`` holding the two alternating patterns, and the read-back buffer."""
        count = size // 4
        patterns = [pattern_for(count, seed=size + i) for i in range(2)]
        sources = [self.ledger.host_buffer(size, "pinned") for _ in range(2)]
        for source, pattern in zip(sources, patterns, strict=True):
            np.copyto(source, pattern)
        self.group = (count, patterns, sources, np.empty(count, np.uint32))

    def leave_group(self, size) -> None:
        for source in self.group[2]:
            self.ledger.free_host(source)
        self.group = None

    def point(self, grid_point):
        variant, size = grid_point["variant"], grid_point["bytes"]
        count, patterns, sources, readback = self.group
        return harness.Point({"variant": variant, "group": "pools", "direction": "h2d"},
                             f"{LABELS[variant]} · {format_bytes(size)}", bytes_moved(size),
                             "host_clock_alloc+copy+free", (variant, size, count, patterns, sources, readback))

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
