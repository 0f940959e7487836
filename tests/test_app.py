"""Every page through Streamlit's AppTest, in replay mode (no GPU here)."""

import base64
import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

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


@pytest.mark.parametrize("page", [None, "pages/transfers.py"])
def test_every_page_says_it_replays_a_recorded_run(page):
    at = open_page(page)
    text = banner(at)
    assert "Replay" in text and "not measured now" in text and "NVIDIA H200 (2026-11-21)" in text


def test_overview_lists_the_recorded_runs():
    at = open_page()
    table = at.dataframe[0].value
    assert list(table["device"]) == ["NVIDIA H200"] and table["points"].iloc[0] == 304
    assert at.sidebar.toggle[0].value is True and at.sidebar.toggle[0].disabled  # no live GPU to switch to


def test_transfers_draws_bandwidth_speedup_and_model_from_the_recording():
    at = open_page("pages/transfers.py")
    bandwidth, speedup, model = figures(at)
    assert {"pageable (NumPy)", "pinned", "pinned write-combined", "mapped zero-copy",
            "PCIe theoretical (63.0 GB/s)"} <= set(trace_names(bandwidth))
    assert "Replay of a run recorded on NVIDIA H200" in bandwidth["layout"]["title"]["text"]
    assert len(values(bandwidth["data"][0]["x"])) == 19  # 4 KiB … 1 GiB
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
    ("0", "size 0 B is too small"),
    ("1000", "size 1000 B is not a multiple of 16 B"),
    ("lots", "'lots' is not a size"),
])
def test_bad_sizes_get_a_clear_message_and_no_chart(typed, message):
    at = open_page("pages/transfers.py")
    at.text_input(key="transfers_custom_sizes").input(typed).run()
    assert not at.exception
    assert any(message in e.value for e in at.error)
    assert not at.get("plotly_chart")


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
