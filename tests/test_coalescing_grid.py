"""Coalescing's points come from its declared grid: the same keys in the same order as the hand-written loop they
replace (copied here as the reference) for every parameter choice, and the sweep, given its points by the harness,
measures them in the same story-first order, with the same labels, bytes, timers and row columns as the old sweep's
own loop, on the simulated board (tests/test_harness.py's recording runtime; the kernels' launches are not replayed
here: ``measure`` and ``verify`` did not change)."""

import pytest

from gpu.experiments import coalescing
from gpu.experiments.coalescing import LABELS, VARIANTS, bytes_moved
from gpu.experiments.coalescing.sweep import CoalescingSweep
from gpu.sweeps import harness
from gpu.sweeps.harness import values_coarse_first
from tests.test_harness import Progress, _device


def old_points(params):
    """Params.points() as it was written by hand before the grid."""
    for block in params.block_sizes:
        for group in ["copy"] + [g for g in params.groups if g != "copy"]:
            for variant in VARIANTS[group]:
                if group == "strided":
                    values = params.strides
                elif group == "offset":
                    values = params.offsets
                elif group == "transpose":
                    values = [params.matrix_side]
                else:
                    values = [0]
                for value in values:
                    yield variant, block, params.elements, value


CHOICES = [
    {},
    {"block_sizes": [1024, 32, 256], "elements": 1 << 20},  # unsorted: normalised by the parser
    {"groups": ["transpose", "strided"], "strides": [64, 1, 8]},  # copy is never chosen, but always measured
    {"groups": ["copy"]},
    {"groups": ["offset", "copy", "offset"], "offsets": [31, 0, 0, 32]},  # duplicates
    {"groups": ["layout"], "block_sizes": [128]},
    {"groups": [], "strides": [], "offsets": []},  # empty lists: the copy group still runs
    {"elements": 1 << 27, "groups": ["transpose"]},  # an odd power of two: a smaller square matrix
    {"strides": [2], "offsets": [4], "block_sizes": [64]},
]


@pytest.mark.parametrize("raw", CHOICES)
def test_the_grid_gives_the_old_loops_points_in_its_order(raw):
    params = coalescing.parse_params(raw)
    assert params.points() == list(old_points(params)) and params.skipped() == []


def test_unparsed_parameters_keep_the_old_order_each_point_once():
    params = coalescing.Params(block_sizes=[512, 64, 512], groups=["strided", "copy"], strides=[4, 1, 4])
    assert params.points() == list(dict.fromkeys(old_points(params)))


class _Timer:
    def timer_name(self):
        return "cuda_event_l2_flushed_held"


class OldCoalescingSweep(CoalescingSweep):
    """The sweep as it was before the grid: its own walk of Params.points() (copied)."""

    def walk(self):  # the harness measures what walk() yields: here, the old loop
        n, side = self.params.elements, self.params.matrix_side
        story = values_coarse_first(list(old_points(self.params)), series=lambda p: (p[0], p[1]), value=lambda p: p[3])
        for variant, block, _, value in story:
            param = {"strided": "stride", "offset": "offset"}.get(
                variant, "matrix_side" if variant.startswith("transpose") else "none")
            yield harness.Point(
                {"variant": variant, "group": next(g for g, vs in VARIANTS.items() if variant in vs),
                 "direction": "device", "block_size": block, "elements": n, "param_value": value, "param": param},
                f"{LABELS[variant]} · block {block}" + (f" · {value}" if value else ""),
                bytes_moved(variant, n, side), self.timer.timer_name(), {"variant": variant, "block": block,
                                                                         "value": value})


def _on_the_board(sweep):
    """``sweep`` with its set-up and its kernels left out: each point's sample is its bytes, its state recorded."""

    class OnTheBoard(sweep):
        states: list = []
        memory_reasons = staticmethod(lambda params, limits: [])  # the board has no memory to check

        def setup(self):
            self.timer = _Timer()

        def measure(self, point):
            type(self).states.append(dict(point.state))
            return lambda: float(point.nbytes)

        def verify(self, point):
            pass

    return OnTheBoard


@pytest.mark.parametrize("raw", [{"elements": 1 << 20}, {"elements": 1 << 21, "block_sizes": [128, 256],
                                                         "groups": ["transpose", "offset", "strided"]}])
def test_the_sweep_given_its_points_measures_what_the_old_sweep_measured(raw):
    params = coalescing.parse_params({"profile": "interactive/timeout_s=0.2", **raw})
    measured = {}
    for name, sweep in (("new", _on_the_board(CoalescingSweep)), ("old", _on_the_board(OldCoalescingSweep))):
        log = []
        progress = Progress(log)
        rows = harness.run(sweep, params, _device(log), progress, lambda: False)
        for row in rows:
            for column in ("stop_reason", "samples", "samples_ms", "cv", "min_ms", "max_ms"):  # the host's clock
                row.pop(column)
        measured[name] = rows, progress.calls, sweep.states
    assert measured["new"] == measured["old"]
    rows, calls, _ = measured["new"]
    assert len(rows) == len(params.points()) and calls[-1] == (len(rows), len(rows), "done")
    strided = [r["param_value"] for r in rows if r["variant"] == "strided" and r["block_size"] == rows[0]["block_size"]]
    assert strided[:3] == [1, 64, 8]  # each stride sweep coarse first
