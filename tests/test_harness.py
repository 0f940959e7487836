"""The sweep harness on a fake device: point order, cancellation, streamed rows, verification and freeing."""

from dataclasses import dataclass, field

import pytest

from gpu.core.errors import JobCancelled, ValidationError, VerificationError
from gpu.experiments import axes
from gpu.experiments.grid import Coordinate, Grid
from gpu.sweeps import harness
from tests.test_job_scope import _runtime


class _Telemetry:
    def __init__(self, log):
        self.log = log

    def start_point(self):
        self.log.append("start_point")

    def sample(self, force=False):
        pass

    def point_summary(self):
        return {"sm_clock_mhz": 1980.0, "throttled": False}


def _device(log):
    """A GpuRuntime with a recording driver (see test_job_scope), plus telemetry and limits."""
    gpu = _runtime(log)
    gpu.telemetry = _Telemetry(log)
    gpu.limits = lambda: "limits"
    return gpu


AXES = (
    axes.Axis("sizes", "sizes", [4, 8, 16], kind="sizes"),
    axes.Axis("variants", "variants", ["a", "b"]),
)
GRID = Grid([Coordinate("bytes", axis="sizes"), Coordinate("variant", axis="variants")])


@dataclass(frozen=True)
class Params(axes.parameters(AXES, grid=GRID, key_columns=["variant", "bytes"])):
    profile: str = field(default="interactive/timeout_s=0.2")


class FakeSweep(harness.Sweep):
    """Measures sizes coarse-first; each size (a group) gets a buffer for its variants, freed after them."""

    NAME, TITLE, KEY_COLUMNS = "fake", "A fake experiment", ["variant", "bytes"]
    wrong: tuple | None = None  # the point whose output is wrong
    closed_log: list = []

    @staticmethod
    def invalid_reasons(params, limits):
        raise AssertionError("a request is checked before it reaches the worker; the sweep re-checks only memory")

    @staticmethod
    def memory_reasons(params, limits):
        assert limits == "limits"
        return [f"size {s} no longer fits in the memory free now" for s in params.sizes if s > 1024]

    def order(self, grid_points):
        rank = {size: i for i, size in enumerate(harness.coarse_first(self.params.sizes))}
        return sorted(grid_points, key=lambda p: rank[p["bytes"]])

    def group_of(self, grid_point):
        return grid_point["bytes"]

    def enter_group(self, size):
        self.buffer = self.ledger.device_buffer(size)

    def leave_group(self, size):
        self.ledger.free_device(self.buffer)

    def point(self, grid_point):
        variant, size = grid_point["variant"], grid_point["bytes"]
        return harness.Point({"variant": variant, "group": "fake", "direction": "h2d"}, f"{variant} · {size} B",
                             size, "host_clock", (variant, size))

    def measure(self, point):
        variant, size = point.state
        return lambda: float(size)

    def verify(self, point):
        if point.state == type(self).wrong:
            raise VerificationError(f"{point.label}: wrong data")

    def close(self):
        type(self).closed_log.append("close")


class Progress:
    def __init__(self, log):
        self.log, self.calls, self.rows = log, [], []

    def __call__(self, done, total, text=""):
        self.calls.append((done, total, text))

    def row(self, row):
        self.rows.append(row)
        self.log.append(f"row {row['variant']} {row['bytes']}")


@pytest.fixture(autouse=True)
def _fresh():
    FakeSweep.wrong = None
    FakeSweep.closed_log = []


def test_points_are_measured_coarse_first_and_come_back_in_point_order():
    log = []
    progress = Progress(log)
    rows = harness.run(FakeSweep, Params(), _device(log), progress, lambda: False)
    assert [(r["variant"], r["bytes"]) for r in rows] == [("a", 4), ("b", 4), ("a", 16), ("b", 16), ("a", 8),
                                                          ("b", 8)]
    assert progress.calls[0] == (0, 6, "a · 4 B") and progress.calls[-1] == (6, 6, "done")
    assert [c[0] for c in progress.calls] == [0, 1, 2, 3, 4, 5, 6]
    row = rows[0]
    assert row["median_ms"] == 4.0 and row["timer"] == "host_clock" and row["verified"] is True
    assert row["group"] == "fake" and row["direction"] == "h2d" and row["sm_clock_mhz"] == 1980.0
    assert row["profile"].startswith("interactive") and row["samples"] >= 5 and row["stop_reason"]
    import pandas as pd

    from gpu.core import schema

    frame = harness.in_point_order(schema.make_frame(
        [{**r, "run_id": "r", "experiment": "fake"} for r in rows], {}), FakeSweep, Params())
    assert list(zip(frame["variant"], frame["bytes"], strict=True)) == list(Params().points())
    assert isinstance(frame, pd.DataFrame)
    assert FakeSweep.closed_log == ["close"]


