"""The Fleet page's results layer (gpu/present/fleet/boards.py): deviations in floors, outlier sentences with the
provenance that differs, groups, drift, the median board, and the bundled fleet."""

import math

import pandas as pd
import pytest

from gpu.core.boards import Board
from gpu.experiments import suites
from gpu.present.charts import fleet as fleet_charts
from gpu.present.fleet import boards as fleet_results
from gpu.results.analysis import compare
from gpu.results.exchange.catalog import ASSETS, read_bundled
from gpu.results.persistence.store import RUNS, RunStore
from tests import fleet_page_helper as helper
from tests import pair_frames, simulated_fleet


@pytest.fixture(scope="module")
def suite():
    return suites.load("health")


@pytest.fixture(scope="module")
def sim(suite):
    runs = helper.board_runs(8, runs_per_board=3)
    newest = [frame for number, _, frame in runs if number == 2]
    earlier = [frame for number, _, frame in runs if number < 2]
    return fleet_results.build(fleet_results.points(newest, suite), suite, fleet_results.points(earlier, suite))


@pytest.mark.slow
def test_deviation_is_the_ratio_to_the_model_median_in_floors(sim):
    cells = sim.cells
    slow = cells[cells["board"] == Board(simulated_fleet.board_uuid(helper.SLOW_BOARD))]
    healthy = cells[cells["board"] == Board(simulated_fleet.board_uuid(0))]
    assert len(sim.boards) == 8 and set(sim.boards["host"]) == {"node-0"}
    for row in slow.itertuples():
        assert row.value == pytest.approx(healthy.set_index("figure").loc[row.figure, "value"] / helper.SLOWDOWN)
        assert row.ratio == pytest.approx(1 / helper.SLOWDOWN)
        floor = compare.floor(row.kind)
        assert row.deviation == pytest.approx((1 / helper.SLOWDOWN - 1) / floor)
        assert (row.deviation < -1) == (floor < 1 - 1 / helper.SLOWDOWN)  # beyond its floor where that is narrower
    assert (healthy["deviation"] == 0).all()  # seven identical boards: the median is theirs


@pytest.mark.slow
def test_a_lone_board_of_its_model_is_shown_but_not_judged(suite):
    frames = [simulated_fleet.as_board(helper.suite_recordings()["reduction"], i) for i in range(3)]
    frames[2] = frames[2].assign(device_name="NVIDIA H100 80GB HBM3")
    fleet = fleet_results.build(fleet_results.points(frames, suite), suite)
    lone = fleet.cells[fleet.cells["model"] == "H100 80GB HBM3"]
    assert len(lone) == 1 and math.isnan(lone["deviation"].iloc[0])
    assert fleet_results.outliers(fleet).empty


def test_outlier_sentence_names_the_board_the_figure_and_the_pcie_link(sim):
    sentences = fleet_results.outlier_sentences(sim)
    assert len(sentences) == 1  # one board is off, named once
    sentence = sentences[0]
    tail = simulated_fleet.board_uuid(helper.SLOW_BOARD)[-8:]
    assert sentence.startswith(f"GPU {tail} on node-0: ")
    assert "0.77× the H200 median of" in sentence and "GB/s" in sentence
    assert "Its run records PCIe Gen4 ×8, the others PCIe Gen5 ×16." in sentence
    assert "more of its figures are beyond 1 floor" in sentence


def test_outlier_sentence_says_when_provenance_is_the_same(suite):
    runs = helper.board_runs(5, downtrained=False)
    fleet = fleet_results.build(fleet_results.points([f for _, _, f in runs], suite), suite)
    sentence = fleet_results.outlier_sentences(fleet)[0]
    assert "same driver, PCIe link and clocks as the others" in sentence
    table = fleet_results.provenance_differences(fleet)
    assert (table["differs"] == "").all()


