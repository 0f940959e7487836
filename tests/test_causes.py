"""Causes named where people decide: Compare's verdicts, ``check``'s exit code, terminal lines, Markdown and JUnit,
with fake conditions set on recorded runs (a throttle, a PCIe link at Gen4 ×8, NVLink CRC errors, another process on
the GPU). Runs without a ``conditions`` column read as not observed, never as clean.

Data: board 5's recorded H200 coalescing repeats (assets/noise), one of them slowed by a known factor as a later run
of the same board (``tests.simulated_fleet.as_board``); only the ``conditions`` column is made up here.
"""

import types
import xml.etree.ElementTree as ET

import pandas as pd
import pytest

from gpu.results.analysis import causes, check, compare
from tests import run_to_run
from tests.simulated_fleet import as_board

LATER = "2026-11-24T10:00:00+00:00"
THROTTLE = "SW power cap in 38 % of samples"
PCIE = "PCIe Gen4 ×8 of Gen5 ×16"
NVLINK = "NVLink 2 CRC errors +12"
SHARED = "shared with pid 1039 (python3) for 100 % of samples"


def board5_runs():
    runs = run_to_run.repeated_runs()["coalescing on NVIDIA H200"]
    board = compare.board_of(runs[-1])
    return [run for run in runs if compare.board_of(run) == board]


def later(slowdown: float, run_id: str, conditions: str | None):
    """Board 5's second repeat measured again later, slowed by ``slowdown``, with ``conditions`` on every point
    (None: no column, as a run recorded before witnesses)."""
    board5 = board5_runs()
    frame = as_board(board5[1], 0, slowdown, when=LATER, run_id=run_id).assign(gpu_uuid=compare.board_of(board5[0]))
    return frame if conditions is None else frame.assign(conditions=conditions)


def baseline(conditions: str | None = "clean"):
    frame = board5_runs()[-1]
    return frame if conditions is None else frame.assign(conditions=conditions)


class FakeCatalog:
    """Just what ``check`` reads of a catalog: the listing of an experiment's runs and each run loaded."""

    def __init__(self, *frames):
        self.frames = {str(f["run_id"].iloc[0]): f for f in frames}

    def runs(self, experiment):
        rows = [f.iloc[0][["run_id", "experiment", "device_name", "profile", "timestamp", "gpu_uuid"]]
                for f in self.frames.values() if f["experiment"].iloc[0] == experiment]
        return pd.DataFrame(rows).reset_index(drop=True)

    def load(self, run_id):
        return self.frames[run_id]


def gate(capsys, tmp_path, base, candidate):
    summary, junit = tmp_path / "summary.md", tmp_path / "junit.xml"
    args = types.SimpleNamespace(candidate=str(candidate["run_id"].iloc[0]), against=str(base["run_id"].iloc[0]),
                                 summary=str(summary), junit=str(junit))
    code = check.check_command(args, FakeCatalog(base, candidate))
    out, err = capsys.readouterr()
    return code, out, err, summary.read_text(), ET.parse(junit).getroot()


@pytest.mark.parametrize("cause", [THROTTLE, PCIE, NVLINK, SHARED])
def test_a_slower_candidate_that_was_not_clean_names_its_cause_everywhere_and_exits_3(capsys, tmp_path, cause):
    hostile = f"{cause}; <b>x</b> | [link](http://x)"  # stored text: escaped in every output
    code, out, err, summary, junit = gate(capsys, tmp_path, baseline(), later(1.1, "slow-not-clean", hostile))
    assert code == check.NOT_CLEAN == 3 and err == ""
    assert out.startswith("NOT CLEAN (measure again on a quiet GPU): 25 of 25 points slower beyond noise")
    assert f"25 of them not clean (candidate: {cause}" in out
    assert f"  slower, not clean (candidate: {cause}" in out
    assert "conditions: candidate: " + cause in out and "baseline: clean" in out
    # Markdown: the cause in the verdict column of each slower point, every punctuation escaped
    assert summary.count("not clean — candidate\\: ") == 2 * 25
    assert "<b>" not in summary and "\\<b\\>" in summary and "\\| \\[link\\]" in summary
    assert "- Conditions: candidate\\: " in summary
    suite = junit.find("testsuite")
    failures = [case.find("failure") for case in suite.findall("testcase")]
    assert all(f is not None and f.get("type") == "slower beyond noise, not clean" for f in failures)
    assert all(f.get("message").startswith(f"slower beyond noise, not clean — candidate: {cause}") for f in failures)
    properties = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert properties["conditions"].startswith(f"candidate: {cause}")


