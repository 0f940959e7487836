"""Verdicts on synthetic sample sets whose answer is known, run-to-run bands (a device's history, the measured floors),
the headline, the provenance diff and history; the floors and bars on the recorded runs of unchanged code."""

import math
import sys

import numpy as np
import pandas as pd
import pytest

from gpu.core import schema
from gpu.results.analysis import bands, compare
from gpu.results.exchange.catalog import BUNDLED_DIRS
from tests import pair_frames, run_to_run

RNG: np.random.Generator | None = None  # set for each test by the ``rng`` fixture


@pytest.fixture(autouse=True)
def rng(monkeypatch) -> np.random.Generator:
    """Each test draws its samples from its own generator, seeded alike: a test's samples do not depend on which
    tests ran before it (its order, -k or -x)."""
    generator = np.random.default_rng(7)
    monkeypatch.setattr(sys.modules[__name__], "RNG", generator)
    return generator


def samples(median, cv, n=50):
    return (median * (1 + cv * RNG.standard_normal(n))).clip(min=median * 0.01)


def test_the_same_distribution_is_the_same():
    result = compare.verdict(samples(1.0, 0.02), samples(1.0, 0.02), 0.02, 0.02)
    assert result["verdict"] == "same"
    assert compare.verdict(samples(1.0, 0.02), samples(1.0, 0.02), band=band(0.05))["verdict"] == "same"


def band(half_width, center=0.0, source="test floor"):
    return {"center": center, "half_width": half_width, "source": source}


def test_a_difference_inside_the_run_to_run_band_is_run_to_run_noise_and_beyond_it_is_slower():
    base, cand = samples(1.0, 0.01), samples(1.08, 0.01)  # 8 % slower, far beyond the 1 % within-run noise
    assert compare.verdict(base, cand, 0.01, 0.01)["verdict"] == "slower"
    within = compare.verdict(base, cand, band=band(0.10))
    assert within["verdict"] == "run-to-run" and within["run_to_run"] == pytest.approx(np.expm1(0.10))
    assert compare.verdict(base, cand, band=band(0.05))["verdict"] == "slower"
    # the band is around where unchanged runs land: a candidate back at that centre is not "faster"
    assert compare.verdict(samples(1.2, 0.01), samples(1.0, 0.01), band=band(0.05, center=0.0))["verdict"] == \
        "run-to-run"


def test_rare_slow_samples_do_not_hide_a_change_of_the_bulk():
    # 4 KiB copies: a 10 % shift of the bulk, with 3 % of samples 5× slower (a CV of about 70 %)
    def heavy(median):
        kept = samples(median, 0.02, 2000)
        kept[::33] *= 5
        return kept

    base, cand = heavy(1.0), heavy(0.9)
    assert np.std(base) / np.mean(base) > 0.5 and compare.robust_spread(base) < 0.03
    assert compare.verdict(base, cand, band=band(0.05))["verdict"] == "faster"


def test_few_but_fully_separated_samples_count_when_a_band_guards():
    base, cand = [1.0, 1.01, 0.99], [1.5, 1.49, 1.51]
    assert compare.verdict(base, cand, band=band(0.05))["verdict"] == "slower"
    assert compare.verdict(base, cand, band=band(0.5))["verdict"] == "run-to-run"
    assert compare.verdict(base, [1.5, 1.49, 0.98], band=band(0.05))["verdict"] == "same"  # overlapping


def test_a_clear_slowdown_beyond_noise_is_slower():
    result = compare.verdict(samples(1.0, 0.01), samples(1.2, 0.01), 0.01, 0.01)
    assert result["verdict"] == "slower" and result["change"] == pytest.approx(1 / 1.2 - 1, rel=0.05)
    assert result["p_value"] < 1e-6


def test_a_clear_speedup_is_faster():
    assert compare.verdict(samples(1.0, 0.01), samples(0.8, 0.01), 0.01, 0.01)["verdict"] == "faster"


def test_a_significant_difference_within_the_runs_spread_is_the_same():
    # 3 % apart with 10 % noise: the U test may notice with many samples, but it is not beyond the spread.
    base, cand = samples(1.0, 0.10, 2000), samples(1.03, 0.10, 2000)
    result = compare.verdict(base, cand, 0.10, 0.10)
    assert result["p_value"] < 0.05 and result["verdict"] == "same"


