"""How the worker measures the device copy experiment, declared in this package's ``__init__.py``
(its docstring says what is measured, how it is timed and how it is checked)."""

from __future__ import annotations

import time

import numpy as np

from gpu.core.units import format_bytes
from gpu.experiments.device_copy import (
    BLOCK,
    GUARD_BYTES,
    LABELS,
    METHOD_LABELS,
    WORD_BYTES,
    bytes_moved,
    l2_passes,
)
from gpu.experiments.order import coarse_first_along
from gpu.sweeps import harness, timing_methods
from gpu.sweeps.verify import PatternChecker


class DeviceCopySweep(harness.Sweep):
    """One source and one destination of the largest size for the whole job; sizes coarse first (4 KiB, 1 GiB,
    16 MiB, …), so the page shows the whole curve early. Each point copies the first ``size`` bytes."""

    def setup(self) -> None:
        gpu, ledger, largest = self.gpu, self.ledger, max(self.params.sizes)
        self.clock = timing_methods.StreamClock(gpu, ledger)  # its stream hold is made at the first batched point
        self.copy_kernel = gpu.kernel("device_copy", "copy_bytes")
        self.copy_kernel.prepare("PPQ")
        self.passes_kernel = gpu.kernel("device_copy", "copy_bytes_passes")
        self.passes_kernel.prepare("PPQi")
        self.checker = PatternChecker(gpu, ledger)
        self.src = ledger.device_buffer(largest)
        self.dst = ledger.device_buffer(largest + GUARD_BYTES)
        self.seed = int(time.time_ns()) & 0xFFFFFFFF
        self.poison_seed = self.seed ^ 0x9E3779B9  # differs from the source's pattern in every word
        self.checker.fill(int(self.src), largest // WORD_BYTES, self.seed)
        self.cuda.Context.synchronize()

    def order(self, grid_points):
        return coarse_first_along(grid_points, "elements")

    def point(self, grid_point):
        variant, size, method = grid_point["variant"], int(grid_point["elements"]), grid_point["method"]
        return harness.Point(
            {"variant": variant, "direction": "device", "elements": size,
             "block_size": BLOCK if variant != "copy_engine" else None},
            f"{LABELS[variant]} {format_bytes(size)} {METHOD_LABELS[method]}",
            bytes_moved(size), grid_point["timer"], {"variant": variant, "size": size, "method": method})

    def prepare(self, point) -> None:
        """Poison the destination and the guard after it: another seed's pattern, which differs in every word."""
        size = point.state["size"]
        self.checker.poison(int(self.dst), size // WORD_BYTES, GUARD_BYTES // WORD_BYTES, self.poison_seed)
        self.cuda.Context.synchronize()

    # --- issuing (the harness's timing methods time it) ------------------------------------------------------------
    def issue(self, stream, variant: str, size: int, passes: int = 1) -> None:
        """Queue one copy of ``size`` bytes, source → destination, on ``stream`` (``passes`` of them in one launch
        for l2_copy)."""
        if variant == "copy_engine":
            self.cuda.memcpy_dtod_async(self.dst, self.src, size, stream)
            return
        vectors = size // 16
        grid = max(1, min(-(-vectors // BLOCK), self.gpu.sm_count * (2048 // BLOCK) * 2))
        if variant == "l2_copy":
            self.passes_kernel.prepared_async_call((grid, 1), (BLOCK, 1, 1), stream, int(self.src),
                                                   int(self.dst), np.uint64(size), np.int32(passes))
        else:
            self.copy_kernel.prepared_async_call((grid, 1), (BLOCK, 1, 1), stream, int(self.src), int(self.dst),
                                                 np.uint64(size))

    def measure(self, point):
        state = point.state
        variant, size = state["variant"], state["size"]
        if variant == "l2_copy":
            passes = l2_passes(size, self.gpu.l2_bytes)
            if passes is None or state["method"] != "single":
                return None  # not an L2-resident size, or batched (one launch is its own batch): no row
            point.columns.update({"passes_per_launch": passes})
            point.nbytes = bytes_moved(size, passes)
            return self.clock.sampler(timing_methods.SINGLE, lambda stream: self.issue(stream, variant, size, passes))
        # batched: held (the copies queue without waiting on the stream); a sample is the batch's mean per copy, the
        # profile's min_time_s counting those means, as the recordings were measured
        method = timing_methods.SINGLE if state["method"] == "single" else timing_methods.HELD
        sample = self.clock.sampler(method, lambda stream: self.issue(stream, variant, size), per_copy=False)
        if method == timing_methods.HELD:
            point.columns.update({"copies_per_sample": sample.copies})
        return sample

    def verify(self, point) -> None:
        state = point.state
        label = f"{LABELS[state['variant']]} {format_bytes(state['size'])} {METHOD_LABELS[state['method']]}"
        self.checker.check(int(self.dst), state["size"] // WORD_BYTES, self.seed, label, GUARD_BYTES // WORD_BYTES,
                           self.poison_seed)


run = harness.runner(DeviceCopySweep)
