"""Memory modes: managed (unified) memory, memory pools vs per-call allocation, batching small copies, and the
latency of host memory read by the GPU (zero-copy) against device memory."""

from __future__ import annotations

import streamlit as st

from gpu.core.units import KiB, SizeError, format_bytes, parse_size_list
from gpu.experiments import batching, host_latency, managed, pools
from gpu.experiments.batching import view as batching_view
from gpu.experiments.host_latency import view as host_latency_view
from gpu.experiments.managed import view as managed_view
from gpu.experiments.pools import view as pools_view
from pages import _ui as ui

page = ui.Page("Memory modes: managed memory, pools, batching, host latency", intro=(
    "Four pieces of memory machinery that real GPU code leans on, each measured and verified: **managed "
    "memory** (the driver migrates pages on demand, or when asked to prefetch), **memory pools** (reuse "
    "allocations instead of paying for them on every call), **batching** (one large copy instead of many "
    "small ones) and **host-memory latency** (how long the GPU waits for one read of pinned host memory, "
    "against its own memory). They live apart from the Transfers page because each asks a different question than "
    "\"which host memory copies fastest\", and each has its own axes."))
backend = page.backend
live = backend.kind == "live"


def tab_start(experiment: str, intro: str) -> str | None:
    """A tab's intro (at the desk) and, in replay, the recording it shows (its choice keyed by the experiment)."""
    if ui.desk():
        st.markdown(intro)
    return page.recording(experiment, experiment)


def measured(experiment: str, params: dict, run_id: str | None, figure, extra_reasons: list[str] | None = None):
    """A tab's experiment, measured (its chart drawn as points arrive) or replayed; None after saying why not."""
    return page.section(experiment, params, experiment, run_id, extra_reasons,
                        preview=lambda part, suffix: ui.chart(figure(part), key=f"chart_{experiment}{suffix}"))


def chart(experiment: str, figure, frame) -> None:
    """The tab's chart of the whole run."""
    ui.chart(ui.cached_figure(figure)(frame), key=f"chart_{experiment}")


def numbers(experiment: str, table, frame) -> None:
    """At the desk: the tab's numbers, and its run to download."""
    if ui.desk():
        st.dataframe(table, hide_index=True)
        ui.download(frame, experiment)


page.link_notes()
controls = ui.Section(page)
# The latency tab runs only while it is open (the tab's state reruns the page), so the page's other three sections
# cost what they did before it came.
TABS = {managed.NAME: "Managed memory", pools.NAME: "Pools vs per-call allocation",
        batching.NAME: "Batching copies", host_latency.NAME: "Host-memory latency"}
# A run opened from the address (Runs → Open on its page) opens on its own tab.
opened = set(backend.data["experiment"]) if ui.opened_run() and backend.kind == "replay" else set()
# The open tab is a setting: the link names it (memory_modes_tab=Host-memory latency) and opens on it.
tab_managed, tab_pools, tab_batching, tab_latency = controls.tabs(
    list(TABS.values()), "memory_modes_tab", default=next((label for name, label in TABS.items() if name in opened),
                                                          None))

with tab_managed:
    run_id = tab_start(managed.NAME, (
        "A kernel reads a buffer once and sums it. From **device memory** it runs at HBM speed. From a **managed** "
        "buffer the host has just written, every page first migrates to the GPU on a page fault (**first "
        "touch**); an explicit **prefetch** (`cuMemPrefetchAsync`) moves the pages in bulk before the kernel; "
        "once **resident**, managed memory is as fast as device memory."))
    size_options = page.axis_options(managed.NAME, "bytes", run_id, ui.axis_powers(managed.NAME, "sizes"),
                                     axis_name="sizes")
    size = controls.axis_slider(managed.NAME, "sizes", "managed_size", size_options, label="Buffer size",
                                format_func=format_bytes)
    frame = measured(managed.NAME, {"sizes": [int(size)]}, run_id, managed_view.managed_figure)
    if frame is not None:
        table = ui.cached(managed_view.managed_table)(frame)
        row = table.iloc[0]
        if ui.desk():  # on stage the takeaway under the chart says it
            st.markdown(managed_view.headline(row))
        chart(managed.NAME, managed_view.managed_figure, frame)
        ui.takeaway(ui.cached(managed_view.takeaway)(frame))
        ui.context(frame)  # is the headline figure normal, and were its points clean
        numbers(managed.NAME, frame[["variant", "bytes", "median_ms", "min_ms", "max_ms", "cv", "samples", "gbps",
                                     "stop_reason", "timer"]].assign(variant=lambda f: f["variant"].map(managed.LABELS),
                                                                     bytes=lambda f: f["bytes"].map(format_bytes)),
                frame)

