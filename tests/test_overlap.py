"""Stream-overlap arithmetic and timeline handling (gpu.core.overlap), on made-up numbers whose answers are known."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from gpu.core import overlap, timelines


def test_depth_first_issues_each_chunk_whole_and_round_robins_streams():
    plan = overlap.issue_plan(4, 2, "depth_first")
    assert plan[:3] == [(0, "h2d", 0), (0, "kernel", 0), (0, "d2h", 0)]
    assert [s for s, _, c in plan if _ == "h2d"] == [0, 1, 0, 1]
    assert len(plan) == 12


def test_breadth_first_issues_every_copy_then_every_kernel_then_every_copy_back():
    plan = overlap.issue_plan(3, 3, "breadth_first")
    assert [op for _, op, _ in plan] == ["h2d"] * 3 + ["kernel"] * 3 + ["d2h"] * 3
    assert [c for _, _, c in plan[:3]] == [0, 1, 2]


def test_staged_gives_each_stage_its_stream_and_chains_each_chunk_across_them():
    plan = overlap.issue_plan(3, 8, "staged")  # the stream count asked for does not matter
    assert plan[:3] == [(0, "h2d", 0), (1, "kernel", 0), (2, "d2h", 0)]
    assert {s for s, op, _ in plan if op == "h2d"} == {0} and {s for s, op, _ in plan if op == "d2h"} == {2}
    waits, records = overlap.handoffs(plan)
    # every kernel waits for its chunk's H2D, every D2H for its chunk's kernel, through an event recorded after it
    assert waits == {1: 0, 2: 1, 4: 3, 5: 4, 7: 6, 8: 7}
    assert records == {0, 1, 3, 4, 6, 7}


def test_round_robin_plans_and_the_bidirectional_pair_need_no_handoffs():
    for order in ("depth_first", "breadth_first"):
        assert overlap.handoffs(overlap.issue_plan(8, 4, order)) == ({}, set())
    # one H2D and one D2H of the same buffer on two streams run at once: no stage lies between them to wait for
    assert overlap.handoffs([(0, "h2d", 0), (1, "d2h", 0)]) == ({}, set())


def test_pipeline_configs_measure_staged_once_on_its_own_streams():
    assert overlap.pipeline_configs([1, 4], ["depth_first", "staged", "breadth_first"]) == [
        (1, "depth_first"), (1, "breadth_first"), (3, "staged"), (4, "depth_first"), (4, "breadth_first")]
    assert overlap.config_text(3, 32, "staged") == "3 streams (one per stage) × 32 chunks"
    assert overlap.config_text(1, 1, "depth_first") == "1 stream × 1 chunk"


def test_a_single_stage_plan_is_what_the_sums_measure():
    assert overlap.issue_plan(3, 1, "depth_first", ("d2h",)) == [(0, "d2h", 0), (0, "d2h", 1), (0, "d2h", 2)]


@pytest.mark.parametrize("chunks,streams,order", [(0, 1, "depth_first"), (1, 0, "depth_first"), (2, 2, "sideways")])
def test_bad_plans_are_refused(chunks, streams, order):
    with pytest.raises(ValueError):
        overlap.issue_plan(chunks, streams, order)


@pytest.mark.parametrize("engines,expected", [(3, 5.0), (2, 5.0), (1, 9.0), (0, 11.0), (None, 5.0)])
def test_the_bound_follows_the_copy_engines(engines, expected):
    # H2D 5 ms, kernel 2 ms, D2H 4 ms
    assert overlap.pipeline_bound(5.0, 2.0, 4.0, engines) == expected


def test_overlap_efficiency_is_the_share_of_the_possible_gain():
    assert overlap.overlap_efficiency(10.0, 10.0, 5.0) == 0.0
    assert overlap.overlap_efficiency(10.0, 5.0, 5.0) == 1.0
    assert overlap.overlap_efficiency(10.0, 7.5, 5.0) == 0.5
    assert math.isnan(overlap.overlap_efficiency(5.0, 5.0, 5.0))  # nothing to gain: no efficiency to speak of


def frame_of(rows):
    base = {"run_id": "r1", "host_memory": "pinned", "elements": 1024, "intensity": 0, "cv": 0.01, "bytes": 4096,
            "async_engine_count": 3, "intervals": None, "issue_order": "serial", "streams": 1}
    return pd.DataFrame([{**base, **row} for row in rows])


def test_pipeline_table_pairs_each_pipeline_with_its_own_serial_and_sums():
    rows = [{"variant": v, "chunks": 4, "median_ms": ms} for v, ms in
            (("h2d_alone", 5.0), ("kernel_alone", 2.0), ("d2h_alone", 4.0), ("serial", 11.0))]
    rows += [{"variant": v, "chunks": 8, "median_ms": ms} for v, ms in
             (("h2d_alone", 6.0), ("kernel_alone", 2.0), ("d2h_alone", 4.0), ("serial", 12.0))]
    rows += [{"variant": "pipeline", "chunks": 4, "streams": 4, "issue_order": "depth_first", "median_ms": 6.0},
             {"variant": "pipeline", "chunks": 8, "streams": 4, "issue_order": "depth_first", "median_ms": 9.0}]
    table = overlap.pipeline_table(frame_of(rows)).set_index("chunks")
    assert table.loc[4, "bound_ms"] == 5.0 and table.loc[8, "bound_ms"] == 6.0
    assert table.loc[4, "efficiency"] == pytest.approx((11 - 6) / (11 - 5))
    assert table.loc[8, "efficiency"] == pytest.approx((12 - 9) / (12 - 6))
    assert table.loc[4, "speedup"] == pytest.approx(11 / 6) and table.loc[4, "vs_bound"] == pytest.approx(6 / 5)


def test_a_pipeline_without_its_serial_run_has_no_efficiency():
    rows = [{"variant": "pipeline", "chunks": 4, "streams": 2, "issue_order": "depth_first", "median_ms": 6.0}]
    table = overlap.pipeline_table(frame_of(rows))
    assert math.isnan(table["efficiency"].iloc[0])


def test_summary_uses_the_median_over_configurations_that_can_overlap():
    rows = [{"variant": v, "chunks": c, "median_ms": ms} for c in (1, 4)
            for v, ms in (("h2d_alone", 5.0), ("kernel_alone", 1.0), ("d2h_alone", 5.0), ("serial", 11.0))]
    rows += [{"variant": "pipeline", "chunks": 1, "streams": 4, "issue_order": "depth_first", "median_ms": 5.5},
             {"variant": "pipeline", "chunks": 4, "streams": 2, "issue_order": "depth_first", "median_ms": 8.0},
             {"variant": "pipeline", "chunks": 4, "streams": 4, "issue_order": "depth_first", "median_ms": 6.0}]
    summary = overlap.overlap_summary(overlap.pipeline_table(frame_of(rows))).iloc[0]
    assert summary["configurations"] == 2  # 1 chunk cannot overlap: left out of the median
    assert summary["median_efficiency"] == pytest.approx(((11 - 8) / 6 + (11 - 6) / 6) / 2)
    # ... and never "the best", though its 5.5 ms is the fastest time measured
    assert (summary["best_chunks"], summary["best_streams"], summary["best_ms"]) == (4, 4, 6.0)


def sums_and_serial(chunks, h2d, kernel, d2h, serial, **extra):
    return [{"variant": v, "chunks": chunks, "median_ms": ms, **extra} for v, ms in
            (("h2d_alone", h2d), ("kernel_alone", kernel), ("d2h_alone", d2h), ("serial", serial))]


def duplex_point(gbps, elements=1024):
    """H2D and D2H of the whole vector at once, moving ``gbps`` together."""
    nbytes = 2 * 4 * elements
    return {"variant": "bidir_both", "chunks": 1, "streams": 2, "issue_order": "concurrent", "bytes": nbytes,
            "median_ms": nbytes / (gbps * 1e9) * 1e3, "elements": elements}


def test_the_duplex_bound_counts_both_directions_at_the_rate_measured_together():
    # 256 MiB each way; alone each direction takes 4.85 ms (55.3 GB/s), together they move 100 GB/s.
    elements = 64 * 2**20
    rows = sums_and_serial(32, 4.85, 1.6, 4.86, 10.5, elements=elements) + [duplex_point(100.0, elements)]
    rows.append({"variant": "pipeline", "chunks": 32, "streams": 4, "issue_order": "depth_first", "median_ms": 5.75,
                 "elements": elements})
    row = overlap.pipeline_table(frame_of(rows)).iloc[0]
    assert row["engine_bound_ms"] == 4.86
    assert row["duplex_gbps"] == pytest.approx(100.0)
    assert row["duplex_bound_ms"] == pytest.approx(2 * 4 * elements / 100e9 * 1e3)  # 5.37 ms
    assert row["bound_ms"] == row["duplex_bound_ms"] and row["bound_kind"] == overlap.BOUND_KINDS["duplex"]
    assert row["vs_bound"] == pytest.approx(5.75 / 5.3687, rel=1e-4)
    assert row["vs_engine_bound"] == pytest.approx(5.75 / 4.86)
    assert row["efficiency"] == pytest.approx((10.5 - 5.75) / (10.5 - row["duplex_bound_ms"]))


def test_the_duplex_rate_is_the_links_fast_spells_not_the_median_of_a_slow_one():
    # Both directions at once in a slow spell of the link (as an H200 measured: 5.28 ms, then up to 6.3 ms), while
    # the chunked pipeline ran at 5.58 ms: against the median the pipeline would "beat" its bound.
    elements = 64 * 2**20
    nbytes = 2 * 4 * elements
    samples = [5.28, 5.28, 5.29, 5.29, 5.6, 5.9, 6.0, 6.1, 6.2, 6.3]
    both = {"variant": "bidir_both", "chunks": 1, "streams": 2, "issue_order": "concurrent", "bytes": nbytes,
            "median_ms": float(np.median(samples)), "min_ms": 5.28, "samples_ms": samples, "elements": elements}
    rows = sums_and_serial(32, 4.85, 1.6, 4.86, 10.5, elements=elements) + [both]
    rows.append({"variant": "pipeline", "chunks": 32, "streams": 3, "issue_order": "staged", "median_ms": 5.58,
                 "elements": elements})
    row = overlap.pipeline_table(frame_of(rows)).iloc[0]
    assert row["duplex_bound_ms"] == pytest.approx(5.28)  # the fastest tenth of the samples (interpolated)
    assert row["vs_bound"] == pytest.approx(5.58 / 5.28) and row["efficiency"] < 1
    # without samples the fastest sample stands in; without that, the median
    assert overlap.duplex_ms(pd.Series({**both, "samples_ms": None})) == 5.28
    assert overlap.duplex_ms(pd.Series({**both, "samples_ms": [], "min_ms": float("nan")})) == both["median_ms"]


def test_the_bound_uses_the_duplex_rate_sampled_between_the_pipelines_of_the_same_sitting():
    # The run's bidir_both point, measured after every pipeline, caught the link in a slow spell (6.3 ms): against
    # it a staged pipeline at 6.07 ms would "beat" its bound (0.96x, as on an H100). The both-ways copies sampled
    # between that chunk count's pipeline samples saw the link as the pipelines did: the bound comes from them, with
    # their spread, and a chunk count without such copies keeps the run-wide rate.
    elements = 64 * 2**20
    nbytes = 2 * 4 * elements
    slow = [6.3, 6.31, 6.32, 6.35, 6.4]
    paired = [5.9, 5.92, 5.95, 6.0, 6.1, 6.2]
    rows = sums_and_serial(32, 4.85, 1.6, 4.86, 10.5, elements=elements)
    rows += sums_and_serial(16, 4.85, 1.6, 4.86, 10.5, elements=elements)
    rows.append({"variant": "bidir_both", "chunks": 1, "streams": 2, "issue_order": "concurrent", "bytes": nbytes,
                 "median_ms": float(np.median(slow)), "samples_ms": slow, "elements": elements})
    rows.append({"variant": overlap.PAIRED_VARIANT, "chunks": 32, "streams": 2, "issue_order": "concurrent",
                 "bytes": nbytes, "median_ms": float(np.median(paired)), "samples_ms": paired,
                 "cv": float(np.std(paired) / np.mean(paired)), "elements": elements})
    for chunks in (32, 16):
        rows.append({"variant": "pipeline", "chunks": chunks, "streams": 3, "issue_order": "staged",
                     "median_ms": 6.07, "elements": elements})
    table = overlap.pipeline_table(frame_of(rows)).set_index("chunks")
    same = table.loc[32]
    assert same["duplex_paired"] and same["duplex_bound_ms"] == pytest.approx(np.quantile(paired, 0.1))
    assert same["duplex_cv"] == pytest.approx(np.std(paired) / np.mean(paired)) and same["vs_bound"] > 1
    apart = table.loc[16]
    assert not apart["duplex_paired"] and math.isnan(apart["duplex_cv"])
    assert apart["duplex_bound_ms"] == pytest.approx(np.quantile(slow, 0.1)) and apart["vs_bound"] < 1
    summary = overlap.overlap_summary(table.reset_index().loc[[0]]).iloc[0].to_dict()
    assert "between its own samples, spread cv" in overlap.headline(summary)


def test_a_kernel_bound_pipeline_keeps_the_kernel_sum_as_its_bound():
    rows = sums_and_serial(16, 1.0, 9.0, 1.0, 11.0) + [duplex_point(100.0)]
    rows.append({"variant": "pipeline", "chunks": 16, "streams": 4, "issue_order": "depth_first", "median_ms": 9.5})
    row = overlap.pipeline_table(frame_of(rows)).iloc[0]
    assert row["duplex_bound_ms"] < 9.0 and row["bound_ms"] == 9.0
    assert row["bound_kind"] == overlap.BOUND_KINDS["engines"]
    assert row["efficiency"] == pytest.approx((11 - 9.5) / (11 - 9))


def test_pipelines_beyond_their_bound_are_explained_by_the_bound_they_beat():
    # 8 KiB both ways at 0.8 MB/s: a 10.24 ms duplex bound; the kernels of 16 chunks take longer (12 ms)
    rows = sums_and_serial(16, 1.0, 12.0, 1.0, 14.0) + sums_and_serial(32, 5.0, 1.0, 5.0, 14.0) + [duplex_point(0.0008)]
    rows += [{"variant": "pipeline", "chunks": 16, "streams": 4, "issue_order": "depth_first", "median_ms": 11.5},
             {"variant": "pipeline", "chunks": 32, "streams": 4, "issue_order": "depth_first", "median_ms": 9.0}]
    table = overlap.pipeline_table(frame_of(rows)).set_index("chunks")
    assert table.loc[16, "bound_ms"] == 12.0 and table.loc[32, "bound_kind"] == overlap.BOUND_KINDS["duplex"]
    notes = overlap.beyond_bound_notes(table.reset_index())
    assert len(notes) == 2 and "last wave" in notes[0] and "duplex rate" in notes[1]
    assert overlap.beyond_bound_notes(table.reset_index().assign(efficiency=0.9)) == []


def test_a_run_without_bidirectional_points_falls_back_to_the_copy_engine_bound_and_says_so():
    rows = sums_and_serial(16, 5.0, 1.0, 5.0, 11.0)
    rows.append({"variant": "pipeline", "chunks": 16, "streams": 4, "issue_order": "depth_first", "median_ms": 6.0})
    table = overlap.pipeline_table(frame_of(rows))
    row = table.iloc[0]
    assert math.isnan(row["duplex_bound_ms"]) and row["bound_ms"] == 5.0
    assert row["bound_kind"] == overlap.BOUND_KINDS["engines_only"]
    summary = overlap.overlap_summary(table).iloc[0]
    assert "no duplex rate was measured" in overlap.headline(summary.to_dict())


def test_the_duplex_rate_of_another_host_memory_is_not_used():
    rows = sums_and_serial(16, 5.0, 1.0, 5.0, 11.0) + [{**duplex_point(1.0), "host_memory": "pageable"}]
    rows.append({"variant": "pipeline", "chunks": 16, "streams": 4, "issue_order": "depth_first", "median_ms": 6.0})
    assert overlap.pipeline_table(frame_of(rows)).iloc[0]["bound_ms"] == 5.0


def summary_of_noisy(chunks, serial_ms, pipeline_ms, cv, seeds):
    """The summary of one pipeline against its serial run, both with 20 samples spread by ``cv``."""
    rng = [np.random.default_rng(seed) for seed in seeds]
    serial, pipeline = (list(ms * (1 + cv * r.standard_normal(20))) for ms, r in zip((serial_ms, pipeline_ms), rng,
                                                                                       strict=True))
    rows = sums_and_serial(chunks, 0.45 * serial_ms, 0.1, 0.45 * serial_ms, float(np.median(serial)), cv=cv,
                           samples_ms=serial)
    rows.append({"variant": "pipeline", "chunks": chunks, "streams": 4, "issue_order": "depth_first", "cv": cv,
                 "median_ms": float(np.median(pipeline)), "samples_ms": pipeline})
    return overlap.overlap_summary(overlap.pipeline_table(frame_of(rows))).iloc[0].to_dict()


def test_a_best_within_the_noise_of_serial_is_no_measurable_overlap():
    summary = summary_of_noisy(16, 52.0, 50.5, 0.09, (1, 2))  # pageable-like: 3 % apart, 9 % noise
    assert summary["gain_measurable"] is False
    assert overlap.gain_text(summary) == "no measurable overlap"
    line = overlap.headline(summary)
    assert "no measurable overlap" in line and "%" not in line.split("(cv")[0]  # no efficiency percentage


def test_a_clear_gain_is_measurable_and_given_as_a_share_of_the_possible_gain():
    summary = summary_of_noisy(32, 10.5, 5.75, 0.003, (3, 4))
    assert summary["gain_measurable"] is True
    assert overlap.gain_text(summary).startswith("overlap efficiency ")


def test_only_configurations_that_cannot_overlap_give_no_best():
    rows = sums_and_serial(1, 5.0, 1.0, 5.0, 11.0)
    rows += [{"variant": "pipeline", "chunks": 1, "streams": s, "issue_order": "depth_first", "median_ms": 11.0}
             for s in (1, 4)]
    summary = overlap.overlap_summary(overlap.pipeline_table(frame_of(rows))).iloc[0].to_dict()
    assert summary["configurations"] == 0 and math.isnan(summary["best_ms"])
    assert "no configuration here can overlap" in overlap.headline(summary)


def test_intervals_round_trip_through_json():
    intervals = [(0, "h2d", 0, 0.0, 1.25, 4096), (1, "kernel", 1, 1.25, 1.5, 4096)]
    decoded = timelines.decode_intervals(timelines.encode_intervals(intervals))
    assert decoded.to_numpy().tolist() == [list(i) for i in intervals]


@pytest.mark.parametrize("text,message", [
    (None, "no recorded timeline"), ("not json", "not valid JSON"), ("[]", "empty"),
    (json.dumps([[0, "memset", 0, 0, 1, 4]]), "unknown operations"),
    (json.dumps([[0, "h2d", 0, 2.0, 1.0, 4]]), "ends before it starts"),
    (json.dumps([[0, "h2d", 0, -1.0, 1.0, 4]]), "before the origin"),
])
def test_damaged_timelines_are_refused_with_the_reason(text, message):
    with pytest.raises(ValueError, match=message):
        timelines.decode_intervals(text)


def test_copies_that_look_simultaneous_on_one_engine_are_laid_end_to_end():
    # Two streams reach their H2D at t=0; one copy engine per direction runs them one after the other.
    intervals = timelines.decode_intervals(timelines.encode_intervals([
        (0, "h2d", 0, 0.0, 1.0, 8), (1, "h2d", 1, 0.0, 2.0, 8), (0, "kernel", 0, 1.0, 1.5, 8),
        (1, "kernel", 1, 2.0, 2.5, 8), (0, "d2h", 0, 1.5, 2.5, 8)]))
    schedule = timelines.engine_schedule(intervals, 3).set_index(["op", "chunk"])
    assert schedule.loc[("h2d", 1), "start_ms"] == 1.0 and schedule.loc[("h2d", 1), "wait_ms"] == 1.0
    assert schedule.loc[("h2d", 1), "run_ms"] == 1.0
    assert schedule.loc[("d2h", 0), "engine"] == "copy engine D2H" and schedule.loc[("d2h", 0), "wait_ms"] == 0
    busy = timelines.busy_fraction(schedule.reset_index())
    assert busy["copy engine H2D"] == pytest.approx(2.0 / 2.5)


def test_with_one_copy_engine_both_directions_share_a_lane():
    assert timelines.engine_of("h2d", 1) == timelines.engine_of("d2h", 1) == "copy engine"
    assert timelines.engine_of("h2d", 3) != timelines.engine_of("d2h", 3)
    assert timelines.engine_of("kernel", 1) == "compute"


def test_both_directions_are_timed_only_while_both_are_busy():
    # 4 chunks of 100 bytes each way. D2H ends at 4 ms; by then H2D has finished 3 chunks and half of its fourth
    # (3 to 5 ms, the last half alone): 750 bytes in 4 ms both ways, so the 800 bytes
    # would take 4.267 ms at that rate, not the 6 ms the two copies took together.
    h2d = [(0, "h2d", c, c * 1.0 if c < 3 else 3.0, c + 1.0 if c < 3 else 5.0, 100) for c in range(4)]
    d2h = [(1, "d2h", c, 0.0, c + 1.0, 100) for c in range(4)]
    assert timelines.both_busy_ms(h2d + d2h) == pytest.approx(800 * 4 / 750)
    # ending together, nothing is left out: the time is the time both took
    assert timelines.both_busy_ms([(0, "h2d", 0, 0.0, 2.0, 50), (1, "d2h", 0, 0.0, 2.0, 50)]) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="both directions"):
        timelines.both_busy_ms(h2d)
