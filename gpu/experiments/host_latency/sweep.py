"""How the worker measures the host latency experiment, declared in this package's ``__init__.py``
(its docstring says what is measured, how it is timed and how it is checked)."""

from __future__ import annotations

import numpy as np

from gpu.core.errors import VerificationError
from gpu.core.units import format_bytes
from gpu.device.timing import KernelTimer
from gpu.experiments.host_latency import LABELS, STEPS, bytes_moved, chain_for
from gpu.sweeps import harness


class HostLatencySweep(harness.Sweep):
    """Each memory, each working set: the chain written there, then launches of one chasing thread. A sample is one
    cold launch timed by the ``KernelTimer`` (L2 flushed, held), not a harness timing method: the chase must start
    cold every sample, or any chain would answer from the L2 after the first."""

    def setup(self) -> None:
        self.timer = KernelTimer(self.gpu, self.ledger)
        self.kernel = self.gpu.kernel("host_latency", "pointer_chase")
        self.kernel.prepare("PQIP")
        self.end = self.ledger.device_buffer(8)

    def group_of(self, grid_point):
        return grid_point["variant"], grid_point["working_set_bytes"]  # each point its own chain

    def enter_group(self, group) -> None:
        """The chain of this working set, written where this memory lives."""
        variant, size = group
        chain, start, order = chain_for(size, seed=size)
        if variant == "mapped":
            host = self.ledger.host_buffer(size, "mapped")
            np.copyto(host.view(np.uint64), chain)
            self.chain = (host, host.base.get_device_pointer(), start, order)
        else:
            buffer = self.ledger.device_buffer(size)
            self.cuda.memcpy_htod(buffer, chain)
            self.chain = (buffer, int(buffer), start, order)

    def leave_group(self, group) -> None:
        buffer = self.chain[0]
        if group[0] == "mapped":
            self.ledger.free_host(buffer)
        else:
            self.ledger.free_device(buffer)
        self.chain = None

    def point(self, grid_point):
        variant, size = grid_point["variant"], grid_point["working_set_bytes"]
        _, pointer, start, order = self.chain
        steps = STEPS[variant]
        return harness.Point(
            {"variant": variant, "group": "host_latency", "direction": "device", "elements": steps,
             "working_set_bytes": size},
            f"{LABELS[variant]} · {format_bytes(size)} chain · {steps:,} loads a sample",
            bytes_moved(variant), self.timer.timer_name(), (pointer, start, steps, int(order[steps % len(order)])))

    def measure(self, point):
        pointer, start, steps, _ = point.state
        self.cuda.memset_d32(self.end, 0xFFFFFFFF, 2)  # no walk ends there: a launch that did not run fails

        def launch(stream) -> None:
            self.kernel.prepared_async_call((1, 1), (1, 1, 1), stream, pointer, np.uint64(start), np.uint32(steps),
                                            self.end)

        return lambda: self.timer.once(launch)

    def verify(self, point) -> None:
        _, _, steps, expected = point.state
        got = np.empty(1, np.uint64)
        self.cuda.memcpy_dtoh(got, self.end)
        if int(got[0]) != expected:
            raise VerificationError(f"{point.label}: the walk ended at index {int(got[0])}, expected {expected}")


run = harness.runner(HostLatencySweep)
