"""The Fleet page through AppTest: the bundled boards in replay, a stored simulated fleet with its slowed board
named, the link state, and the stage view."""

import json

import pytest
import streamlit as st

from tests import fleet_page_helper as helper
from tests import simulated_fleet
from tests.test_url_state import open_with

SLOW_TAIL = simulated_fleet.board_uuid(helper.SLOW_BOARD)[-8:]


@pytest.fixture(autouse=True)
def fresh_store(monkeypatch, tmp_path):
    monkeypatch.setenv("PINPOINT_BACKEND", "replay")
    monkeypatch.setenv("PINPOINT_DB_URL", f"sqlite:///{tmp_path}/runs.sqlite")
    st.cache_resource.clear()
    yield f"sqlite:///{tmp_path}/runs.sqlite"
    st.cache_resource.clear()


def text(at) -> str:
    return "\n".join([m.value for m in at.markdown] + [c.value for c in at.caption])


def heatmap(at) -> dict:
    [spec] = [json.loads(c.proto.spec) for c in at.get("plotly_chart") if "deviation from the median"
              in json.loads(c.proto.spec)["layout"]["title"]["text"]]
    return spec


def test_replay_shows_the_bundled_boards_with_the_h200_groups():
    at = open_with("pages/fleet.py")
    assert at.selectbox(key="fleet_choice").value == "bundled boards"
    shown = text(at)
    assert "The bundled boards** are recorded real runs" in shown
    assert r"strided · stride 64 on H200 boards\: 4 at 335\.9 GB/s, 4 at 377\.9 GB/s" in shown
    figure = heatmap(at)
    rows = figure["data"][0]["y"]
    assert "vm · H200 · cedf2970" in rows and any("H100 80GB HBM3" in r for r in rows)
    assert len(figure["data"][0]["x"]) == 23  # every figure of the health suite that the bundled runs hold
    # the median board for Compare is a run Compare lists (assets/replay or assets/runs), else the page says why
    # (or names the chosen board's run that Compare cannot open: the noise runs are not in Compare's catalog)
    assert "never a made\\-up median run" in shown or "there is no median board" in shown or \
        "is not among them" in shown


def test_a_stored_fleet_names_its_slowed_board_and_opens_compare(fresh_store):
    helper.fill_store(fresh_store, boards=8, runs_per_board=3)
    at = open_with("pages/fleet.py")
    assert at.selectbox(key="fleet_choice").value == "sim-fleet"
    shown = text(at)
    assert f"GPU {SLOW_TAIL} on node\\-0\\:" in shown
    assert "Its run records PCIe Gen4 ×8, the others PCIe Gen5 ×16" in shown
    assert at.selectbox(key="fleet_board").value.endswith(SLOW_TAIL)  # the outlier is the board shown first
    drift = [json.loads(c.proto.spec) for c in at.get("plotly_chart")
             if json.loads(c.proto.spec)["layout"]["title"]["text"].startswith("Drift of")]
    assert drift and len(drift[0]["data"]) == len(heatmap(at)["data"][0]["x"])  # a line per figure
    [link] = at.get("page_link")
    assert link.proto.page.endswith("compare") or "compare" in link.proto.page
    assert "compare_candidates=b003r002" in link.proto.query_string
    assert "compare_baseline=b00" in link.proto.query_string


def test_the_link_restores_the_fleet_and_names_a_bad_value(fresh_store):
    helper.fill_store(fresh_store, boards=4, runs_per_board=1)
    at = open_with("pages/fleet.py", fleet_choice="bundled boards")
    assert at.selectbox(key="fleet_choice").value == "bundled boards"
    assert at.query_params["fleet_choice"] == "bundled boards"
    at = open_with("pages/fleet.py", fleet_choice="no-such-fleet")
    assert at.selectbox(key="fleet_choice").value == "sim-fleet"
    assert any("no\\-such\\-fleet" in w.value and "is not one of the choices" in w.value for w in at.warning)


def test_the_stage_shows_the_heatmap_and_names_the_slowed_board(fresh_store):
    helper.fill_store(fresh_store, boards=8, runs_per_board=1)
    at = open_with("pages/fleet.py", present="1")
    assert len(at.get("plotly_chart")) == 1 and not at.dataframe
    [takeaway] = [m.value for m in at.markdown if m.value.startswith("### ")]
    assert f"GPU {SLOW_TAIL} on node\\-0" in takeaway


def test_a_fleet_whose_suite_is_gone_is_refused_in_one_line(fresh_store):
    from gpu.results.store import RunStore

    [(_, _, frame)] = [run for run in helper.board_runs(1) if run[2]["experiment"].iloc[0] == "reduction"]
    RunStore(fresh_store).save(frame, "fleet", fleet=("lost-suite", "/no/such/suite.toml"))
    at = open_with("pages/fleet.py", fleet_choice="lost-suite")
    assert not at.get("plotly_chart")
    [error] = [e.value for e in at.error]
    assert error.count("\n- ") == 1 and "/no/such/suite\\.toml\\: cannot read the suite" in error  # one reason