def test_each_row_is_streamed_as_soon_as_it_is_measured():
    log = []
    progress = Progress(log)
    harness.run(FakeSweep, Params(sizes=[4, 8]), _device(log), progress, lambda: False)
    assert log == ["start_point", "row a 4", "start_point", "row b 4", "free buffer1",
                   "start_point", "row a 8", "start_point", "row b 8", "free buffer2", "synchronize"]
    assert len(progress.rows) == 4


def test_a_cancelled_sweep_stops_before_its_next_point_and_frees_at_once():
    log = []
    progress = Progress(log)
    gpu = _device(log)
    asked = []

    def should_cancel():
        asked.append(1)
        return len(asked) > 3

    with pytest.raises(JobCancelled):
        harness.run(FakeSweep, Params(), gpu, progress, should_cancel)
    assert len(progress.rows) == 3
    assert log[-2:] == ["synchronize", "free buffer2"]  # the held buffer of the interrupted size is freed
    assert gpu._released_after_reply == [] and FakeSweep.closed_log == ["close"]


def test_a_wrong_result_fails_the_job_without_a_row_and_frees_everything():
    log = []
    progress = Progress(log)
    gpu = _device(log)
    FakeSweep.wrong = ("b", 16)
    with pytest.raises(VerificationError, match="b · 16 B: wrong data"):
        harness.run(FakeSweep, Params(), gpu, progress, lambda: False)
    assert [(r["variant"], r["bytes"]) for r in progress.rows] == [("a", 4), ("b", 4), ("a", 16)]
    assert log[-2:] == ["synchronize", "free buffer2"]
    assert FakeSweep.closed_log == ["close"]


def test_a_request_that_no_longer_fits_in_free_memory_is_refused_before_anything_is_allocated():
    log = []
    with pytest.raises(ValidationError, match="size 4096 no longer fits"):
        harness.run(FakeSweep, Params(sizes=[4, 4096]), _device(log), Progress(log), lambda: False)
    assert log == [] and FakeSweep.closed_log == []


def test_a_successful_job_keeps_its_buffers_until_the_reply_is_sent():
    log = []
    gpu = _device(log)

    class Holding(FakeSweep):
        def setup(self):
            self.ledger.device_buffer(64)  # job-wide: freed with the job

    harness.run(Holding, Params(sizes=[4]), gpu, Progress(log), lambda: False)
    assert "free buffer1" not in log and log[-1] == "synchronize"
    gpu.release_after_reply()
    assert log[-1] == "free buffer1"


def test_a_point_that_cannot_run_has_its_progress_but_no_row():
    log = []
    progress = Progress(log)

    class Skipping(FakeSweep):
        RESTART_TELEMETRY = False  # readings kept across points: no start_point in the log

        def measure(self, point):
            return None if point.state == ("b", 4) else super().measure(point)

    rows = harness.run(Skipping, Params(sizes=[4, 8]), _device(log), progress, lambda: False)
    assert [(r["variant"], r["bytes"]) for r in rows] == [("a", 4), ("a", 8), ("b", 8)]
    assert progress.calls == [(0, 4, "a · 4 B"), (1, 4, "b · 4 B"), (2, 4, "a · 8 B"), (3, 4, "b · 8 B"),
                              (4, 4, "done")]
    assert "start_point" not in log


def test_an_experiment_may_ask_the_device_more_to_validate():
    log = []

    class Asking(FakeSweep):
        @classmethod
        def reasons(cls, params, gpu, limits):
            return [f"the device says no to {len(params.sizes)} sizes"]

    with pytest.raises(ValidationError, match="the device says no to 3 sizes"):
        harness.run(Asking, Params(), _device(log), Progress(log), lambda: False)
    assert log == []