def test_a_baseline_that_was_not_clean_is_named_but_excuses_no_slower_candidate(capsys, tmp_path):
    table = compare.compare(baseline(THROTTLE), later(1.1, "slow", "clean"))
    assert set(table["conditions"]) == {f"baseline: {THROTTLE}"}
    assert table["not_clean"].all()
    assert compare.verdict_text(table.iloc[0]) == f"slower beyond noise, not clean — baseline: {THROTTLE}"
    # a throttled baseline could only have been slower: a candidate slower still is a regression, its cause named
    code, out, _, summary, _ = gate(capsys, tmp_path, baseline(THROTTLE), later(1.1, "slow-after-throttle", "clean"))
    assert code == check.REGRESSED and out.startswith("FAILED: 25 of 25 points slower beyond noise")
    assert f"  slower, not clean (baseline: {THROTTLE}): " in out


def test_a_slower_clean_candidate_is_a_regression_and_says_clean(capsys, tmp_path):
    code, out, _, summary, junit = gate(capsys, tmp_path, baseline(), later(1.1, "slow-clean", "clean"))
    assert code == check.REGRESSED == 1
    assert out.startswith("FAILED: 25 of 25 points slower beyond noise") and "not clean" not in out
    assert "conditions: candidate: clean · baseline: clean" in out
    assert summary.count("| clean |") == 2 * 25
    failure = junit.find("testsuite").find("testcase").find("failure")
    assert failure.get("type") == "slower beyond noise" and "conditions: clean" in failure.get("message")


def test_one_clean_slower_point_beside_not_clean_ones_is_still_a_regression():
    candidate = later(1.1, "mixed", THROTTLE)
    candidate.loc[0, "conditions"] = "clean"
    result = check.Check(candidate, baseline(), compare.compare(baseline(), candidate), "run", 0, 0)
    assert len(result.slower) == 25 and len(result.slower_not_clean) == 24
    assert result.exit_code == check.REGRESSED


def test_not_clean_but_not_slower_passes_with_its_cause_in_the_headline(capsys, tmp_path):
    code, out, *_ = gate(capsys, tmp_path, baseline(), later(1.0, "same-throttled", THROTTLE))
    assert code == check.PASSED
    assert out.startswith("passed: none of 25 points slower beyond noise")
    assert f"25 not clean (candidate: {THROTTLE})" in out


def test_runs_without_conditions_read_as_not_observed_never_clean(capsys, tmp_path):
    code, out, _, summary, junit = gate(capsys, tmp_path, baseline(None), later(1.1, "slow-unwatched", None))
    assert code == check.REGRESSED  # nothing observed explains it: a regression, as before witnesses
    assert "conditions: candidate: not observed · baseline: not observed" in out
    assert "clean" not in out.replace("not clean", "")
    assert summary.count("| not observed |") == 2 * 25 and "| clean |" not in summary
    message = junit.find("testsuite").find("testcase").find("failure").get("message")
    assert message.endswith("conditions: not observed")
    table = compare.compare(baseline(None), later(1.1, "x", None))
    assert set(table["conditions"]) == {"not observed"} and not table["not_clean"].any()
    # one side watched and clean, the other not watched: still not 'clean'
    half = compare.compare(baseline("clean"), later(1.1, "y", None))
    assert set(half["conditions"]) == {"candidate: not observed"}


def test_the_compare_headline_names_the_cause_of_slower_points():
    table = compare.compare(baseline(), later(1.1, "slow", SHARED))
    line = compare.headline(table)
    assert line.startswith("25 of 25 points slower beyond noise, worst")
    assert f"25 of them not clean (candidate: {SHARED})" in line
    assert "not clean" not in compare.headline(compare.compare(baseline(), later(1.1, "c", "clean")))