def test_provenance_differences_flag_the_downtrained_board(sim):
    table = fleet_results.provenance_differences(sim).set_index("board")
    slow_row = sim.boards.set_index("board").loc[Board(simulated_fleet.board_uuid(helper.SLOW_BOARD)), "row"]
    assert table.loc[slow_row, "PCIe"] == "Gen4 ×8" and table.loc[slow_row, "differs"] == "PCIe"
    assert (table.drop(index=slow_row)["differs"] == "").all()


def test_groups_split_at_the_widest_gap_with_two_boards_a_side(suite):
    frame = helper.suite_recordings()["coalescing"]
    slowdowns = [1.0, 1.0, 1.01, 1.12, 1.125, 1.13]  # three boards ~12 % slower on every figure
    frames = [simulated_fleet.as_board(frame, i, s) for i, s in enumerate(slowdowns)]
    fleet = fleet_results.build(fleet_results.points(frames, suite), suite)
    found = fleet_results.groups(fleet)
    assert len(found) == len(fleet.figures)  # every coalescing figure splits 3 / 3
    first = found.iloc[0]
    assert len(first["low_boards"]) == 3 and len(first["high_boards"]) == 3
    assert first["gap"] == pytest.approx(1.125 / 1.0 - 1)  # the groups' medians: 1/1.0 against 1/1.125
    assert "on H200 boards: 3 at" in fleet_results.group_sentences(fleet)[0]
    # one slow board is an outlier, not a group (a group needs two boards a side)
    frames = [simulated_fleet.as_board(frame, i, s) for i, s in enumerate([1.0, 1.0, 1.0, 1.0, 1.3])]
    assert fleet_results.groups(fleet_results.build(fleet_results.points(frames, suite), suite)).empty


def test_drift_of_a_board_over_its_runs(sim):
    slow = Board(simulated_fleet.board_uuid(helper.SLOW_BOARD))
    table = fleet_results.drift(sim, slow)
    assert table["run_id"].nunique() == 3 * 5  # three runs of each of the suite's five experiments
    newest_run = table["run_id"].str[4:8] == "r002"  # run number 2 of each experiment (b003r002…)
    newest, older = table[newest_run], table[~newest_run]
    assert (older["change"] == 0).all()  # the two unslowed runs are the board's median
    assert newest["change"].to_numpy() == pytest.approx(1 / helper.SLOWDOWN - 1)
    summary = fleet_results.drift_summary(sim).set_index("board")
    assert summary.loc[slow, "change"] == pytest.approx(1 / helper.SLOWDOWN - 1)
    assert summary.loc[Board(simulated_fleet.board_uuid(0)), "change"] == 0


@pytest.mark.parametrize("which", ["simulated", "bundled"])
def test_the_drift_summary_names_each_boards_largest_move_as_its_own_drift_does(which, sim, suite):
    fleet = sim if which == "simulated" else fleet_results.build(
        fleet_results.points(read_bundled()[0].values(), suite), suite)
    summary = fleet_results.drift_summary(fleet)
    expected = []
    for board in fleet.boards["board"]:  # board by board, in the fleet's order, as the page lists them
        table = fleet_results.drift(fleet, board)
        table = table[table.groupby("figure")["run_id"].transform("count") >= 2] if not table.empty else table
        if not table.empty:
            worst = table.loc[table["floors"].abs().idxmax()]
            expected.append((board, table["run_id"].nunique(), worst["label"], worst["change"], worst["floors"]))
    assert len(expected) >= 1
    assert [tuple(row)[:3] for row in summary.itertuples(index=False)] == [row[:3] for row in expected]
    assert summary[["change", "floors"]].to_numpy().ravel() == pytest.approx([v for row in expected for v in row[3:]])


def test_median_board_is_a_real_run_of_another_board(sim):
    slow = Board(simulated_fleet.board_uuid(helper.SLOW_BOARD))
    run_id, board = fleet_results.median_board(sim, slow, "transfers")
    assert board != slow and run_id in set(sim.cells["run_id"])
    assert fleet_results.median_board(sim, slow, "transfers", listed=set()) is None


