"""Chart helpers read the data they are given: traces, speedups and labels come from the frame."""

import pytest

from gpu.core.units import GiB, KiB
from gpu.experiments.transfers import view as charts
from gpu.present.charts import _common as chart_common
from gpu.service.backends import ReplayBackend, submit_values


@pytest.fixture(scope="module")
def frame():
    return submit_values(ReplayBackend(), "transfers", {"include_alloc": [False, True]}).outcome()


def test_bandwidth_figure_has_a_trace_per_mode_and_the_pcie_line(frame):
    fig = charts.bandwidth_figure(frame[~frame["include_alloc"]])
    names = {t.name for t in fig.data}
    assert {"pageable (NumPy)", "pinned", "pinned write-combined", "mapped zero-copy"} <= names
    pcie = [t for t in fig.data if t.name.startswith("PCIe theoretical")]
    assert len(pcie) == 2 and pcie[0].y[0] == pytest.approx(frame["pcie_gbps_theoretical"].iloc[0])
    assert fig.layout.xaxis.type == "log"
    assert "NVIDIA H200" in fig.layout.title.text and "Replay" in fig.layout.title.text


def test_speedup_is_mode_over_pageable_at_the_same_point(frame):
    table = charts.speedup_table(frame)
    row = table[(table["variant"] == "pinned") & (table["direction"] == "h2d") & (table["bytes"] == GiB)
                & (~table["include_alloc"])].iloc[0]
    pick = frame[(frame["direction"] == "h2d") & (frame["bytes"] == GiB) & (~frame["include_alloc"])]
    expected = pick[pick["variant"] == "pinned"]["gbps"].iloc[0] / pick[pick["variant"] == "pageable"]["gbps"].iloc[0]
    assert row["speedup"] == pytest.approx(expected)


def test_recorded_h200_shows_the_allocation_verdict_flip(frame):
    # The recorded run itself: pinned wins copy-only at 1 GiB, and loses once allocation is timed.
    table = charts.speedup_table(frame)
    at_1gib = table[(table["variant"] == "pinned") & (table["bytes"] == GiB) & (table["direction"] == "h2d")]
    assert at_1gib[~at_1gib["include_alloc"]]["speedup"].iloc[0] > 2
    assert at_1gib[at_1gib["include_alloc"]]["speedup"].iloc[0] < 1


def test_model_table_fits_each_mode_and_direction(frame):
    fits = charts.model_table(frame[~frame["include_alloc"]])
    assert len(fits) == 8
    pinned = fits[(fits["variant"] == "pinned") & (fits["direction"] == "h2d")].iloc[0]
    top = frame[(frame["variant"] == "pinned") & (frame["direction"] == "h2d") & (frame["bytes"] == GiB)
                & (~frame["include_alloc"])]["gbps"].iloc[0]
    assert pinned["beta_gbps"] == pytest.approx(top, rel=0.05)
    assert 0.5 < pinned["alpha_us"] < 50
    assert pinned["n_half_bytes"] == pytest.approx(pinned["alpha_us"] * 1e-6 * pinned["beta_gbps"] * 1e9)


def test_numbers_table_keeps_spread_and_formats_sizes(frame):
    table = charts.numbers_table(frame[frame["bytes"] == 4 * KiB])
    assert set(table["size"]) == {"4 KiB"}
    assert (table["min µs"] <= table["median µs"]).all() and (table["median µs"] <= table["max µs"]).all()


def test_pinned_and_write_combined_lines_differ_in_dash_and_marker(frame):
    # They often measure the same: identical styles would hide one line under the other.
    fig = charts.bandwidth_figure(frame[~frame["include_alloc"]])
    looks = {t.name: (t.line.dash, t.marker.symbol) for t in fig.data if t.name in ("pinned", "pinned write-combined")}
    assert len(set(looks.values())) == 2
    assert all(dash != symbol for dash, symbol in zip(*looks.values(), strict=True))


def test_stage_figure_sizes_every_text_for_the_back_of_the_room(frame):
    fig = chart_common.stage_figure(charts.bandwidth_figure(frame), 540)
    assert fig.layout.height == 540 and fig.layout.legend.font.size >= 20
    for axis in (fig.layout.xaxis, fig.layout.xaxis2, fig.layout.yaxis):
        assert axis.tickfont.size >= 20 and axis.title.font.size >= 22
    assert fig.layout.annotations and all(a.font.size >= 20 for a in fig.layout.annotations)  # subplot titles


def test_log_value_axes_have_one_plain_tick_per_decade(frame):
    fig = charts.model_figure(frame[~frame["include_alloc"]])
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis.dtick == 1
    assert fig.layout.yaxis.exponentformat == "none"  # never "10B" or "1k"


def test_a_reference_line_on_a_log_axis_is_labelled_in_log10_units():
    import plotly.graph_objects as go

    fig = go.Figure(go.Bar(x=["a"], y=[10.0])).update_yaxes(type="log")
    chart_common.reference_line(fig, 4800.0, "HBM", "4,800 GB/s", log=True)
    chart_common.reference_line(fig, 63.0, "PCIe", "63 GB/s", log=False)
    assert fig.layout.shapes[0].y0 == 4800.0  # the line itself is in data units
    hbm, pcie = fig.layout.annotations
    assert hbm.y == pytest.approx(3.681, abs=1e-3) and pcie.y == 63.0


