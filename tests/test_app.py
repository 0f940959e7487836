"""Every page through Streamlit's AppTest, in replay mode (no GPU here)."""

import base64
import json
import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from gpu.experiments import registry
from pages import _shared as shared

APP = str(Path(__file__).resolve().parent.parent / "app.py")


@pytest.fixture(autouse=True)
def replay_mode(monkeypatch):
    monkeypatch.setenv("PINPOINT_BACKEND", "replay")


def open_page(page=None):
    at = AppTest.from_file(APP, default_timeout=60).run()
    if page:
        at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def figures(at):
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def values(array):
    """Plotly's JSON stores numeric arrays as base64 typed arrays; decode them to a list."""
    if isinstance(array, dict) and "bdata" in array:
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"]).tolist()
    return list(array)


def trace_names(figure):
    return [trace.get("name") for trace in figure["data"]]


def banner(at):
    return " ".join(i.value for i in at.info)


PAGES = registry.experiment_pages()


@pytest.mark.parametrize("page", [None, *PAGES])
@pytest.mark.slow
def test_every_page_says_it_replays_a_recorded_run(page):
    at = open_page(page)
    text = banner(at)
    assert "Replay" in text and "not measured now" in text and "NVIDIA H200 (2026-11-21)" in text
    for figure in figures(at):
        title = figure["layout"]["title"]["text"]
        # every recording is an H200's; the peer matrix opens on its newest, made on a machine of two H200s
        recorded = any(f"Replay of a run recorded on {device}" in title
                       for device in ("NVIDIA H200", "2 × NVIDIA H200"))
        assert recorded or "computed, checked against the driver" in title


def test_overview_lists_the_recorded_runs():
    at = open_page()
    table = at.dataframe[0].value
    assert set(table["experiment"]) == set(registry.EXPERIMENTS)  # every registered experiment's recordings
    assert set(table["device"]) == {"NVIDIA H200", "NVIDIA H100 80GB HBM3"}  # the peer matrix: two H200s, two H100s
    assert set(table.loc[table["device"] != "NVIDIA H200", "experiment"]) == {"peers"}
    # the single-copy sweep (copy-only and including allocation) and the batched copies, recorded apart
    assert sorted(table.loc[table["experiment"] == "transfers", "points"]) == [152, 304]
    assert at.sidebar.toggle[0].value is True and at.sidebar.toggle[0].disabled  # no live GPU to switch to


def test_transfers_draws_bandwidth_speedup_and_model_from_the_recording():
    at = open_page("pages/transfers.py")
    bandwidth, speedup, model = figures(at)
    assert {"pageable (NumPy)", "pinned", "pinned write-combined", "mapped zero-copy",
            "PCIe theoretical (63.0 GB/s)"} <= set(trace_names(bandwidth))
    assert "Replay of a run recorded on NVIDIA H200" in bandwidth["layout"]["title"]["text"]
    assert len(values(bandwidth["data"][0]["x"])) == 19  # 4 KiB … 1 GiB
    # what stopped each point is said under the table, counted from the recording (not "until the noise is small")
    assert any(c.value.startswith("How the 152 points stopped: 33 reached the noise target") for c in at.caption)
    assert "pinned ÷ pageable" in trace_names(speedup)
    assert any(name and name.startswith("pinned fit: α=") for name in trace_names(model))
    numbers = at.dataframe[1].value
    assert len(numbers) == 19 * 4 * 2 and {"median µs", "min µs", "max µs", "cv %", "samples"} <= set(numbers.columns)


def test_include_allocation_shows_both_views_side_by_side():
    at = open_page("pages/transfers.py")
    at.toggle(key="transfers_include_alloc").set_value(True).run()
    assert not at.exception
    titles = [f["layout"]["title"]["text"] for f in figures(at)]
    assert titles[0].startswith("Copy only") and titles[1].startswith("Including allocation")
    verdict = " ".join(m.value for m in at.markdown)
    assert "Copy only, 1 GiB: pinned ÷ pageable = H2D" in verdict
    assert "Including allocation, 1 GiB: pinned ÷ pageable = H2D 0." in verdict  # the recorded flip
    assert any("+ allocation" in (name or "") for name in trace_names(figures(at)[1]))


