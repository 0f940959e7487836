"""Transfers: what pinned memory buys for host↔device copies, and what allocating it costs."""

from __future__ import annotations

import streamlit as st

from gpu.core import text
from gpu.core.units import format_bytes, parse_size_list
from gpu.experiments import transfers
from gpu.experiments.transfers import view as charts
from gpu.present import headlines
from gpu.present.charts._common import source_title
from pages import _ui as ui

page = ui.Page("Transfers: pinned vs pageable memory", intro=(
    "Copies between host and device through four kinds of host memory: **pageable** (a NumPy array; the "
    "driver stages it through its own pinned buffer), **pinned** (page-locked, DMA straight from it), "
    "**pinned write-combined** (uncached for the CPU) and **mapped zero-copy** (a kernel reads or writes host "
    "memory across PCIe itself). Each point is timed with CUDA events, repeated until its noise is small or "
    "until a sample or time limit (the table's **stop** column says which, and the line under it why), and "
    "its data is checked bit-exact; GB/s are 10⁹ bytes per second. The **latency view** times each copy alone "
    "(what one copy costs a program, issue included); the **throughput view** times back-to-back copies, "
    "as bandwidthTest and nvbandwidth do."))
backend = page.backend
live = backend.kind == "live"
page.link_notes()

# --- widgets ----------------------------------------------------------------------------------------
sizes_axis = ui.axis(transfers.NAME, "sizes")
if live:
    largest = transfers.max_size(backend.known_limits())  # instant; never waits behind another job
else:
    largest = max(sizes_axis.default)
options = ui.axis_powers(transfers.NAME, "sizes", low=min(sizes_axis.default), high=largest)


def exact_sizes(typed: str) -> list[int]:
    """The sizes typed in (or linked); ValueError saying what is wrong, in one line, when they cannot run here."""
    sizes = parse_size_list(typed)
    reasons = backend.check(transfers.NAME, {"sizes": sizes})  # live: against this device's free memory
    if not live and max(sizes) > largest:
        reasons.append(f"{format_bytes(max(sizes))} is more than the largest size here ({format_bytes(largest)})")
    if reasons:
        raise ValueError(reasons[0] + (f" (and {text.count(len(reasons) - 1, 'more problem')})"
                                       if len(reasons) > 1 else ""))
    return sizes


controls = ui.Section(page)
methods = list(ui.axis(transfers.NAME, "methods").values)
# A run opened from the address (Runs → Open on its page) that was timed only in the throughput view opens there.
if ui.opened_run() and not live and "transfers_method" not in st.session_state \
        and backend.data["timer"].isin(transfers.BATCHED_TIMERS).all():
    st.session_state["transfers_method"] = "batched"
left, right = st.columns([3, 2])
low, high = controls.range_slider("Transfer sizes (powers of two)", options, "transfers_size_range", where=left,
                                  format_func=format_bytes,
                                  value=(options[0], min(max(sizes_axis.default), options[-1])))
with right:
    method = controls.radio("Timing", methods, "transfers_method", format_func=transfers.METHOD_LABELS.get,
                            horizontal=True,
                            help="Latency view: CUDA events around each copy, issue cost included, as one copy in a "
                                 "program pays it. Throughput view: back-to-back copies of one buffer between two "
                                 "events, at least 1 ms a sample, as bandwidthTest and nvbandwidth time them.")
    include_alloc = controls.toggle(ui.axis_label(ui.axis(transfers.NAME, "include_alloc")),
                                    "transfers_include_alloc", disabled=method == "batched",
                                    help="Also time allocating the host buffer before each copy, as code that "
                                         "allocates per transfer does. Shown beside the copy-only view (latency view "
                                         "only: batched copies reuse one buffer).")
with ui.more_settings():
    custom_column, mode_column = st.columns([3, 2])
    custom = controls.text_input("…or exact sizes (overrides the slider)", "transfers_custom_sizes",
                                 check=lambda typed: exact_sizes(typed) if typed.strip() else None,
                                 where=custom_column, placeholder="e.g. 64KiB, 3MiB, 1GB or 1MiB:256MiB",
                                 help="Any multiple of 16 bytes. Units: B, KiB, MiB, GiB (2¹⁰ⁿ) or KB, MB, GB "
                                      "(10³ⁿ).")
    with mode_column:
        modes = controls.axis_choices(transfers.NAME, "modes", "transfers_modes",
                                      format_func=transfers.MODE_LABELS.get)
        directions = controls.axis_choices(transfers.NAME, "directions", "transfers_directions",
                                           format_func=lambda d: d.upper())

sizes = [s for s in options if low <= s <= high]
if custom.strip():
    try:
        sizes = exact_sizes(custom)
    except ValueError as exc:  # SizeError included: say why, and keep the slider's sizes and their chart
        st.warning(f"Exact sizes {text.plain(custom)} not used: {text.plain(exc, None)}. Showing the slider's "
                   "sizes instead.")

