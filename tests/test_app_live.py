"""The live path of the pages, through a real worker process serving recorded numbers (no GPU here)."""

import json
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parent.parent / "app.py")


@pytest.fixture(autouse=True)
def live_mode(monkeypatch):
    monkeypatch.setenv("PINPOINT_BACKEND", "auto")
    monkeypatch.setenv("PINPOINT_WORKER_SERVICE", "tests.fake_service:RecordedService")
    st.cache_resource.clear()
    yield
    st.cache_resource.clear()


def transfers_page(page="pages/transfers.py"):
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert not at.exception, at.exception
    at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def test_banner_says_live_and_nothing_is_measured_until_asked():
    at = transfers_page()
    assert any("**Live**" in s.value and "NVIDIA H200" in s.value for s in at.success)
    assert not at.get("plotly_chart")
    assert any("press **Measure**" in i.value for i in at.info)
    assert at.radio(key="transfers_profile").value == "interactive"


@pytest.mark.slow
def test_measure_draws_the_result_and_keeps_it_across_reruns():
    at = transfers_page()
    at.text_input(key="transfers_custom_sizes").input("64KiB, 1MiB, 16MiB").run()
    at.button(key="transfers_measure").click().run()
    assert not at.exception, at.exception
    shown = [e.value for e in at.error] + [i.value for i in at.info]
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert len(charts) == 3, shown
    assert "Live NVIDIA H200" in charts[0]["layout"]["title"]["text"]
    assert len(at.dataframe[-1].value) == 3 * 4 * 2
    # the recorded points above their profile's noise target are named under the result
    noise = [c.value for c in at.caption if "noise target" in c.value]
    assert len(noise) == 1 and noise[0].startswith("3 points stopped above the 0.5 % noise target: 16 MiB mapped D2H "
                                                   "(cv 1.0 %)"), noise
    assert "18 pageable, small or host-timed points are above 0.5 % too" in noise[0]
    at.pills(key="transfers_directions").set_value(["h2d"]).run()  # a widget change reruns, no new job
    assert len(at.get("plotly_chart")) == 3 and len(at.dataframe[-1].value) == 3 * 4 * 2


def test_limits_come_from_the_worker_and_bad_sizes_never_reach_it():
    at = transfers_page()
    at.text_input(key="transfers_custom_sizes").input("4096GiB").run()
    warning = " ".join(w.value.replace("\\", "") for w in at.warning)
    assert "Exact sizes 4096GiB not used" in warning and "does not fit in device memory" in warning
    assert "139 GiB free" in warning and "Showing the slider's sizes instead" in warning
    assert not at.error  # the slider's sizes stay measurable; the typed ones never reach the worker


@pytest.mark.parametrize("page,key,chart_count", [
    ("pages/coalescing.py", "coalescing", 5), ("pages/reductions.py", "reduction", 2),
    ("pages/occupancy.py", "occupancy_sweep", 4),
])
@pytest.mark.slow
def test_kernel_pages_measure_on_request(page, key, chart_count):
    at = transfers_page(page)
    before = len(at.get("plotly_chart"))
    if key == "coalescing":  # choose what the recording holds: live sliders offer every size
        at.select_slider(key="coalescing_elements").set_value(1 << 26).run()
    if key == "reduction":
        at.select_slider(key="reduction_size").set_value(1 << 24).run()
    if key == "occupancy_sweep":
        at.select_slider(key="occupancy_spoiler").set_value(0).run()
    at.button(key=f"{key}_measure").click().run()
    assert not at.exception, at.exception
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert len(charts) == chart_count, [e.value for e in at.error]
    assert before < len(charts)
    assert any("Live NVIDIA H200" in c["layout"]["title"]["text"] for c in charts)


@pytest.mark.slow
def test_points_measured_before_are_reused_at_once_and_say_when():
    at = transfers_page()
    at.text_input(key="transfers_custom_sizes").input("64KiB, 1MiB, 16MiB").run()
    at.button(key="transfers_measure").click().run()
    assert not any("Reused" in c.value for c in at.caption)
    at.text_input(key="transfers_custom_sizes").input("64KiB, 1MiB").run()  # a subset: every point is known
    at.button(key="transfers_measure").click().run()
    assert not at.exception, at.exception
    reused = [c.value for c in at.caption if c.value.startswith("Reused: all 16 points")]
    assert reused and "UTC, profile interactive" in reused[0]
    assert len(at.dataframe[-1].value) == 2 * 4 * 2
    at.sidebar.toggle(key="reuse_points").set_value(False).run()
    at.button(key="transfers_measure").click().run()
    assert not any(c.value.startswith("Reused") for c in at.caption)  # measured anew
    assert len(at.dataframe[-1].value) == 2 * 4 * 2
