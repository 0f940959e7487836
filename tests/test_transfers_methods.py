"""The transfers timing methods: single copies (latency view) and batched back-to-back copies (throughput view).
Parameters and point keys, the batched measurement on a simulated GPU (no CUDA: a stand-in for pycuda.driver whose
copies advance a clock by a known cost), and the page in replay."""

from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from gpu.core import stats
from gpu.core.errors import ValidationError, VerificationError
from gpu.core.limits import Limits
from gpu.core.units import GiB, KiB, MiB
from gpu.device.memory import AllocationLedger
from gpu.experiments import sweep_of, transfers
from gpu.experiments.transfers import sweep as transfers_sweep
from gpu.sweeps import harness, verify

APP = str(Path(__file__).resolve().parent.parent / "app.py")
LATENCY_MS, RATE_GBPS = 0.002, 50.0  # the simulated copy: 2 µs + bytes at 50 GB/s


def test_points_carry_their_timer_so_both_methods_coexist_in_one_run():
    params = transfers.parse_params({"sizes": [MiB], "modes": ["pageable", "pinned"], "directions": ["h2d"],
                                     "include_alloc": [False, True], "methods": ["single", "batched"]})
    points = list(params.points())
    alloc = "host_clock_alloc+cuda_event_copy"
    assert points == [
        (MiB, "pageable", "h2d", False, "cuda_event"), (MiB, "pageable", "h2d", True, alloc),
        (MiB, "pageable", "h2d", False, "cuda_event_batched"),  # pageable copies wait on the host: not held
        (MiB, "pinned", "h2d", False, "cuda_event"), (MiB, "pinned", "h2d", True, alloc),
        (MiB, "pinned", "h2d", False, "cuda_event_batched_held")]  # batched copies are copy-only
    assert transfers.KEY_COLUMNS[-1] == "timer" and len(set(points)) == len(points)


def test_the_default_method_is_single_as_every_recording_before_batched_copies():
    assert {p[-1] for p in transfers.parse_params({}).points()} == {"cuda_event"}


@pytest.mark.parametrize("raw,message", [
    ({"methods": ["bulk"]}, "unknown timing method 'bulk' (known: single, batched)"),
    ({"methods": []}, "choose at least one timing method"),
    ({"methods": ["batched"], "include_alloc": [True]}, "batched copies reuse one buffer"),
    ({"methods": ["x" * 500]}, "(500 characters)"),
])
def test_bad_methods_are_refused_with_the_reason(raw, message):
    found = transfers.invalid_reasons(transfers.parse_params({"sizes": [MiB], **raw}), None)
    assert any(message in r for r in found), found


# --- a simulated GPU ---------------------------------------------------------------------------------------------
class _Pinned:
    """Page-locked memory as PyCUDA returns it: an array whose base can name its device pointer and be freed."""

    def __init__(self, count, dtype):
        self.data = np.zeros(count, dtype)
        self.__array_interface__ = self.data.__array_interface__

    def get_device_pointer(self):
        return 0x1000

    def free(self):
        pass


class _Event:
    def __init__(self, gpu):
        self.gpu, self.at = gpu, None

    def record(self, stream=None):
        self.at = self.gpu.clock_ms

    def synchronize(self):
        pass

    def time_till(self, other):
        return other.at - self.at


class _Function:
    def __init__(self, gpu, name):
        self.gpu, self.name = gpu, name

    def prepare(self, signature):
        pass

    def prepared_call(self, grid, block, *args):
        if self.name == "pattern_fill":  # (pointer, words, seed): the device buffer now holds that seed's pattern
            self.gpu.device_seed = int(args[2])

    def prepared_async_call(self, grid, block, stream, *args):
        if self.name == "copy_vec4":  # the zero-copy kernel: its last argument counts 16-byte vectors
            self.gpu.copy(16 * int(args[-1]))
        else:
            self.gpu.launches.append(self.name)


class _Driver:
    """What _TransferBench and StreamHold call on pycuda.driver; copies advance the clock."""

    class host_alloc_flags:  # noqa: N801 (PyCUDA's name)
        WRITECOMBINED, DEVICEMAP = 1, 2

    class Context:
        @staticmethod
        def synchronize():
            pass

    def __init__(self):
        self.clock_ms, self.copies, self.launches = 0.0, 0, []
        self.device_seed = None  # whose pattern the device buffer holds (the fill kernel's last seed)

    def copy(self, nbytes):
        self.copies += 1
        self.clock_ms += LATENCY_MS + nbytes / (RATE_GBPS * 1e9) * 1e3

    def Stream(self):  # noqa: N802 (PyCUDA's name)
        return object()

    def Event(self):  # noqa: N802
        return _Event(self)

    def mem_alloc(self, nbytes):
        return 0x2000

    def pagelocked_empty(self, count, dtype, mem_flags=0):
        return np.asarray(_Pinned(count, dtype))

    def memcpy_htod_async(self, device, host, stream):
        self.copy(host.nbytes)

    def memcpy_dtoh_async(self, host, device, stream):
        self.copy(host.nbytes)
        host[...] = verify.pattern_for(host.size, self.device_seed)  # a pageable destination is checked on the host

    def memcpy_htod(self, device, host):
        pass

    def memcpy_dtoh(self, host, device):
        host[...] = 0  # the check kernel's counters read back as "no word wrong"


