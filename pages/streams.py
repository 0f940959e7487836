"""Streams: chunked H2D → kernel → D2H pipelines over several streams, with the timeline of each."""

from __future__ import annotations

import streamlit as st

from gpu.core import overlap, text
from gpu.core.units import format_bytes
from gpu.experiments import streams
from gpu.experiments.streams import view as stream_charts
from pages import _ui as ui

page = ui.Page("Streams: hiding copies behind compute", intro=(
    "A vector is cut into **chunks**; each chunk goes host → device, through a kernel, and back, on one of "
    "several **streams** (chunk *c* on stream *c mod S*), so one chunk's copy can run while another's kernel "
    "does. The GPU has separate copy engines for each direction, so at best the whole job takes as long as its "
    "slowest stage alone, or as long as the link needs to carry both directions at once: that is the **bound**. "
    "**Overlap efficiency** = (serial − pipeline) / (serial − bound): "
    "0 % when the streams won nothing, 100 % when the pipeline reached the bound. Every output is checked "
    "exactly. With **pageable** host memory the driver must stage each copy and a device → host copy blocks "
    "the host until it is done: watch the overlap disappear."))
backend = page.backend
live = backend.kind == "live"

# Recordings with pipelines that can overlap (more than one chunk): the Roofline page's one-chunk intensity sweep
# is a Streams recording too, with nothing to show here.
run_id = page.recording(streams.NAME, "streams", holds=lambda rows: rows["chunks"].fillna(1) > 1)


def recorded(column: str) -> list:
    return page.recorded_values(streams.NAME, column, run_id)


host_axis, order_axis = ui.axis(streams.NAME, "host_memory"), ui.axis(streams.NAME, "issue_orders")
if live:
    top = streams.max_size(backend.known_limits())
    size_options = (ui.axis_powers(streams.NAME, "size_bytes", low=2**24, high=top)
                    or [ui.axis(streams.NAME, "size_bytes").low])
    chunk_options, stream_options = ui.axis_powers(streams.NAME, "chunks"), ui.axis_steps(streams.NAME, "streams")
    intensity_options = list(ui.axis(streams.NAME, "intensities").steps)
    host_options, order_options = list(host_axis.values), list(order_axis.values)
else:
    size_options = [4 * e for e in recorded("elements")] or [ui.axis_default(streams.NAME, "size_bytes")]
    chunk_options, stream_options = recorded("chunks") or [16], recorded("streams") or [4]
    intensity_options = recorded("intensity") or [ui.axis_default(streams.NAME, "intensities")]
    data = backend.data[(backend.data["experiment"] == streams.NAME)]
    data = data[data["run_id"] == (run_id or backend.recordings(streams.NAME).iloc[0]["run_id"])] \
        if not backend.recordings(streams.NAME).empty else data
    host_options = [h for h in host_axis.values if h in set(data["host_memory"])] or [ui.first_default(host_axis)]
    order_options = [o for o in order_axis.values if o in set(data["issue_order"])] or [ui.first_default(order_axis)]

page.link_notes()
controls = ui.Section(page)
# On stage the measured grid's controls fold away (with their notes, which describe the grid, not the configuration
# on screen); the chunks and streams of the one configuration shown are the stage's two controls.
settings = ui.more_settings()
with settings:
    left, right = st.columns(2)
with left:
    size = controls.axis_slider(streams.NAME, "size_bytes", "streams_size", size_options, label="Total size",
                                format_func=format_bytes)
    chunks = controls.axis_choices(streams.NAME, "chunks", "streams_chunks", chunk_options)
    chunk_axis = ui.axis(streams.NAME, "chunks")
    typed_chunks = controls.text_input(f"…or type chunk counts ({chunk_axis.low} … {chunk_axis.high})",
                                       "streams_chunks_typed", placeholder="e.g. 3, 12")
    stream_counts = controls.axis_choices(streams.NAME, "streams", "streams_streams", stream_options)
with right:
    host_memory = controls.axis_choices(streams.NAME, "host_memory", "streams_host", host_options)
    pageable_grid = controls.toggle("Pageable at every chunk and stream count", "streams_pageable_grid",
                                    disabled="pageable" not in (host_memory or []),
                                    help="Off: pageable memory is measured at one configuration that can overlap "
                                         "(16 chunks × 4 streams, or the nearest chosen) with its serial run, which "
                                         "shows that it does not; its pipelines take ~50 ms a sample on an H200. On: "
                                         "the whole grid, as pinned.")
    intensity = controls.axis_slider(streams.NAME, "intensities", "streams_intensity", intensity_options, otherwise=0,
                                     label="Kernel intensity (fused multiply-adds per element)",
                                     help="0: the kernel just copies (copy-bound). Each step adds 2 FLOP per element; "
                                          "around 2048 the kernel takes as long as the copies on an H200.")
    orders = controls.axis_choices(streams.NAME, "issue_orders", "streams_orders", order_options, label="Issue order",
                                   format_func=streams.ORDER_LABELS.get,
                                   help="Depth-first enqueues each chunk's H2D, kernel and D2H before the next chunk; "
                                        "breadth-first enqueues every H2D, then every kernel, then every D2H (both "
                                        "round-robin chunks over the streams). One stream per stage puts every H2D on "
                                        "one stream, every kernel on a second and every D2H on a third, each chunk's "
                                        "stages chained by events, so each copy engine works through its direction in "
                                        "order; it is measured once per chunk count, on 3 streams.")

