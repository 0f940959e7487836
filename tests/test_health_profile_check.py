"""The health profile check's verdicts (``tests/benchmarks/health_profile_check.py``), on made-up medians and on a
run of its whole report with the GPU's sweeps replaced: a point whose spread under the suite's profile is already
wider than its floor is judged against that spread too, and a profile spec with a comma is one argument."""

import importlib.util
import math
import sys

import pytest

from gpu.core import paths

SCRIPT = paths.ROOT / "tests" / "benchmarks" / "health_profile_check.py"


@pytest.fixture(scope="module")
def check():
    spec = importlib.util.spec_from_file_location("health_profile_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up while it is made
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def test_a_point_a_itself_cannot_hold_to_its_floor_is_judged_by_as_spread_too(check):
    # A pageable point on an H200: A's own repeats spread 40 % against a 28 % floor.
    verdict = check.judge([1.0, 1.2, 1.4], [1.0, 1.2, 1.33], 0.28)
    assert not verdict.a_keeps_floor and verdict.spread_a == pytest.approx(math.log(1.4))
    assert not verdict.keeps  # B spreads 28.5 %: past the floor, as A does
    assert verdict.no_worse  # but within A's own 33.6 %
    worse = check.judge([1.0, 1.2, 1.4], [1.0, 1.5, 1.6], 0.28)  # B spreads 47 %: more than A
    assert not worse.no_worse and not worse.keeps


def test_a_quiet_point_is_held_to_its_floor_by_both_verdicts(check):
    verdict = check.judge([1.000, 1.001, 1.002], [1.010, 1.011, 1.012], 0.005)  # shift 1 %, floor 0.5 %
    assert verdict.a_keeps_floor and not verdict.keeps and not verdict.no_worse
    kept = check.judge([1.000, 1.001, 1.002], [1.001, 1.002, 1.003], 0.005)
    assert kept.keeps and kept.no_worse


def test_a_profile_with_a_comma_is_one_argument_and_a_bad_one_is_one_line(check, capsys, monkeypatch):
    assert check.profile_argument("precise/timeout_s=1,hot_max_noise=1") == "precise/timeout_s=1,hot_max_noise=1"
    monkeypatch.setattr(sys, "argv", ["health_profile_check.py", "--candidate", "precise/timeout_s=1,hot_max_noise=2"])
    with pytest.raises(SystemExit):
        check.main()
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.endswith("profile 'precise/timeout_s=1,hot_max_noise=2': hot_max_noise must be a finite number of at "
                          "most 1, not 2")


class FakeRuntime:
    facts = {"device_name": "Simulated H200"}

    def __init__(self, index):
        self.index = index

    def close(self):
        pass


def test_the_report_gives_both_verdicts_and_counts_batched_points_apart(check, capsys, monkeypatch):
    """The whole report, its sweeps replaced by rows whose medians are made up: A's pageable point spreads wider than
    its floor, B's no wider; the batched point says its copies."""
    import gpu.device.context

    profiles, calls = [], iter(range(100))

    def measure(experiment, params, gpu):
        profiles.append(params.profile)
        wobble = [1.0, 1.0, 0.0, 0.0, 1.6][next(calls)]  # A's pageable medians (the first run is not counted)
        hot = "hot_max_noise" in params.profile
        rows = [{"bytes": 1 << 20, "variant": "pageable", "direction": "h2d", "include_alloc": False,
                 "timer": "cuda_event_batched", "median_ms": 0.1 * (1.15 if hot else wobble), "copies_per_sample": 12,
                 "stop_reason": "min_time" if hot else "timeout", "samples_ms": [0.1] * (400 if hot else 800)},
                {"bytes": 1 << 20, "variant": "pinned", "direction": "h2d", "include_alloc": False,
                 "timer": "cuda_event", "median_ms": 0.02, "copies_per_sample": None, "stop_reason": "converged",
                 "samples_ms": [0.02] * 10}]
        return rows, 1.0

    monkeypatch.setattr(check, "measure", measure)
    monkeypatch.setattr(gpu.device.context, "GpuRuntime", FakeRuntime)
    monkeypatch.setattr(sys, "argv", ["health_profile_check.py", "--candidate", "precise/timeout_s=1,hot_max_noise=1",
                                      "--baseline", "precise/timeout_s=1", "--repeats", "2"])
    check.main()
    out = capsys.readouterr().out
    assert set(profiles) == {"precise/timeout_s=1", "precise/timeout_s=1,hot_max_noise=1"}  # the comma kept whole
    assert "A precise/timeout_s=1 against B precise/timeout_s=1,hot_max_noise=1, 2 repeats each" in out
    [pageable] = [line for line in out.splitlines() if "variant=pageable" in line]
    assert "12 copies a sample" in pageable and "A does NOT keep the floor itself" in pageable
    assert "B no worse than A" in pageable and "stops A timeout ×2, B min_time ×2" in pageable
    assert pageable.endswith("samples A 0.96 s, B 0.48 s")  # 800 and 400 samples of 12 copies of 0.1 ms
    [pinned] = [line for line in out.splitlines() if "variant=pinned" in line]
    assert "copies a sample" not in pinned and "keeps its noise; A keeps the floor itself" in pinned
    assert "  2 of 2 points keep their noise under B\n" in out  # the first verdict's count, as before
    assert "  batched (1 points): B keeps the floor at 1, B no worse than A at 1, A keeps the floor itself at 0" in out
    assert "  single (1 points): B keeps the floor at 1, B no worse than A at 1, A keeps the floor itself at 1" in out
    assert "  B (precise/timeout_s=1,hot_max_noise=1): 1.00 s a run" in out