def test_few_samples_are_flagged():
    # 3 against 3 fully separated samples: the exact U test cannot go below p = 0.1, so no verdict.
    result = compare.verdict([1.0, 1.01, 0.99], [1.5, 1.49, 1.51], 0.01, 0.01)
    assert result["few_samples"] and result["p_value"] == pytest.approx(0.1) and result["verdict"] == "same"


def make_run(run_id, medians, cv=0.01, device="GPU A", driver="580", timestamp="2026-11-22T00:00:00+00:00",
             exact=False):
    """A transfers run; ``exact``: samples spread around exactly the given medians (for histories)."""
    rows = []
    for (size, variant), median in medians.items():
        kept = list(samples(median, cv, 30))
        if exact:
            kept = list(median * (1 + cv * np.linspace(-1, 1, 31)))
        rows.append({"run_id": run_id, "experiment": "transfers", "variant": variant, "direction": "h2d",
                     "bytes": size, "include_alloc": False, "median_ms": float(np.median(kept)), "min_ms": min(kept),
                     "max_ms": max(kept), "cv": cv, "samples": len(kept), "gbps": size / median / 1e6,
                     "stop_reason": "converged", "profile": "precise", "timer": "cuda_event", "verified": True,
                     "samples_ms": kept, "throttled": False})
    provenance = {"device_name": device, "driver_version": driver, "timestamp": timestamp, "pcie_gen": 5,
                  "pcie_width": 16, "pcie_gbps_theoretical": 63.0, "hbm_gbps_theoretical": 4800.0, "host": "h",
                  "git_commit": "abc", "backend": "live"}
    return schema.make_frame(rows, provenance)


def test_headline_counts_and_names_the_worst_point():
    base = make_run("a", {(4096, "pinned"): 0.010, (1 << 20, "pinned"): 0.050, (1 << 30, "pinned"): 120.0,
                          (1 << 30, "pageable"): 120.0})
    cand = make_run("b", {(4096, "pinned"): 0.010, (1 << 20, "pinned"): 0.061, (1 << 30, "pinned"): 100.0,
                          (1 << 30, "pageable"): 100.0}, driver="590")
    table = compare.compare(base, cand)
    line = compare.headline(table)
    assert line.startswith("1 of 4 points slower beyond noise, worst −18 % at 1 MiB pinned H2D")
    best = table.set_index("point").loc["1 GiB pinned H2D", "change"]
    assert f"1 faster, best {compare.percent(best)} at 1 GiB pinned H2D" in line and best > 0.15
    # the same 20 % on pageable memory is within what pageable copies move between runs
    assert table.set_index("point").loc["1 GiB pageable H2D", "verdict"] == "run-to-run"
    assert line.endswith("1 within run-to-run noise; 1 the same within noise")
    assert compare.verdict_counts(table) == {"slower beyond noise": 1, "faster beyond noise": 1,
                                             "within run-to-run noise": 1, "same within noise": 1}
    diff = compare.provenance_diff(base, cand).set_index("field")
    assert diff.loc["driver_version", "differs"] and diff.loc["driver_version", "candidate"] == "590"
    assert not diff.loc["device_name", "differs"] and not diff.loc["timers", "differs"]


def test_provenance_names_a_change_of_timing_method():
    base = make_run("a", {(4096, "pinned"): 0.010})
    cand = make_run("b", {(4096, "pinned"): 0.010, (1 << 20, "pinned"): 0.050})
    cand.loc[cand["bytes"] == 4096, "timer"] = "cuda_event_held"
    timers = compare.provenance_diff(base, cand).set_index("field").loc["timers"]
    assert timers["differs"] and timers["baseline"] == "cuda_event"
    assert timers["candidate"] == "cuda_event, cuda_event_held"  # every timer a run used, once each


def test_provenance_tells_two_boards_of_one_model_apart():
    base = make_run("a", {(4096, "pinned"): 0.010})
    cand = make_run("b", {(4096, "pinned"): 0.010})
    base["gpu_uuid"], cand["gpu_uuid"] = "GPU-e92dfc77", "GPU-fef4569a"
    diff = compare.provenance_diff(base, cand).set_index("field")
    assert diff.loc["gpu_uuid", "differs"] and not diff.loc["device_name", "differs"]
    assert not compare.provenance_diff(base, base).set_index("field").loc["gpu_uuid", "differs"]


