"""The live parts benchmark (``tests/benchmarks/live_parts.py``) and the parts machinery it shares with
``health_time.py --parts`` (``tests/benchmarks/sweep_parts.py``), without a GPU: the pages' default requests, bad
arguments as one line, and a sweep timed on the recording board (its times are the board's, never a measurement):
each point kept with its row, its GPU time from its samples, the hooks put back afterwards, and both reports."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import sys

import pytest

from gpu.core import paths
from gpu.experiments.request import checked_request
from tests.recording_board import PROFILE, Board, Runtime

BENCHMARKS = paths.ROOT / "tests" / "benchmarks"


def _load(name: str):
    """The benchmark ``name``, importable by its name while the tests use it (a process it spawns pickles its
    functions by reference)."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules[name]


@pytest.fixture(scope="module")
def live_parts():
    yield from _load("live_parts")


@pytest.fixture(scope="module")
def health_time():
    yield from _load("health_time")


def _board_params():
    """Device copies at two sizes: batched and single points, and points the sweep cannot run (no row)."""
    params = checked_request("device_copy", {"sizes": [1 << 20, 4096]}, None).params
    return dataclasses.replace(params, profile=PROFILE)


class Progress:
    def __init__(self):
        self.messages, self.rows = [], []

    def __call__(self, done, total, text=""):
        self.messages.append((done, total, text))

    def row(self, row):
        self.rows.append(row)


def test_the_pages_default_requests_are_the_pages_points_with_the_interactive_profile(live_parts):
    args = live_parts.arguments([])
    assert args.pages == ["transfers", "streams"] and args.profile == "interactive" and args.repeats == 2
    requests = live_parts.requests(args)
    transfers, streams = requests["transfers"].params, requests["streams"].params
    assert len(transfers.walk()[0]) == 19 * 4 * 2  # 4 KiB … 1 GiB, four modes, both directions
    assert transfers.profile == streams.profile == "interactive"
    assert len(streams.walk()[0]) == 41
    assert live_parts.arguments(["--pages", "streams", "--profile", "precise"]).pages == ["streams"]


def test_a_bad_page_profile_or_repeat_count_is_one_line(live_parts, capsys):
    with pytest.raises(SystemExit):
        live_parts.arguments(["--pages", "transfers,coalescence"])
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        "unknown page 'coalescence': choose from transfers, streams")
    with pytest.raises(SystemExit) as refused:
        live_parts.requests(live_parts.arguments(["--profile", "fast"]))
    assert refused.value.code == "live_parts: unknown profile 'fast': choose one of precise, interactive"
    with pytest.raises(SystemExit):
        live_parts.arguments(["--repeats", "0"])
    assert capsys.readouterr().err.strip().endswith("--repeats must be at least 1, not 0")


def test_a_points_gpu_time_is_its_samples_times_its_copies(live_parts):
    assert live_parts.measured_ms({"samples_ms": [0.5, 0.25], "copies_per_sample": 8}) == 6.0
    assert live_parts.measured_ms({"samples_ms": [0.5, 0.25], "copies_per_sample": math.nan}) == 0.75
    assert live_parts.measured_ms({"samples_ms": [0.5, 0.25]}) == 0.75


def test_a_sweep_on_the_board_keeps_each_point_with_its_row_and_its_parts(live_parts, capsys):
    from gpu.core import stats
    from gpu.device import telemetry
    from gpu.sweeps import _kernels

    originals = (stats.stop_reason, _kernels.measured_row, telemetry.Telemetry.sample)
    sweep_parts = sys.modules["sweep_parts"]
    timer, progress = sweep_parts.SweepParts("device_copy"), Progress()
    whole = live_parts.measure(timer, _board_params(), Runtime(Board()), progress)
    assert (stats.stop_reason, _kernels.measured_row, telemetry.Telemetry.sample) == originals  # put back

    measured = [p for p in timer.points if p.row is not None]
    skipped = [p for p in timer.points if p.row is None]
    assert [p.row for p in measured] == progress.rows  # each point with its own row, in measured order
    assert skipped and all(not p.measured for p in skipped) and all("many passes in the L2" in p.label
                                                                   for p in skipped)
    assert len(progress.messages) == len(timer.points) + 1  # one a point, then "done"
    for point in measured:
        assert point.wall >= point.seconds > 0 and point.sampling is not None
        assert point.parts[live_parts.PROGRESS] > 0 and point.parts[live_parts.MEASURED_ROW] > 0
        assert point.parts[live_parts.STOP_RULE] > 0  # the stop rule after each sample, on this point's loop
        copies = point.row.get("copies_per_sample") or 1
        assert live_parts.measured_ms(point.row) == pytest.approx(sum(point.row["samples_ms"]) * copies)
    assert any((p.row.get("copies_per_sample") or 1) > 1 for p in measured)  # a batched point counted whole

    live_parts.report("device_copy", timer, whole, 0.0, "on the recording board")
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"LIVE-PARTS device_copy on the recording board: whole job {whole:.2f} s")
    assert f"{len(measured)} points, {sum(p.row['samples'] for p in measured):,} samples" in out[0]
    heading = next(i for i, line in enumerate(out) if "points with the most host overhead" in line)
    assert out[heading].startswith(f"  the {min(10, len(measured))} points")
    listed = out[heading + 1:]
    assert len(listed) == min(10, len(measured)) and all(" samples" in line and "(wall " in line for line in listed)
    each = next(i for i, line in enumerate(out) if line.startswith("  each point"))
    assert [line.split(": wall ")[0].strip() for line in out[each + 1:heading]] == [p.label for p in measured]
    assert all(line.endswith(f"{p.row['samples']} samples, {p.row['stop_reason']}")
               for line, p in zip(out[each + 1:heading], measured, strict=True))
    assert any("host overhead per sample median" in line for line in out)


