"""Reductions: the pinned dot product of naive GPU code, done right, with numbers for both questions."""

from __future__ import annotations

import streamlit as st

from gpu.core.units import format_bytes
from gpu.experiments import reduction
from gpu.experiments.reduction import view
from pages import _ui as ui

page = ui.Page("Reductions: a dot product, five ways", intro=(
    "Naive GPU code computes a dot product with one `atomicAdd` per element into a single float, and times it "
    "together with the copies from pinned memory. Here each question gets its own number: **how fast is the "
    "kernel** (kernel only, L2 flushed, CUDA events) and **what does the whole job cost** (host data → GPU → "
    "result, from pageable or pinned memory). Every variant is checked exactly on −1/0/1 data and its relative "
    "error against a float64 NumPy dot is shown."))

run_id = page.recording(reduction.NAME, "reduction")
size_options = page.axis_options(reduction.NAME, "elements", run_id, ui.axis_powers(reduction.NAME, "sizes"),
                                 axis_name="sizes")
block_options = page.axis_options(reduction.NAME, "block_size", run_id,
                                  ui.axis_steps(reduction.NAME, "block_sizes", 32), axis_name="block_sizes")
page.link_notes()
controls = ui.Section(page)
left, right = st.columns(2)
size = controls.axis_slider(reduction.NAME, "sizes", "reduction_size", size_options, where=left,
                            label="Vector size (floats)", format_func=lambda n: f"{n:,} ({format_bytes(4 * n)} each)")
settings = ui.more_settings()
variants = controls.axis_choices(reduction.NAME, "variants", "reduction_variants", format_func=reduction.LABELS.get,
                                 where=right if ui.desk() else settings)  # on stage they fold away with the block
block_sizes = controls.block_size("reduction_block", block_options, "Threads per block", placeholder="e.g. 1024",
                                  default=ui.axis_default(reduction.NAME, "block_sizes"), settings=settings)

params = {"sizes": [size], "block_sizes": block_sizes, "variants": list(variants or [])}
page.sync()
def preview(partial, suffix: str) -> None:
    """While measuring: the kernels measured so far."""
    if (partial["group"] == "kernel").any():
        ui.chart(view.reduction_figure(partial), key=f"chart_reduction{suffix}")


frame = page.measure(reduction.NAME, params, "reduction", run_id, preview=preview)

kernels = frame[frame["group"] == "kernel"]
best = view.reduction_best(frame, reduction.LABELS)
if best and ui.desk():  # on stage the takeaway under the chart says it
    st.markdown(best)
if not kernels.empty:
    ui.chart(ui.cached_figure(view.reduction_figure)(frame), key="chart_reduction")
ui.takeaway(ui.cached(view.takeaway)(frame))
ui.context(frame)  # is the headline figure normal, and were its points clean
if not ui.desk():
    st.stop()  # on stage: the kernels and the takeaway
if set(reduction.END_TO_END) & set(frame["variant"]):
    ui.chart(ui.cached_figure(view.end_to_end_figure)(frame), key="chart_end_to_end")
st.dataframe(frame[["variant", "group", "elements", "block_size", "median_ms", "min_ms", "max_ms", "cv", "samples",
                    "gbps", "rel_error", "stop_reason"]].assign(variant=lambda f: f["variant"].map(reduction.LABELS)),
             hide_index=True, column_config={"rel_error": st.column_config.NumberColumn("relative error",
                                                                                        format="%.2e")})
ui.download(frame, "reduction")
