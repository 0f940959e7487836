"""Derived numbers of the Memory modes and Streams charts, on made-up rows whose answers are known."""

import math

import pandas as pd
import pytest

from gpu.core import schema
from gpu.experiments.batching import view as batching_view
from gpu.experiments.managed import view as managed_view
from gpu.experiments.pools import view as pools_view
from gpu.experiments.streams import view as stream_charts
from gpu.service.backends import REPLAY_DIR


def rows(spec, **common):
    return pd.DataFrame([{**common, **r} for r in spec])


def test_pool_crossover_is_where_per_call_allocation_outweighs_the_copy_from_then_on():
    frame = rows([{"variant": v, "bytes": b, "median_ms": ms} for b, per_call, pooled in
                  ((4096, 0.05, 0.01), (65536, 0.012, 0.010), (1 << 20, 1.0, 0.05), (1 << 24, 8.0, 0.4))
                  for v, ms in (("pinned_per_call", per_call), ("pinned_pooled", pooled))])
    table = pools_view.pool_table(frame)
    # 4 KiB is 5× but 64 KiB is not 2×: the crossover is 1 MiB, from where every larger size is ≥ 2×.
    assert pools_view.pool_crossover(table, "pinned") == 1 << 20
    assert pools_view.pool_crossover(table, "device") is None  # not measured
    assert table.set_index("bytes").loc[1 << 24, "pinned: per call ÷ pooled"] == pytest.approx(20)


def test_batching_overhead_is_the_extra_time_per_separate_copy():
    frame = rows([{"variant": "separate", "median_ms": 0.5, "gbps": 0.1},
                  {"variant": "one_copy", "median_ms": 0.1, "gbps": 1.0}], piece_bytes=64, chunks=100)
    table = batching_view.batching_table(frame)
    assert table["per-copy overhead µs"].iloc[0] == pytest.approx((0.5 - 0.1) / 100 * 1e3)
    assert math.isnan(table["packed GB/s"].iloc[0])


def test_managed_table_states_the_migration_cost_over_resident():
    frame = rows([{"variant": v, "median_ms": ms, "gbps": 256 / ms} for v, ms in
                  (("first_touch", 27.0), ("prefetch", 5.0), ("after_prefetch", 0.1), ("resident", 0.1))], bytes=256)
    row = managed_view.managed_table(frame).iloc[0]
    assert row["first touch extra ms"] == pytest.approx(26.9)
    assert row["first touch ÷ resident"] == pytest.approx(270)
    assert row["prefetch + kernel ms"] == pytest.approx(5.1)


def test_recorded_streams_run_draws_one_gantt_lane_per_stream_or_engine():
    frame = schema.read_results(next(REPLAY_DIR.glob("streams_*.parquet")))
    from gpu.core import overlap

    table = overlap.pipeline_table(frame)
    row = table[(table["streams"] == 4) & (table["chunks"] == 16) & (table["host_memory"] == "pinned")].iloc[0]
    by_stream = stream_charts.gantt_figure(row["intervals"], frame, "stream")
    lanes = {y for trace in by_stream.data for y in trace.y}
    assert lanes == {"stream 0", "stream 1", "stream 2", "stream 3"}
    by_engine = stream_charts.gantt_figure(row["intervals"], frame, "engine")
    assert {y for trace in by_engine.data for y in trace.y} == {"copy engine H2D", "compute", "copy engine D2H"}
    bars = sum(len(trace.y) for trace in by_engine.data)
    assert bars == 16 * 3  # every chunk's three operations, nothing invented


def test_managed_reference_lines_keep_the_log_axis_near_its_data():
    frame = schema.read_results(next(REPLAY_DIR.glob("managed_*.parquet")))
    fig = managed_view.managed_figure(frame)
    # Annotations sit at log10 of their line (Plotly's unit for a log axis), not at the GB/s value itself.
    for annotation, shape in zip(fig.layout.annotations, fig.layout.shapes, strict=True):
        assert annotation.y == pytest.approx(math.log10(shape.y0))
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis.exponentformat == "none"


def test_streams_sweep_draws_a_staged_pipeline_as_one_point_beside_the_round_robin_lines():
    table = rows([{"chunks": c, "streams": s, "issue_order": o, "pipeline_ms": p, "serial_ms": 10.0 + c,
                   "bound_ms": 5.0, "efficiency": 0.5, "speedup": 1.5, "cv": 0.01}
                  for c, s, o, p in ((16, 1, "depth_first", 10.0), (16, 4, "depth_first", 6.0),
                                     (16, 3, "staged", 5.7), (32, 4, "depth_first", 5.9), (32, 3, "staged", 5.6))])
    fig = stream_charts.sweep_figure(table, table.assign(device_name="GPU", timestamp="2026", backend="replay",
                                                         profile="precise"))
    staged = [t for t in fig.data if "one stream per stage" in t.name]
    assert [(t.name, list(t.x), list(t.y), t.mode) for t in staged] == [
        ("16 chunks, one stream per stage", [3], [5.7], "markers"), ("32 chunks, one stream per stage", [3], [5.6],
                                                                      "markers")]
    lines = {t.name: list(t.x) for t in fig.data if t.mode == "lines+markers"}
    assert lines == {"16 chunks": [1, 4], "32 chunks": [4]}  # the staged points are not on the round-robin lines


def test_streams_sweep_draws_one_line_for_chunk_counts_whose_serial_times_coincide():
    table = rows([{"chunks": c, "streams": s, "pipeline_ms": p, "serial_ms": serial, "bound_ms": 5.0,
                   "efficiency": 0.5, "speedup": 1.5, "cv": 0.01}
                  for c, serial, p in ((1, 10.0, 10.0), (4, 10.01, 7.0), (16, 12.0, 6.0)) for s in (1, 4)])
    names = [t.name for t in stream_charts.sweep_figure(table, table.assign(
        device_name="GPU", timestamp="2026", backend="replay", profile="precise")).data]
    assert "1, 4 chunks: serial" in names and "16 chunks: serial" in names  # 10.00 and 10.01 ms share a line
    assert "1, 4, 16 chunks: bound" in names and len(names) == 6
