"""How the streams experiment is shown: the Streams page's Plotly figures (the timeline (Gantt), the sweep, the
breakdown and bidirectional copies), the best pipelines it says on the page, on stage and in the talk, its stage
takeaway, its duplex headline, the talk's timeline and the talk's judge of "streams double throughput".

No Streamlit here; each figure takes a results frame (``gpu.core.schema``) or a row of ``overlap.pipeline_table``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from gpu.core import overlap, text, timelines
from gpu.core.errors import ClaimError
from gpu.core.overlap import gain_text as overlap_gain
from gpu.core.units import format_bytes
from gpu.experiments.streams import LABELS, ORDER_LABELS
from gpu.present.charts._common import LEGEND_BELOW, mark_not_clean, reference_line, series_color, source_title
from gpu.present.takeaways import sentence

OP_COLORS = {"h2d": "#EF553B", "kernel": "#00CC96", "d2h": "#636EFA"}


def config_label(row) -> str:
    return (f"{row['host_memory']} · {text.count(int(row['streams']), 'stream')} × "
            f"{text.count(int(row['chunks']), 'chunk')} · "
            f"{ORDER_LABELS.get(row['issue_order'], row['issue_order'])} · intensity {int(row['intensity'])}")


def gantt_figure(intervals, frame: pd.DataFrame, lanes: str = "stream", title: str = "Timeline") -> go.Figure:
    """One bar per operation, one lane per stream (or per engine), coloured by operation.

    Solid: the operation running on its engine; faint (stream lanes only): the time its stream had reached
    it while the engine was still busy with another stream's operation (see ``timelines.engine_schedule``)."""
    engines = frame["async_engine_count"].dropna()
    async_engines = int(engines.iloc[0]) if not engines.empty else None
    schedule = timelines.engine_schedule(timelines.decode_intervals(intervals), async_engines)
    if lanes == "engine":
        order = [e for e in ("copy engine H2D", "copy engine", "compute", "copy engine D2H")
                 if e in set(schedule["engine"])]
        schedule["lane"] = schedule["engine"]
    else:
        order = [f"stream {s}" for s in sorted(schedule["stream"].unique())]
        schedule["lane"] = [f"stream {s}" for s in schedule["stream"]]
    fig = go.Figure()
    if lanes != "engine":
        waited = schedule[schedule["wait_ms"] > 1e-4]
        if not waited.empty:
            fig.add_trace(go.Bar(
                y=waited["lane"], x=waited["wait_ms"] * 1e3, base=waited["ready_ms"] * 1e3, orientation="h",
                name="waiting for the engine", marker={"color": "rgba(150,150,150,0.25)"},
                customdata=np.column_stack([waited["op"], waited["chunk"], waited["wait_ms"] * 1e3]),
                hovertemplate="%{customdata[0]} chunk %{customdata[1]} waited %{customdata[2]:.1f} µs for its engine"
                              "<extra></extra>"))
    for op in overlap.STAGES:
        part = schedule[schedule["op"] == op]
        if part.empty:
            continue
        fig.add_trace(go.Bar(
            y=part["lane"], x=part["run_ms"] * 1e3, base=part["start_ms"] * 1e3, orientation="h",
            name=overlap.STAGE_LABELS[op], marker={"color": OP_COLORS[op], "line": {"width": 0.5, "color": "white"}},
            customdata=np.column_stack([part["chunk"], part["bytes"].map(format_bytes), part["start_ms"] * 1e3,
                                        part["run_ms"] * 1e3, part["wait_ms"] * 1e3, part["stream"]]),
            hovertemplate=(f"{overlap.STAGE_LABELS[op]} · chunk %{{customdata[0]}} · %{{customdata[1]}}<br>"
                           "start %{customdata[2]:.1f} µs · ran %{customdata[3]:.1f} µs · "
                           "waited %{customdata[4]:.1f} µs<br>stream %{customdata[5]}<extra></extra>")))
    span = float(schedule["end_ms"].max()) * 1e3
    fig.update_layout(title=source_title(title, frame), barmode="overlay",
                      xaxis_title="µs from the pipeline's start event",
                      yaxis={"categoryorder": "array", "categoryarray": order[::-1], "title": None},
                      # above the lanes, right: below them a short chart's legend would cover the time axis
                      legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "xanchor": "right", "x": 1},
                      height=max(280, 110 + 34 * len(order)),
                      xaxis={"range": [0, span * 1.02]})
    return fig