class _Telemetry:
    def start_point(self):
        pass

    def sample(self):
        pass

    def point_summary(self):
        return {}


class _Gpu:
    sm_count = 132

    def __init__(self):
        self.cuda = _Driver()
        self.telemetry = _Telemetry()
        self.functions = {"copy_vec4": _Function(self.cuda, "copy_vec4")}

    def kernel(self, stem, name):
        return _Function(self.cuda, name)

    def limits(self):
        return Limits(64 * GiB, 80 * GiB, 16 * GiB, 256 * GiB, 1024, 32)

    @contextmanager
    def job_scope(self):
        yield AllocationLedger(self.cuda)


def measure(size, mode, direction, method):
    """One point measured through the sweep harness on the simulated GPU: its row, the driver, and the copies."""
    gpu = _Gpu()
    params = transfers.Params(sizes=[size], modes=[mode], directions=[direction], methods=[method])
    [row] = sweep_of(transfers.NAME)(params, gpu, lambda *args: None, lambda: False)
    return row, gpu.cuda, gpu.cuda.copies


@pytest.mark.parametrize("mode,direction", [("pinned", "h2d"), ("pinned", "d2h"), ("mapped", "h2d"),
                                            ("pageable", "d2h")])
def test_a_batched_sample_is_a_batch_of_at_least_1_ms_divided_by_its_copies(mode, direction):
    size = 1 * MiB
    row, driver, copies = measure(size, mode, direction, "batched")
    per_copy = LATENCY_MS + size / (RATE_GBPS * 1e9) * 1e3
    n = row["copies_per_sample"]
    assert n * per_copy >= harness.BATCH_MS > (n / 2) * per_copy
    assert row["bytes"] == size  # one copy's bytes: median_ms and GB/s are per copy
    assert row["samples_ms"] == pytest.approx([per_copy] * row["samples"])
    assert row["gbps"] == pytest.approx(size / (per_copy * 1e-3) / 1e9)
    assert row["verified"] and row["timer"] == transfers.timer_for("batched", mode, False)
    # every sample (and the warm-up) queued n copies; the calibration before them fewer
    assert copies >= n * (row["samples"] + 1)
    held = driver.launches.count("hold_stream")
    assert held >= row["samples"] if mode != "pageable" else held == 0


def test_a_small_batched_copy_stops_at_the_largest_batch():
    row, _, _ = measure(4 * KiB, "pinned", "h2d", "batched")
    assert row["copies_per_sample"] == harness.MAX_BATCH


def test_a_single_sample_is_one_copy():
    size = 16 * MiB
    row, _, copies = measure(size, "pinned", "h2d", "single")
    assert row["samples_ms"] == pytest.approx([LATENCY_MS + size / (RATE_GBPS * 1e9) * 1e3] * row["samples"])
    assert row["timer"] == "cuda_event" and "copies_per_sample" not in row
    assert copies == row["samples"] + stats.INTERACTIVE.warmup


def chart_text(at) -> str:
    return " ".join(chart.proto.spec for chart in at.get("plotly_chart"))


def test_each_timing_view_replays_the_recording_measured_with_its_method(monkeypatch):
    monkeypatch.setenv("PINPOINT_BACKEND", "replay")
    at = AppTest.from_file(APP, default_timeout=90).run()
    at.switch_page("pages/transfers.py").run()
    assert not at.exception and "2026-11-21" in chart_text(at)  # the single-copy sweep
    at.radio(key="transfers_method").set_value("batched").run()
    assert not at.exception
    assert "2026-11-23" in chart_text(at) and "2026-11-21" not in chart_text(at)  # the batched recording
    assert at.toggle(key="transfers_include_alloc").disabled


def test_replay_picks_the_newest_recording_that_holds_the_requested_method():
    from gpu.core import schema
    from gpu.service.backends import ReplayBackend, submit_values

    def recording(run_id, method, timestamp):
        row, _, _ = measure(MiB, "pinned", "h2d", method)
        return schema.make_frame([{**row, "run_id": run_id, "experiment": "transfers", "timestamp": timestamp}], {})

    single = recording("single-run", "single", "2026-11-21T00:00:00+00:00")
    batched = recording("batched-run", "batched", "2026-11-23T00:00:00+00:00")
    both = ReplayBackend(frames=[single, batched])
    request = {"sizes": [MiB], "modes": ["pinned"], "directions": ["h2d"]}
    for method in ("single", "batched"):
        chosen = submit_values(both, "transfers", {**request, "methods": [method]}).outcome()
        assert set(chosen["run_id"]) == {f"{method}-run"}
    only_single = ReplayBackend(frames=[single])
    with pytest.raises(ValidationError, match="none of the requested points were recorded"):
        submit_values(only_single, "transfers", {**request, "methods": ["batched"]}).outcome()


