"""Memory modes: managed (unified) memory, memory pools vs per-call allocation, and batching small copies."""

from __future__ import annotations

import streamlit as st

from gpu.core.units import KiB, MiB, SizeError, format_bytes, parse_size_list
from gpu.experiments import batching, managed, pools
from gpu.present import headlines, takeaways
from gpu.present.charts import memory as memory_charts
from pages import _ui as ui

page = ui.Page()
backend = page.backend
live = backend.kind == "live"

st.title("Memory modes: managed memory, pools and batching")
if ui.desk():
    st.markdown(
        "Three pieces of memory machinery that real GPU code leans on, each measured and verified: **managed "
        "memory** (the driver migrates pages on demand, or when asked to prefetch), **memory pools** (reuse "
        "allocations instead of paying for them on every call) and **batching** (one large copy instead of many "
        "small ones). They live apart from the Transfers page because each asks a different question than "
        "\"which host memory copies fastest\", and each has its own axes.")


page.link_notes()
tab_managed, tab_pools, tab_batching = st.tabs(["Managed memory", "Pools vs per-call allocation", "Batching copies"])

with tab_managed:
    if ui.desk():
        st.markdown(
            "A kernel reads a buffer once and sums it. From **device memory** it runs at HBM speed. From a **managed** "
            "buffer the host has just written, every page first migrates to the GPU on a page fault (**first "
            "touch**); an explicit **prefetch** (`cuMemPrefetchAsync`) moves the pages in bulk before the kernel; "
            "once **resident**, managed memory is as fast as device memory.")
    run_id = page.recording(managed.NAME, "managed")
    size_options = page.axis_options(managed.NAME, "bytes", run_id, [2**p for p in range(20, 34)],
                                       256 * MiB)
    page.restore("managed_size", "int", size_options)
    size = st.select_slider("Buffer size", size_options, format_func=format_bytes, key="managed_size",
                            value=256 * MiB if 256 * MiB in size_options else size_options[-1])
    frame = page.section(managed.NAME, {"sizes": [int(size)]}, "managed", run_id,
                                 preview=lambda part, suffix: ui.chart(memory_charts.managed_figure(part),
                                                                           key=f"chart_managed{suffix}"))
    if frame is not None:
        table = ui.cached(memory_charts.managed_table)(frame)
        row = table.iloc[0]
        if ui.desk():  # on stage the takeaway under the chart says it
            st.markdown(headlines.managed(row))
        ui.chart(ui.cached_figure(memory_charts.managed_figure)(frame), key="chart_managed")
        ui.takeaway(ui.cached(takeaways.managed)(frame))
        if ui.desk():
            st.dataframe(frame[["variant", "bytes", "median_ms", "min_ms", "max_ms", "cv", "samples", "gbps",
                                "stop_reason", "timer"]].assign(variant=lambda f: f["variant"].map(managed.LABELS),
                                                                bytes=lambda f: f["bytes"].map(format_bytes)),
                         hide_index=True)
            ui.download(frame, "managed")

with tab_pools:
    if ui.desk():
        st.markdown(
            "Allocate → copy → free, once per iteration, against the same through PyCUDA's `DeviceMemoryPool` and "
            "`PageLockedMemoryPool`. Allocating device memory costs microseconds; pinning host memory costs far more "
            "(the driver locks every page), which is why pooled staging buffers matter.")
    run_id = page.recording(pools.NAME, "pools")
    size_options = page.axis_options(pools.NAME, "bytes", run_id, [4 * KiB * 16**i for i in range(6)],
                                       4 * KiB)
    page.restore("pools_sizes", "ints", size_options)
    chosen = st.pills("Buffer sizes", size_options, selection_mode="multi", default=size_options,
                      format_func=format_bytes, key="pools_sizes")
    typed = st.text_input("…or type sizes", key="pools_typed", placeholder="e.g. 4KiB, 1MiB:256MiB") if live else ""
    sizes, errors = sorted(chosen or []), []
    if typed.strip():
        try:
            sizes = parse_size_list(typed)
        except SizeError as exc:
            sizes, errors = [], [str(exc)]
    frame = page.section(pools.NAME, {"sizes": sizes}, "pools", run_id, extra_reasons=errors,
                                 preview=lambda part, suffix: ui.chart(memory_charts.pools_figure(part),
                                                                           key=f"chart_pools{suffix}"))
    if frame is not None:
        table = ui.cached(memory_charts.pool_table)(frame)
        parts = headlines.pools(table, memory_charts.pool_crossover)
        st.markdown("\n".join(f"- {p}" for p in parts))
        ui.chart(ui.cached_figure(memory_charts.pools_figure)(frame), key="chart_pools")
        if ui.desk():  # the table and download stay at the desk
            st.dataframe(table.assign(bytes=table["bytes"].map(format_bytes)), hide_index=True)
            ui.download(frame, "pools")

with tab_batching:
    if ui.desk():
        st.markdown(
            "K pieces of s bytes, scattered in pinned host memory, copied to one contiguous device buffer: as K "
            "separate copies, packed by the host into one pinned staging buffer first, or (the floor) as one copy "
            "of K·s bytes. Each copy pays a fixed cost α, the latency the Transfers page's model fits.")
    run_id = page.recording(batching.NAME, "batching")
    piece_options = page.axis_options(batching.NAME, "param_value", run_id,
                                        [4 * 4**i for i in range(11)], 64)
    count_options = page.axis_options(batching.NAME, "chunks", run_id, [2**i for i in range(1, 13)], 64)
    page.restore("batching_count", "int", count_options)
    count = st.select_slider("Pieces K", count_options, key="batching_count",
                             value=64 if 64 in count_options else count_options[-1])
    fitting = [s for s in piece_options if s * count <= batching.MAX_TOTAL]  # K·s must fit the experiment's cap
    page.restore(f"batching_pieces_{count}", "ints", fitting)
    pieces_chosen = st.pills("Piece sizes s", fitting, selection_mode="multi", default=fitting,
                             format_func=format_bytes, key=f"batching_pieces_{count}")
    frame = page.section(batching.NAME, {"piece_sizes": sorted(pieces_chosen or []),
                                                          "pieces": int(count)}, "batching", run_id,
                                 preview=lambda part, suffix: ui.chart(memory_charts.batching_figure(part),
                                                                           key=f"chart_batching{suffix}"))
    if frame is not None:
        table = ui.cached(memory_charts.batching_table)(frame)
        overhead = headlines.batching(table)
        if overhead:
            st.markdown(overhead)
        ui.chart(ui.cached_figure(memory_charts.batching_figure)(frame), key="chart_batching")
        if ui.desk():
            st.dataframe(table.assign(**{"piece bytes": table["piece bytes"].map(format_bytes)}), hide_index=True)
            ui.download(frame, "batching")

page.sync()
