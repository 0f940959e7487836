"""The Fleet page through AppTest: the bundled boards in replay, a stored simulated fleet with its slowed board
named, the link state, and the stage view."""

import json
from collections import Counter

import pytest
import streamlit as st

from gpu.present.charts import fleet as fleet_charts
from gpu.present.fleet import boards as fleet_results
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


@pytest.mark.slow
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
    # runs without a UUID are counted apart from boards, named as such, after the boards of their model
    assert "7 boards with a GPU UUID and 23 runs without one" in shown
    h200 = [r for r in rows if " H200 " in r]
    assert all("no UUID · run " in r for r in h200[5:]) and not any("no UUID" in r for r in h200[:5])
    # the floor's size is written where it is used
    assert "here 3.5 % (13 figures), 54.5 % (8 figures) and 16 % (2 figures)" in shown
    # boards of a group are judged against their group: the two stride-64 groups name no outlier
    assert "Every board sits within one run-to-run floor" in shown
    # the colour scale ends at the largest deviation (at least one floor), not at a fixed ±5
    trace = figure["data"][0]
    largest = max(abs(float(v)) for row in trace["text"] for v in row if v not in ("", "·"))
    assert trace["zmax"] == -trace["zmin"] and 1.0 <= trace["zmax"] <= max(1.0, largest + 0.2)
    # the board shown first is one whose drift can be drawn, and it opens in Compare
    assert any(json.loads(c.proto.spec)["layout"]["title"]["text"].startswith("Drift of")
               for c in at.get("plotly_chart"))
    assert at.get("page_link")


@pytest.mark.slow
def test_what_the_page_says_of_a_whole_fleet_is_worked_out_once_for_every_session(monkeypatch):
    calls = Counter()

    def counted(module, name):
        real = getattr(module, name)

        def spy(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)
        monkeypatch.setattr(module, name, spy)

    for name in ("outlier_sentences", "group_sentences", "provenance_differences", "drift_summary", "outliers"):
        counted(fleet_results, name)
    counted(fleet_charts, "heatmap_figure")
    first = open_with("pages/fleet.py")
    worked_out = dict(calls)
    assert len(worked_out) == 6
    second = open_with("pages/fleet.py")  # another visitor's session: it shows the same, working none of it out
    assert calls == worked_out
    assert text(second) == text(first) and heatmap(second) == heatmap(first)


@pytest.mark.slow
def test_the_compare_link_of_a_board_without_a_uuid_opens_runs_that_share_points():
    """Each fleet link opens a comparison with points: the H100 run 160fed5b3810 measured with batched timers, and
    its median board must be a run measured with the same timer."""
    at = open_with("pages/fleet.py")
    [row] = [r for r in at.selectbox(key="fleet_board").options if "160fed5b3810" in r]
    at.selectbox(key="fleet_board").set_value(row).run()
    [link] = at.get("page_link")
    params = dict(pair.split("=", 1) for pair in link.proto.query_string.split("&"))
    assert params["compare_candidates"] == "160fed5b3810"
    compared = open_with("pages/compare.py", **params)
    assert not compared.exception
    shown = "\n".join(e.value for e in [*compared.info, *compared.warning, *compared.error, *compared.markdown])
    assert "share no points" not in shown


@pytest.mark.slow
def test_every_bundled_board_and_experiment_opens_in_compare_or_says_why():
    from gpu.experiments import suites
    from gpu.present.fleet import boards as fleet_results
    from gpu.results.analysis import compare
    from gpu.results.exchange.catalog import ASSETS, Catalog, read_bundled
    from gpu.results.persistence.store import RunStore

    suite = suites.load("health")
    frames, _, _ = read_bundled((ASSETS / "fleet", ASSETS / "replay", ASSETS / "runs", ASSETS / "noise"))
    fleet = fleet_results.build(fleet_results.points(frames.values(), suite), suite)
    listed = set(Catalog(RunStore("sqlite://")).runs(with_reference=True)["run_id"])
    linked, alone = 0, []
    for board in fleet.boards["board"]:
        cells = fleet.cells[fleet.cells["board"] == board]
        for experiment, mine in cells.groupby("experiment"):
            nearest = fleet_results.median_board(fleet, board, experiment, listed)
            if nearest is None:
                model = mine["model"].iloc[0]
                peers = fleet.cells[(fleet.cells["model"] == model) & fleet.cells["figure"].isin(mine["figure"])]
                assert set(peers["board"]) == {board}  # no other board measured these points
                alone.append((board, experiment))
                continue
            baseline, candidate = frames[nearest[0]], frames[mine["run_id"].iloc[0]]
            assert mine["run_id"].iloc[0] in listed
            assert compare.disjoint_reason(baseline[baseline["experiment"] == experiment],
                                           candidate[candidate["experiment"] == experiment]) is None
            linked += 1
    assert linked >= 40 and len(alone) <= 2