def test_normalized_view_compares_each_point_to_its_own_device_limit():
    base = make_run("a", {(1 << 30, "pinned"): 20.0})
    cand = make_run("b", {(1 << 30, "pinned"): 20.0}, device="GPU B")
    cand["pcie_gbps_theoretical"] = 31.5  # half the link: the same speed is twice the share of it
    table = compare.compare(base, cand)
    assert table["verdict"].iloc[0] == "same"
    assert table["normalized_change"].iloc[0] == pytest.approx(1.0)


def test_runs_of_different_experiments_are_refused():
    base = make_run("a", {(4096, "pinned"): 0.01})
    other = base.assign(experiment="pools", run_id="b")
    with pytest.raises(ValueError, match="different experiments"):
        compare.compare(base, other)


def test_history_marks_runs_that_regressed_against_the_one_before():
    point = {(1 << 20, "pinned"): 0.050}
    runs = [make_run("r1", point, timestamp="2026-11-01T00:00:00+00:00"),
            make_run("r2", point, timestamp="2026-11-02T00:00:00+00:00"),
            make_run("r3", {(1 << 20, "pinned"): 0.065}, timestamp="2026-11-03T00:00:00+00:00")]
    history = compare.history(list(reversed(runs)), runs[0].iloc[0].to_dict())
    assert history["run_id"].tolist() == ["r1", "r2", "r3"]
    assert history["regressed"].tolist() == [False, False, True]


def test_the_bundled_h100_and_h200_transfers_compare_point_by_point():
    h200 = schema.read_results(next(BUNDLED_DIRS[0].glob("transfers_nvidia-h200_*.parquet")))
    h100 = schema.read_results(next(BUNDLED_DIRS[1].glob("transfers_nvidia-h100*.parquet")))
    table = compare.compare(h200, h100)
    assert len(table) == 152  # the H100 run measured copy-only: those points are compared
    assert set(table["verdict"]) <= {"faster", "slower", "run-to-run", "same"}
    assert pd.notna(table["p_value"]).all()


def day(n):
    return f"2026-11-{n:02d}T00:00:00+00:00"


def history_runs(medians, device="GPU A"):
    return [make_run(f"h{i}", {(1 << 30, "mapped"): m}, cv=0.002, timestamp=day(i + 1), exact=True, device=device)
            for i, m in enumerate(medians)]


def test_three_earlier_runs_replace_the_floor_with_their_spread():
    floor = compare.floor("mapped")
    slower = 20.0 * np.exp(floor / 2)  # half the floor slower: within it, beyond a steady history
    candidate = make_run("cand", {(1 << 30, "mapped"): slower}, cv=0.002, timestamp=day(20), exact=True)
    steady = history_runs([20.0, 20.01, 19.99, 20.0])
    by_floor = compare.compare(steady[-1], candidate).iloc[0]
    assert by_floor["verdict"] == "run-to-run" and by_floor["run_to_run_source"] == "mapped floor"
    by_history = compare.compare(steady[-1], candidate, steady[:-1]).iloc[0]
    assert by_history["verdict"] == "slower"
    assert by_history["run_to_run_source"] == "history of 4 runs of the device model"
    assert by_history["run_to_run"] < floor / 2
    # two earlier runs (the baseline and one more) are not a history: the floor again
    assert compare.compare(steady[-1], candidate, steady[-2:-1]).iloc[0]["run_to_run_source"] == "mapped floor"


def test_a_noisy_history_never_widens_the_band_beyond_the_floor():
    floor = compare.floor("mapped")
    noisy = history_runs([20.0 * f for f in (1.0, 1 + 2 * floor, 1 - 2 * floor, 1 + floor)])
    candidate = make_run("cand", {(1 << 30, "mapped"): 20.0 * (1 + 1.5 * floor)}, cv=0.002, timestamp=day(20),
                         exact=True)
    assert compare.compare(noisy[0], candidate).iloc[0]["verdict"] == "slower"  # beyond the floor alone
    judged = compare.compare(noisy[0], candidate, noisy[1:]).iloc[0]
    # the history's spread is wider than the floor, but the runs a band judges against cannot widen it past the
    # band of a store with no history
    assert judged["verdict"] == "slower" and judged["run_to_run"] <= math.expm1(floor) + 1e-12
    assert judged["run_to_run_source"] == "history of 4 runs of the device model"


