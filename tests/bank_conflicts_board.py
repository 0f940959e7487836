"""A simulated board for the bank-conflicts sweep, for tests only: a stand-in runtime whose "kernels" are replayed in
NumPy read by read from their launch arguments (the strided sums lane by lane, a transpose by transposing), and a
stand-in clock. Nothing here is ever bundled or shown as a measurement: a recording made here says
``backend="simulated"`` and ``device_name="simulated board"``, and its times are the stand-in clock's (each strided
launch costs its warps' reads times the bank passes of its addresses; a transpose its bytes, twice over for the naive
tile), so a page drawn from it shows the pipeline, not a GPU."""

from __future__ import annotations

import contextlib
import datetime as dt
from pathlib import Path

import numpy as np

from gpu.core import schema
from gpu.core.limits import Limits
from gpu.experiments import bank_conflicts as bank
from gpu.experiments import sweep_of
from gpu.experiments.order import in_point_order
from tests.sweep_walk import StandInTelemetry

SIMULATED_PROVENANCE = {
    "device_name": "simulated board", "compute_capability": "9.0", "sm_count": 4, "memory_total_bytes": 1 << 36,
    "driver_version": "simulated", "cuda_version": "simulated", "pycuda_version": "simulated", "host": "tests",
    "git_commit": "unknown", "backend": "simulated", "sm_clock_max_mhz": 1980, "l2_bytes": 50 << 20,
}


def replayed_lane_sums(word_bytes: int, row: int, trips: int) -> list[int]:
    """The strided kernel replayed read by read in Python integers, wrapping at the word's width."""
    mask = (1 << (8 * word_bytes)) - 1
    factor = 2654435761 if word_bytes == 4 else 0x9E3779B97F4A7C15
    sums = []
    for lane in range(32):
        total = 0
        for _ in range(trips):
            for k in range(bank.READS_PER_TRIP):
                total = (total + ((lane * row + k) * factor + 1 & mask)) & mask
        sums.append(total)
    return sums


class StandInRuntime:
    """Just enough of GpuRuntime for the sweep: each "launch" is replayed in NumPy, so what the sweep reads back is
    what the kernel's arguments would have produced. ``wrong`` names a kernel whose result is off by one in one
    word."""

    sm_count, attributes = 4, {"MAX_THREADS_PER_MULTIPROCESSOR": 2048}

    def __init__(self, wrong: str = ""):
        runtime = self
        self.launches, self.poisoned, self.buffers, self.wrong = [], [], {}, wrong
        self.next_pointer = 0x1000

        class Ledger:
            def device_buffer(self, nbytes):
                runtime.next_pointer += 0x1000
                runtime.buffers[runtime.next_pointer] = np.zeros(nbytes, np.uint8)
                return runtime.next_pointer

            def host_buffer(self, nbytes, mode):
                return np.zeros(nbytes // 4, np.uint32)  # as AllocationLedger: uint32 words

        class Cuda:
            @staticmethod
            def memset_d32(pointer, value, words):
                runtime.poisoned.append((value, words))
                runtime.buffers[pointer][:4 * words].view(np.uint32)[:] = value

            @staticmethod
            def memcpy_htod(pointer, host):
                runtime.buffers[pointer][:host.nbytes] = host.view(np.uint8).ravel()

            @staticmethod
            def memcpy_dtoh(host, pointer):
                host.view(np.uint8).ravel()[:] = runtime.buffers[pointer][:host.nbytes]

        self.cuda, self.telemetry = Cuda, StandInTelemetry()
        self.job_scope = lambda: contextlib.nullcontext(Ledger())
        self.limits = lambda: Limits(1 << 36, 1 << 37, 1 << 34, 1 << 36, 1024, 32)

    def kernel(self, stem, name):
        assert stem == "bank_conflicts"
        runtime = self
        dtype = np.uint32 if name.endswith("4B") else np.uint64

        def strided(out, row, trips, block, grid, stream):
            assert (type(row), type(trips)) == (np.uint32, np.uint32)
            threads = block[0] * grid[0]
            runtime.launches.append((name, int(row), int(trips), threads))
            result = np.tile(np.array(replayed_lane_sums(dtype().itemsize, int(row), int(trips)), dtype), threads // 32)
            if runtime.wrong == name:
                result[5] += dtype(1)
            runtime.buffers[out][:result.nbytes] = result.view(np.uint8)

        def transpose(source, out, side, block, grid, stream):
            assert block == (32, 8, 1) and grid == (int(side) // 32,) * 2
            runtime.launches.append((name, int(side)))
            words = int(side) ** 2
            matrix = runtime.buffers[source][:words * dtype().itemsize].view(dtype).reshape(int(side), int(side))
            result = np.ascontiguousarray(matrix.T).ravel()
            if runtime.wrong == name:
                result[7] += dtype(1)
            runtime.buffers[out][:result.nbytes] = result.view(np.uint8)

        return transpose if name.startswith("transpose") else strided


class StandInTimer:
    """KernelTimer's interface over the stand-in runtime's launches: ``once`` runs the launch and returns the stand-in
    clock's time for it (see the module's text). ``made`` records each timer's ``flush_l2``."""

    made: list[bool] = []
    runtime: StandInRuntime | None = None

    def __init__(self, gpu, ledger, flush_l2=True, hold=True):
        self.flush, self.gpu = flush_l2, gpu
        StandInTimer.made.append(flush_l2)

    def timer_name(self, hold=None):
        return "cuda_event" + ("_l2_flushed" if self.flush else "") + "_held"

    def once(self, launch):
        launch("stream")
        last = self.gpu.launches[-1]
        word = 4 if last[0].endswith("4B") else 8
        if last[0].startswith("transpose"):
            side = last[1]
            return 2 * side * side * word / 1e9 * (2 if "naive" in last[0] else 1)
        _, row, trips, threads = last
        reads = threads // 32 * trips * bank.READS_PER_TRIP
        return reads * bank.passes([lane * row for lane in range(32)], word) * 1e-6


def simulated_recording(folder: Path, raw: dict, monkeypatch) -> Path:
    """The sweep of ``raw`` run on the simulated board, written as a recording in ``folder``
    (``bank_conflicts_simulated.parquet``, in the results schema)."""
    from gpu.experiments.bank_conflicts import sweep as bank_sweep

    monkeypatch.setattr(bank_sweep, "KernelTimer", StandInTimer)
    params = bank.parse_params(raw)
    rows = sweep_of(bank.NAME)(params, StandInRuntime(), lambda *a: None, lambda: False)
    point = {"run_id": "simulated-1", "experiment": bank.NAME}
    provenance = {**SIMULATED_PROVENANCE, "timestamp": dt.datetime(2026, 11, 28, tzinfo=dt.UTC).isoformat()}
    frame = in_point_order(schema.make_frame([{**point, **row} for row in rows], provenance), bank, params)
    path = folder / "bank_conflicts_simulated.parquet"
    schema.to_parquet(frame, path)
    return path