def test_the_points_table_and_the_ratio_chart_carry_conditions_escaped():
    from gpu.results.analysis import report

    hostile = "shared with pid 7 (<img src=x onerror=alert(1)>) for 50 % of samples"
    table = compare.compare(baseline(), later(1.1, "slow", hostile))
    shown = report.points_table(table)
    assert set(shown["conditions"]) == {f"candidate: {hostile}"}
    assert shown["verdict"].iloc[0].startswith("slower beyond noise, not clean — candidate: shared with pid 7")
    figure = report.ratio_figure(table, "t")
    hover = [str(v) for trace in figure.data for row in trace.customdata for v in row]
    assert not any("<img" in v for v in hover) and any("&lt;img" in v for v in hover)
    outlines = [w for trace in figure.data for w in trace.marker.line.width[1:]]
    assert outlines and set(outlines) == {4}  # every point drawn with the not-clean outline
    assert "dark outline: not clean" in figure.layout.title.text
    clean_figure = report.ratio_figure(compare.compare(baseline(), later(1.1, "c", "clean")), "t")
    assert {w for trace in clean_figure.data for w in trace.marker.line.width[1:]} == {2}


def test_causes_words():
    assert causes.pair_words("clean", "clean") == "clean"
    assert causes.pair_words(None, float("nan")) == "not observed"
    assert causes.pair_words("clean", f"{THROTTLE}; {PCIE}") == f"candidate: {THROTTLE}; {PCIE}"
    assert causes.board_cause([f"{THROTTLE}", "clean"]) == "SW power cap in 38 % of its samples"
    assert causes.board_cause(["clean", "clean"]) == causes.NO_CAUSE
    assert causes.board_cause([None, "not observed"]) == "conditions not observed"
    frame = pd.DataFrame({"x": [1, 2, 3]})
    assert list(causes.of_frame(frame)) == ["not observed"] * 3
    assert causes.count_line(frame) == "Conditions not observed for these 3 points (no witness watched them)"
    assert causes.count_line(frame.assign(conditions=["clean", THROTTLE, "clean"])) == \
        f"1 of 3 points not clean: {THROTTLE}"
    assert causes.count_line(frame.assign(conditions="clean")) is None
    many = [f"NVLink {link} CRC errors +1" for link in range(7)]  # a run with many distinct causes: the first four
    line = causes.count_line(pd.DataFrame({"conditions": ["; ".join(many[:3]), "; ".join(many[2:]), "clean"]}))
    assert line == ("2 of 3 points not clean: " + "; ".join(many[:4])
                    + "; and 3 more causes (each point's are in its hover)")


# --- the Fleet page's words ------------------------------------------------------------------------------------
def reduction_fleet(conditions: dict[int, str] | None, slow_board: int | None = 3, default: str | None = "clean"):
    """Four boards of the recorded H200 reduction run, ``slow_board`` taking 1.3× as long; each board's points carry
    ``conditions[board]`` (else ``default``; None: no column)."""
    from gpu.experiments import suites
    from gpu.present.fleet import boards as fleet_results
    from tests import fleet_page_helper as helper
    from tests.simulated_fleet import as_board

    suite = suites.load("health")
    frames = []
    for board in range(4):
        frame = as_board(helper.suite_recordings()["reduction"], board, 1.3 if board == slow_board else 1.0)
        said = (conditions or {}).get(board, default)
        frames.append(frame if said is None else frame.assign(conditions=said))
    return fleet_results.build(fleet_results.points(frames, suite), suite)


@pytest.mark.slow
@pytest.mark.parametrize("cause", [THROTTLE, PCIE, SHARED])
def test_the_fleet_names_the_cause_of_a_slow_board(cause):
    from gpu.present.fleet import boards as fleet_results

    [sentence] = fleet_results.outlier_sentences(reduction_fleet({3: cause}))
    assert "0.77× the H200 median" in sentence
    assert f"slower); {cause.replace(' of samples', ' of its samples')}." in sentence


@pytest.mark.slow
def test_a_slow_board_with_nothing_observed_says_so_and_a_clean_fleet_names_no_cause():
    from gpu.present.fleet import boards as fleet_results

    [watched] = fleet_results.outlier_sentences(reduction_fleet({}))
    assert "slower); no cause observed." in watched
    [unwatched] = fleet_results.outlier_sentences(reduction_fleet({}, default=None))
    assert "slower); conditions not observed." in unwatched and "clean" not in unwatched
    # a clean fleet: no board off, no cause named anywhere the page speaks
    clean = reduction_fleet({}, slow_board=None)
    assert fleet_results.outlier_sentences(clean) == []
    assert set(clean.cells["conditions"]) == {"clean"}