def breakdown_figure(row, frame: pd.DataFrame) -> go.Figure:
    """The three sums, the bound, the pipeline and serial time of one configuration, side by side."""
    names = ["all H2D alone", "all kernels alone", "all D2H alone", "bound: copy engines", "bound: duplex link",
             "pipeline", "serial (one stream)"]
    values = [row["h2d_ms"], row["kernel_ms"], row["d2h_ms"], row["engine_bound_ms"], row["duplex_bound_ms"],
              row["pipeline_ms"], row["serial_ms"]]
    colors = [OP_COLORS["h2d"], OP_COLORS["kernel"], OP_COLORS["d2h"], "#888888", "#666666", "#222222", "#BBBBBB"]
    if not math.isfinite(values[4]):  # no bidirectional points in this run: no duplex-aware bound to draw
        del names[4], values[4], colors[4]
    fig = go.Figure(go.Bar(x=values, y=names, orientation="h", marker={"color": colors},
                           text=[f"{v:.2f} ms" for v in values], textposition="outside", cliponaxis=False,
                           hovertemplate="%{y}: %{x:.3f} ms<extra></extra>"))
    finite = [v for v in values if math.isfinite(v)]
    # Room right of the longest bar for its label ("10.17 ms"), which would otherwise be cut at the plot's edge.
    fig.update_layout(title=source_title(f"Where the time goes: {config_label(row)}", frame),
                      xaxis={"title": "ms", "range": [0, 1.25 * max(finite, default=1)]},
                      yaxis={"autorange": "reversed"}, height=320)
    return fig


def sweep_figure(table: pd.DataFrame, frame: pd.DataFrame) -> go.Figure:
    """Pipeline time vs streams, one line per chunk count (one issue order), with the serial and bound lines, and
    each staged pipeline as a diamond at its 3 streams. Chunk counts whose serial (or bound) times are within 1.5 %
    of the chart's span share one line, named after all of them: drawn apart, one line would hide the others."""
    fig = go.Figure()
    values = table[["pipeline_ms", "serial_ms", "bound_ms"]].to_numpy(dtype=float)
    values = values[np.isfinite(values)]
    tolerance = 0.015 * (values.max() - values.min()) if values.size else 0.0
    levels: dict[str, list[dict]] = {"serial_ms": [], "bound_ms": []}
    colors = {c: series_color(i) for i, c in enumerate(sorted(table["chunks"].unique()))}
    is_staged = table["issue_order"] == "staged" if "issue_order" in table else pd.Series(False, index=table.index)
    staged = table[is_staged]
    for chunks, part in staged.groupby("chunks"):  # one point each: a staged pipeline has its own 3 streams
        fig.add_trace(go.Scatter(
            x=part["streams"], y=part["pipeline_ms"], mode="markers", name=f"{chunks} chunks, one stream per stage",
            legendgroup=str(chunks), marker={"color": colors[chunks], "symbol": "diamond", "size": 13,
                                             "line": {"color": "#222", "width": 1}},
            customdata=np.column_stack([part["efficiency"] * 100, part["speedup"], part["cv"] * 100]),
            hovertemplate=(f"{chunks} chunks, one stream per stage: %{{y:.3f}} ms<br>overlap efficiency "
                           "%{customdata[0]:.0f} % · %{customdata[1]:.2f}× serial · cv %{customdata[2]:.2f} %"
                           "<extra></extra>")))
        mark_not_clean(fig, part, "streams", "pipeline_ms")
    for chunks, part in table[~is_staged].groupby("chunks"):
        part = part.sort_values("streams")
        color = colors[chunks]
        fig.add_trace(go.Scatter(
            x=part["streams"], y=part["pipeline_ms"], mode="lines+markers", name=text.count(int(chunks), "chunk"),
            legendgroup=str(chunks), line={"color": color},
            customdata=np.column_stack([part["efficiency"] * 100, part["speedup"], part["cv"] * 100]),
            hovertemplate=(f"{chunks} chunks, %{{x}} streams: %{{y:.3f}} ms<br>overlap efficiency "
                           "%{customdata[0]:.0f} % · %{customdata[1]:.2f}× serial · cv %{customdata[2]:.2f} %"
                           "<extra></extra>")))
        mark_not_clean(fig, part, "streams", "pipeline_ms")
        for what in levels:
            level = float(part[what].iloc[0])
            if not math.isfinite(level):
                continue
            same = next((line for line in levels[what] if abs(line["level"] - level) <= tolerance), None)
            if same is None:
                levels[what].append({"level": level, "color": color, "chunks": [chunks],
                                     "x": [part["streams"].min(), part["streams"].max()]})
            else:
                same["chunks"].append(chunks)
                same["x"] = [min(same["x"][0], part["streams"].min()), max(same["x"][1], part["streams"].max())]
    for what, dash in (("serial_ms", "dot"), ("bound_ms", "dash")):
        label = "serial" if what == "serial_ms" else "bound"
        for line in levels[what]:
            counts = ", ".join(str(c) for c in line["chunks"])
            fig.add_trace(go.Scatter(
                x=line["x"], y=[line["level"]] * 2, mode="lines",
                line={"color": line["color"], "dash": dash, "width": 1}, name=f"{counts} chunks: {label}",
                legendgroup=str(line["chunks"][0]),
                hovertemplate=f"{counts} chunks {label}: %{{y:.3f}} ms<extra></extra>"))
    fig.update_layout(title=source_title("Pipeline time vs streams (dotted: serial, dashed: bound)", frame),
                      xaxis={"title": "streams", "type": "log", "tickvals": sorted(table["streams"].unique())},
                      yaxis_title="ms (median)", legend=LEGEND_BELOW, height=440)
    return fig


