"""How the worker measures the fma experiment, declared in this package's ``__init__.py``
(its docstring says what is measured, how it is timed and how it is checked)."""

from __future__ import annotations

import numpy as np

from gpu.core import compute
from gpu.device.timing import KernelTimer
from gpu.experiments.fma import (
    FMAS_PER_TRIP,
    ITEM_BYTES,
    LABELS,
    A,
    B,
    check_sums,
    expected_sums,
    grid_blocks,
)
from gpu.sweeps import harness


class FmaSweep(harness.Sweep):
    """One output buffer (and its pinned read-back) for the largest grid; each point launches its precision's and
    chain count's kernel, then its output is compared with the exact sums on the host."""


    def setup(self) -> None:
        gpu, ledger = self.gpu, self.ledger
        # A kernel's own clock (gpu.device.timing.KernelTimer: events around one launch, the stream held while it is
        # queued), not one of the harness's copy methods: a sample is one cold launch, never a batch.
        self.timer = KernelTimer(gpu, ledger, flush_l2=False)  # nothing is read: no cache state to reset
        self.threads_per_sm = int(gpu.attributes.get("MAX_THREADS_PER_MULTIPROCESSOR", 2048))
        most_threads = max(grid_blocks(gpu.sm_count, self.threads_per_sm, b) * b for b in self.params.block_sizes)
        self.out = ledger.device_buffer(most_threads * 8)
        self.readback = ledger.host_buffer(most_threads * 8, "pinned").view(np.uint8)  # sliced by bytes
        self.fn = {(p, c): gpu.kernel("fma", f"fma_{p}_x{c}") for p in self.params.precisions
                   for c in self.params.chains}

    def point(self, grid_point) -> harness.Point:
        precision, block = grid_point["variant"], grid_point["block_size"]
        chains, fmas = grid_point["param_value"], grid_point["intensity"]
        threads = grid_blocks(self.gpu.sm_count, self.threads_per_sm, block) * block
        return harness.Point(
            {"variant": precision, "group": "fma", "direction": "device", "block_size": block,
             "elements": threads, "param": "chains", "param_value": chains, "intensity": fmas},
            f"{LABELS[precision]} · {chains} chains · block {block}", threads * ITEM_BYTES[precision],
            self.timer.timer_name(), {"precision": precision, "block": block, "chains": chains, "fmas": fmas,
                                      "threads": threads})

    def prepare(self, point) -> None:
        state = point.state
        words = state["threads"] * ITEM_BYTES[state["precision"]] // 4
        self.cuda.memset_d32(self.out, 0xFFFFFFFF, words)  # poison: NaN wherever a thread writes nothing

    def measure(self, point):
        state = point.state
        precision, block, threads = state["precision"], state["block"], state["threads"]
        kernel, out = self.fn[(precision, state["chains"])], self.out
        scalar = np.float32 if precision == compute.FP32 else np.float64
        a, b, trips = scalar(A), scalar(B), np.uint32(state["fmas"] // FMAS_PER_TRIP)
        blocks = (threads // block, 1)

        def launch(s):
            kernel(out, a, b, trips, block=(block, 1, 1), grid=blocks, stream=s)

        timer = self.timer
        return lambda: timer.once(launch)

    def verify(self, point) -> None:
        state = point.state
        precision, threads = state["precision"], state["threads"]
        got = self.readback[:threads * ITEM_BYTES[precision]].view(
            np.float32 if precision == compute.FP32 else np.float64)
        self.cuda.memcpy_dtoh(got, self.out)
        expected = expected_sums(threads, state["chains"], state["fmas"], precision)
        check_sums(expected, got, f"{LABELS[precision]} ({state['chains']} chains, block {state['block']})")


run = harness.runner(FmaSweep)