@pytest.mark.slow
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


@pytest.mark.slow
def test_the_link_restores_the_fleet_and_names_a_bad_value(fresh_store):
    helper.fill_store(fresh_store, boards=4, runs_per_board=1)
    at = open_with("pages/fleet.py", fleet_choice="bundled boards")
    assert at.selectbox(key="fleet_choice").value == "bundled boards"
    assert at.query_params["fleet_choice"] == "bundled boards"
    at = open_with("pages/fleet.py", fleet_choice="no-such-fleet")
    assert at.selectbox(key="fleet_choice").value == "sim-fleet"
    assert any("no\\-such\\-fleet" in w.value and "is not one of the choices" in w.value for w in at.warning)


@pytest.mark.slow
def test_stored_runs_without_a_fleet_id_are_a_fleet_of_their_newest_runs(fresh_store):
    from gpu.results.persistence.store import RunStore

    store = RunStore(fresh_store)
    for number, _, frame in helper.board_runs(4, runs_per_board=2):
        store.save(frame, "import", label=f"node-{number}")  # as `gpu.bench … --label`: no fleet id
    at = open_with("pages/fleet.py")
    assert at.selectbox(key="fleet_choice").value == "stored runs: every board's newest"
    rows = heatmap(at)["data"][0]["y"]
    assert len(rows) == 4
    shown = text(at)
    assert f"GPU {SLOW_TAIL}" in shown  # the newest runs: the slowed board is judged on them
    assert "4 boards with a GPU UUID" in shown


@pytest.mark.slow
def test_the_stage_shows_the_heatmap_and_names_the_slowed_board(fresh_store):
    helper.fill_store(fresh_store, boards=8, runs_per_board=1)
    at = open_with("pages/fleet.py", present="1")
    assert len(at.get("plotly_chart")) == 1 and not at.dataframe
    [takeaway] = [m.value for m in at.markdown if m.value.startswith("### ")]
    assert f"GPU {SLOW_TAIL} on node\\-0" in takeaway
    [spec] = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert spec["layout"]["yaxis"]["tickfont"]["size"] >= 20  # board names readable from the back of the room
    assert spec["layout"]["xaxis"]["tickangle"] == 0  # column labels wrapped, not rotated into 300 px
    assert spec["layout"]["height"] <= 600  # with the title and the takeaway, 1920×960


def test_the_stage_shows_the_bundled_boards_furthest_from_their_medians_at_20_px():
    at = open_with("pages/fleet.py", present="1")
    [spec] = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    rows = spec["data"][0]["y"]
    assert 8 <= len(rows) < 30 and "of 30)" in spec["layout"]["title"]["text"]  # the rows that fit, named
    assert spec["layout"]["yaxis"]["tickfont"]["size"] >= 20 and spec["layout"]["xaxis"]["tickangle"] == 0
    [takeaway] = [m.value for m in at.markdown if m.value.startswith("### ")]
    assert "7 boards with a UUID and 23 runs without one" in takeaway and "3\\.5\u00a0% to 54\\.5\u00a0%" in takeaway


