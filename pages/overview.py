"""Overview: what PinPoint is, where its numbers come from, and the device they describe."""

import pandas as pd
import streamlit as st

from gpu.core.units import format_bytes
from gpu.experiments import registry
from gpu.experiments.registry import EXPERIMENTS
from pages import _shared as shared
from pages import _ui as ui

page = ui.Page()

if ui.presenting():  # on stage: a title card, centred, with where the numbers come from
    backend = ui.current_backend()
    source = (f"Measuring live on {backend.facts.get('device_name')}" if backend.kind == "live" else
              f"Replaying runs recorded on {', '.join(sorted(set(backend.data['device_name'])))} (not measured now)")
    with st.container(key="stage_title_card"):
        st.title(f"{shared.ICON} PinPoint")
        st.markdown("## A live GPU memory-performance lab\n\n### Pinned memory, coalescing, occupancy and stream "
                    "overlap: every number measured, timed like nvbench, checked for correct results.")
        st.caption(source)
    st.stop()
st.title(f"{shared.ICON} PinPoint")
page.link_notes()
page.sync(link=False)  # no settings here: only names what the link holds that this page does not read
st.markdown(
    "A live GPU memory-performance lab. Pick sizes and memory modes with sliders and see **measured** "
    "effects of pinned memory, coalescing, occupancy and stream overlap, timed like nvbench (CUDA events, "
    "warm-up, samples until the noise is small, median and spread) and checked for correct results.\n\n"
    "Every number shown was measured: live on this machine's GPU, or replayed from runs that PinPoint's "
    "runner recorded on a real GPU (the device and date are on every chart).")
for entry in shared.PAGES:
    if entry.blurb:
        st.page_link(entry.file, label=entry.blurb, icon=entry.icon)
        shown = [e.module.TITLE for e in registry.REGISTRY if e.page == entry.file]
        if len(shown) > 1:  # a page of several experiments: each one, as the registry lists it
            st.caption("Measures: " + " · ".join(shown))

backend = ui.current_backend()
if backend.kind == "live":
    st.subheader("This GPU")
    facts = backend.facts
    cols = st.columns(4)
    cols[0].metric("Device", facts.get("device_name", "?"), f"compute capability {facts.get('compute_capability')}")
    cols[1].metric("Memory", format_bytes(facts.get("memory_total_bytes", 0)), f"{facts.get('sm_count')} SMs")
    cols[2].metric("PCIe per direction", f"{facts.get('pcie_gbps_theoretical', float('nan')):.1f} GB/s",
                   f"gen {facts.get('pcie_gen')} × {facts.get('pcie_width')}")
    cols[3].metric("HBM theoretical", f"{facts.get('hbm_gbps_theoretical', float('nan')):.0f} GB/s",
                   f"driver {facts.get('driver_version')}")
    if st.button("Run a health check", key="overview_health", disabled=bool(ui.why_not("measure")),
                 help=ui.why_not("measure")) and ui.permitted("measure"):
        # No session: a health check must not cancel this session's measurement on another page.
        result = ui.outcome(backend.client.submit("health"))
        if result:
            st.success(f"Health-check kernel verified; {format_bytes(result['free_device_bytes'])} of device "
                       "memory free.")
else:
    st.subheader("Recorded runs")
    recordings = [backend.recordings(name).assign(experiment=name) for name in EXPERIMENTS]
    recordings = pd.concat([r for r in recordings if not r.empty] or [pd.DataFrame()], ignore_index=True)
    if recordings.empty:
        st.warning("No recorded runs are available: put runner output in assets/replay/.")
    else:
        st.dataframe(recordings.rename(columns={"device_name": "device", "timestamp": "recorded (UTC)"})
                     [["experiment", "device", "recorded (UTC)", "profile", "points", "run_id"]], hide_index=True)
