"""Occupancy: an exact calculator beside measurements that show when occupancy matters and when not."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from gpu.core import text
from gpu.core.occupancy import LIMITERS, DeviceLimits, KernelResources, occupancy, recorded_profiles
from gpu.core.units import format_bytes
from gpu.experiments import occupancy_sweep
from gpu.experiments.occupancy_sweep import view
from pages import _ui as ui


@st.cache_resource(show_spinner=False)
def device_profiles() -> dict:
    return recorded_profiles()


page = ui.Page("Occupancy: calculator and measurement", intro=(
    "How many blocks of a kernel fit on one SM, and which resource stops the next one: warps, the block cap, "
    "registers or shared memory. The calculator follows the driver's own rules (register allocation per warp "
    "and sub-partition, shared-memory granularity, carveouts and the driver's reserved 1 KiB per block); it is "
    "checked against `cuOccupancyMaxActiveBlocksPerMultiprocessor` on the committed answers below. Below it, "
    "two measured kernels (a streaming copy and a dependent-load chase), each plotted beside its theoretical "
    "occupancy, show how much of their speed occupancy buys on this GPU."))
backend = page.backend
live = backend.kind == "live"

# --- calculator ---------------------------------------------------------------------------------------------
profiles = dict(device_profiles())
if live:
    live_device = backend.client.info.get("occupancy_device")
    if live_device:
        live_device = {**live_device, "compute_capability": tuple(live_device["compute_capability"])}
        profiles = {f"{live_device['name']} (this GPU)": (DeviceLimits(**live_device), {"checked": None}),
                    **profiles}
# The device the numbers on this page come from goes first: the live GPU, or the recording's device.
recorded_device = "" if live else next(iter(backend.recordings(occupancy_sweep.NAME)["device_name"]), "")
names = sorted(profiles, key=lambda n: (not n.endswith("(this GPU)"), n != recorded_device, n))
# On stage the measured sweep and its takeaway come first; the calculator follows below them.
calculator_slot, measured_slot = st.container(), st.container()
if ui.presenting():  # folded under the takeaway, so the stage does not scroll
    measured_slot = calculator_slot
    calculator_slot = st.expander("Theoretical occupancy: the calculator", icon=":material/calculate:")
with calculator_slot:
    st.subheader("Theoretical occupancy")
    page.link_notes()
    controls = ui.Section(page)
    name = controls.selectbox("Device profile", names, "occupancy_device", format_func=lambda n: n + (
        "" if profiles[n][1].get("checked") is None else
        f" · matches the driver on {profiles[n][1]['checked']:,} configurations"
        f" (driver {profiles[n][1]['driver_version']})"))
    device, _meta = profiles[name]
    c1, c2 = st.columns(2)
    block = controls.select_slider("Threads per block", list(range(32, device.max_threads_per_block + 1, 32)),
                                   "occupancy_block", where=c1, value=256)
    registers = controls.slider("Registers per thread", 1, 255, 32, "occupancy_registers", where=c2)
    with ui.more_settings():
        c3, c4, c5 = st.columns(3)
        static = controls.slider("Static shared memory (bytes)", 0, 48 * 1024, 0, "occupancy_static", step=256,
                                 where=c3)
        dynamic = controls.slider("Dynamic shared memory (bytes)", 0, device.shared_per_block_optin - static, 0,
                                  "occupancy_dynamic", step=256, where=c4)
        typed_block = controls.text_input("…or type a block size", "occupancy_block_typed", where=c5,
                                          placeholder="e.g. 1025")
    block = (ui.typed_block_size(typed_block) or [block])[0]
    kernel = KernelResources(registers, static, device.shared_per_block_optin - static)
    result = occupancy(device, kernel, block, dynamic)
    if result.blocks_per_sm == 0:
        ui.show_reasons([result.reason], "This configuration cannot launch")
    else:
        m1, m2, m3, m4 = st.columns(4)
        m1.metric("Occupancy", text.percent(result.occupancy))
        m2.metric("Blocks per SM", result.blocks_per_sm)
        m3.metric("Active warps per SM", f"{result.warps_per_sm} / {device.max_threads_per_sm // device.warp_size}")
        m4.metric("Limited by", result.limiter)
        if ui.desk():
            st.dataframe(pd.DataFrame([{"resource": k, "blocks it allows": result.limits[k]} for k in LIMITERS]),
                         hide_index=True)
        tabs = controls.tabs(["vs block size", "vs registers", "vs shared memory"], "occupancy_curve")
        for tab, axis in zip(tabs, ("block", "registers", "shared"), strict=True):
            with tab:
                ui.chart(view.occupancy_curve(device, kernel, block, dynamic, axis),
                                key=f"chart_occupancy_{axis}")

with measured_slot:
    # --- measured sweep -------------------------------------------------------------------------------------
    if ui.desk():  # on stage the page's title says it, and the room goes to the chart
        st.subheader("Measured: does occupancy matter?")
    run_id = page.recording(occupancy_sweep.NAME, "occupancy_sweep")
    if live:
        block_sizes = list(ui.axis(occupancy_sweep.NAME, "block_sizes").default)
        extra_options = list(ui.axis(occupancy_sweep.NAME, "extra_registers").values)
        shared_options = ui.axis_steps(occupancy_sweep.NAME, "dynamic_shared_bytes", 8 * 1024, high=200 * 1024)
    else:
        block_sizes = page.recorded_values(occupancy_sweep.NAME, "block_size", run_id)
        extra_options = (page.recorded_values(occupancy_sweep.NAME, "extra_registers", run_id)
                         or [ui.axis_default(occupancy_sweep.NAME, "extra_registers")])
        shared_options = (page.recorded_values(occupancy_sweep.NAME, "shared_bytes_per_block", run_id)
                          or [ui.axis_default(occupancy_sweep.NAME, "dynamic_shared_bytes")])
    if ui.desk():
        s1, s2, s3 = st.columns(3)
    else:  # on stage: the kernels and the spoiler; register pressure folds away
        s1, s3 = st.columns(2)
        s2 = ui.more_settings()
    kernels = controls.axis_choices(occupancy_sweep.NAME, "kernels", "occupancy_kernels", where=s1,
                                    format_func=occupancy_sweep.LABELS.get)
    extra = controls.select_one("Register pressure (extra live registers, latency-bound kernel)", extra_options,
                                "occupancy_extra", where=s2,
                                help="Only the latency-bound kernel gets it: in a one-float-per-thread copy, the "
                                     "instructions that fill extra registers would cost more than the copy.")
    spoiler = controls.select_one("Shared-memory spoiler per block", shared_options, "occupancy_spoiler",
                                  format_func=format_bytes, where=s3)
    params = {"block_sizes": block_sizes, "kernels": list(kernels or []), "extra_registers": extra,
              "dynamic_shared_bytes": spoiler}
    page.sync()
    def preview(partial, suffix: str) -> None:
        """While measuring: both curves, coarse block sizes first."""
        ui.chart(view.occupancy_sweep_figure(partial), key=f"chart_occupancy_sweep{suffix}")


    frame = page.measure(occupancy_sweep.NAME, params, "occupancy_sweep", run_id, preview=preview)
    if ui.desk():
        st.caption("Kernel time only, L2 flushed before every sample. memory-bound: one float per thread over "
                   f"{format_bytes(occupancy_sweep.STREAM_ELEMENTS * 4)}; latency-bound: "
                   f"{occupancy_sweep.CHASE_THREADS:,} threads each following {occupancy_sweep.CHASE_STEPS} dependent "
                   f"loads through a {format_bytes(occupancy_sweep.CHASE_NODES * 4)} random cycle. Blocks that cannot "
                   "launch (too many registers) have no point.")
    ui.chart(ui.cached_figure(view.occupancy_sweep_figure)(frame), key="chart_occupancy_sweep")
    ui.takeaway(ui.cached(view.takeaway)(frame))
    ui.context(frame)  # is the headline figure normal, and were its points clean
if not ui.desk():
    st.stop()  # on stage: the measured curves and the takeaway
st.dataframe(frame[["variant", "block_size", "registers_per_thread", "shared_bytes_per_block",
                    "theoretical_occupancy", "median_ms", "cv", "samples", "gbps"]], hide_index=True)
ui.download(frame, "occupancy")
