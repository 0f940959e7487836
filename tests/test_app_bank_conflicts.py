"""The Bank conflicts page through AppTest, in replay: the bundled recording once one is bundled, until then a run of
the simulated board (tests/bank_conflicts_board.py: its rows say backend "simulated", never a measurement), in a
folder of its own through PINPOINT_REPLAY_DIR. The desk view (headline, both charts, table), the stage view (chart and
takeaway), and the view's settings in the address."""

import json
import re
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from gpu.core import paths
from gpu.experiments import bank_conflicts as bank
from tests.bank_conflicts_board import simulated_recording

APP = str(Path(__file__).resolve().parent.parent / "app.py")
PAGE = "pages/bank_conflicts.py"
BUNDLED = sorted(paths.asset("replay").glob(f"{bank.NAME}_*.parquet"))
# The simulated board's run: the default grid, on a small matrix and short reads (NumPy replays every read).
SIMULATED = {"reads_per_thread": 1024, "matrix_side": 1024, "profile": "interactive"}
TAKEAWAY = re.compile(r"4-byte words 32 apart take [\d.,]+× as long as neighbouring words \(32-way in the bank "
                      r"model\), [\d.,]+× in rows padded to 33 words; 8-byte words 32 apart [\d.,]+× \(16-way\), "
                      r"padded [\d.,]+×; the padded tile transposes 4-byte words [\d.,]+× as fast as the naive one "
                      r"\([\d,]+ vs [\d,]+ GB/s\); 8-byte words [\d.,]+× \([\d,]+ vs [\d,]+ GB/s\)\.")


@pytest.fixture
def clean_caches():
    st.cache_resource.clear()
    st.cache_data.clear()
    yield
    st.cache_resource.clear()
    st.cache_data.clear()


@pytest.fixture
def recording(monkeypatch, tmp_path, clean_caches):
    """Replay of the bundled recording where there is one, else of the simulated board's run (the cached backends
    cleared around it)."""
    monkeypatch.setenv("PINPOINT_BACKEND", "replay")
    if BUNDLED:
        monkeypatch.delenv("PINPOINT_REPLAY_DIR", raising=False)
    else:
        simulated_recording(tmp_path, SIMULATED, monkeypatch)
        monkeypatch.setenv("PINPOINT_REPLAY_DIR", str(tmp_path))


def open_page(**params):
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    at.switch_page(PAGE).run()
    assert not at.exception, at.exception
    return at


def figures(at) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def title(figure) -> str:
    return figure["layout"]["title"]["text"].split("<br>")[0]


def takeaway(at) -> str:
    """The stage's takeaway (shown on stage only), its no-break spaces read as spaces."""
    return " ".join(m.value.removeprefix("### ").replace("\u00a0", " ") for m in at.markdown if "apart take" in m.value)


def test_the_desk_shows_the_headline_the_strided_reads_the_transposes_and_every_point(recording):
    at = open_page()
    strided, transposes = figures(at)
    assert title(strided).startswith("Shared-memory reads: time against stride 1 · block 256, ")
    assert [t["name"] for t in strided["data"]] == ["4-byte words", "4-byte words, padded rows", "8-byte words",
                                                    "8-byte words, padded rows"]
    assert title(transposes).startswith("Transpose through a shared-memory tile · ")
    assert "Replay of a run recorded on" in strided["layout"]["title"]["text"]
    assert not takeaway(at)  # the takeaway is the stage's
    assert any(m.value.startswith("**Conflict-free shared-memory reads (stride 1), all SMs together: "
                                "4-byte words ") for m in at.markdown)
    table = at.dataframe[0].value
    assert len(table) == len(list(bank.parse_params({}).points())) and table["× conflict-free"].notna().all()
    assert "The bank model" in " ".join(c.value for c in at.caption)
    # reads per thread and the matrix side are offered from the recording's own, never a transpose's 4 tile reads
    assert at.session_state["bank_reads"] >= 1024 and at.session_state["bank_side"] >= 1024
    offered = [int(o.split(" ")[0].replace(",", "")) for s in at.select_slider if s.key in ("bank_reads", "bank_side")
               for o in s.options]
    assert all(value >= 1024 for value in offered), offered


def test_the_stage_shows_the_strided_reads_and_the_takeaway_only(recording):
    at = open_page(present="1")
    [strided] = figures(at)
    assert title(strided).startswith("Shared-memory reads")
    assert TAKEAWAY.fullmatch(takeaway(at)), takeaway(at)
    assert not at.dataframe and not any(m.value.startswith("**Conflict-free") for m in at.markdown)


def test_the_view_s_settings_come_back_from_the_address(recording):
    at = open_page(bank_words="8", bank_groups="strided")
    [strided] = figures(at)
    assert [t["name"] for t in strided["data"]] == ["8-byte words", "8-byte words, padded rows"]
    assert set(at.dataframe[0].value["variant"]) == {"8-byte words", "8-byte words, padded rows"}
    assert at.session_state["bank_words"] == [8] and at.session_state["bank_groups"] == ["strided"]
    staged = open_page(present="1", bank_words="8", bank_groups="strided")
    assert takeaway(staged).startswith("8-byte words 32 apart take ") and "transposes" not in takeaway(staged)


def test_without_a_recording_the_page_says_so_in_one_line(monkeypatch, tmp_path, clean_caches):
    monkeypatch.setenv("PINPOINT_BACKEND", "replay")
    monkeypatch.setenv("PINPOINT_REPLAY_DIR", str(tmp_path))  # no recording at all
    at = open_page()
    [info] = [i.value for i in at.info if "bank-conflicts recording" in i.value]
    assert info.startswith("No bank-conflicts recording is bundled here yet") and "\n" not in info
    assert not at.get("plotly_chart") and not at.error