def test_error_bars_span_the_middle_of_the_samples_not_the_one_slowest(frame):
    """Pinned copies of 256 KiB – 4 MiB hold steady at 29–52 GB/s; min-to-max bars ran from ~0 to 50 GB/s there."""
    import numpy as np

    fig = charts.bandwidth_figure(frame[~frame["include_alloc"]])
    for trace in (t for t in fig.data if t.name == "pinned"):
        x, y = np.asarray(trace.x), np.asarray(trace.y)
        low, high = y - np.asarray(trace.error_y.arrayminus), y + np.asarray(trace.error_y.array)
        middle = (x >= 256 * KiB) & (x <= 4096 * KiB)
        assert middle.any() and (low[middle] > 0.8 * y[middle]).all() and (high[middle] >= y[middle]).all()


def test_bidirectional_bar_labels_sit_inside_their_bars_clear_of_the_pcie_lines():
    from gpu.experiments.streams import view as stream_charts

    data = ReplayBackend().data
    fig = stream_charts.bidirectional_figure(data[data["experiment"] == "streams"])
    bars = [t for t in fig.data if t.type == "bar"]
    assert bars and all(t.textposition == "inside" for t in bars)


def test_every_chart_module_titles_with_the_source_of_its_numbers(frame):
    title = chart_common.source_title("Bandwidth", frame)["text"]
    assert title.startswith("Bandwidth<br><sup>Replay of a run recorded on NVIDIA H200")
    assert title.endswith(f"profile {frame['profile'].iloc[0]}</sup>")
    assert chart_common.source_title("Empty", frame.iloc[:0])["text"] == "Empty<br><sup></sup>"
    # the board that measured: the end of its UUID, said to be one
    board = frame.assign(gpu_uuid="GPU-0c1d2e3f-aaaa-bbbb-cccc-dd0050595206")
    assert "recorded on NVIDIA H200 (board …50595206) · " in chart_common.source_title("Bandwidth", board)["text"]


def test_variant_parts_follow_the_declared_order_and_skip_what_the_run_lacks(frame):
    parts = list(chart_common.variant_parts(frame, ["pinned", "no_such_mode", "pageable"], "bytes"))
    assert [variant for variant, _ in parts] == ["pinned", "pageable"]
    assert all(part["bytes"].is_monotonic_increasing and set(part["variant"]) == {variant} for variant, part in parts)


def test_theoretical_lines_draw_only_the_limits_the_run_recorded(frame):
    import plotly.graph_objects as go

    fig = go.Figure()
    chart_common.theoretical_lines(fig, frame.assign(hbm_gbps_theoretical=float("nan")),
                                   {"hbm_gbps_theoretical": "HBM", "pcie_gbps_theoretical": "PCIe"}, log=False)
    assert [a.text.split("<br>")[0] for a in fig.layout.annotations] == ["PCIe"]
    assert fig.layout.shapes[0].y0 == pytest.approx(frame["pcie_gbps_theoretical"].iloc[0])


def test_a_stage_figure_keeps_its_title_clear_of_the_panel_titles_and_its_ticks_apart(frame):
    """On stage (20 px ticks, a 26 px title over its source line) the title is centred in a band above the panels'
    titles, a written-out size axis keeps at most 8 labels (the largest size among them), legend clicks do nothing."""
    from gpu.experiments.transfers import view as transfer_charts

    fig = chart_common.stage_figure(transfer_charts.bandwidth_figure(frame), 480)
    title = fig.layout.title
    assert title.yref == "container" and title.yanchor == "middle"
    centre = (1 - title.y) * 480
    block = chart_common.STAGE_TITLE_PX * 1.3 + chart_common.STAGE_TITLE_PX * 0.8  # two lines
    assert centre - block / 2 >= 0  # the first line inside the figure
    assert fig.layout.margin.t >= centre + block / 2 + chart_common.STAGE_FONT_PX  # the panel titles under it
    ticks = fig.layout.xaxis.tickvals
    assert len(ticks) <= chart_common.STAGE_MOST_TICKS and ticks[-1] == frame["bytes"].max()
    assert fig.layout.legend.itemclick is False and fig.layout.legend.itemdoubleclick is False


def test_a_stage_figure_names_a_few_points_of_a_category_axis_and_long_names_on_hover_only():
    import plotly.graph_objects as go

    def staged(names):
        fig = go.Figure(go.Scatter(x=names, y=list(range(len(names)))))
        fig.update_xaxes(type="category", categoryarray=names, title_text="point")
        return chart_common.stage_figure(fig, 480).layout.xaxis

    short = staged([f"block {b} · stride {s}" for b in (128, 256, 512) for s in (1, 2, 4, 8, 16, 32)])
    assert len(short.tickvals) <= chart_common.STAGE_MOST_CATEGORIES and short.tickvals[-1] == "block 512 · stride 32"
    long = staged([f"{n:,} elements · cuda_event_batched_held" for n in (4096 * 2 ** i for i in range(17))])
    assert long.showticklabels is False and long.title.text == "point (names on hover)"
