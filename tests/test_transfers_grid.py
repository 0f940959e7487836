"""The transfers' points come from their declared grid: the same keys in the same order as the hand-written loop they
replace (copied here as the reference) for every parameter choice, the batched copies that would include their
allocation skipped with the reason, and the sweep, given its points by the harness, measures on the simulated GPU
(tests/test_transfers_methods.py's) exactly what the old sweep measured: the same copies, holds and launches in the
same order, and the same rows."""

from types import SimpleNamespace

import numpy as np
import pytest

from gpu.core.units import KiB, MiB
from gpu.experiments import transfers
from gpu.experiments.transfers import sweep as transfers_sweep
from gpu.experiments.transfers.sweep import TransfersSweep
from gpu.sweeps import harness
from tests.test_transfers_methods import _Driver, _Function, _Gpu


def old_points(params):
    """Params.points() as it was written by hand before the grid."""
    timings = [(method, alloc) for method in params.methods for alloc in params.include_alloc
               if not (method == "batched" and alloc)]
    for size in params.sizes:
        for mode in params.modes:
            for method, alloc in timings:
                for direction in params.directions:
                    yield size, mode, direction, alloc, transfers.timer_for(method, mode, alloc)


CHOICES = [
    {},
    {"sizes": [MiB]},
    {"sizes": [64 * MiB, 4 * KiB, MiB], "modes": ["mapped", "pageable"]},  # unsorted: normalised by the parser
    {"sizes": [MiB, MiB, 4 * KiB], "directions": ["h2d", "d2h", "h2d"]},  # duplicates
    {"directions": ["d2h"], "modes": ["pinned_wc"]},
    {"include_alloc": [True, False], "methods": ["batched", "single"]},
    {"include_alloc": [False, True], "methods": ["single", "batched"], "modes": ["pageable", "pinned"]},
    {"include_alloc": [True], "methods": ["single", "batched"]},
    {"include_alloc": [True], "methods": ["batched"]},  # nothing left to measure (refused by invalid_reasons)
    {"methods": ["batched"], "sizes": [4 * KiB, 1 << 30]},
    {"modes": [], "methods": []},  # empty lists (refused by the axes' checks, but the grid must not fail)
]


@pytest.mark.parametrize("raw", CHOICES)
def test_the_grid_gives_the_old_loops_points_in_its_order(raw):
    params = transfers.parse_params(raw)
    assert params.points() == list(old_points(params))


@pytest.mark.parametrize("fields", [
    {"sizes": [MiB, 4 * KiB, MiB], "modes": ["pinned", "pageable"]},  # as constructed, not parsed: unsorted, repeated
    {"sizes": [], "include_alloc": [True, True, False]},
])
def test_unparsed_parameters_keep_the_old_order_each_point_once(fields):
    params = transfers.Params(**fields)
    assert params.points() == list(dict.fromkeys(old_points(params)))


def test_batched_copies_that_would_include_their_allocation_are_skipped_with_the_reason():
    params = transfers.parse_params({"sizes": [MiB], "modes": ["pinned"], "include_alloc": [False, True],
                                     "methods": ["single", "batched"]})
    assert [(p.key(transfers.KEY_COLUMNS), reason) for p, reason in params.skipped()] == [
        ((MiB, "pinned", "h2d", True, "cuda_event_batched_held"), transfers.BATCHED_COPY_ONLY),
        ((MiB, "pinned", "d2h", True, "cuda_event_batched_held"), transfers.BATCHED_COPY_ONLY)]
    assert transfers.parse_params({}).skipped() == []


def test_the_point_count_comes_from_the_grid():
    sizes = [16 * (i + 1) for i in range(130)]
    params = transfers.parse_params({"sizes": sizes, "include_alloc": [False, True], "methods": ["single", "batched"]})
    # 130 sizes × 4 modes × 3 timings × 2 directions
    assert transfers.invalid_reasons(params, None) == ["3120 points requested; at most 2000 per run"]


# --- the sweep, old and new, on the simulated GPU ----------------------------------------------------------------
class _LoggingDriver(_Driver):
    """The simulated driver, logging each copy and launch in order."""

    def __init__(self):
        super().__init__()
        self.log = []

    def copy(self, nbytes):
        self.log.append(f"copy {nbytes}")
        super().copy(nbytes)

    def memcpy_htod(self, device, host):
        self.log.append(f"htod {host.nbytes}")

    def memcpy_dtoh(self, host, device):
        self.log.append(f"dtoh {host.nbytes}")
        super().memcpy_dtoh(host, device)

    def pagelocked_empty(self, count, dtype, mem_flags=0):
        self.log.append(f"pin {count} {mem_flags}")
        return super().pagelocked_empty(count, dtype, mem_flags)


class _LoggingFunction(_Function):
    def prepared_async_call(self, grid, block, stream, *args):
        self.gpu.log.append(f"launch {self.name} {[int(a) if isinstance(a, (int, np.integer)) else 'p' for a in args]}")
        super().prepared_async_call(grid, block, stream, *args)

    def __call__(self, *args, **kwargs):
        self.gpu.log.append(f"call {self.name}")


class _LoggingGpu(_Gpu):
    def __init__(self):
        super().__init__()
        self.cuda = _LoggingDriver()
        self.functions = {"copy_vec4": _LoggingFunction(self.cuda, "copy_vec4")}

    def kernel(self, stem, name):
        return _LoggingFunction(self.cuda, name)