def test_the_fleet_names_nvlink_crc_errors_on_a_slow_link():
    from gpu.experiments import peers
    from gpu.present.fleet import links as fleet_links
    from tests.simulated_fleet import peer_frame

    params = peers.parse_params({"sizes": [268435456], "variants": ["ce_write"], "methods": ["batched"],
                                 "profile": "interactive"})
    boards = list(range(2, 10))
    healthy = peer_frame(boards, params, host="node-3", run_id="clean").assign(conditions="clean")
    pairs = healthy[healthy["peer_index"].notna() & (healthy["peer_index"] != healthy["gpu_index"])]
    source, destination = int(pairs["gpu_index"].iloc[0]), int(pairs["peer_index"].iloc[0])  # a measured pair
    node3 = peer_frame(boards, params, {(boards[source], boards[destination]): 1 / 0.51}, host="node-3",
                       run_id="node3peers")
    slow_pair = (node3["gpu_index"] == source) & (node3["peer_index"] == destination)
    node3 = node3.assign(conditions=["clean"] * len(node3)).astype({"conditions": object})
    node3.loc[slow_pair, "conditions"] = NVLINK
    judged = fleet_links.judge(fleet_links.links([node3]), fleet_links.figures(fleet_links.links([node3]))
                               ["figure"].iloc[0])
    [sentence] = fleet_links.slow_link_sentences(judged)
    assert sentence.startswith(f"node-3: GPU {source} → GPU {destination} at 0.51×")
    assert sentence.endswith(f"); {NVLINK}.")
    table = fleet_links.links([healthy])
    assert fleet_links.slow_link_sentences(fleet_links.judge(table, fleet_links.figures(table)["figure"].iloc[0])) \
        == []


# --- charts: non-clean points marked, their conditions in the hover (escaped) ----------------------------------
HOSTILE = "shared with pid 7 (<script>alert(1)</script>) for 50 % of samples"


def test_the_shared_chart_helper_rings_not_clean_points_with_escaped_conditions():
    from gpu.experiments.transfers import view as transfer_charts
    from tests.simulated_fleet import recorded

    frame = recorded("transfers")
    frame = frame.assign(conditions="clean").astype({"conditions": object})
    frame.loc[frame.index[:3], "conditions"] = HOSTILE
    figure = transfer_charts.bandwidth_figure(frame)
    rings = [trace for trace in figure.data if trace.name == "not clean (hover: its conditions)"]
    assert sum(len(trace.x) for trace in rings) == 3
    hovers = [row[0] for trace in rings for row in trace.customdata]
    assert all(h.startswith("conditions: shared with pid 7 (&lt;script&gt;") for h in hovers)
    assert sum(1 for trace in rings if trace.showlegend) == 1  # one legend entry, however many panels
    for clean in (frame.assign(conditions="clean"), frame.drop(columns="conditions")):
        assert not [t for t in transfer_charts.bandwidth_figure(clean).data if t.name and "not clean" in t.name]


@pytest.mark.slow
def test_the_fleet_heatmap_marks_a_not_clean_cell_and_escapes_its_conditions():
    from gpu.present.charts import fleet as fleet_charts

    fleet = reduction_fleet({3: HOSTILE})
    figure = fleet_charts.heatmap_figure(fleet, "t")
    text = figure.data[0].text
    hover = figure.data[0].customdata
    flagged = [(i, j) for i in range(len(text)) for j in range(len(text[i])) if str(text[i][j]).endswith("!")]
    assert flagged and all("conditions: shared with pid 7 (&lt;script&gt;" in hover[i][j] for i, j in flagged)
    assert not any("<script>" in str(h) for row in hover for h in row)
    clean = fleet_charts.heatmap_figure(reduction_fleet({}), "t").data[0]
    assert not any(str(t).endswith("!") for row in clean.text for t in row)
    assert all("conditions: clean" in h for row in clean.customdata for h in row if h and "not measured" not in h)


