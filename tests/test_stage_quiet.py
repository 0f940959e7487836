"""The stage's charts are quiet and its states fit (AppTest, replay): no Plotly toolbar, tips or legend clicks on
stage; Transfers with Include allocation as one chart without the desk's headings; the Fleet stage's column labels
readable and its title free of a host name; a linked widget value logs no Streamlit warning."""

import json
import logging
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parent.parent / "app.py")


@pytest.fixture(autouse=True)
def replay_mode(monkeypatch):
    monkeypatch.setenv("PINPOINT_BACKEND", "replay")


def open_with(page: str, **params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def charts(at) -> list[tuple[dict, dict]]:
    """(figure, Plotly config) of every chart on the page."""
    return [(json.loads(c.proto.spec), json.loads(c.proto.config or "{}")) for c in at.get("plotly_chart")]


@pytest.mark.parametrize("page", ["pages/transfers.py", "pages/peers.py", "pages/roofline.py", "pages/fleet.py",
                                  "pages/talk.py", "pages/memory_modes.py"])
def test_stage_charts_have_no_toolbar_tips_or_legend_clicks(page):
    shown = charts(open_with(page, present="1"))
    assert shown
    for figure, config in shown:
        assert config.get("displayModeBar") is False and config.get("showTips") is False, config
        legend = figure["layout"].get("legend", {})
        assert legend.get("itemclick") is False and legend.get("itemdoubleclick") is False, legend


def test_desk_charts_keep_plotlys_toolbar():
    [(_, config)] = charts(open_with("pages/transfers.py"))[:1]
    assert "displayModeBar" not in config


def test_transfers_with_include_allocation_on_stage_is_one_chart_and_one_takeaway():
    at = open_with("pages/transfers.py", present="1", transfers_include_alloc="1")
    [(figure, _)] = charts(at)
    assert figure["layout"]["title"]["text"].startswith("Copy only vs including allocation<br>")
    names = {t.get("name") for t in figure["data"]}
    assert {"pinned", "pinned + allocation"} <= names  # both views in one chart: solid and dashed
    assert not at.subheader  # no desk heading
    markdown = [m.value for m in at.markdown]
    assert not [m for m in markdown if m.startswith("- ")]  # no desk bullets repeating the takeaway's ratio
    assert len([m for m in markdown if m.startswith("### ")]) == 1


def test_the_fleet_stage_labels_columns_at_16_px_dark_staggered_and_titles_no_host():
    at = open_with("pages/fleet.py", present="1")
    [(figure, _)] = charts(at)
    axis = figure["layout"]["xaxis"]
    assert axis["tickfont"]["size"] >= 14 and axis["tickfont"]["color"] == "#31333F"
    texts = axis["ticktext"]
    assert not texts[0].startswith("\u00a0") and texts[1].startswith("\u00a0<br>")  # neighbours on two rows
    assert " on vm" not in figure["layout"]["title"]["text"]


def test_a_linked_board_logs_no_streamlit_warning(monkeypatch):
    from streamlit.elements.lib import policies

    monkeypatch.setattr(policies, "_shown_default_value_warning", False)  # Streamlit says it once per process
    first = open_with("pages/fleet.py")
    board = first.selectbox(key="fleet_board").options[-1]
    said: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            said.append(record.getMessage())

    keep = Keep()
    logger = logging.getLogger("streamlit.elements.lib.policies")
    logger.addHandler(keep)
    try:
        at = open_with("pages/fleet.py", fleet_board=board)
    finally:
        logger.removeHandler(keep)
    assert at.selectbox(key="fleet_board").value == board
    assert not [s for s in said if "default value" in s], said


def test_every_memory_modes_tab_has_its_takeaway_on_stage_and_no_desk_sentences():
    at = open_with("pages/memory_modes.py", present="1")
    takeaways = [m.value for m in at.markdown if m.value.startswith("### ")]
    # managed, pools and batching (host-memory latency runs only while its tab is open)
    assert len(takeaways) == 3, takeaways
    assert any("per call ÷ pooled" in t for t in takeaways) and any("Each separate copy costs" in t for t in takeaways)
    assert not [m.value for m in at.markdown if m.value.startswith("- **")]  # the desk's bullets stay at the desk