class OldTransfersSweep(TransfersSweep):
    """The sweep as it was before the grid: its own loop over the axes and its own batched clock (copied)."""

    def walk(self):  # the harness measures what walk() yields: here, the old loop
        params = self.params
        timings = [(method, alloc) for method in params.methods for alloc in params.include_alloc
                   if not (method == "batched" and alloc)]
        for size in harness.coarse_first(params.sizes):
            for mode in params.modes:
                for method, alloc in timings:
                    for direction in sorted(params.directions, key=lambda d: d != "d2h"):
                        yield harness.Point(
                            {"variant": mode, "direction": direction, "bytes": int(size), "include_alloc": bool(alloc)},
                            f"{transfers.MODE_LABELS[mode]} {direction.upper()} {transfers_sweep.format_bytes(size)}"
                            + (" incl. allocation" if alloc else "") + (" batched" if method == "batched" else ""),
                            transfers.bytes_moved(size, mode, direction), transfers.timer_for(method, mode, alloc),
                            {"size": size, "mode": mode, "direction": direction, "alloc": alloc, "method": method})
                self.bench.done_with(mode)

    def measure(self, point):
        state = point.state
        if state["alloc"] or state["method"] != "batched":
            return super().measure(point)
        bench, size, mode, direction = self.bench, state["size"], state["mode"], state["direction"]
        full = bench.host(mode)
        host, host_ptr = full[:size // 4], bench.mapped_pointer(mode, full)
        seed = bench.host_seed(mode, size // 4) if direction == "h2d" else bench.next_seed()
        bench.prepare(direction, size // 4, seed)
        state.update(host=host, seed=seed)
        holder = None if mode == "pageable" else bench.clock.hold()

        def batch_ms(copies):
            def enqueue():
                for _ in range(copies):
                    bench.issue(mode, direction, host, host_ptr, size)
            return bench.clock.timer.time(enqueue, holder)

        copies = harness.copies_per_sample(batch_ms)
        point.columns.update({"param": "copies per sample", "param_value": copies})
        return harness.PerCopy(batch_ms, copies)


def _run(sweep, raw, monkeypatch):
    # one seed for both sweeps' patterns; the allocation's host clock reads 0 (the copies' clock is the simulated one)
    monkeypatch.setattr(transfers_sweep, "time", SimpleNamespace(time_ns=lambda: 12345, perf_counter=lambda: 0.0))
    gpu = _LoggingGpu()
    calls = []
    progress = lambda done, total, text="": calls.append((done, total, text))  # noqa: E731
    params = transfers.parse_params({"profile": "interactive/timeout_s=5", **raw})
    rows = harness.run(sweep, params, gpu, progress, lambda: False)
    for row in rows:  # the stop rule's wall clock is the host's, not the simulated one
        row.pop("stop_reason")
    return rows, gpu.cuda.log, calls


@pytest.mark.parametrize("raw", [
    {"sizes": [4 * KiB, 64 * KiB, MiB, 16 * MiB]},
    {"sizes": [MiB, 4 * MiB], "include_alloc": [False, True], "methods": ["single", "batched"]},
    {"sizes": [4 * KiB, MiB], "modes": ["pinned", "pageable"], "directions": ["h2d"], "methods": ["batched"]},
])
def test_the_sweep_given_its_points_measures_what_the_old_sweep_measured(raw, monkeypatch):
    new_rows, new_log, new_calls = _run(TransfersSweep, raw, monkeypatch)
    old_rows, old_log, old_calls = _run(OldTransfersSweep, raw, monkeypatch)
    assert new_calls == old_calls  # the same points, labels and order of measurement
    assert new_log == old_log  # the same pins, pattern loads, copies, holds and launches, in order
    assert new_rows == old_rows
    assert len(new_rows) == len(transfers.parse_params(raw).points())


def test_a_jobs_notes_say_how_many_points_were_skipped_and_why():
    from gpu.core import schema
    from gpu.service.backends import ReplayBackend, submit_values
    from tests.test_transfers_methods import measure

    rows = [{**measure(MiB, "pinned", direction, method)[0], "run_id": "both", "experiment": "transfers",
             "device_name": "simulated", "timestamp": "2026-11-23T00:00:00+00:00"}
            for direction in ("h2d", "d2h") for method in transfers.METHODS]
    replay = ReplayBackend(frames=[schema.make_frame(rows, {})])
    request = {"sizes": [MiB], "modes": ["pinned"], "methods": ["single", "batched"]}
    handle = submit_values(replay, "transfers", {**request, "include_alloc": [False, True]})
    handle.wait()
    assert handle.notes[0] == f"2 points skipped: {transfers.BATCHED_COPY_ONLY}"
    plain = submit_values(replay, "transfers", request)
    assert len(plain.outcome()) == 4 and plain.notes == []


def test_the_runner_prints_how_many_points_were_skipped_and_why(monkeypatch, capsys):
    from gpu import bench

    # a worker serving the committed recordings (tests/fake_service.py), so the runner runs end to end
    monkeypatch.setenv("PINPOINT_BACKEND", "auto")
    monkeypatch.setenv("PINPOINT_WORKER_SERVICE", "tests.fake_service:TwoGpuRecordedService")
    assert bench.main(["transfers", "--sizes", "4KiB,1MiB", "--modes", "pinned", "--methods", "single,batched",
                       "--include-alloc", "both", "--no-store", "--gpus", "1", "--profile", "interactive"]) == 0
    err = capsys.readouterr().err
    assert f"\n4 points skipped: {transfers.BATCHED_COPY_ONLY}\n" in err
    assert bench.main(["transfers", "--sizes", "4KiB", "--modes", "pinned", "--no-store", "--gpus", "1"]) == 0
    assert "skipped" not in capsys.readouterr().err
