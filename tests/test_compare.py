"""Verdicts on synthetic sample sets whose answer is known, the headline, the provenance diff and history."""

import numpy as np
import pandas as pd
import pytest

from gpu import compare, schema
from gpu.catalog import BUNDLED_DIRS

RNG = np.random.default_rng(7)


def samples(median, cv, n=50):
    return (median * (1 + cv * RNG.standard_normal(n))).clip(min=median * 0.01)


def test_the_same_distribution_is_the_same():
    result = compare.verdict(samples(1.0, 0.02), samples(1.0, 0.02), 0.02, 0.02)
    assert result["verdict"] == "same"


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


def make_run(run_id, medians, cv=0.01, device="GPU A", driver="580", timestamp="2026-11-22T00:00:00+00:00"):
    rows = []
    for (size, variant), median in medians.items():
        kept = list(samples(median, cv, 30))
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
    base = make_run("a", {(4096, "pinned"): 0.010, (1 << 20, "pinned"): 0.050, (1 << 30, "pageable"): 120.0})
    cand = make_run("b", {(4096, "pinned"): 0.010, (1 << 20, "pinned"): 0.061, (1 << 30, "pageable"): 100.0},
                    driver="590")
    table = compare.compare(base, cand)
    line = compare.headline(table)
    assert line.startswith("1 of 3 points slower beyond noise, worst −18 % at 1 MiB pinned H2D")
    best = table.set_index("point").loc["1 GiB pageable H2D", "change"]
    assert f"1 faster, best {compare.percent(best)} at 1 GiB pageable H2D" in line and best > 0.15
    assert line.endswith("1 the same within noise")
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
    assert set(table["verdict"]) <= {"faster", "slower", "same"}
    assert pd.notna(table["p_value"]).all()
