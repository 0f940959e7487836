"""A sweep walked through the harness on a stand-in board, for tests only: nothing is launched, allocated on a GPU or
timed. The sweep's own ``setup`` / ``prepare`` / ``measure`` / ``verify`` are replaced (a test names what its points
need instead of the real buffers, kernels and timers), so what comes back is what the harness was handed, point by
point, in the order it would measure them: each point's progress text, bytes, timer and row columns."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import numpy as np

from gpu.core import stats
from gpu.core.limits import Limits
from gpu.sweeps import harness


class StandInLedger:
    """An allocation ledger that allocates nothing on a device: device buffers are numbers, host buffers small
    NumPy arrays (uint32 words, as ``AllocationLedger`` gives)."""

    def __init__(self):
        self.next_pointer = 0x1000

    def device_buffer(self, nbytes):
        self.next_pointer += 0x1000
        return self.next_pointer

    def host_buffer(self, nbytes, mode, pooled=False):
        return np.zeros(max(1, nbytes // 4), np.uint32)

    def free_host(self, array):
        pass

    def free_device(self, allocation):
        pass


class StandInTelemetry:
    """NVML telemetry that reads nothing: every point at 1,980 MHz, never throttled."""

    def sample(self, force=False):
        pass

    def start_point(self):
        pass

    def point_summary(self):
        return {"sm_clock_mhz": 1980.0, "throttled": False}


class StandInBoard:
    """Just enough of a GPU runtime for the harness: its limits, telemetry and an allocation scope."""

    def __init__(self, sm_count: int = 4, threads_per_sm: int = 2048):
        self.cuda, self.telemetry = None, StandInTelemetry()
        self.sm_count, self.attributes = sm_count, {"MAX_THREADS_PER_MULTIPROCESSOR": threads_per_sm}
        self.job_scope = lambda: contextlib.nullcontext(StandInLedger())

    def limits(self):
        return Limits(1 << 40, 1 << 40, 1 << 40, 1 << 40, 1024, 32)


def walked(sweep_class: type[harness.Sweep], params, equip: Callable[[harness.Sweep], None],
           board: StandInBoard | None = None, measured: Callable[[harness.Point], None] | None = None) -> list[tuple]:
    """``(label, bytes, timer, columns)`` of every point ``sweep_class`` measures for ``params``, in the order the
    harness measures them. ``equip(sweep)`` replaces the sweep's ``setup``: it gives the sweep what its points are
    built from (a timer's name, the SM count …). Columns are taken as the point is measured, before the sweep's
    ``measure`` or ``verify`` fill any in; ``measured(point)`` fills in what they would (a key column a sweep reads
    from the device)."""
    seen: list[tuple] = []

    class Walk(sweep_class):
        def setup(self) -> None:
            equip(self)

        def prepare(self, point) -> None:
            pass

        def measure(self, point):
            seen.append((point.label, point.nbytes, point.timer, dict(point.columns)))
            if measured is not None:
                measured(point)
            return stats.summarize([1.0], "walked")

        def verify(self, point) -> None:
            pass

        @classmethod
        def reasons(cls, params, gpu, limits) -> list[str]:
            return []

    Walk.__init__ = lambda self, params, gpu, profile: harness.Sweep.__init__(self, params, gpu, profile)
    rows = harness.run(Walk, params, board or StandInBoard(), lambda *a: None, lambda: False)
    assert len(rows) == len(seen)
    return seen