typed_errors: list[str] = []
if typed_chunks.strip():
    try:
        chunks = [int(c) for c in typed_chunks.replace(" ", "").split(",") if c]
    except ValueError:
        typed_errors.append(f"'{typed_chunks}' is not a list of whole chunk counts")
params = {"size_bytes": int(size), "chunks": list(chunks or []), "streams": list(stream_counts or []),
          "host_memory": list(host_memory or []), "issue_orders": list(orders or []), "intensities": [int(intensity)],
          "pageable_grid": bool(pageable_grid)}
if not typed_errors:
    with settings:
        for note in streams.notes(streams.parse_params(params)):
            st.warning(note)
page.sync(final=False)
def preview(partial, suffix: str) -> None:
    """While measuring: the pipelines measured so far against their serial runs."""
    table = overlap.pipeline_table(partial)
    if not table.empty:
        ui.chart(stream_charts.sweep_figure(table, partial), key=f"chart_sweep{suffix}")


frame = page.measure(streams.NAME, params, "streams", run_id, extra_reasons=typed_errors,
                             preview=preview)

table = ui.cached(overlap.pipeline_table)(frame)  # once per recording, for all sessions
if table.empty:
    st.info("No pipeline was measured with these settings.")
    st.stop()

# --- headline: per host memory, the best pipeline that can overlap and the median over all of them ------------
summary = overlap.overlap_summary(table)
if ui.desk():  # on stage the takeaway under the timeline says it
    st.markdown("\n".join(f"- {overlap.headline(r)}" for r in summary.to_dict("records")))
    st.caption(overlap.BOUNDS_EXPLAINED if summary["best_duplex_bound_ms"].notna().any()
               else overlap.NO_DUPLEX_EXPLAINED)
    if "pageable" in params["host_memory"] and not pageable_grid:
        chunk_counts, stream_counts = streams.parse_params(params).counts("pageable")
        st.caption(f"Pageable memory was measured at {text.count(chunk_counts[0], 'chunk')} × "
                   f"{text.count(stream_counts[0], 'stream')} only; "
                   "'Pageable at every chunk and stream count' measures its whole grid.")
    for note in overlap.beyond_bound_notes(table):
        st.caption(note)

# --- one configuration --------------------------------------------------------------------------------------
if ui.desk():
    st.subheader("One configuration, operation by operation")
    c1, c2, c3, c4, c5 = st.columns(5)
else:
    c2, c3 = st.columns(2)
    with settings:
        c1, c4, c5 = st.columns(3)
focus_host = controls.radio("Host memory", list(dict.fromkeys(table["host_memory"])), "streams_focus_host", where=c1)
mine = table[table["host_memory"] == focus_host]
chunk_values = sorted(mine["chunks"].unique())
# On stage the timeline opens on the best pipeline, the one the takeaway names.
best = overlap.best_pipeline(mine)
focus_chunks = controls.select_one("Chunks", chunk_values, "streams_focus_chunks", where=c2,
                                   value=best["chunks"] if ui.presenting() else
                                   16 if 16 in chunk_values else chunk_values[-1])
stream_values = sorted(mine[mine["chunks"] == focus_chunks]["streams"].unique())
focus_streams = controls.select_slider("Streams", stream_values, "streams_focus_streams", where=c3,
                                       value=best["streams"] if ui.presenting() and best["streams"] in stream_values
                                       else 4 if 4 in stream_values else stream_values[-1]) \
    if len(stream_values) > 1 else stream_values[0]
# The orders measured at this chunk and stream count (a staged pipeline runs on its own three streams).
order_values = list(dict.fromkeys(mine[(mine["chunks"] == focus_chunks) & (mine["streams"] == focus_streams)]
                                  ["issue_order"]))
focus_order = controls.radio("Issue order", order_values, "streams_focus_order", where=c4,
                             format_func=streams.ORDER_LABELS.get,
                             index=order_values.index(best["issue_order"])
                             if ui.presenting() and best["issue_order"] in order_values else 0)
lanes = controls.radio("Lanes", ["stream", "engine"], "streams_lanes", where=c5,
                       format_func=lambda x: "one per stream" if x == "stream" else "one per engine")