def test_the_peer_matrix_marks_a_pair_with_nvlink_errors_and_escapes_its_conditions():
    from gpu.experiments.peers import matrix as pm
    from gpu.experiments.peers import view as peer_charts
    from tests.peer_frames import peer_frame

    frame = peer_frame(4).assign(backend="replay", conditions="clean").astype({"conditions": object})
    frame.loc[(frame["gpu_index"] == 1) & (frame["peer_index"] == 2), "conditions"] = f"{NVLINK}; <i>{HOSTILE}</i>"
    heatmap = peer_charts.matrix_figure(frame, pm.default_view(frame)).data[0]
    assert str(heatmap.text[1][2]).split("<br>")[0].endswith("!")
    assert f"conditions: {NVLINK}; &lt;i&gt;shared with pid 7 (&lt;script&gt;" in heatmap.customdata[1][2]
    assert not any(str(t).split("<br>")[0].endswith("!") for i, row in enumerate(heatmap.text)
                   for j, t in enumerate(row) if (i, j) != (1, 2))
    assert "conditions: clean" in heatmap.customdata[0][1]


def test_the_roofline_rings_kernels_that_were_not_clean():
    from gpu.present import roofline as rl
    from gpu.present.charts import roofline as roofline_chart
    from gpu.service.backends import ReplayBackend

    data = ReplayBackend().data
    data = data.assign(conditions=[THROTTLE if e == "reduction" else "clean" for e in data["experiment"]])
    roofs = rl.measured_roofs(data)
    points = rl.kernel_points(data, roofs)
    assert set(points.loc[points["experiment"] == "reduction", "conditions"]) == {THROTTLE}
    figure = roofline_chart.figure(points, roofs)
    rings = [t for t in figure.data if t.name == "not clean (hover: its conditions)"]
    assert sum(len(t.x) for t in rings) == int((points["experiment"] == "reduction").sum())


def test_pandas_missing_values_read_as_not_observed_never_as_a_cause():
    frame = pd.DataFrame({"conditions": pd.array([pd.NA, "clean", None], dtype="string")})
    assert list(causes.of_frame(frame)) == ["not observed", "clean", "not observed"]
    assert causes.words(pd.NA) == "not observed" and not causes.has_causes(pd.NA)
    assert causes.pair_words(pd.NA, "clean") == "baseline: not observed"
    assert causes.board_cause([pd.NA, float("nan")]) == "conditions not observed"
    assert causes.summary([pd.NA, "clean"]) == "not observed"


def test_the_streams_sweep_rings_pipelines_that_were_not_clean():
    from gpu.core import overlap
    from gpu.experiments.streams import view as stream_charts
    from tests.simulated_fleet import recorded

    frame = recorded("streams").assign(conditions="clean").astype({"conditions": object})
    first = frame.index[frame["variant"] == "pipeline"][0]
    frame.loc[first, "conditions"] = SHARED
    table = overlap.pipeline_table(frame)
    assert list(table.loc[table["conditions"] == SHARED].index) == [0] and len(table) > 1
    figure = stream_charts.sweep_figure(table, frame)
    rings = [t for t in figure.data if t.name == "not clean (hover: its conditions)"]
    assert sum(len(t.x) for t in rings) == 1
    assert rings[0].customdata[0][0] == f"conditions: {SHARED}"


@pytest.mark.slow
def test_the_runner_check_reads_stored_conditions_and_exits_3(monkeypatch, capsys, tmp_path):
    from gpu import bench
    from gpu.results.persistence.store import RunStore

    url = f"sqlite:///{tmp_path}/runs.sqlite"
    store = RunStore(url)
    store.save(baseline(), "import")
    store.save(later(1.1, "stored-throttled", THROTTLE), "import")
    store.close()
    monkeypatch.setenv("PINPOINT_DB_URL", url)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    summary = tmp_path / "summary.md"
    code = bench.main(["check", "--candidate", "stored-throttled", "--against", str(baseline()["run_id"].iloc[0]),
                       "--summary", str(summary)])
    out, err = capsys.readouterr()
    assert code == 3 and err == "", err
    assert out.startswith("NOT CLEAN") and f"conditions: candidate: {THROTTLE} · baseline: " in out
    assert "not clean — candidate\\: SW power cap in 38 % of samples" in summary.read_text()