@pytest.mark.parametrize("poison", [(1.45, 0.7), (1.45, 1.45), (1.6,)])
def test_runs_far_outside_their_history_cannot_silence_a_slower_candidate(poison):
    """Two imports of the candidate's board, one 1.45x slower and one 0.7x faster (or both slower, or one truly bad
    earlier run), beside the baseline: a candidate 1.3x slower is still slower beyond noise, and the lying runs are
    named as left out of the history."""
    floor = compare.floor("mapped")
    honest = history_runs([20.0, 20.0 * (1 + floor / 4), 20.0 * (1 - floor / 4)])
    lies = [make_run(f"lie{i}", {(1 << 30, "mapped"): 20.0 * f}, cv=0.002, timestamp=day(10 + i), exact=True)
            for i, f in enumerate(poison)]
    candidate = make_run("cand", {(1 << 30, "mapped"): 26.0}, cv=0.002, timestamp=day(20), exact=True)
    for earlier in ([*honest[:-1], *lies], lies):
        judged = compare.compare(honest[-1], candidate, earlier)
        assert judged.iloc[0]["verdict"] == "slower", judged.iloc[0]["run_to_run_source"]
        assert set(judged.iloc[0]["run_to_run_left_out"]) == {run["run_id"].iloc[0] for run in lies}
        summary = compare.band_summary(judged)
        assert f"Left out of the history, more than {bands.OUTLIER_FLOORS} run-to-run floors from the baseline: " \
               + ", ".join(f"lie{i} (on 1 point)" for i in range(len(poison))) in summary


def test_history_counts_only_earlier_runs_of_the_candidates_device():
    steady = history_runs([20.0, 20.01, 19.99, 20.0])
    later = history_runs([20.0, 20.01, 19.99])
    for i, run in enumerate(later):  # measured after the candidate: not its history
        run["timestamp"], run["run_id"] = day(25 + i), f"late{i}"
    other = history_runs([20.0, 20.01, 19.99], device="GPU B")
    candidate = make_run("cand", {(1 << 30, "mapped"): 21.0}, cv=0.002, timestamp=day(20), exact=True)
    sources = [compare.compare(base, candidate, earlier).iloc[0]["run_to_run_source"]
               for base, earlier in [(steady[-1], later), (steady[-1], other), (other[0], steady[:-1])]]
    assert sources == ["mapped floor"] * 3  # later runs, another device's runs, a baseline of another device
    assert compare.compare(steady[-1], candidate, steady).iloc[0]["run_to_run_source"] == \
        "history of 4 runs of the device model"


class FakeCatalog:
    def __init__(self, frames):
        self.frames = {f["run_id"].iloc[0]: f for f in frames}
        self.loaded = []

    def runs(self, experiment):
        return pd.DataFrame([{"run_id": r, "experiment": f["experiment"].iloc[0], "timestamp": f["timestamp"].iloc[0],
                              "device_name": f["device_name"].iloc[0], "profile": f["profile"].iloc[0]}
                             for r, f in self.frames.items()])

    def load(self, run_id):
        self.loaded.append(run_id)
        return self.frames[run_id]


def test_earlier_runs_come_from_the_catalog_newest_first_up_to_the_limit(monkeypatch):
    monkeypatch.setattr(bands, "HISTORY_RUNS", 3)
    runs = history_runs([20.0] * 6) + history_runs([20.0], device="GPU B")
    runs[-1]["run_id"] = "otherdevice"
    runs[1]["profile"] = "interactive"  # quick runs saved from the app do not judge precise ones
    candidate = make_run("cand", {(1 << 30, "mapped"): 21.0}, timestamp=day(6))
    catalog = FakeCatalog(runs + [candidate])
    picked = compare.earlier_runs(catalog, runs[4], candidate)
    assert [f["run_id"].iloc[0] for f in picked] == ["h0", "h2", "h3"]  # before day 6, not the baseline h4
    assert compare.earlier_runs(catalog, runs[-1], candidate) == []  # a baseline of another device: no history
    catalog.loaded.clear()
    assert compare.earlier_runs(catalog, runs[0], make_run("c2", {(1 << 30, "mapped"): 21.0}, timestamp=day(2))) \
        == [] and catalog.loaded == []  # one earlier run besides the baseline cannot make a history: none loaded


def test_a_history_point_measured_with_another_timer_does_not_count():
    steady = history_runs([20.0, 20.01, 19.99, 20.0])
    candidate = make_run("cand", {(1 << 30, "mapped"): 21.0}, cv=0.002, timestamp=day(20), exact=True)
    for run in steady[:2]:
        run["timer"] = "cuda_event_held"
    assert compare.compare(steady[-1], candidate, steady).iloc[0]["run_to_run_source"] == "mapped floor"