page.sync()
chosen = mine[(mine["chunks"] == focus_chunks) & (mine["streams"] == focus_streams)
              & (mine["issue_order"] == focus_order)]
if chosen.empty:
    st.info("That combination was not measured; pick another.")
    st.stop()
row = chosen.iloc[0]
if ui.desk():  # on stage: the chart and its takeaway
    m = st.columns(5)
    m[0].metric("Pipeline", f"{row['pipeline_ms']:.3f} ms", f"cv {text.percent(row['cv'], 2)}", delta_color="off")
    m[1].metric("Serial (one stream)", f"{row['serial_ms']:.3f} ms")
    m[2].metric("Bound", f"{row['bound_ms']:.3f} ms", "both directions at the duplex rate" if row["bound_kind"] ==
                overlap.BOUND_KINDS["duplex"] else "slowest stage alone", delta_color="off",
                help=f"Copy-engine bound {row['engine_bound_ms']:.3f} ms; duplex-aware bound "
                     + (f"{row['duplex_bound_ms']:.3f} ms" if row["duplex_bound_ms"] == row["duplex_bound_ms"]
                        else "not measured (no bidirectional points in this run)"))
    measurable = overlap.can_overlap(row["chunks"], row["streams"]) and overlap.gain_beyond_noise(row)
    m[3].metric("Overlap efficiency",
                text.percent(row['efficiency']) if measurable and row["efficiency"] == row["efficiency"]
                else "none measurable", help=None if measurable else "This configuration is not faster than serial "
                "beyond the noise of the two (or cannot overlap: one chunk or one stream).")
    m[4].metric("Speedup over serial", f"{row['speedup']:.2f}×")
try:
    ui.chart(stream_charts.gantt_figure(row["intervals"], frame, lanes,
                                            f"Timeline: {stream_charts.config_label(row)}"), key="chart_gantt")
    timeline_drawn = True
except ValueError as exc:
    st.warning(f"This point's timeline cannot be drawn: {exc}")
    timeline_drawn = False
ui.takeaway(ui.cached(stream_charts.takeaway)(frame))
ui.context(frame)  # is the headline figure normal, and were its points clean
if not ui.desk():
    st.stop()  # on stage: the timeline and its takeaway
if timeline_drawn:
    st.caption("Bars are CUDA events recorded before and after every operation, each on its own stream, in one run "
               "of this configuration. An event fires when its stream reaches the operation; a bar starts when its "
               "engine was also free (faint: the wait). Hover a bar for its chunk, bytes and µs.")
ui.chart(stream_charts.breakdown_figure(row, frame), key="chart_breakdown")

if len(mine["streams"].unique()) > 1:
    st.subheader("Sweep: streams × chunks")
    # One round-robin order's lines (the one in focus), with the staged pipelines beside them as single points.
    line_order = focus_order if focus_order != "staged" else next(
        (o for o in dict.fromkeys(mine["issue_order"]) if o != "staged"), "staged")
    sweep = mine[mine["issue_order"].isin([line_order, "staged"])]
    ui.chart(ui.cached_figure(stream_charts.sweep_figure)(sweep, frame), key="chart_sweep")

if (frame["group"] == "bidirectional").any():
    st.subheader("Bidirectional copies")
    ui.chart(ui.cached_figure(stream_charts.bidirectional_figure)(frame), key="chart_bidirectional")
    st.markdown(stream_charts.bidirectional(frame))

st.subheader("The numbers")
st.dataframe(table.drop(columns=["intervals", "run_id", "elements", "samples_ms", "serial_samples_ms"]).assign(
    issue_order=lambda t: t["issue_order"].map(streams.ORDER_LABELS), bytes=lambda t: t["bytes"].map(format_bytes),
    # fractions shown in percent, in the one style ("91 %"): Streamlit's "percent" format writes "91%"
    efficiency=lambda t: t["efficiency"] * 100, engine_efficiency=lambda t: t["engine_efficiency"] * 100,
    cv=lambda t: t["cv"] * 100),
    hide_index=True, column_config={"efficiency": st.column_config.NumberColumn("overlap efficiency", format="%.0f %%"),
                                    "speedup": st.column_config.NumberColumn("speedup ×", format="%.2f"),
                                    "vs_bound": st.column_config.NumberColumn("× bound", format="%.3f"),
                                    "vs_engine_bound": st.column_config.NumberColumn("× copy-engine bound",
                                                                                     format="%.3f"),
                                    "engine_efficiency": st.column_config.NumberColumn(
                                        "efficiency vs copy-engine bound", format="%.0f %%"),
                                    "cv": st.column_config.NumberColumn("cv", format="%.2f %%")})
ui.download(frame, "streams")