def test_stored_points_read_in_bulk_match_the_frames(tmp_path, suite):
    store = helper.fill_store(f"sqlite:///{tmp_path / 'fleet.sqlite'}", boards=4)
    ids = list(store.runs(fleet_id="sim-fleet")["run_id"])
    bulk = fleet_results.stored_points(store, ids, suite)
    loaded = fleet_results.points([store.load(i) for i in ids], suite)
    key = ["run_id", "figure"]
    pd.testing.assert_series_equal(bulk.sort_values(key)["gbps"].reset_index(drop=True),
                                   loaded.sort_values(key)["gbps"].reset_index(drop=True))
    assert isinstance(store, RunStore)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fleet.sqlite'}"
    from tests.conftest import new_postgres_database

    return new_postgres_database(request.getfixturevalue("postgres_url"))


def _cells(fleet) -> pd.DataFrame:
    return fleet.cells[["board", "figure", "value", "median", "deviation", "run_id"]].sort_values(
        ["board", "figure"]).reset_index(drop=True)


@pytest.mark.slow
def test_a_stored_fleet_read_from_its_runs_parameters_shows_what_its_suite_shows(store_url, suite, monkeypatch):
    store = helper.fill_store(store_url, boards=4, runs_per_board=2)
    ids = list(store.runs(fleet_id="sim-fleet")["run_id"])
    before = fleet_results.build(fleet_results.stored_points(store, ids, suite), suite)

    def parsing(*args, **kwargs):
        raise AssertionError("a suite was parsed")
    monkeypatch.setattr(suites, "parse", parsing)
    plan = fleet_results.stored_plan(store, ids, "health")
    after = fleet_results.build(fleet_results.stored_points(store, ids, plan), plan)
    # the same figures as the suite's one-GPU runs, in suite order
    assert plan.problems == () and list(plan.keys.items()) == list(fleet_results.Plan.of_suite(suite).keys.items())
    pd.testing.assert_frame_equal(_cells(after), _cells(before))
    assert list(after.figures["figure"]) == list(before.figures["figure"])


@pytest.mark.slow
def test_a_run_whose_parameters_cannot_be_read_is_named_in_one_line_and_the_rest_is_shown(store_url):
    store = helper.fill_store(store_url, boards=4)
    runs = store.runs(fleet_id="sim-fleet")
    ids = list(runs["run_id"])
    hostile = {"b000r000transf": "{not json", "b001r000transf": '{"sizes": "many", "profile": 7}',
               "b002r000transf": '[{"sizes": [1048576]}, 5]', "b003r000transf": None,
               "b001r000coales": "[" * 30_000 + "]" * 30_000}
    hostile["b000r000coales"] = "x" * 70_000  # written past the store's checks: never read, its length named
    with store.engine.begin() as connection:
        for run_id, text in hostile.items():
            connection.execute(RUNS.update().where(RUNS.c.run_id == run_id).values(params=text))
    plan = fleet_results.stored_plan(store, ids, "health")
    named = {line.split(" ")[1]: line for line in plan.problems}
    assert set(named) == set(hostile) and all("\n" not in line and len(line) < 400 for line in plan.problems)
    assert "not JSON" in named["b000r000transf"] and "cannot be read" in named["b001r000transf"]
    assert "parameters not recorded (stored before version 7)" in named["b003r000transf"]
    assert "70,000 characters" in named["b000r000coales"] and "not an object" in named["b002r000transf"]
    assert "not JSON" in named["b001r000coales"]  # nested past any parser's depth
    fleet = fleet_results.build(fleet_results.stored_points(store, ids, plan), plan)
    assert len(fleet.boards) == 4 and {"reduction", "occupancy", "host_latency"} <= set(fleet.cells["experiment"])