@pytest.mark.slow
def test_a_fleet_whose_runs_record_no_parameters_names_each_run_in_one_line(fresh_store):
    from gpu.results.persistence.store import RunStore

    [(_, _, frame)] = [run for run in helper.board_runs(1) if run[2]["experiment"].iloc[0] == "reduction"]
    RunStore(fresh_store).save(frame, "fleet", fleet=("lost-suite", "/no/such/suite.toml"))
    at = open_with("pages/fleet.py", fleet_choice="lost-suite")
    assert not at.get("plotly_chart") and not at.exception and not at.error
    [warning] = [w.value.replace("\\", "") for w in at.warning]  # shown as plain text: Markdown escaped
    assert warning.count("\n") == 0 and "run b000r000reduct (reduction): parameters not recorded" in warning
    assert any("hold none of the figures" in i.value for i in at.info)


QUICK_SUITE = """title = "Quick copies"
[[run]]
experiment = "coalescing"
[run.params]
elements = 67108864
block_sizes = [256]
groups = ["copy", "strided"]
strides = [64]
"""


@pytest.fixture(params=["sqlite", "postgresql"])
def page_store(request, monkeypatch, fresh_store):
    """The page's store on SQLite and on PostgreSQL (a fresh database each)."""
    if request.param == "sqlite":
        return fresh_store
    from tests.conftest import new_postgres_database

    url = new_postgres_database(request.getfixturevalue("postgres_url"))
    monkeypatch.setenv("PINPOINT_DB_URL", url)
    return url