params = {"sizes": sizes, "modes": list(modes or []), "directions": list(directions or []),
          "include_alloc": [False, True] if include_alloc and method == "single" else [False], "methods": [method]}

batched = method == "batched"
run_id = page.recording(transfers.NAME, "transfers",
                        holds=lambda rows: rows["timer"].isin(transfers.BATCHED_TIMERS) == batched)
page.sync()
if not live and run_id is None:
    st.info(f"No recording here was measured with the {transfers.METHOD_LABELS[method]} method, so it has nothing "
            "to replay: choose the other timing view.")
    st.stop()
def preview(partial, suffix: str) -> None:
    """While measuring: the bandwidth curves of the points measured so far."""
    ui.chart(charts.bandwidth_figure(partial[~partial["include_alloc"].astype(bool)]), key=f"chart_bw{suffix}")


frame = page.measure(transfers.NAME, params, "transfers", run_id, preview=preview)

# --- charts -------------------------------------------------------------------------------------------------
bandwidth_figure = ui.cached_figure(charts.bandwidth_figure)
copy_only = frame[~frame["include_alloc"]]
with_alloc = frame[frame["include_alloc"]]


verdict = ui.cached(charts.transfers_verdict)


if not with_alloc.empty and ui.presenting():
    # On stage one chart holds both (solid: copy only; dashed: allocated per copy) and the takeaway says the ratios:
    # two side-by-side charts of two panels each were too small to read and too tall for the screen.
    ui.chart(bandwidth_figure(frame).update_layout(title=source_title("Copy only vs including allocation", frame)),
             key="chart_bw_both")
elif not with_alloc.empty:
    st.subheader("Copy only vs including allocation")
    lines = [v for v in (verdict(copy_only, "Copy only"), verdict(with_alloc, "Including allocation")) if v]
    if lines:
        st.markdown("\n".join(f"- {line}" for line in lines)
                    + "\n\nPinned memory is expensive to allocate (the driver locks every page): allocated "
                      "once and reused it wins; allocated per transfer it can lose.")
    col_a, col_b = st.columns(2)
    with col_a:
        ui.chart(bandwidth_figure(copy_only).update_layout(title=source_title("Copy only", copy_only)),
                 key="chart_bw_copy")
    with col_b:
        ui.chart(bandwidth_figure(with_alloc).update_layout(title=source_title("Including allocation", with_alloc)),
                 key="chart_bw_alloc")
else:
    line = verdict(copy_only, "Copy only")
    if line:
        st.markdown(f"**{line}**")
    ui.chart(bandwidth_figure(copy_only), key="chart_bw_copy")

ui.takeaway(ui.cached(charts.takeaway)(frame))
ui.context(frame)  # is the headline figure normal, and were its points clean
if not ui.desk():
    st.stop()  # on stage: the chart and its takeaway; the analysis below is for the desk

if "pageable" in set(frame["variant"]) and len(set(frame["variant"])) > 1:
    ui.chart(ui.cached_figure(charts.speedup_figure)(frame), key="chart_speedup")
else:
    st.caption("Select pageable and at least one other mode to see speedups over pageable.")

st.subheader("Latency and bandwidth: t = α + bytes/β")
fits = ui.cached(charts.model_table)(copy_only)
if fits.empty:
    st.caption("The model needs at least two sizes per mode.")
else:
    ui.chart(ui.cached_figure(charts.model_figure)(copy_only), key="chart_model")
    st.dataframe(
        fits.assign(direction=fits["direction"].str.upper(), n_half=fits["n_half_bytes"].map(format_bytes),
                    max_rel_residual=fits["max_rel_residual"] * 100)  # percent in the one style ("3.1 %")
        [["mode", "direction", "alpha_us", "beta_gbps", "n_half", "max_rel_residual", "points"]],
        column_config={"alpha_us": st.column_config.NumberColumn("α (µs)", format="%.2f"),
                       "beta_gbps": st.column_config.NumberColumn("β (GB/s)", format="%.1f"),
                       "n_half": st.column_config.TextColumn("n½ (size reaching β/2)"),
                       "max_rel_residual": st.column_config.NumberColumn("worst fit error", format="%.1f %%"),
                       "points": "sizes"},
        hide_index=True)

st.subheader("The numbers")
st.dataframe(ui.cached(charts.numbers_table)(frame), hide_index=True,
             column_config={"median µs": st.column_config.NumberColumn(format="%.2f"),
                            "min µs": st.column_config.NumberColumn(format="%.2f"),
                            "max µs": st.column_config.NumberColumn(format="%.2f"),
                            "cv %": st.column_config.NumberColumn(format="%.2f"),
                            "GB/s": st.column_config.NumberColumn(format="%.2f")})
stops = None if live else ui.cached(headlines.transfer_stops)(frame)  # live: the noise line under the result says it
if stops:
    st.caption(stops)
ui.download(frame, "transfers")
