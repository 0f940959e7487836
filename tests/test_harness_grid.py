"""The harness hands a sweep the points of its declared grid (``Sweep.point``), in the sweep's ``order``, with its
group hooks around each group, reports the points the grid skips and never measures them (on the simulated board:
tests/test_harness.py's recording driver)."""

from dataclasses import dataclass, field

import pytest

from gpu.core.errors import JobCancelled
from gpu.experiments import axes
from gpu.experiments.grid import Coordinate, Exclude, Grid
from gpu.sweeps import harness
from tests.test_harness import FakeSweep, Progress, _device

AXES = (
    axes.Axis("sizes", "sizes", [4, 8, 16], kind="sizes"),
    axes.Axis("variants", "variants", ["a", "b"], values=("a", "b", "c")),
)
GRID = Grid([Coordinate("bytes", axis="sizes"), Coordinate("variant", axis="variants")],
            [Exclude(lambda p: p["variant"] == "c" and p["bytes"] > 4, "c runs on 4 B only")])


@dataclass(frozen=True)
class Params(axes.parameters(AXES, grid=GRID, key_columns=["variant", "bytes"])):
    profile: str = field(default="interactive/timeout_s=0.2")


class GridSweep(FakeSweep):
    """FakeSweep (sizes coarse first, a buffer per size: a group), its group hooks recorded."""

    entered: list = []

    def enter_group(self, size):
        type(self).entered.append(("enter", size))
        super().enter_group(size)

    def leave_group(self, size):
        type(self).entered.append(("leave", size))
        super().leave_group(size)


@pytest.fixture(autouse=True)
def _fresh():
    FakeSweep.wrong = None
    FakeSweep.closed_log = []
    GridSweep.entered = []


def _measured(sweep, params):
    log = []
    progress = Progress(log)
    rows = harness.run(sweep, params, _device(log), progress, lambda: False)
    strip = ("median_ms", "samples", "stop_reason", "profile", "mean_ms", "min_ms", "max_ms", "p10_ms", "p90_ms",
             "stddev_ms", "cv", "ci95_half_ms", "elapsed_s")
    return [{c: v for c, v in r.items() if c not in strip} for r in rows], log, progress.calls


def test_a_grid_sweep_measures_in_its_order_with_its_hooks_around_each_group():
    rows, log, calls = _measured(GridSweep, Params(sizes=[4, 8, 16], variants=["a", "b"]))
    assert [(r["variant"], r["bytes"]) for r in rows] == [("a", 4), ("b", 4), ("a", 16), ("b", 16), ("a", 8),
                                                          ("b", 8)]
    assert log == ["start_point", "row a 4", "start_point", "row b 4", "free buffer1",
                   "start_point", "row a 16", "start_point", "row b 16", "free buffer2",
                   "start_point", "row a 8", "start_point", "row b 8", "free buffer3", "synchronize"]
    assert [c[2] for c in calls] == ["a · 4 B", "b · 4 B", "a · 16 B", "b · 16 B", "a · 8 B", "b · 8 B", "done"]
    assert GridSweep.entered == [("enter", 4), ("leave", 4), ("enter", 16), ("leave", 16), ("enter", 8),
                                 ("leave", 8)]


def test_skipped_points_are_reported_and_never_measured():
    log = []

    class Reporting(Progress):
        def skipped(self, skipped):
            self.said = [(p.key(["variant", "bytes"]), reason) for p, reason in skipped]

    progress = Reporting(log)
    rows = harness.run(GridSweep, Params(sizes=[4, 8], variants=["a", "c"]), _device(log), progress, lambda: False)
    assert [(r["variant"], r["bytes"]) for r in rows] == [("a", 4), ("c", 4), ("a", 8)]
    assert progress.said == [(("c", 8), "c runs on 4 B only")]
    assert progress.calls[0] == (0, 3, "a · 4 B") and progress.calls[-1] == (3, 3, "done")


def test_a_cancelled_grid_sweep_leaves_no_group_open_past_the_job_scope():
    log = []
    asked = []

    def should_cancel():
        asked.append(1)
        return len(asked) > 3

    with pytest.raises(JobCancelled):
        harness.run(GridSweep, Params(), _device(log), Progress(log), should_cancel)
    # the group being measured is not left by the sweep: the job's allocation scope frees its buffer
    assert GridSweep.entered == [("enter", 4), ("leave", 4), ("enter", 16)]
    assert log[-2:] == ["synchronize", "free buffer2"] and FakeSweep.closed_log == ["close"]


def test_a_sweep_without_groups_gets_every_point_in_the_grid_order():
    class Ungrouped(GridSweep):
        order = harness.Sweep.order
        group_of = harness.Sweep.group_of

    rows, _, _ = _measured(Ungrouped, Params(sizes=[16, 4], variants=["b"]))
    assert [(r["variant"], r["bytes"]) for r in rows] == [("b", 16), ("b", 4)] and GridSweep.entered == []


def test_the_harness_walks_the_declared_grid_once(monkeypatch):
    walks = []
    walk = GRID.walk
    monkeypatch.setattr(GRID, "walk", lambda params: walks.append(params) or walk(params))
    rows, _, _ = _measured(GridSweep, Params())
    assert len(walks) == 1 and len(rows) == 6
