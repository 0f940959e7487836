"""The board's own history in Compare, and the CI gate ``python -m gpu.bench check``: its exit codes through
``gpu.bench.main`` with a throwaway SQLite store, its Markdown summary and its JUnit XML.

Data: the recorded H200 block-256 coalescing runs of several boards (assets/noise/*_board{2,3,4}) and three repeats
on one board (*_board5_repeat{1,2,3}, one ``gpu_uuid``), and candidates made from a recorded repeat by
``tests.simulated_fleet.as_board``: the same samples, slowed by a known factor, measured "later" on board 5.
"""

import xml.etree.ElementTree as ET

import pytest

from gpu import bench
from gpu.results.analysis import check, compare
from gpu.results.persistence.store import RunStore
from tests import pair_frames, run_to_run
from tests.simulated_fleet import as_board

LATER = "2026-11-24T10:00:00+00:00"


def coalescing_runs():
    """The H200 coalescing runs of unchanged code, oldest first, and board 5's three repeats."""
    runs = run_to_run.repeated_runs()["coalescing on NVIDIA H200"]
    board5 = [run for run in runs if compare.board_of(run) == compare.board_of(runs[-1])]
    assert len(board5) == 3 and len({compare.board_of(run) for run in runs if compare.board_of(run)}) == 3
    return runs, board5


def on_board5(slowdown: float, run_id: str, when: str = LATER):
    """Board 5's second repeat measured again 'later', every time × ``slowdown``, on board 5."""
    _, board5 = coalescing_runs()
    return as_board(board5[1], 0, slowdown, when=when, run_id=run_id).assign(gpu_uuid=compare.board_of(board5[0]))


def verdicts(table):
    return table["verdict"].value_counts().to_dict()


@pytest.mark.slow
def test_a_board_with_three_earlier_runs_is_judged_by_its_own_history():
    runs, board5 = coalescing_runs()
    candidate = on_board5(1.02, "two-percent")  # 2 % slower: boards of the model differ by more than that
    table = compare.compare(board5[-1], candidate, runs)
    assert set(table["run_to_run_source"]) == {"history of 3 runs of this board"}
    assert verdicts(table) == {"slower": 25}  # board 5 repeats to 0.1–0.8 %: every point is caught
    assert "the history of 3 runs of this board for 25 points" in compare.band_summary(table)
    unchanged = compare.compare(board5[-1], on_board5(1.0, "unchanged"), runs)
    assert set(unchanged["run_to_run_source"]) == {"history of 3 runs of this board"}
    assert verdicts(unchanged) == {"same": 25}


def test_fewer_than_three_board_runs_use_the_one_board_floor_never_the_models_history_of_mixed_boards():
    runs, board5 = coalescing_runs()
    candidate = on_board5(1.02, "two-percent")
    others = [run for run in runs if run["run_id"].iloc[0] != board5[0]["run_id"].iloc[0]]  # board 5: two runs left
    table = compare.compare(board5[-1], candidate, others)
    # The model's history holds boards up to 12 % apart, where most of a 2 % change would hide: one board is
    # judged by its measured one-board floor until it has three runs of its own.
    assert set(table["run_to_run_source"]) == {"kernel one-board floor"}
    assert verdicts(table) == {"slower": 25}
    # A baseline on another board: the pair spans two boards, so the model's history judges it, not board 5's.
    board3 = next(run for run in runs if compare.board_of(run) == "GPU-53b65870-5436-066c-f076-f3a436f59b94")
    across = compare.compare(board3, candidate, runs)
    assert set(across["run_to_run_source"]) == {"history of 8 runs of the device model"}
    assert not compare.same_board(board3, candidate)


def test_the_history_view_judges_a_board_by_its_own_runs():
    runs, board5 = coalescing_runs()
    frames = [*runs, on_board5(1.02, "two-percent")]
    point = board5[0].iloc[0].to_dict()
    history = compare.history(frames, point)
    last = history.iloc[-1]
    assert last["run_id"] == "two-percent" and last["verdict"] == "slower"
    assert last["run_to_run_source"] == "history of 3 runs of this board"
    # board 5's third repeat had two runs of its board before it: its one-board floor judged it
    assert history.iloc[-2]["run_to_run_source"] == "kernel one-board floor"


