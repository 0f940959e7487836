"""Coalescing: how the addresses a warp touches decide the bandwidth a kernel gets."""

from __future__ import annotations

import streamlit as st

from gpu.core.units import format_bytes
from gpu.experiments import coalescing
from gpu.experiments.coalescing import view
from pages import _ui as ui

page = ui.Page("Coalescing: access patterns vs bandwidth", intro=(
    "The same bytes, moved by kernels whose warps touch memory in different patterns: strided, misaligned, "
    "array-of-structures vs structure-of-arrays, and three matrix transposes. Kernel time only (CUDA events), "
    "**L2 flushed before every sample** and working sets far above the L2, so the cache never flatters a "
    "result. Each figure is compared with the driver's device copy (`memcpy_dtod`) **measured in the same run**, "
    "and every output is checked exactly against NumPy."))

run_id = page.recording(coalescing.NAME, "coalescing")
elements_options = page.axis_options(coalescing.NAME, "elements", run_id, ui.axis_powers(coalescing.NAME, "elements"))
block_options = page.axis_options(coalescing.NAME, "block_size", run_id,
                                  ui.axis_steps(coalescing.NAME, "block_sizes", 32), axis_name="block_sizes")
group_options = [g for g in ui.axis(coalescing.NAME, "groups").values if g != "copy"]  # copy always runs
page.link_notes()
controls = ui.Section(page)
left, right = st.columns(2)
elements = controls.axis_slider(coalescing.NAME, "elements", "coalescing_elements", elements_options, where=left,
                                format_func=lambda n: f"{n:,} ({format_bytes(4 * n)})")
groups = controls.axis_choices(coalescing.NAME, "groups", "coalescing_groups", group_options, where=right,
                               label="Experiments",
                               help="The copy group (the memcpy_dtod reference and our copy kernels) always runs.")
block_sizes = controls.block_size("coalescing_block", block_options, "Threads per block (1-D kernels)",
                                  placeholder="e.g. 192", default=ui.axis_default(coalescing.NAME, "block_sizes"))

params = {"elements": elements, "block_sizes": block_sizes, "groups": ["copy", *(groups or [])]}
page.sync()
def preview(partial, suffix: str) -> None:
    """While measuring: the copies (the reference) and the strided sweep, as far as measured."""
    ui.chart(view.variants_figure(partial, coalescing.VARIANTS["copy"], "Copy kernels"),
                 key=f"chart_copy{suffix}")
    if "strided" in set(partial["variant"]):
        ui.chart(view.sweep_figure(partial, "strided"),
                     key=f"chart_strided{suffix}")


frame = page.measure(coalescing.NAME, params, "coalescing", run_id, preview=preview)

# On stage: the strided sweep and its takeaway; the copies and their reference are for the desk.
if ui.desk():
    l2 = frame["l2_bytes"].dropna()
    st.caption(f"Working set: {format_bytes(4 * elements)} per buffer"
               + (f" vs an L2 of {format_bytes(l2.iloc[0])}; " if not l2.empty else "; ")
               + "L2 flushed before every sample. Transposes use 32×8-thread tiles whatever the block size.")
    best = view.with_peak_share(frame)
    reference = view.copy_reference(frame, best)
    if reference:
        st.markdown(reference)
    ui.chart(ui.cached_figure(view.variants_figure)(frame, coalescing.VARIANTS["copy"],
                                                                     "Copy kernels"), key="chart_copy")
if "strided" in set(frame["variant"]):
    ui.chart(ui.cached_figure(view.sweep_figure)(frame, "strided"), key="chart_strided")
ui.takeaway(ui.cached(view.takeaway)(frame))
ui.context(frame)  # is the headline figure normal, and were its points clean
if not ui.desk():
    st.stop()  # on stage: the strided sweep and the takeaway
if "offset" in set(frame["variant"]):
    ui.chart(ui.cached_figure(view.sweep_figure)(frame, "offset"), key="chart_offset")
if set(coalescing.VARIANTS["layout"]) & set(frame["variant"]):
    ui.chart(ui.cached_figure(view.variants_figure)(
        frame, coalescing.VARIANTS["layout"], "Array of structures vs structure of arrays"), key="chart_layout")
if set(coalescing.VARIANTS["transpose"]) & set(frame["variant"]):
    ui.chart(ui.cached_figure(view.variants_figure)(frame, coalescing.VARIANTS["transpose"],
                                                                     "Matrix transpose"), key="chart_transpose")
table = best[["variant", "stride", "offset", "matrix_side", "block_size", "median_ms", "min_ms", "max_ms", "cv",
              "samples", "gbps", "pct_of_dtod", "stop_reason"]].rename(columns={"pct_of_dtod": "% of memcpy_dtod"})
st.dataframe(table, hide_index=True)
ui.download(frame, "coalescing")