def test_every_kind_of_point_has_a_measured_floor():
    from gpu.results.exchange import catalog

    frames, _, _ = catalog.read_bundled()
    kinds = {compare.point_kind(f["experiment"].iloc[0], row) for f in frames.values() for row in f.to_dict("records")}
    assert kinds == set(compare.RUN_TO_RUN_FLOORS)  # every kind a bundled run has, and no floor without one
    assert all(compare.floor(kind) > 0 for kind in kinds)


def flagged(table):
    return table["verdict"].isin(["slower", "faster"])


def test_the_day_apart_h200_transfers_runs_flag_at_most_5_percent():
    earlier, later = run_to_run.runs_of(run_to_run.DAY_APART)
    table = compare.compare(earlier, later)
    assert len(table) == 304
    assert flagged(table).sum() <= 0.05 * len(table)  # within-run noise alone flags 95 slower + 3 faster
    assert (table["verdict"] == "run-to-run").sum() > 150  # shown as what it is, not hidden among "same"


@pytest.mark.slow
def test_the_repeated_runs_flag_at_most_5_percent_of_their_points():
    tables = [compare.compare(base, cand, earlier) for _, base, cand, earlier in run_to_run.unchanged_pairs()[1:]]
    points = sum(len(t) for t in tables)
    assert points >= 250 and sum(flagged(t).sum() for t in tables) <= 0.05 * points


@pytest.mark.slow
def test_a_ten_percent_change_is_caught_wherever_runs_repeat_closer_than_that():
    quiet_points = 0
    for label, run, _ in [case for case in run_to_run.changed_cases() if not case[2]]:  # floors alone
        candidate = run_to_run.scaled(run)
        table = compare.compare(run, candidate).assign(changed=candidate["changed"].to_numpy())
        changed, unchanged = table[table["changed"]], table[~table["changed"]]
        quiet = changed["kind"].map(compare.floor) < np.log(1 / 0.9)  # kinds whose runs agree to better than 10 %
        assert flagged(changed[quiet]).mean() >= 0.95 if quiet.any() else True, label
        assert (changed.loc[flagged(changed), "verdict"] == "faster").all(), label
        # elsewhere the change shows as run-to-run noise (or, with a handful of samples, not at all)
        assert (changed.loc[~quiet, "verdict"] == "run-to-run").mean() >= 0.9 if (~quiet).any() else True, label
        assert not flagged(unchanged).any(), label
        quiet_points += int(quiet.sum())
    assert quiet_points >= 100


@pytest.mark.slow
def test_a_ten_percent_change_of_kernels_is_caught():
    for name in ("coalescing on NVIDIA H200", "occupancy on NVIDIA H200"):
        run = max(run_to_run.repeated_runs()[name], key=len)
        candidate = run_to_run.scaled(run)
        table = compare.compare(run, candidate).assign(changed=candidate["changed"].to_numpy())
        assert len(table) >= 100 and (table["kind"] == "kernel").all()
        assert flagged(table[table["changed"]]).mean() >= 0.95 and not flagged(table[~table["changed"]]).any()


@pytest.mark.slow
def test_the_floors_are_the_spread_measured_between_runs():
    table = run_to_run.spread_table()
    assert run_to_run.derived_floors(table) == compare.RUN_TO_RUN_FLOORS
    assert run_to_run.derived_one_board_floors(table) == compare.ONE_BOARD_FLOORS


def test_a_two_percent_kernel_change_is_caught_on_one_board_and_is_run_to_run_across_boards():
    run = run_to_run.repeated_runs()["coalescing on NVIDIA H200"][-1]  # a repeat on one lease, which names its board
    assert compare.board_of(run).startswith("GPU-")
    candidate = run_to_run.scaled(run, factor=0.98)  # kernels 2 % faster on every third point, same board
    table = compare.compare(run, candidate).assign(changed=candidate["changed"].to_numpy())
    assert set(table["run_to_run_source"]) == {"kernel one-board floor"}
    assert (table.loc[table["changed"], "verdict"] == "faster").all() and not flagged(table[~table["changed"]]).any()
    elsewhere = candidate.assign(gpu_uuid="GPU-another-board")  # the same numbers, measured on another board
    table = compare.compare(run, elsewhere).assign(changed=candidate["changed"].to_numpy())
    assert set(table["run_to_run_source"]) == {"kernel floor"}
    assert (table.loc[table["changed"], "verdict"] == "run-to-run").all()
    assert "kernel (one board) −0.5 % … +0.5 %" in compare.band_summary(compare.compare(run, candidate))
    assert not compare.same_board(run, run.assign(gpu_uuid=None))  # a run that names no board is not "the same"