def test_the_numbers_table_names_the_copies_per_batched_sample():
    from gpu.core import schema
    from gpu.experiments.transfers import view as charts

    rows = [measure(MiB, "pinned", "h2d", "batched")[0], measure(MiB, "pinned", "h2d", "single")[0]]
    frame = schema.make_frame([{**r, "run_id": "r", "experiment": "transfers"} for r in rows], {})
    table = charts.numbers_table(frame)
    assert sorted(table["copies per sample"].dropna().tolist()) == [rows[0]["copies_per_sample"]]
    assert "copies per sample" not in charts.numbers_table(frame[frame["timer"] == "cuda_event"])


def test_replay_selects_each_method_by_its_timer_from_one_run():
    from gpu.core import schema
    from gpu.service.backends import ReplayBackend, submit_values

    # One run holding both methods: the single points as measured by the worker stand-in, the batched ones too.
    rows = [{**measure(size, "pinned", direction, method)[0], "run_id": "both", "experiment": "transfers",
             "device_name": "simulated", "timestamp": "2026-11-23T00:00:00+00:00"}
            for size in (MiB, 16 * MiB) for direction in ("h2d", "d2h") for method in transfers.METHODS]
    replay = ReplayBackend(frames=[schema.make_frame(rows, {})])
    request = {"sizes": [MiB, 16 * MiB], "modes": ["pinned"]}
    single = submit_values(replay, "transfers", request).outcome()
    batched = submit_values(replay, "transfers", {**request, "methods": ["batched"]}).outcome()
    assert set(single["timer"]) == {"cuda_event"} and len(single) == 4
    assert set(batched["timer"]) == {"cuda_event_batched_held"} and len(batched) == 4
    assert batched["copies_per_sample"].notna().all() and single["copies_per_sample"].isna().all()


@pytest.mark.parametrize("argv,methods", [([], ["single"]), (["--methods", "single,batched"], ["single", "batched"])])
def test_the_runner_passes_its_timing_methods(argv, methods):
    from gpu import bench

    [job] = bench.experiment_jobs(bench.parse_args(["transfers", *argv]))
    assert job["methods"] == methods


@pytest.mark.parametrize("argv,grid", [([], False), (["--pageable-grid"], True), (["--no-pageable-grid"], False)])
def test_the_runner_takes_the_pageable_streams_grid_default_of_its_axis(argv, grid):
    from gpu import bench

    [job] = bench.experiment_jobs(bench.parse_args(["streams", *argv]))
    assert job["pageable_grid"] is grid


class _DeviceAllocation(int):
    """A device allocation as PyCUDA's: usable as its address, and freed by the ledger."""

    def free(self):
        pass


class _CountingDriver(_Driver):
    """The simulated driver, counting page-locked allocations and whole-buffer host writes (pattern loads: a copy
    down, or the CPU's write into pageable memory once ``count_cpu_loads`` counts those too)."""

    def __init__(self):
        super().__init__()
        self.pinned_allocations, self.host_loads, self.cpu_loads = [], 0, 0

    def mem_alloc(self, nbytes):
        return _DeviceAllocation(0x2000)

    def pagelocked_empty(self, count, dtype, mem_flags=0):
        self.pinned_allocations.append(mem_flags)
        return super().pagelocked_empty(count, dtype, mem_flags)

    def memcpy_dtoh(self, host, device):
        if host.size > 2:  # the check kernel's two counters are not a pattern load
            self.host_loads += 1
        super().memcpy_dtoh(host, device)


def count_cpu_loads(monkeypatch, driver):
    """Count the CPU's pattern writes (into pageable host memory) among the driver's host loads."""
    real = transfers_sweep.write_pattern

    def counted(host, seed):
        driver.host_loads += 1
        driver.cpu_loads += 1
        real(host, seed)

    monkeypatch.setattr(transfers_sweep, "write_pattern", counted)