@pytest.mark.parametrize("named", ["/dev/zero", "/etc/passwd", "../../etc/passwd.toml"])
@pytest.mark.slow
def test_a_stored_fleet_never_makes_the_page_read_a_file_its_data_names(page_store, monkeypatch, named):
    import builtins
    import io
    import pathlib

    from gpu.results.persistence.store import RunStore

    opened = []
    real_open, real_read_text = builtins.open, pathlib.Path.read_text

    def watched_open(file, *args, **kwargs):
        if isinstance(file, str | pathlib.PurePath) and str(file).endswith(named.rsplit("/", 1)[-1]):
            opened.append(str(file))
            raise PermissionError(f"the test forbids reading {file}")
        return real_open(file, *args, **kwargs)

    def watched_read_text(self, *args, **kwargs):
        watched_open(self)
        return real_read_text(self, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", watched_open)
    monkeypatch.setattr(io, "open", watched_open)
    monkeypatch.setattr(pathlib.Path, "read_text", watched_read_text)
    [(_, _, frame)] = [run for run in helper.board_runs(1) if run[2]["experiment"].iloc[0] == "reduction"]
    RunStore(page_store).save(frame, "fleet", fleet=("hostile", named))  # a run that records no parameters
    at = open_with("pages/fleet.py", fleet_choice="hostile")
    assert not at.exception and not at.get("plotly_chart") and opened == [] and not at.error
    [warning] = [w.value.replace("\\", "") for w in at.warning]  # shown as plain text: Markdown escaped
    assert "b000r000reduct" in warning and "parameters not recorded (stored before version 7)" in warning


@pytest.mark.slow
def test_a_fleet_of_a_suite_file_of_ones_own_is_shown_from_the_suite_the_store_keeps(page_store, tmp_path):
    from gpu.experiments import suites
    from gpu.results.persistence.store import RunStore, params_by_run

    path = tmp_path / "quick.toml"
    path.write_text(QUICK_SUITE)
    suite = suites.load(str(path))
    store = RunStore(page_store)
    for _, _, frame in helper.board_runs(4):
        if frame["experiment"].iloc[0] == "coalescing":
            store.save(frame, "fleet", fleet=("quick-fleet", suite.name), suite_text=suite.text,
                       params=params_by_run(frame, suite.runs[0].checked()), gpus="one")
    path.unlink()  # the page reads the store, not the file
    at = open_with("pages/fleet.py", fleet_choice="quick-fleet")
    assert not at.exception and not at.error
    figure = heatmap(at)
    assert len(figure["data"][0]["y"]) == 4 and len(figure["data"][0]["x"]) == len(suite.runs[0].points())
    assert "the quick suite" in text(at)  # its name: the suite's text is not parsed on a view
    # a fleet keeps one suite: another text under its id is refused, nothing written
    other = QUICK_SUITE.replace("[64]", "[32]")
    [(_, _, frame)] = [run for run in helper.board_runs(5)[-5:] if run[2]["experiment"].iloc[0] == "coalescing"]
    with pytest.raises(Exception, match="measured with another suite"):
        store.save(frame, "fleet", fleet=("quick-fleet", "quick"), suite_text=other)
    assert store.fleet_suite("quick-fleet") == ("quick", QUICK_SUITE)


@pytest.mark.slow
def test_a_stored_fleet_is_shown_from_its_runs_parameters_without_parsing_a_suite(page_store, monkeypatch):
    """The same cells as its suite gives, with the fleet's suite never parsed (only the built-in health suite, which
    the page reads once for the bundled boards' figures); a run whose parameters cannot be read is named in one line
    and the rest of the fleet is shown."""
    from gpu.experiments import suites
    from gpu.results.persistence.store import RUNS, RunStore

    store = helper.fill_store(page_store, boards=4, runs_per_board=2)
    suite = suites.load("health")
    ids = list(store.runs(fleet_id="sim-fleet")["run_id"])
    expected = fleet_results.build(fleet_results.stored_points(store, ids, suite), suite)
    health = str(suites.resolve("health"))
    real_parse, parsed = suites.parse, []

    def watched_parse(text, where="<suite>", name="suite"):
        parsed.append(where)
        if where != health:
            raise AssertionError(f"the Fleet view parsed {where}")
        return real_parse(text, where, name)

    def no_suite_text(*_args):
        raise AssertionError("the Fleet view read a fleet's suite text")

    monkeypatch.setattr(suites, "parse", watched_parse)
    monkeypatch.setattr(RunStore, "fleet_suite", no_suite_text)
    at = open_with("pages/fleet.py", fleet_choice="sim-fleet")
    assert not at.exception and not at.error and not at.warning
    assert set(parsed) <= {health}
    trace = heatmap(at)["data"][0]
    want = json.loads(fleet_charts.heatmap_figure(expected, "expected").to_json())["data"][0]
    assert trace["y"] == want["y"] and trace["x"] == want["x"] and trace["text"] == want["text"]
    assert len(trace["x"]) == len(expected.figures) >= 10 and len(trace["y"]) == 4
    with store.engine.begin() as connection:  # one run's parameters damaged: named, the rest still shown
        connection.execute(RUNS.update().where(RUNS.c.run_id == "b002r001reduct").values(params='{"sizes": "x"}'))
    st.cache_resource.clear()
    at = open_with("pages/fleet.py", fleet_choice="sim-fleet")
    assert not at.exception and not at.error
    [warning] = [w.value.replace("\\", "") for w in at.warning]  # shown as plain text: Markdown escaped
    assert "b002r001reduct" in warning and "cannot be read" in warning and "Traceback" not in warning
    assert heatmap(at)["data"][0]["y"] == want["y"]  # every board still shown


@pytest.mark.slow
def test_one_ordinary_stored_run_leaves_the_bundled_boards_shown_and_says_why(monkeypatch, store_url):
    """A user's own import (no fleet id) in the store: the page still opens on the bundled boards, not on a fleet of
    one run that holds none of the suite's figures, and says in one sentence why."""
    from gpu.core import schema
    from gpu.results.exchange.catalog import ASSETS
    from gpu.results.persistence.store import RunStore

    monkeypatch.setenv("PINPOINT_DB_URL", store_url)
    run = schema.read_results(ASSETS / "runs" / "transfers_nvidia-h200_2026-11-22.parquet").assign(run_id="myown01")
    RunStore(store_url).save(run, "import", label="my own transfers run")
    at = open_with("pages/fleet.py")
    assert at.selectbox(key="fleet_choice").value == "bundled boards"
    assert "stored runs: every board's newest" in at.selectbox(key="fleet_choice").options
    assert len(heatmap(at)["data"][0]["y"]) > 1
    why = [c.value for c in at.caption if c.value.startswith("The runs store holds 1 run but no fleet")]
    assert len(why) == 1 and "boards bundled with PinPoint" in why[0], [c.value for c in at.caption]
    # chosen by hand, the stored run is judged and what is missing said in one plain line
    at.selectbox(key="fleet_choice").set_value("stored runs: every board's newest").run()
    assert not at.exception, at.exception
    assert any(i.value.startswith("The stored runs hold none of the health suite's figures") for i in at.info) \
        or at.get("plotly_chart")