def test_the_bundled_fleet_holds_the_noise_boards_the_fleet_run_and_the_h200_groups(suite):
    frames, _, _ = read_bundled((ASSETS / "fleet", ASSETS / "replay", ASSETS / "runs", ASSETS / "noise"))
    fleet = fleet_results.build(fleet_results.points(frames.values(), suite), suite)
    named = fleet.boards.dropna(subset=["gpu_uuid"])
    # three noise boards, the re-recorded coalescing boards (an H200 and an H100), and the fleet's H100 and H200 of
    # 2026-11-25
    assert {u[-8:] for u in named["gpu_uuid"]} == {"36f59b94", "f8916996", "cedf2970", "50595206", "478b878a",
                                                   "45a10a9c", "88e9785d"}
    assert set(fleet.boards["model"]) == {"H200", "H100 80GB HBM3"}
    sentences = fleet_results.group_sentences(fleet)
    stride = next(s for s in sentences if s.startswith("strided · stride 64"))
    assert "4 at 335.9 GB/s" in stride and "4 at 377.9 GB/s" in stride  # the two H200 groups of the issue


def test_heatmap_escapes_hosts_and_labels_and_marks_a_lone_board(suite):
    frame = helper.suite_recordings()["reduction"]
    frames = [simulated_fleet.as_board(frame, i).assign(host="<b>node</b>") for i in range(2)]
    frames.append(simulated_fleet.as_board(frame, 2).assign(device_name="NVIDIA H100 80GB HBM3"))
    fleet = fleet_results.build(fleet_results.points(frames, suite), suite)
    figure = fleet_charts.heatmap_figure(fleet, "<i>fleet</i>")
    trace = figure.data[0]
    assert all("<b>" not in row for row in trace.y) and any("&lt;b&gt;node&lt;/b&gt;" in row for row in trace.y)
    assert figure.layout.title.text == "&lt;i&gt;fleet&lt;/i&gt;"
    assert list(trace.x) == ["warp_shuffle (reduction)"]  # a lone figure of its experiment names it
    lone = list(trace.y).index(next(r for r in trace.y if "H100" in r))
    assert trace.text[lone][0] == "·" and "not judged" in trace.customdata[lone][0]


# --- nodes of eight GPUs: points matched by their GPU pair (made-up frames, tests.pair_frames) ------------------
def test_a_slowed_pair_of_one_node_is_named_against_the_same_pair_of_the_other_nodes(monkeypatch):
    pair_frames.register(monkeypatch)
    nodes = [pair_frames.peer_run(f"node-{n}", 8, node=n, seed=n, slow={(2, 5): 0.5} if n == 3 else None)
             for n in range(4)]
    keys = sorted({(v, s, d, pair_frames.ELEMENTS, "cuda_event") for v in pair_frames.VARIANTS
                   for s in range(8) for d in range(8) if s != d})
    suite = fleet_results.Plan("pairs", {pair_frames.NAME: keys})
    table = fleet_results.points(nodes, suite)
    assert len(table) == 4 * len(keys)  # no pair dropped or merged
    assert table["board"].nunique() == 32 and all(isinstance(b, Board) and b.named for b in table["board"])
    fleet = fleet_results.build(table, suite)
    far = fleet_results.outliers(fleet)
    assert set(far["full_label"]) == {f"{v} · GPU 2 → GPU 5 · 67,108,864 elements · cuda_event"
                                      for v in pair_frames.VARIANTS}
    assert set(far["board"]) == {Board(pair_frames.uuid(3, 2))}  # the source GPU of the slowed pair, on node-3
    [sentence] = fleet_results.outlier_sentences(fleet)
    assert sentence.startswith(f"GPU {pair_frames.uuid(3, 2)[-8:]} on node-3: ") and "GPU 2 → GPU 5" in sentence
    assert "0.50× the H100 80GB HBM3 median" in sentence


def test_a_board_without_uuid_is_its_run_and_never_a_string_to_parse(suite):
    frame = simulated_fleet.as_board(helper.suite_recordings()["reduction"], 0).assign(gpu_uuid=None)
    fleet = fleet_results.build(fleet_results.points([frame], suite), suite)
    [board] = fleet.boards["board"]
    assert board == Board(None, frame["run_id"].iloc[0]) and not board.named
    assert fleet.boards["row"].iloc[0].endswith(f"no UUID · run {frame['run_id'].iloc[0]}")
    assert pd.isna(fleet.boards["gpu_uuid"].iloc[0])