with tab_pools:
    run_id = tab_start(pools.NAME, (
        "Allocate → copy → free, once per iteration, against the same through PyCUDA's `DeviceMemoryPool` and "
        "`PageLockedMemoryPool`. Allocating device memory costs microseconds; pinning host memory costs far more "
        "(the driver locks every page), which is why pooled staging buffers matter."))
    size_options = page.axis_options(pools.NAME, "bytes", run_id, [4 * KiB * 16**i for i in range(6)],
                                     axis_name="sizes")
    chosen = controls.axis_choices(pools.NAME, "sizes", "pools_sizes", size_options, default=size_options,
                                   format_func=format_bytes)
    typed = st.text_input("…or type sizes", key="pools_typed", placeholder="e.g. 4KiB, 1MiB:256MiB") if live else ""
    sizes, errors = sorted(chosen or []), []
    if typed.strip():
        try:
            sizes = parse_size_list(typed)
        except SizeError as exc:
            sizes, errors = [], [str(exc)]
    frame = measured(pools.NAME, {"sizes": sizes}, run_id, pools_view.pools_figure, extra_reasons=errors)
    if frame is not None:
        table = ui.cached(pools_view.pool_table)(frame)
        parts = pools_view.headline(table, pools_view.pool_crossover)
        if ui.desk():  # on stage the takeaway under the chart says it
            st.markdown("\n".join(f"- {p}" for p in parts))
        chart(pools.NAME, pools_view.pools_figure, frame)
        ui.takeaway("; ".join(parts) + "." if parts else None, key="stage_takeaway_pools")
        numbers(pools.NAME, table.assign(bytes=table["bytes"].map(format_bytes)), frame)

with tab_batching:
    run_id = tab_start(batching.NAME, (
        "K pieces of s bytes, scattered in pinned host memory, copied to one contiguous device buffer: as K "
        "separate copies, packed by the host into one pinned staging buffer first, or (the floor) as one copy "
        "of K·s bytes. Each copy pays a fixed cost α, the latency the Transfers page's model fits."))
    piece_options = page.axis_options(batching.NAME, "piece_bytes", run_id, [4 * 4**i for i in range(11)],
                                      axis_name="piece_sizes")
    count_options = page.axis_options(batching.NAME, "chunks", run_id, ui.axis_powers(batching.NAME, "pieces"),
                                      axis_name="pieces")
    count = controls.axis_slider(batching.NAME, "pieces", "batching_count", count_options, label="Pieces K")
    fitting = [s for s in piece_options if s * count <= batching.MAX_TOTAL]  # K·s must fit the experiment's cap
    pieces_chosen = controls.pills("Piece sizes s", fitting, f"batching_pieces_{count}", default=fitting,
                                   format_func=format_bytes)
    frame = measured(batching.NAME, {"piece_sizes": sorted(pieces_chosen or []), "pieces": int(count)}, run_id,
                     batching_view.batching_figure)
    if frame is not None:
        table = ui.cached(batching_view.batching_table)(frame)
        overhead = batching_view.headline(table)
        if overhead and ui.desk():  # on stage the takeaway under the chart says it
            st.markdown(overhead)
        chart(batching.NAME, batching_view.batching_figure, frame)
        ui.takeaway(overhead.replace("**", "") if overhead else None, key="stage_takeaway_batching")
        numbers(batching.NAME, table.assign(**{"piece bytes": table["piece bytes"].map(format_bytes)}), frame)

with tab_latency:
    if tab_latency.open:
        run_id = tab_start(host_latency.NAME, (
            "One GPU thread follows a chain of indices, each load waiting for the one before: through **pinned "
            "host memory mapped into the GPU** (zero-copy, so every load crosses PCIe) or through **device "
            "memory**, at a few working-set sizes. The time per load is the memory's latency (or the cache's, "
            "when the chain fits one). It is nvbandwidth's `host_device_latency_sm` pointer chase; where a "
            "kernel reads host memory a few bytes at a time, this is what each read costs."))
        sizes_axis = ui.axis(host_latency.NAME, "sizes")
        size_options = page.axis_options(host_latency.NAME, "working_set_bytes", run_id, list(sizes_axis.default),
                                         max(sizes_axis.default))
        sizes = controls.axis_choices(host_latency.NAME, "sizes", "host_latency_sizes", size_options,
                                      default=size_options, format_func=format_bytes)
        frame = measured(host_latency.NAME, {"sizes": sorted(sizes or [])}, run_id,
                         host_latency_view.host_latency_figure)
        if frame is not None:
            largest = frame[frame["working_set_bytes"] == frame["working_set_bytes"].max()]
            ns = (largest["median_ms"] * 1e6 / largest["elements"]).groupby(largest["variant"]).first()
            line = (f"With a {format_bytes(int(largest['working_set_bytes'].iloc[0]))} chain, a dependent load takes "
                    f"{ns['mapped']:,.0f} ns over PCIe and {ns['device']:,.0f} ns in device memory "
                    f"({ns['mapped'] / ns['device']:.1f}× longer)." if {"mapped", "device"} <= set(ns.index) else None)
            if line and ui.desk():  # on stage the takeaway under the chart says it
                st.markdown(line)
            chart(host_latency.NAME, host_latency_view.host_latency_figure, frame)
            ui.takeaway(line, key="stage_takeaway_host_latency")
            numbers(host_latency.NAME,
                    frame[["variant", "working_set_bytes", "elements", "median_ms", "cv", "samples", "timer"]].assign(
                        variant=lambda f: f["variant"].map(host_latency.LABELS),
                        working_set_bytes=lambda f: f["working_set_bytes"].map(format_bytes)), frame)

# While another tab is open, the latency tab's sizes stay in the address as the link gave them (and apply when it
# opens): a setting of this page, not an unknown one.
page.sync(own=() if tab_latency.open else ("host_latency_sizes",))