def test_a_point_is_prepared_after_its_progress_and_before_its_telemetry_with_the_checked_limits():
    log = []

    class Prepared(FakeSweep):
        def prepare(self, point):
            log.append(f"prepare {point.label} ({self.limits})")

    progress = Progress(log)
    harness.run(Prepared, Params(sizes=[4], variants=["a"]), _device(log), progress, lambda: False)
    assert log[:3] == ["prepare a · 4 B (limits)", "start_point", "row a 4"]
    assert progress.calls[0] == (0, 1, "a · 4 B")


def test_unknown_parameters_and_profiles_are_named_in_one_place():
    from dataclasses import dataclass

    from gpu.core.errors import ValidationError
    from gpu.experiments import axes

    @dataclass(frozen=True)
    class Params:
        sizes: tuple = ()
        profile: str = "interactive"

    assert axes.unknown_parameter_reasons({"sizes": [1], "profile": "precise"}, Params) == []
    assert axes.unknown_parameter_reasons({"size": 1, "blocks": 2}, Params) == ["unknown parameters: blocks, size"]
    with pytest.raises(ValidationError, match="unknown parameter: size"):
        axes.parser(Params)({"size": 1})
    assert axes.profile_reasons("precise/timeout_s=2") == []
    assert axes.profile_reasons("quick") == ["unknown profile 'quick': choose one of precise, interactive"]


class DriftingSweep(FakeSweep):
    """A sweep whose walk measures one size its Params never declared."""

    def walk(self):
        yield from super().walk()
        buffer = self.ledger.device_buffer(32)
        yield harness.Point({"variant": "a", "group": "fake", "direction": "h2d"}, "a · 32 B", 32, "host_clock",
                            ("a", 32))
        self.ledger.free_device(buffer)


def test_a_sweep_that_measures_outside_its_declared_grid_is_refused_without_that_row():
    log, rows = [], []
    progress = Progress(log)
    progress.row = rows.append
    with pytest.raises(VerificationError, match=r"fake: measured a point outside its declared grid \(variant=a, "
                                                r"bytes=32\)"):
        harness.run(DriftingSweep, Params(), _device(log), progress, lambda: False)
    assert len(rows) == 6 and {r["bytes"] for r in rows} == {4, 8, 16}


class BatchedSweep(FakeSweep):
    """Each sample is the mean of 100 back-to-back copies of 0.02 ms (2 ms of copying a sample)."""

    def measure(self, point):
        return harness.PerCopy(lambda copies: copies * 0.02, 100)


def test_a_batched_sample_counts_its_copies_time_towards_the_profiles_minimum():
    """nvbench's rule (0.5 s of samples) counts the time measured: 250 samples of 100 copies of 0.02 ms, not the
    25,000 that the per-copy means would need (past precise's 5,000 samples: a converged point ran to its cap)."""
    params = Params(sizes=[4], variants=["a"], profile="precise/timeout_s=1000")
    [row] = harness.run(BatchedSweep, params, _device([]), Progress([]), lambda: False)
    assert row["median_ms"] == pytest.approx(0.02) and row["stop_reason"] == "converged"
    assert 250 <= row["samples"] <= 251  # 0.5 s of copying (the last ms in floating point)


class NoisyBatchedSweep(FakeSweep):
    """Each sample the mean of 100 copies, 0.02 ms ± 3 % (a pageable copy's noise): never within 0.5 %."""

    def measure(self, point):
        calls = iter(range(10**6))
        return harness.PerCopy(lambda copies: copies * 0.02 * (1.03 if next(calls) % 2 else 0.97), 100)


def test_a_noisy_batched_point_stops_at_min_time_under_the_hot_rule_and_its_row_names_the_whole_profile():
    hot = Params(sizes=[4], variants=["a"], profile="precise/timeout_s=1000,max_samples=2000,hot_max_noise=1")
    [row] = harness.run(NoisyBatchedSweep, hot, _device([]), Progress([]), lambda: False)
    assert row["stop_reason"] == "min_time" and 250 <= row["samples"] <= 252 and row["cv"] > 0.025
    assert row["profile"] == "precise/timeout_s=1000,max_samples=2000,hot_max_noise=1"
    plain = Params(sizes=[4], variants=["a"], profile="precise/timeout_s=1000,max_samples=2000")
    [row] = harness.run(NoisyBatchedSweep, plain, _device([]), Progress([]), lambda: False)
    assert row["stop_reason"] == "max_samples" and row["samples"] == 2000  # the noise rule: to its cap