def test_narrowing_the_slider_and_modes_redraws_from_the_recording():
    at = open_page("pages/transfers.py")
    at.select_slider(key="transfers_size_range").set_value((4096, 1 << 20)).run()
    at.pills(key="transfers_modes").set_value(["pinned", "pageable"]).run()
    bandwidth = figures(at)[0]
    pinned = next(t for t in bandwidth["data"] if t["name"] == "pinned")
    assert len(values(pinned["x"])) == 9 and max(values(pinned["x"])) == 1 << 20
    assert "mapped zero-copy" not in trace_names(bandwidth)


@pytest.mark.parametrize("typed,message", [
    ("0", "size 0 B must be at least 16 B"),
    ("1000", "size 1000 B is not a multiple of 16 B"),
    ("lots", "'lots' is not a size"),
])
def test_bad_sizes_get_a_clear_message_and_the_slider_sizes_chart(typed, message):
    at = open_page("pages/transfers.py")
    at.text_input(key="transfers_custom_sizes").input(typed).run()
    assert not at.exception and not at.error
    warning = " ".join(w.value.replace("\\", "") for w in at.warning)
    assert message in warning and "Showing the slider's sizes instead" in warning
    pinned = next(t for t in figures(at)[0]["data"] if t["name"] == "pinned")
    assert min(values(pinned["x"])) == 4096 and max(values(pinned["x"])) == 1 << 30  # the slider's default range


def test_unrecorded_exact_sizes_are_named_not_invented():
    at = open_page("pages/transfers.py")
    at.text_input(key="transfers_custom_sizes").input("4KiB, 48KiB").run()
    assert any("48 KiB" in c.value and "never interpolates" in c.value for c in at.caption)
    pinned = next(t for t in figures(at)[0]["data"] if t["name"] == "pinned")
    assert values(pinned["x"]) == [4096]


def test_no_mode_selected_is_explained():
    at = open_page("pages/transfers.py")
    at.pills(key="transfers_modes").set_value([]).run()
    assert any("choose at least one memory mode" in e.value for e in at.error)


def test_coalescing_draws_each_pattern_against_the_device_copy_of_the_same_run():
    at = open_page("pages/coalescing.py")
    charts = figures(at)
    titles = [c["layout"]["title"]["text"] for c in charts]
    assert [t.split("<br>")[0].split(" ·")[0] for t in titles] == [
        "Copy kernels", "Strided reads", "Misaligned reads", "Array of structures vs structure of arrays",
        "Matrix transpose"]
    strided = charts[1]
    assert [t["name"] for t in strided["data"]][:2] == ["strided read", strided["data"][1]["name"]]
    assert strided["data"][1]["name"].startswith("memcpy_dtod (")
    assert values(strided["data"][0]["x"]) == [1, 2, 4, 8, 16, 32, 64]
    copy_labels = charts[0]["data"][0]["text"]
    assert copy_labels[0] == "100 %"  # memcpy_dtod against itself
    assert "L2 flushed before every sample" in " ".join(c.value for c in at.caption)


def test_coalescing_block_size_comes_from_the_recording_and_narrows_the_view():
    at = open_page("pages/coalescing.py")
    assert at.select_slider(key="coalescing_block").options == ["128", "256", "512", "1024"]
    at.select_slider(key="coalescing_block").set_value(1024).run()
    table = at.dataframe[0].value
    assert set(table["block_size"]) == {1024}


@pytest.mark.parametrize("page,key,typed,message", [
    ("pages/coalescing.py", "coalescing_block_typed", "1025", "block size 1025 must be from 32 to 1024"),
    ("pages/coalescing.py", "coalescing_block_typed", "0", "block size 0 must be from 32 to 1024"),
    ("pages/reductions.py", "reduction_block_typed", "96", "needs a power of two"),
    ("pages/reductions.py", "reduction_block_typed", "many", "is not a whole number"),
    ("pages/occupancy.py", "occupancy_block_typed", "1025", "outside 1…1024"),
    ("pages/occupancy.py", "occupancy_block_typed", "0", "outside 1…1024"),
])
def test_bad_block_sizes_get_a_clear_message(page, key, typed, message):
    at = open_page(page)
    at.text_input(key=key).input(typed).run()
    assert not at.exception
    # Reasons are shown as plain text: the Markdown source has a backslash before each punctuation mark.
    assert any(message in re.sub(r"\\(.)", r"\1", e.value) for e in at.error), [e.value for e in at.error]