def bidirectional_figure(frame: pd.DataFrame) -> go.Figure:
    """GB/s of one H2D alone, one D2H alone, and both at once (aggregate), per host memory."""
    data = frame[frame["group"] == "bidirectional"]
    fig = go.Figure()
    for variant, color in (("bidir_h2d", OP_COLORS["h2d"]), ("bidir_d2h", OP_COLORS["d2h"]),
                           ("bidir_both", "#AB63FA")):
        part = data[data["variant"] == variant]
        fig.add_trace(go.Bar(x=part["host_memory"], y=part["gbps"], name=LABELS[variant] + (
            " (aggregate)" if variant == "bidir_both" else ""), marker={"color": color},
            # inside the bar's top: above it, a label at 55 GB/s sits on the PCIe line at 63
            text=[f"{g:.1f}" for g in part["gbps"]], textposition="inside", insidetextanchor="end",
            customdata=np.column_stack([part["median_ms"], part["cv"] * 100, part["bytes"].map(format_bytes)]),
            hovertemplate="%{x}: %{y:.1f} GB/s<br>%{customdata[2]} in %{customdata[0]:.3f} ms · "
                          "cv %{customdata[1]:.2f} %<extra></extra>"))
    pcie = frame["pcie_gbps_theoretical"].dropna()
    if not pcie.empty and not data.empty:
        for level, name in ((pcie.iloc[0], "PCIe theoretical,<br>one direction"),
                            (2 * pcie.iloc[0], "PCIe theoretical,<br>both directions")):
            reference_line(fig, level, name, f"{level:.0f} GB/s", log=False)
    fig.update_layout(title=source_title("Bidirectional copies: H2D and D2H at the same time on two streams", frame),
                      barmode="group", yaxis_title="GB/s (10⁹ B/s)", height=420, legend=LEGEND_BELOW)
    return fig


# --- the best pipelines against one stream (the page, the stage and the talk) -----------------------------------------
def best_pipelines(frame: pd.DataFrame) -> list[dict]:
    """Per host memory, at its lightest kernel (the copy-bound case the page opens with): the best pipeline that
    can overlap against one stream, with how many configurations were searched (``searched``)."""
    table = overlap.pipeline_table(frame)
    if table.empty:
        raise ClaimError("the measurement has no pipeline")
    summary = overlap.overlap_summary(table)
    summary = summary.sort_values("intensity", kind="stable").drop_duplicates("host_memory")
    found = []
    for best in summary.to_dict("records"):
        searched = int(best["configurations"])
        if not searched:
            continue
        config = overlap.config_text(best["best_streams"], best["best_chunks"], best["best_order"])
        found.append({**best, "config": config, "searched": searched,
                      "speedup_text": text.times(best["best_speedup"], 2),
                      "searched_text": "the only pipeline measured that can overlap" if searched == 1 else
                      f"the best of {searched} pipelines measured that can overlap",
                      "ceiling": float(best["best_serial_ms"] / best["best_bound_ms"]),
                      "ceiling_text": text.times(best["best_serial_ms"] / best["best_bound_ms"], 2)})
    return found