def test_a_sweep_pins_pinned_and_mapped_memory_once_and_never_reloads_a_host_buffer_between_points(monkeypatch):
    gpu = _Gpu()
    gpu.cuda = _CountingDriver()
    count_cpu_loads(monkeypatch, gpu.cuda)
    gpu.functions = {"copy_vec4": _Function(gpu.cuda, "copy_vec4")}
    sizes = [4 * KiB, 64 * KiB, MiB, 16 * MiB]
    params = transfers.parse_params({"sizes": sizes})
    rows = sweep_of(transfers.NAME)(params, gpu, lambda *args: None, lambda: False)
    assert len(rows) == len(sizes) * 4 * 2 and all(r["verified"] for r in rows)
    # pinned and mapped share one DEVICEMAP allocation; write-combined is its own
    assert sorted(gpu.cuda.pinned_allocations) == sorted([_Driver.host_alloc_flags.DEVICEMAP,
                                                           _Driver.host_alloc_flags.WRITECOMBINED])
    # one pattern load per host buffer (pageable, pinned, write-combined): D2H points leave the pattern that the
    # H2D point of the same size sends back up, so nothing is rewritten between points
    assert gpu.cuda.host_loads == 3
    assert gpu.cuda.cpu_loads == 1  # the pageable buffer's, written by the CPU: no pageable copy down
    # D2H is measured first (the worker puts the rows back in point order)
    assert [r["direction"] for r in rows[:2]] == ["d2h", "h2d"]


class _PooledGpu(_Gpu):
    """The simulated GPU with the runtime's host pool: a job's ledger gives pooled buffers back when it ends."""

    def __init__(self, capacity=2 * GiB):
        super().__init__()
        self.cuda = _CountingDriver()
        self.functions = {"copy_vec4": _Function(self.cuda, "copy_vec4")}
        from gpu.device.memory import HostPool

        self.host_pool = HostPool(self.cuda, capacity)

    @contextmanager
    def job_scope(self):
        ledger = AllocationLedger(self.cuda, self.host_pool)
        yield ledger
        ledger.free_all()


def test_a_second_sweep_pins_nothing_its_buffers_wait_in_the_pool_and_every_point_still_verifies(monkeypatch):
    gpu = _PooledGpu()
    count_cpu_loads(monkeypatch, gpu.cuda)
    params = transfers.parse_params({"sizes": [4 * KiB, MiB]})
    first = harness_run(params, gpu)
    # pinned-and-mapped, write-combined and pageable: the pageable one is kept too (no fresh pages to fault in)
    assert len(gpu.cuda.pinned_allocations) == 2 and gpu.host_pool.held_bytes == 3 * MiB
    kept = [array for _, array in gpu.host_pool.idle]
    second = harness_run(params, gpu)
    assert len(gpu.cuda.pinned_allocations) == 2  # nothing pinned again
    assert sorted(map(id, kept)) == sorted(id(array) for _, array in gpu.host_pool.idle)  # the same three buffers
    assert all(r["verified"] for r in first + second) and len(second) == len(first) == 16
    # what a pooled buffer holds from the last sweep is never trusted: each is loaded with a new pattern
    assert gpu.cuda.host_loads == 3 + 3 and gpu.cuda.cpu_loads == 1 + 1


def test_the_pool_keeps_no_more_than_its_capacity_and_a_failed_job_frees_what_it_borrowed():
    from gpu.device.memory import HostPool

    driver = _Driver()
    pool = HostPool(driver, capacity_bytes=MiB)
    ledger = AllocationLedger(driver, pool)
    kept = ledger.host_buffer(MiB, "mapped", pooled=True)
    ledger.host_buffer(MiB, "pinned_wc", pooled=True)
    ledger.free_all()
    assert pool.held_bytes == MiB and pool.take(MiB, "mapped") is kept  # the second did not fit: freed
    ledger = AllocationLedger(driver, pool)
    ledger.host_buffer(MiB, "mapped", pooled=True)
    ledger.free_all(keep_pooled=False)  # after a failed job
    assert pool.held_bytes == 0


def harness_run(params, gpu):
    return harness.run(transfers_sweep.TransfersSweep, params, gpu, lambda *args: None, lambda: False)


class _OneWrongWordDriver(_Driver):
    """A device-to-host copy that leaves one word of its destination unwritten."""

    def memcpy_dtoh_async(self, host, device, stream):
        before = int(host[-1])
        super().memcpy_dtoh_async(host, device, stream)
        host[-1] = before


@pytest.mark.parametrize("method", ["single", "batched"])
def test_a_pageable_destination_is_checked_on_the_host_and_a_word_left_unwritten_names_its_place(method):
    gpu = _Gpu()
    gpu.cuda = _OneWrongWordDriver()
    params = transfers.Params(sizes=[MiB], modes=["pageable"], directions=["d2h"], methods=[method])
    with pytest.raises(VerificationError, match=r"pageable \(NumPy\) D2H 1 MiB: 1 of 262144 words wrong, first at "
                                                r"word 262143 \(expected 0x[0-9a-f]{8}, got 0x[0-9a-f]{8}\)"):
        sweep_of(transfers.NAME)(params, gpu, lambda *args: None, lambda: False)