def test_reductions_show_kernel_and_end_to_end_views_with_errors():
    at = open_page("pages/reductions.py")
    kernel, end_to_end = figures(at)
    assert list(kernel["data"][0]["x"]) == ["atomicAdd per element (seed)", "shared-memory tree", "warp shuffle",
                                            "grid-stride + shuffle", "pycuda gpuarray.dot"]
    assert kernel["layout"]["yaxis"]["type"] == "log"
    assert len(end_to_end["data"][0]["y"]) == 3
    best = " ".join(m.value for m in at.markdown)
    assert "× gpuarray.dot" in best
    table = at.dataframe[0].value
    assert table["rel_error"].notna().all() and (table["rel_error"] < 1e-3).all()


def test_reductions_at_2_28_meet_the_bar_in_the_recording():
    at = open_page("pages/reductions.py")
    at.select_slider(key="reduction_size").set_value(1 << 28).run()
    table = at.dataframe[0].value.set_index("variant")
    assert table.loc["grid-stride + shuffle", "gbps"] >= 1.15 * table.loc["pycuda gpuarray.dot", "gbps"]


def test_occupancy_calculator_marks_the_current_point_and_limiter():
    at = open_page("pages/occupancy.py")
    at.slider(key="occupancy_registers").set_value(64).run()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Occupancy"] == "50 %" and metrics["Limited by"] == "registers"
    curve = figures(at)[0]
    current = next(t for t in curve["data"] if t["name"] == "current")
    assert values(current["x"]) == [256] and values(current["y"]) == [50.0]
    assert at.selectbox(key="occupancy_device").value == "NVIDIA H200"


def test_occupancy_sweep_shows_measured_throughput_beside_theory():
    at = open_page("pages/occupancy.py")
    at.select_slider(key="occupancy_spoiler").set_value(102400).run()
    sweep = figures(at)[-1]
    names = [t["name"] for t in sweep["data"]]
    assert "latency-bound: dependent loads: GB/s" in names and "memory-bound: copy: theoretical occupancy" in names
    chase = next(t for t in sweep["data"] if t["name"] == "latency-bound: dependent loads: GB/s")
    throughput = values(chase["y"])
    assert throughput[0] < throughput[-1] / 2  # 2 warps per SM at block 32 cannot hide load latency


def test_the_committed_streamlit_config_fetches_nothing_from_the_internet():
    import tomllib

    config = tomllib.loads((Path(__file__).resolve().parent.parent / ".streamlit" / "config.toml").read_text())
    assert config["browser"]["gatherUsageStats"] is False  # else every page load fetches a config online


def test_every_page_script_is_an_entry_of_the_one_table_of_pages():
    on_disk = {f"pages/{p.name}" for p in (Path(APP).parent / "pages").glob("*.py") if not p.name.startswith("_")}
    assert on_disk == {entry.file for entry in shared.PAGES}
    assert len({entry.url_path for entry in shared.PAGES}) == len(shared.PAGES)


@pytest.mark.parametrize("entry", shared.PAGES, ids=lambda entry: entry.url_path or "overview")
@pytest.mark.slow
def test_every_page_of_the_table_is_reachable_at_its_address(entry):
    """A PinPoint link (/?page=NAME) opens each page of the table through app.py's navigation: a page missing
    there could not be switched to, and the router would report another address."""
    at = AppTest.from_file(APP, default_timeout=60)
    if entry.url_path:
        at.query_params["page"] = entry.url_path
    at.run()
    assert not at.exception, at.exception
    assert at.session_state["_url_state"].page_path == entry.url_path
    assert "page" not in at.query_params and not at.warning.values  # no "not a page of PinPoint"


def test_streams_without_a_recording_says_so_instead_of_crashing(monkeypatch):
    import streamlit as st

    from gpu.service.backends import ReplayBackend
    from pages._ui import backends

    class NoStreams(ReplayBackend):
        def __init__(self):
            super().__init__()
            self.data = self.data[self.data["experiment"] != "streams"].reset_index(drop=True)
            self._recordings = {}

    monkeypatch.setattr(backends, "ReplayBackend", NoStreams)
    st.cache_resource.clear()
    try:
        at = open_page("pages/streams.py")
        assert any("no recorded streams runs in the bundled recordings" in e.value for e in at.error)
    finally:
        st.cache_resource.clear()
