"""Causes named on the pages (AppTest, replay): Compare's verdicts and the line under its headline, the Fleet page's
outlier words, and a page's stage view saying in words how many points were not clean and why. The recordings are
real; only their ``conditions`` column is set here (the runs store carries it once the witness records it), and a
hostile one is shown as plain text."""

import json

import pytest
import streamlit as st

from gpu.present.fleet import boards as fleet_results
from gpu.results.exchange import catalog as catalog_module
from gpu.results.persistence import legacy
from tests import fleet_page_helper as helper
from tests.test_url_state import open_with

THROTTLE = "SW power cap in 38 % of samples"
HOSTILE = "shared with pid 1039 (**python3** <b>x</b>) for 100 % of samples"


@pytest.fixture(autouse=True)
def replay(monkeypatch, tmp_path):
    monkeypatch.setenv("PINPOINT_BACKEND", "replay")
    monkeypatch.setenv("PINPOINT_DB_URL", f"sqlite:///{tmp_path}/runs.sqlite")
    st.cache_resource.clear()
    st.cache_data.clear()
    yield
    st.cache_resource.clear()
    st.cache_data.clear()


def words(at) -> str:
    return "\n".join([m.value for m in at.markdown] + [c.value for c in at.caption])


@pytest.mark.slow
def test_compare_names_the_candidates_cause_and_never_calls_not_observed_clean(monkeypatch):
    loaded = catalog_module.Catalog.load

    def load(self, run_id):  # the default candidate, the bundled rerun (assets/runs/), was not clean
        frame = loaded(self, run_id)
        return frame.assign(conditions=HOSTILE) if self.files.get(run_id, "").startswith("runs/") else frame

    monkeypatch.setattr(catalog_module.Catalog, "load", load)
    at = open_with("pages/compare.py")
    said = words(at)
    assert "not clean \\(candidate\\: shared with pid 1039 \\(\\*\\*python3\\*\\* \\<b\\>x\\</b\\>\\)" in said
    assert "Conditions\\: candidate\\: shared with pid 1039" in said and "baseline\\: not observed" in said
    assert "Is this normal? candidate" in said.replace("\\", "")
    [points] = [d for d in at.dataframe if "conditions" in d.value.columns]
    assert set(points.value["conditions"]) == {f"candidate: {HOSTILE}; baseline: not observed"}


@pytest.mark.slow
def test_the_fleet_names_the_cause_of_its_slowed_board_or_says_none_was_observed(monkeypatch, tmp_path):
    helper.fill_store(f"sqlite:///{tmp_path}/runs.sqlite", boards=4)
    unwatched = words(open_with("pages/fleet.py"))
    assert "slower\\); conditions not observed\\." in unwatched and "no cause observed" not in unwatched
    st.cache_resource.clear()
    points = fleet_results.points
    monkeypatch.setattr(fleet_results, "points", lambda *a, **k: points(*a, **k).assign(conditions=THROTTLE))
    at = open_with("pages/fleet.py")
    assert "slower\\); SW power cap in 38 % of its samples\\." in words(at)
    heatmap = next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
                   if "deviation from the median" in json.loads(c.proto.spec)["layout"]["title"]["text"])
    assert any(f"conditions: {THROTTLE}" in h for row in heatmap["data"][0]["customdata"] for h in row if h)


@pytest.mark.slow
def test_the_stage_says_how_many_points_were_not_clean_and_why(monkeypatch):
    read = legacy.read_results  # how the replay reads its recordings (old ones by axis name)

    def throttled(path, *args, **kwargs):
        frame = read(path, *args, **kwargs)
        return frame.assign(conditions=[THROTTLE if i % 2 else "clean" for i in range(len(frame))])

    monkeypatch.setattr(legacy, "read_results", throttled)
    at = open_with("pages/transfers.py", present="1")
    line = [m.value.replace("\xa0", " ") for m in at.markdown if "points not clean" in m.value]
    assert len(line) == 1 and "points not clean\\: SW power cap in 38 % of samples" in line[0]
    chart = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert any(trace.get("name") == "not clean (hover: its conditions)" for trace in chart["data"])
    desk = open_with("pages/transfers.py")
    assert any("Is this normal?" in c.value for c in desk.caption)