@pytest.mark.slow
def test_the_runner_report_prints_every_verdict_count(tmp_path):
    import os
    import subprocess
    import sys

    earlier, later = (run["run_id"].iloc[0] for run in run_to_run.runs_of(run_to_run.DAY_APART))
    h100 = schema.read_results(next(BUNDLED_DIRS[1].glob("transfers_nvidia-h100*.parquet")))["run_id"].iloc[0]
    env = {**os.environ, "PINPOINT_DB_URL": f"sqlite:///{tmp_path}/runs.sqlite"}
    done = subprocess.run([sys.executable, "-m", "gpu.bench", "report", "--baseline", earlier, "--candidate", later,
                           "--candidate", h100, "--out", str(tmp_path / "review.html")], capture_output=True,
                          text=True, timeout=300, cwd=run_to_run.ASSETS.parent, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("points slower beyond noise") == 2 and "Run-to-run noise: measured floors" in done.stdout
    lines = [line for line in done.stdout.splitlines() if "slower beyond noise: " in line]
    counts = [dict(part.rsplit(": ", 1) for part in line.strip().split(" · ")) for line in lines]
    assert list(counts[0]) == ["slower beyond noise", "faster beyond noise", "within run-to-run noise",
                               "same within noise"]
    assert sum(map(int, counts[0].values())) == 304 and int(counts[0]["within run-to-run noise"]) > 150
    assert sum(map(int, counts[1].values())) == 152  # the H100 measured copy-only points
    html = (tmp_path / "review.html").read_text()
    assert "within run-to-run noise" in html and "prediction interval" in html


@pytest.mark.slow
def test_the_compare_page_judges_a_candidate_by_its_devices_history(monkeypatch, tmp_path):
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from gpu.results.persistence.store import RunStore

    url = f"sqlite:///{tmp_path}/runs.sqlite"
    monkeypatch.setenv("PINPOINT_BACKEND", "replay")
    monkeypatch.setenv("PINPOINT_DB_URL", url)
    repeats = run_to_run.repeated_runs()["transfers on NVIDIA H200"]
    for run in repeats:
        RunStore(url).save(run, "import")
    st.cache_resource.clear()
    at = AppTest.from_file(str(run_to_run.ASSETS.parent / "app.py"), default_timeout=120).run()
    at.switch_page("pages/compare.py").run()
    baseline, candidate = (run["run_id"].iloc[0] for run in repeats[1:3])  # the 13:03 and 13:07 repeats
    at.selectbox(key="compare_baseline").set_value(baseline).run()
    at.multiselect(key="compare_candidates").set_value([candidate]).run()
    assert not at.exception, at.exception
    points = at.dataframe[1].value
    # before the third repeat: the first two and the day-apart pair, four runs of the H200 (the baseline among them)
    assert len(points) == 40 and set(points["run-to-run from"]) == {"history of 4 runs of the device model"}
    metrics = {m.label: int(m.value) for m in at.metric}
    assert sum(v for k, v in metrics.items() if k != "Points compared") == 40
    st.cache_resource.clear()


def test_the_history_view_judges_each_run_by_the_runs_before_it():
    floor = compare.floor("mapped")
    medians = [20.0, 20.01, 19.99, 20.0, 20.0 * np.exp(floor / 2)]  # the last: within the floor, beyond the history
    history = compare.history(history_runs(medians), history_runs(medians)[0].iloc[0].to_dict())
    assert history["verdict"].tolist() == ["first", "same", "same", "same", "slower"]
    two = compare.history(history_runs([20.0, 20.0 * np.exp(floor / 2)]), history_runs([20.0])[0].iloc[0].to_dict())
    assert two["verdict"].tolist() == ["first", "run-to-run"]  # one earlier run: the floor decides


def test_the_band_summary_names_where_run_to_run_noise_came_from():
    steady = history_runs([20.0, 20.01, 19.99, 20.0])
    candidate = make_run("cand", {(1 << 30, "mapped"): 21.0, (4096, "pinned"): 0.01}, cv=0.002, timestamp=day(20),
                         exact=True)
    base = make_run("h3", {(1 << 30, "mapped"): 20.0, (4096, "pinned"): 0.01}, cv=0.002, timestamp=day(4), exact=True)
    line = compare.band_summary(compare.compare(base, candidate, steady[:-1]))
    assert line == "Run-to-run noise: the history of 4 runs of the device model for 1 point; measured floors for 1 " \
                   "point (small copy −38.7 % … +63.2 %). 3 or more earlier runs of the board (of the device model, " \
                   "for runs on two boards) give a point a band of its own. Bands made from 4 earlier runs: h0, h1, " \
                   "h2, h3."


@pytest.mark.parametrize("slower_by", [0.409, 0.343, 0.30, 0.45])
def test_no_row_reads_as_its_own_contradiction(slower_by):
    """The band is written in the change's units: −40.9 % lies beyond "−38.7 % … +63.2 %" (slower beyond noise) and
    −34.3 % inside it (within run-to-run noise), where "±63.2 %" beside both read as a contradiction."""
    base = make_run("b", {(4096, "pinned"): 0.010}, cv=0.002, timestamp=day(4), exact=True)
    cand = make_run("c", {(4096, "pinned"): 0.010 / (1 - slower_by)}, cv=0.002, timestamp=day(5), exact=True)
    row = compare.compare(base, cand).iloc[0]
    assert row["kind"] == "small copy" and row["change"] == pytest.approx(-slower_by, abs=0.005)
    inside = row["run_to_run_low"] <= row["change"] <= row["run_to_run_high"]
    assert row["verdict"] == ("run-to-run" if inside else "slower")
    assert compare.band_text(row["run_to_run_low"], row["run_to_run_high"]) == "−38.7 % … +63.2 %"


@pytest.mark.parametrize(("experiment", "row", "kind"), [
    ("transfers", {"variant": "pinned", "direction": "h2d", "bytes": 4096}, "small copy"),
    ("transfers", {"variant": "pinned_wc", "direction": "d2h", "bytes": 256 << 10}, "medium copy"),
    ("transfers", {"variant": "pinned_wc", "direction": "d2h", "bytes": 256 << 10,
                   "timer": "cuda_event_batched_held"}, "pinned"),
    ("transfers", {"variant": "pinned", "direction": "h2d", "bytes": 4 << 20}, "pinned"),
    ("transfers", {"variant": "mapped", "direction": "h2d", "bytes": 1 << 20}, "medium copy"),
    ("transfers", {"variant": "mapped", "direction": "h2d", "bytes": 16 << 20}, "mapped"),
    ("transfers", {"variant": "pageable", "direction": "d2h", "bytes": 1 << 30}, "pageable"),
    ("transfers", {"variant": "pinned", "direction": "h2d", "bytes": 1 << 30, "include_alloc": True,
                   "timer": "host_clock_alloc+cuda_event_copy"}, "host clock"),
    ("pools", {"variant": "device_pooled", "direction": "h2d", "bytes": 1 << 20,
               "timer": "host_clock_alloc+copy+free"}, "host clock"),
    ("managed", {"variant": "first_touch", "direction": "device", "bytes": 1 << 28, "median_ms": 27.0},
     "managed migration"),
    ("managed", {"variant": "resident", "direction": "device", "bytes": 1 << 28, "median_ms": 0.08}, "short kernel"),
    ("coalescing", {"variant": "copy_f4", "direction": "device", "bytes": 1 << 29, "median_ms": 0.14}, "kernel"),
    ("reduction", {"variant": "end_to_end_pinned", "direction": "device", "bytes": 1 << 26}, "pinned"),
    ("reduction", {"variant": "end_to_end_pageable", "direction": "device", "bytes": 1 << 26}, "pageable"),
    ("streams", {"variant": "pipeline", "direction": "round_trip", "bytes": 1 << 29, "chunks": 64,
                 "host_memory": "pageable"}, "pageable"),
    ("batching", {"variant": "separate", "direction": "h2d", "bytes": 64 * 4096, "chunks": 64}, "small copy"),
    ("batching", {"variant": "one_copy", "direction": "h2d", "bytes": 64 * 4096, "chunks": 64}, "pinned"),
])
def test_each_point_gets_the_kind_of_path_it_measures(experiment, row, kind):
    assert compare.point_kind(experiment, row) == kind


# --- peer runs: points keyed by their GPU pair (made-up two- and eight-GPU frames, tests.peer_frames) ------------
@pytest.fixture
def peer_experiment(monkeypatch):
    return pair_frames.register(monkeypatch)



@pytest.mark.parametrize("gpus", [2, 8])
def test_peer_runs_are_compared_pair_by_pair(peer_experiment, gpus):
    baseline = pair_frames.peer_run("base", gpus, seed=1)
    unchanged = pair_frames.peer_run("again", gpus, seed=2, timestamp="2026-11-25T11:00:00+00:00")
    table = compare.compare(baseline, unchanged)
    pairs = gpus * (gpus - 1)
    assert len(table) == 2 * pairs  # every (method, pair) matched once: no pair dropped or merged
    assert set(zip(table["gpu_index"], table["peer_index"], strict=True)) == {
        (s, d) for s in range(gpus) for d in range(gpus) if s != d}
    assert (table["verdict"] != compare.SLOWER).all()
    assert "copy_ce_read · GPU 0 → GPU 1 · 67,108,864 elements · cuda_event" in set(table["point"])
    # both runs name the node's boards: the one-board band, not the model's
    assert compare.same_board(baseline, unchanged) and compare.board_of(baseline) is None
    assert compare.boards_of(baseline) == {pair_frames.uuid(0, g) for g in range(gpus)}
    assert table["run_to_run_source"].str.endswith("one-board floor").all()


def test_a_slowed_pair_of_an_eight_gpu_node_is_the_only_slower_point_and_is_named(peer_experiment):
    baseline = pair_frames.peer_run("base", 8, seed=1)
    candidate = pair_frames.peer_run("cand", 8, seed=2, slow={(2, 5): 0.5}, timestamp="2026-11-25T11:00:00+00:00")
    table = compare.compare(baseline, candidate)
    slower = table[table["verdict"] == compare.SLOWER]
    assert set(slower["point"]) == {"copy_ce_read · GPU 2 → GPU 5 · 67,108,864 elements · cuda_event",
                                    "copy_sm · GPU 2 → GPU 5 · 67,108,864 elements · cuda_event"}
    assert slower["change"].to_numpy() == pytest.approx(-0.5, abs=0.01)
    assert compare.headline(table).startswith("2 of 112 points slower beyond noise, worst −50 % at ")
    reverse = table[(table["gpu_index"] == 5) & (table["peer_index"] == 2)]
    assert (reverse["verdict"] != compare.SLOWER).all()  # the other direction of the pair is its own point
    # the provenance names every board of the run, not its first row's
    boards = compare.provenance_diff(baseline, candidate).set_index("field").loc["gpu_uuid", "candidate"]
    assert boards == ", ".join(sorted(pair_frames.uuid(0, g) for g in range(8)))


def test_peer_runs_of_two_nodes_are_not_one_board_and_share_no_board_history(peer_experiment):
    node0 = pair_frames.peer_run("n0", 2, node=0, seed=1)
    node1 = pair_frames.peer_run("n1", 2, node=1, seed=2, timestamp="2026-11-25T11:00:00+00:00")
    assert not compare.same_board(node0, node1)
    table = compare.compare(node0, node1)
    assert not table["run_to_run_source"].str.contains("one-board").any()
    missing = pair_frames.peer_run("n2", 2, node=1, seed=3).assign(peer_index=7)
    assert "different peer GPUs (baseline 0, 1; candidate 7)" in compare.disjoint_reason(node0, missing)


def test_each_test_draws_its_samples_from_a_freshly_seeded_generator():
    expected = (1.0 + 0.02 * np.random.default_rng(7).standard_normal(5)).clip(min=0.01)
    assert samples(1.0, 0.02, 5) == pytest.approx(expected)  # the first draws, whatever ran before this test


def test_provenance_tells_a_profile_with_several_overrides_from_its_family():
    """A run's profile column is its whole spec: a hot-rule run differs from the suite's plain one in provenance,
    while its history stays the precise family's."""
    base = make_run("a", {(4096, "pinned"): 0.010})
    cand = make_run("b", {(4096, "pinned"): 0.010})
    base["profile"], cand["profile"] = "precise/timeout_s=1", "precise/timeout_s=1,hot_max_noise=1"
    profile = compare.provenance_diff(base, cand).set_index("field").loc["profile"]
    assert profile["differs"] and profile["candidate"] == "precise/timeout_s=1,hot_max_noise=1"
    later = pd.Timestamp("2026-11-23", tz="UTC")
    assert bands._same_history(base.iloc[0], "GPU A", "precise/timeout_s=1,hot_max_noise=1", later)
