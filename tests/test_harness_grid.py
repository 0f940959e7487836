"""The harness hands a sweep the points of its declared grid (``Sweep.point``), in the sweep's ``order``, with its
group hooks around each group, reports the points the grid skips and never measures them; on the simulated board
(tests/test_harness.py's recording driver) it measures exactly what the old ``points()`` generator measured."""

from dataclasses import dataclass, field

import pytest

from gpu.core.errors import JobCancelled
from gpu.experiments import axes
from gpu.experiments.grid import Coordinate, Exclude, Grid
from gpu.sweeps import harness
from tests.test_harness import FakeSweep, Progress, _device
from tests.test_harness import Params as OldParams

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
    """FakeSweep's measurement, given its points: sizes coarse first, a buffer per size (a group)."""

    points = harness.Sweep.points  # the new shape: no generator of its own
    entered: list = []

    def order(self, grid_points):
        rank = {size: i for i, size in enumerate(harness.coarse_first(self.params.sizes))}
        return sorted(grid_points, key=lambda p: rank[p["bytes"]])

    def group_of(self, grid_point):
        return grid_point["bytes"]

    def enter_group(self, size):
        type(self).entered.append(("enter", size))
        self.buffer = self.ledger.device_buffer(size)

    def leave_group(self, size):
        type(self).entered.append(("leave", size))
        self.ledger.free_device(self.buffer)

    def point(self, grid_point):
        variant, size = grid_point["variant"], grid_point["bytes"]
        return harness.Point({"variant": variant, "group": "fake", "direction": "h2d"}, f"{variant} · {size} B",
                             size, "host_clock", (variant, size))


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


def test_a_grid_sweep_measures_what_the_old_generator_measured_in_the_same_order():
    new_rows, new_log, new_calls = _measured(GridSweep, Params(sizes=[4, 8, 16], variants=["a", "b"]))
    old_rows, old_log, old_calls = _measured(FakeSweep, OldParams())
    assert [(r["variant"], r["bytes"]) for r in new_rows] == [("a", 4), ("b", 4), ("a", 16), ("b", 16), ("a", 8),
                                                              ("b", 8)]
    assert new_rows == old_rows and new_log == old_log and new_calls == old_calls
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