def pinned_best_pipeline(frame: pd.DataFrame) -> dict:
    """``best_pipelines`` for pinned host memory."""
    found = [b for b in best_pipelines(frame) if b["host_memory"] == "pinned"]
    if not found:
        raise ClaimError("the measurement has no pinned configuration that can overlap (≥ 2 chunks and ≥ 2 streams)")
    return found[0]


def takeaway(frame: pd.DataFrame) -> str | None:
    """The best pipeline that can overlap against one stream, per host memory, or 'no measurable overlap'."""
    try:
        found = best_pipelines(frame)
    except ClaimError:
        return None
    parts = [(f"{best['host_memory']}: {best['config']} run {best['speedup_text']} as fast as one stream "
              f"({overlap_gain(best)}; {best['searched_text']})" if best["gain_measurable"] else
              f"{best['host_memory']}: no measurable overlap ({best['config']} against one stream)")
             + f"; the ceiling here is {best['ceiling_text']}" for best in found]
    return sentence(parts)


def bidirectional(frame: pd.DataFrame) -> str:
    """Per host memory: both directions at once against the faster direction alone, and the rate of their fastest
    tenth of samples where it is over 1 % above the median's, since that is the rate the Streams bound uses."""
    rows = frame[frame["variant"] == "bidir_both"].set_index("host_memory")
    alone = frame[frame["variant"].isin(["bidir_h2d", "bidir_d2h"])].groupby("host_memory")["gbps"].max()
    parts = []
    for h, row in rows.iterrows():
        if h not in alone:
            continue
        line = f"{h}: both directions at once move **{row['gbps']:.1f} GB/s**, {row['gbps'] / alone[h]:.2f}× the " \
               "faster direction alone"
        if {"bytes", "median_ms"} <= set(row.index):
            fast = overlap.duplex_gbps(row)
            if fast > 1.01 * row["gbps"]:
                line += f" ({fast:.1f} GB/s in their fastest tenth of samples: the rate the pipelines' bound uses)"
        parts.append(line)
    return " · ".join(parts)


def best_timeline_figure(frame: pd.DataFrame) -> go.Figure:
    """The timeline, by copy engine, of the run's fastest pipeline configuration."""
    table = overlap.pipeline_table(frame)
    best = table.sort_values("pipeline_ms").iloc[0]
    return gantt_figure(best["intervals"], frame, "engine", f"Timeline: {config_label(best)}")


# The talk's charts of a streams scene, by the name its talk file gives them (``chart = "timeline"``).
TALK_FIGURES = {"timeline": best_timeline_figure}


def streams_double_throughput(frame: pd.DataFrame) -> dict:
    """The talk's judge of 'Overlapping with streams doubles throughput' (``gpu.present.claims``): the best pinned
    pipeline that can overlap (≥ 2 chunks and ≥ 2 streams) against one stream, among those measured
    (``pinned_best_pipeline``, as the Streams page says it); 'no measurable overlap' when its gain is within the
    noise."""
    best = pinned_best_pipeline(frame)
    speedup = float(best["best_speedup"])
    if not best["gain_measurable"]:
        verdict = "False"
    else:
        verdict = "True" if speedup >= 1.9 else ("Close" if speedup >= 1.6 else "False")
    return {"verdict": verdict, "speedup": speedup, "speedup_text": best["speedup_text"],
            "efficiency": float(best["best_efficiency"]), "gain": overlap.gain_text(best),
            "streams": int(best["best_streams"]), "chunks": int(best["best_chunks"]), "config": best["config"],
            "searched": best["searched"], "searched_text": best["searched_text"], "bound_x": best["ceiling"],
            "ceiling_text": best["ceiling_text"]}


CLAIMS = {streams_double_throughput.__name__: streams_double_throughput}
# The figures of the verdict that the page's stage takeaway shows too, as text (tests/test_one_fact.py).
SHARED_FIGURES = {"streams_double_throughput": ("speedup_text", "config", "searched_text", "ceiling_text")}