def test_health_times_parts_keep_each_points_line(health_time, capsys, monkeypatch):
    """``health_time.py --parts`` on the shared machinery: each point's line with its samples and stop reason."""
    import gpu.device.context
    from gpu.experiments import suites

    class BoardRuntime(Runtime):
        def __init__(self, index):
            super().__init__(Board())

        def close(self):
            pass

    class Suite:
        def run_for(self, experiment):
            return type("Run", (), {"checked": lambda self: type("Checked", (), {"params": _board_params()})()})()

    monkeypatch.setattr(gpu.device.context, "GpuRuntime", BoardRuntime)
    monkeypatch.setattr(suites, "load", lambda name: Suite())
    health_time.run_parts(health_time.ROOT, 0, "device_copy")
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("DEVICE_COPY run of the health suite from") and "(recording board, " in out[0]
    rows = int(out[0].split(" row(s)")[0].rsplit(", ", 1)[1])
    points = [line for line in out if line.startswith("    ")]
    assert len(points) == rows and all(" samples, converged, " in line for line in points)
    assert "  samples (the profile's loop): " in "\n".join(out)


def test_a_job_handled_by_the_service_measures_the_timed_sweep(live_parts):
    """The page's path: the service's handler runs the experiment's own runner, which measures the timed sweep while
    the benchmark runs (its ``harness.run`` put back afterwards)."""
    from gpu.experiments import sweep_of
    from gpu.sweeps import harness

    class Service:  # the worker's handler, less its provenance and frame
        devices = Runtime(Board())

        def handle(self, job, progress, should_cancel):
            request = job["request"]
            return sweep_of(request.experiment)(request.params, self.devices, progress, should_cancel)

    service, original = Service(), harness.run
    request = dataclasses.replace(checked_request("device_copy", {}, None), params=_board_params())
    timer = sys.modules["sweep_parts"].SweepParts("device_copy")
    live_parts.measure(timer, request.params, service.devices, Progress(),
                       run=live_parts.through_service(service, request, timer))
    assert harness.run is original
    measured = [p for p in timer.points if p.measured]
    assert measured and all(p.row is not None and p.sampling is not None for p in measured)
    assert timer.parts[live_parts.sweep_parts.SAMPLES] > 0 and timer.parts[live_parts.PROGRESS] > 0


def test_without_the_gpu_asked_for_it_says_so_in_one_line(live_parts):
    with pytest.raises(SystemExit) as refused:
        live_parts.main(["--pages", "streams", "--gpu", "99"])
    assert str(refused.value.code).startswith("live_parts: needs GPU 99: ")
    assert "\n" not in str(refused.value.code)


def test_the_whole_benchmark_on_the_board_as_the_worker_runs_it(live_parts, capsys, monkeypatch):
    """``main`` with the worker's service standing on the board (a page of device copies): the host pool's job first,
    each Measure's progress messages and rows put on a spawned event queue that another process drains, a report a
    Measure, the service closed."""
    import gpu.service.worker
    from gpu.experiments import sweep_of

    jobs, closed = [], []

    class BoardService:
        def __init__(self, device=None):
            self.devices = self.runtime = Runtime(Board())

        def handle(self, job, progress, should_cancel):
            jobs.append(job["kind"])
            if job["kind"] == "warm_host_pool":
                return {"pooled_bytes": 0}
            request = job["request"]
            return sweep_of(request.experiment)(request.params, self.devices, progress, should_cancel)

        def conditions_now(self):
            return {"gpu": 0}

        def after_reply(self):
            jobs.append("freed")

        def close(self):
            closed.append(True)

    monkeypatch.setattr(gpu.service.worker, "GpuService", BoardService)
    monkeypatch.setitem(live_parts.DEFAULTS, "device_copy", {"sizes": [1 << 20, 4096]})
    live_parts.main(["--pages", "device_copy", "--profile", PROFILE, "--repeats", "2"])
    out = capsys.readouterr().out
    assert jobs == ["warm_host_pool", "experiment", "freed", "experiment", "freed"] and closed == [True]
    headers = [line for line in out.splitlines() if line.startswith("LIVE-PARTS")]
    assert [h.split(" from ")[0] for h in headers] == ["LIVE-PARTS device_copy Measure 1",
                                                        "LIVE-PARTS device_copy Measure 2"]
    assert all("(recording board, " in h and f"profile {PROFILE}: whole job " in h for h in headers)