def fill(url: str) -> str:
    """The recorded coalescing runs, a reduction run, board 5 measured later (unchanged, and 10 % slower) and a
    board with no earlier run, in the store at ``url``."""
    store = RunStore(url)
    runs, _ = coalescing_runs()
    for run in runs:
        store.save(run, "import")
    store.save(run_to_run.repeated_runs()["reduction on NVIDIA H200"][-1], "import")
    store.save(on_board5(1.1, "board5-slower"), "import")
    store.save(on_board5(1.0, "board5-unchanged"), "import")
    store.save(as_board(coalescing_runs()[1][1], 9, 1.0, when=LATER, run_id="fresh-board"), "import")  # a new board
    store.close()
    return url


@pytest.fixture(scope="module")
def store_url(tmp_path_factory):
    return fill(f"sqlite:///{tmp_path_factory.mktemp('check')}/runs.sqlite")


def gate(monkeypatch, capsys, url, *args):
    """``python -m gpu.bench check …`` in this process: exit code, stdout, stderr."""
    monkeypatch.setenv("PINPOINT_DB_URL", url)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    code = bench.main(["check", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_a_board_that_got_ten_percent_slower_fails_the_gate(monkeypatch, capsys, store_url, tmp_path):
    summary, junit = tmp_path / "summary.md", tmp_path / "junit.xml"
    code, out, err = gate(monkeypatch, capsys, store_url, "--candidate", "board5-slower", "--against", "history",
                          "--summary", str(summary), "--junit", str(junit))
    assert code == 1 and err == ""
    assert out.startswith("FAILED: 25 of 25 points slower beyond noise")
    assert "the board's newest earlier run, run edc86d0d4c5c" in out  # board 5's third repeat is the baseline
    assert "the history of 3 runs of this board for 25 points" in out

    text = summary.read_text()
    assert text.startswith("## PinPoint check: coalescing on NVIDIA H200")
    assert "FAILED\\: 25 of 25 points slower beyond noise" in text
    assert "### Slower beyond noise (25)" in text and "GPU\\-0818954e" in text
    assert text.count("| slower beyond noise |") == 2 * 25  # the slower table and the folded table of every point
    assert "history of 3 runs of this board |" in text and "<details><summary>Every point (25)" in text

    suite = ET.parse(junit).getroot().find("testsuite")
    cases = suite.findall("testcase")
    failures = [case.find("failure") for case in cases if case.find("failure") is not None]
    assert (suite.get("tests"), suite.get("failures")) == ("25", "25") and len(cases) == 25 and len(failures) == 25
    memcpy = next(case for case in cases if case.get("name").startswith("memcpy_dtod"))
    message = memcpy.find("failure").get("message")
    assert message.startswith("slower beyond noise, −9 %: median 0.129 ms → 0.142 ms")
    assert "(history of 3 runs of this board)" in message and "GB/s" in message


def test_against_a_run_on_another_board_uses_the_models_history(monkeypatch, capsys, store_url, tmp_path):
    junit = tmp_path / "junit.xml"
    code, out, err = gate(monkeypatch, capsys, store_url, "--candidate", "board5-slower", "--against", "2f3ef530eb9b",
                          "--junit", str(junit))
    assert code == 1 and err == ""
    assert "against: baseline NVIDIA H200 · 2026-11-23 19:32 · run 2f3ef530eb9b" in out
    assert "runs of the device model for 25 points" in out
    suite = ET.parse(junit).getroot().find("testsuite")
    slower = int(out.split(" of 25 points slower")[0].split()[-1])
    assert suite.get("failures") == str(slower) and len(suite.findall("testcase/failure")) == slower


def test_an_unchanged_run_passes_and_the_summary_joins_the_github_step_summary(monkeypatch, capsys, store_url,
                                                                               tmp_path):
    step_summary = tmp_path / "step_summary.md"
    step_summary.write_text("## an earlier step\n")
    junit = tmp_path / "junit.xml"
    monkeypatch.setenv("PINPOINT_DB_URL", store_url)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    code = bench.main(["check", "--candidate", "board5-unchanged", "--against", "history", "--junit", str(junit)])
    out, err = capsys.readouterr()
    assert code == 0 and err == "" and out.startswith("passed: none of 25 points slower beyond noise")
    text = step_summary.read_text()
    assert text.startswith("## an earlier step\n## PinPoint check: coalescing")  # appended, not replaced
    assert "passed\\: none of 25 points" in text and "### Slower beyond noise" not in text
    suite = ET.parse(junit).getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures")) == ("25", "0") and not suite.findall("testcase/failure")


def test_a_board_with_few_runs_is_checked_against_its_one_board_floor(monkeypatch, capsys, store_url):
    code, out, _ = gate(monkeypatch, capsys, store_url, "--candidate", "edc86d0d4c5c", "--against", "history")
    assert code == 0  # board 5's third repeat: two earlier runs of its board, so its one-board floor sets bands
    assert "the board's newest earlier run, run 8a4af463c978 (2026-11-23 22:28), as baseline; bands from the " \
        "measured one-board floors (fewer than 3 earlier runs of the board)" in out
    assert "measured floors for 25 points (kernel (one board) −0.5 % … +0.5 %)" in out


def test_a_board_without_runs_is_checked_against_its_models_newest_run(monkeypatch, capsys, store_url):
    code, out, _ = gate(monkeypatch, capsys, store_url, "--candidate", "fresh-board", "--against", "history")
    assert code == 0
    assert "(no earlier run of board GPU-sim00009-0000-4000-8000-000000000009 measured its points): the model's " \
        "newest earlier run, NVIDIA H200 · 2026-11-23 22:30 · run edc86d0d4c5c" in out
    assert "the history of 8 runs of the device model for 25 points" in out


@pytest.mark.parametrize(("args", "says"), [
    (["--candidate", "no-such-run", "--against", "history"], "error: candidate no-such-run: no stored run with id"),
    (["--candidate", "board5-slower", "--against", "no-such-run"], "error: baseline no-such-run: no stored run"),
    (["--candidate", "board5-slower", "--against", "48dd1002fa30"],
     "error: runs of different experiments cannot be checked against each other: coalescing and reduction"),
    (["--candidate", "f05fe7ce816f", "--against", "history"],  # the oldest coalescing run: nothing before it
     "error: no history to check run f05fe7ce816f against: no earlier coalescing run of this device model"),
    (["--candidate", "board5-slower", "--against", "board5-slower"], "cannot be checked against itself"),
])
@pytest.mark.slow
def test_bad_input_exits_2_with_one_line(monkeypatch, capsys, store_url, args, says):
    code, out, err = gate(monkeypatch, capsys, store_url, *args)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and says in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(("url", "says"), [
    ("nosuch://x", "error: cannot open the runs store at "),
    # reading never creates a store: a store where none can be is an empty one, which holds no such run
    ("sqlite:////proc/no-such-dir/runs.sqlite", "error: candidate board5-slower: no stored run with id board5-slower"),
])
def test_a_store_that_cannot_be_opened_exits_2_with_one_line(monkeypatch, capsys, url, says):
    code, out, err = gate(monkeypatch, capsys, url, "--candidate", "board5-slower", "--against", "history")
    assert code == 2 and out == ""
    assert err.startswith(says) and err.count("\n") == 1


def test_a_summary_that_cannot_be_written_exits_2(monkeypatch, capsys, store_url, tmp_path):
    code, _, err = gate(monkeypatch, capsys, store_url, "--candidate", "board5-slower", "--against", "history",
                        "--summary", str(tmp_path / "missing-dir" / "summary.md"))
    assert code == 2 and err.startswith("error: cannot write ") and err.count("\n") == 1


def test_run_content_is_escaped_in_markdown_and_kept_valid_in_junit(monkeypatch, store_url, tmp_path):
    monkeypatch.setenv("PINPOINT_DB_URL", store_url)
    from gpu.results.exchange.catalog import Catalog

    result = check.run_check(Catalog(), "board5-slower", "history")
    result.candidate = result.candidate.assign(device_name="H200 <b>|x|</b> [l](http://e.x)\x1b[2J")
    text = check.markdown(result)
    assert "<b>" not in text and "](http" not in text and "\x1b" not in text
    path = tmp_path / "junit.xml"
    path.write_text(check.junit_xml(result))
    assert ET.parse(path).getroot().find("testsuite").get("name").startswith("coalescing on H200 <b>|x|</b>")


@pytest.mark.slow
def test_the_compare_page_says_a_band_came_from_the_boards_history(monkeypatch, store_url):
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("PINPOINT_BACKEND", "replay")
    monkeypatch.setenv("PINPOINT_DB_URL", store_url)
    st.cache_resource.clear()
    at = AppTest.from_file(str(run_to_run.ASSETS.parent / "app.py"), default_timeout=120).run()
    at.switch_page("pages/compare.py").run()
    at.selectbox(key="compare_experiment").set_value("coalescing").run()
    at.selectbox(key="compare_baseline").set_value("edc86d0d4c5c").run()  # board 5's third repeat
    at.multiselect(key="compare_candidates").set_value(["board5-slower"]).run()
    assert not at.exception, at.exception
    points = at.dataframe[1].value
    assert len(points) == 25 and set(points["run-to-run from"]) == {"history of 3 runs of this board"}
    assert any("the history of 3 runs of this board for 25 points" in c.value for c in at.caption)
    st.cache_resource.clear()


@pytest.mark.slow
def test_the_exit_status_reaches_the_shell(store_url):
    import os
    import subprocess
    import sys

    env = {**os.environ, "PINPOINT_DB_URL": store_url}
    env.pop("GITHUB_STEP_SUMMARY", None)
    done = subprocess.run([sys.executable, "-m", "gpu.bench", "check", "--candidate", "board5-slower", "--against",
                           "history"], capture_output=True, text=True, timeout=300, cwd=run_to_run.ASSETS.parent,
                          env=env)
    assert done.returncode == 1 and done.stderr == "" and done.stdout.startswith("FAILED: 25 of 25")


@pytest.mark.slow
def test_a_teams_postgresql_store_gates_the_same_way(monkeypatch, capsys, postgres_url, tmp_path):
    from tests.conftest import new_postgres_database

    url = fill(new_postgres_database(postgres_url))
    junit = tmp_path / "junit.xml"
    code, out, err = gate(monkeypatch, capsys, url, "--candidate", "board5-slower", "--against", "history",
                          "--junit", str(junit))
    assert code == 1 and err == "" and "the history of 3 runs of this board for 25 points" in out
    assert ET.parse(junit).getroot().find("testsuite").get("failures") == "25"
    assert gate(monkeypatch, capsys, url, "--candidate", "board5-unchanged", "--against", "history")[0] == 0


# --- peer runs: check judges each GPU pair as a point (made-up eight-GPU frames, tests.peer_frames) -------------
@pytest.fixture
def peer_store(monkeypatch, tmp_path):
    pair_frames.register(monkeypatch)
    store = RunStore(f"sqlite:///{tmp_path}/peers.sqlite")
    days = [f"2026-11-2{d}T10:00:00+00:00" for d in range(1, 6)]
    for i, day in enumerate(days[:3]):  # three earlier runs of the node: its boards' own history
        store.save(pair_frames.peer_run(f"node-earlier-{i}", 8, seed=i, timestamp=day), "import")
    store.save(pair_frames.peer_run("node-slow-pair", 8, seed=7, slow={(2, 5): 0.5}, timestamp=days[3]), "import")
    store.save(pair_frames.peer_run("node-unchanged", 8, seed=8, timestamp=days[4]), "import")
    store.close()
    return store.url


def test_a_slowed_gpu_pair_fails_the_gate_and_is_named(monkeypatch, capsys, peer_store, tmp_path):
    junit = tmp_path / "junit.xml"
    code, out, err = gate(monkeypatch, capsys, peer_store, "--candidate", "node-slow-pair", "--against", "history",
                          "--junit", str(junit))
    assert code == 1 and err == ""
    assert out.startswith("FAILED: 2 of 112 points slower beyond noise, worst −50 % at ")
    slower = [line for line in out.splitlines() if line.strip().startswith("slower:")]
    assert len(slower) == 2 and all("GPU 2 → GPU 5" in line for line in slower)
    assert "boards GPU-00000000-0000-4000-8000-000000000000, " in out  # the run names the node's eight boards
    assert "the history of 3 runs of this board for 112 points" in out  # the node's own runs, pair by pair
    failures = [case.get("name") for case in ET.parse(junit).getroot().iter("testcase")
                if case.find("failure") is not None]
    assert sorted(failures) == ["copy_ce_read · GPU 2 → GPU 5 · 67,108,864 elements · cuda_event",
                                "copy_sm · GPU 2 → GPU 5 · 67,108,864 elements · cuda_event"]


def test_an_unchanged_eight_gpu_node_passes(monkeypatch, capsys, peer_store):
    code, out, err = gate(monkeypatch, capsys, peer_store, "--candidate", "node-unchanged", "--against",
                          "node-earlier-2")
    assert code == 0 and err == "" and out.startswith("passed: none of 112 points slower beyond noise")
