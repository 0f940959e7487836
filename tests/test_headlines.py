"""The lines above the pages' charts, worked out from recorded runs (no Streamlit): pinned ÷ pageable is one rule for
the chart, the takeaway and the claims, and each headline names the numbers it read."""

import numpy as np
import pandas as pd
import pytest

from gpu.core.errors import ClaimError
from gpu.core.units import GiB
from gpu.experiments import reduction
from gpu.experiments.batching import view as batching_view
from gpu.experiments.coalescing import view as coalescing_view
from gpu.experiments.managed import view as managed_view
from gpu.experiments.pools import view as pools_view
from gpu.experiments.reduction import view as reduction_view
from gpu.experiments.streams import view as streams_view
from gpu.experiments.transfers import view as charts
from gpu.present import headlines
from gpu.service.backends import ReplayBackend, submit_values


@pytest.fixture(scope="module")
def replay():
    return ReplayBackend()


@pytest.fixture(scope="module")
def transfers(replay):
    return submit_values(replay, "transfers", {"include_alloc": [False, True]}).outcome()


def test_speedup_is_the_baseline_time_over_the_mode_time_at_the_same_point(transfers):
    table = headlines.speedups(transfers)
    assert "pageable" not in set(table["variant"])
    row = table[(table["variant"] == "pinned") & (table["direction"] == "d2h") & (table["bytes"] == GiB)
                & table["include_alloc"]].iloc[0]
    pick = transfers[(transfers["direction"] == "d2h") & (transfers["bytes"] == GiB) & transfers["include_alloc"]]
    ms = pick.set_index("variant")["median_ms"]
    assert row["speedup"] == pytest.approx(ms["pageable"] / ms["pinned"], rel=1e-12)
    # the same ratio in GB/s: the mode's rate over the baseline's
    gbps = pick.set_index("variant")["gbps"]
    assert row["speedup"] == pytest.approx(gbps["pinned"] / gbps["pageable"], rel=1e-9)


def test_chart_table_and_claims_read_the_same_pinned_over_pageable(transfers):
    table = charts.speedup_table(transfers)
    chart = table[(table["variant"] == "pinned") & (table["direction"] == "h2d") & ~table["include_alloc"]]
    claim = charts.pinned_speedups(transfers, False)
    assert list(claim.index) == sorted(chart["bytes"])
    assert list(claim.values) == list(chart.sort_values("bytes")["speedup"])


def test_pinned_speedups_still_say_what_is_missing(transfers):
    with pytest.raises(ClaimError, match="both pinned and pageable"):
        charts.pinned_speedups(transfers[transfers["variant"] != "pageable"], False)
    with pytest.raises(ClaimError, match="has no"):
        charts.pinned_speedups(transfers[transfers["direction"] != "h2d"], False)


def test_transfers_verdict_names_the_largest_size_and_each_direction(transfers):
    copy_only = transfers[~transfers["include_alloc"]]
    line = charts.transfers_verdict(copy_only, "Copy only")
    assert line.startswith("Copy only, 1 GiB: pinned ÷ pageable = ")
    assert "H2D " in line and "D2H " in line
    assert charts.transfers_verdict(copy_only[copy_only["variant"] != "pinned"], "Copy only") is None


def test_reduction_best_compares_our_fastest_kernel_with_the_library(replay):
    frame = submit_values(replay, "reduction", {}).outcome()
    line = reduction_view.reduction_best(frame, reduction.LABELS)
    kernels = frame[(frame["group"] == "kernel") & (frame["variant"] != "gpuarray_dot")]
    fastest = kernels.sort_values("gbps").iloc[-1]
    assert line.startswith(f"**Best: {reduction.LABELS[fastest['variant']]} at {fastest['gbps']:,.0f} GB/s")
    assert "× gpuarray.dot**" in line
    assert reduction_view.reduction_best(frame[frame["variant"] != "gpuarray_dot"], reduction.LABELS) is None


def test_copy_reference_reads_memcpy_dtod_from_the_same_run(replay):
    frame = submit_values(replay, "coalescing", {}).outcome()
    best = coalescing_view.with_peak_share(frame)
    line = coalescing_view.copy_reference(frame, best)
    peak = best[best["variant"] == "memcpy_dtod"]["gbps"].iloc[0]
    assert line.startswith(f"**memcpy_dtod: {peak:,.0f} GB/s**")
    assert coalescing_view.copy_reference(frame, best[best["variant"] != "memcpy_dtod"]) is None


def test_memory_modes_headlines(replay):
    managed = submit_values(replay, "managed", {}).outcome()
    row = managed_view.managed_table(managed).iloc[0]
    assert "first touch" in managed_view.headline(row) and "prefetching first" in managed_view.headline(row)
    pools = pools_view.pool_table(submit_values(replay, "pools", {}).outcome())
    parts = pools_view.headline(pools, pools_view.pool_crossover)
    assert [p.split("**")[1] for p in parts] == ["device", "pinned"]
    batching = batching_view.batching_table(submit_values(replay, "batching", {}).outcome())
    assert batching_view.headline(batching).startswith("**Each separate copy costs about ")
    assert batching_view.headline(batching.assign(**{"per-copy overhead µs": float("nan")})) is None


def test_bidirectional_is_both_directions_over_the_faster_one_alone():
    frame = pd.DataFrame({"variant": ["bidir_both", "bidir_h2d", "bidir_d2h"], "host_memory": ["pinned"] * 3,
                          "gbps": [100.0, 55.0, 50.0]})
    assert streams_view.bidirectional(frame) == ("pinned: both directions at once move **100.0 GB/s**, 1.82× the "
                                              "faster direction alone")


def test_bidirectional_names_the_fast_spell_rate_the_bound_uses_when_it_differs():
    samples = [5.28, 5.28, 5.29, 5.29, 5.30, 5.9, 6.0, 6.1, 6.2, 6.3]  # a slow spell: median 5.6 ms
    nbytes = 2 * 256 * 2**20
    median = float(np.median(samples))
    frame = pd.DataFrame({"variant": ["bidir_both", "bidir_h2d", "bidir_d2h"], "host_memory": ["pinned"] * 3,
                          "gbps": [nbytes / median / 1e6, 55.0, 55.0], "bytes": [nbytes, nbytes // 2, nbytes // 2],
                          "median_ms": [median, 4.9, 4.9], "samples_ms": [samples, [4.9] * 10, [4.9] * 10]})
    line = streams_view.bidirectional(frame)
    assert line.startswith("pinned: both directions at once move **95.9 GB/s**")
    assert line.endswith("(101.7 GB/s in their fastest tenth of samples: the rate the pipelines' bound uses)")
    steady = frame.assign(samples_ms=[[median] * 10, [4.9] * 10, [4.9] * 10])
    assert "fastest tenth" not in streams_view.bidirectional(steady)


def test_the_stops_line_says_a_batched_point_stopped_by_the_hot_rule_and_does_not_count_it_as_a_limit():
    frame = pd.DataFrame({"stop_reason": ["converged", "min_time", "min_time", "timeout"],
                          "cv": [0.004, 0.03, 0.008, 0.3],
                          "profile": ["precise/timeout_s=1,hot_max_noise=1"] * 4})
    line = headlines.transfer_stops(frame)
    assert line.startswith("How the 4 points stopped: 1 reached the noise target (cv ≤ 0.5 % over ≥ 0.5 s of samples), "
                           "2 batched, stopped at the minimum samples and time (nvbench's hot rule for batched "
                           "samples) (10 samples, 0.5 s), 1 at the time limit (1 s).")
    assert " All 1 were still noisier than the target" in line  # the timeout only: min_time is no limit reached
