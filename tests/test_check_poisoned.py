"""The CI gate against a poisoned history, on SQLite and PostgreSQL: runs of the candidate's board imported far
outside what the board measures (one 1.45x slower and one 0.7x faster on every point) cannot widen the noise band
nor become the baseline, so a candidate 1.3x slower still fails, against its history and against a named baseline,
and the gate names the runs it left out. Data: board 5's three recorded H200 coalescing repeats (assets/noise/)."""

import pytest

from gpu import bench
from gpu.results.persistence.store import RunStore
from tests.test_check import coalescing_runs, on_board5

LIES = {"lie-slower": (1.45, "2026-11-24T08:00:00+00:00"), "lie-faster": (0.7, "2026-11-24T07:00:00+00:00")}


def poisoned(url: str, lies: dict = LIES) -> str:
    store = RunStore(url)
    _, board5 = coalescing_runs()
    for run in board5:
        store.save(run, "import")
    for run_id, (factor, when) in lies.items():  # newer than the honest runs: the newest would be the baseline
        store.save(on_board5(factor, run_id, when=when), "import")
    store.save(on_board5(1.3, "candidate-slower"), "import")
    store.close()
    return url


def gate(monkeypatch, capsys, url, *args):
    monkeypatch.setenv("PINPOINT_DB_URL", url)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    code = bench.main(["check", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_imports_that_lie_cannot_silence_a_slower_candidate(monkeypatch, capsys, store_url):
    url = poisoned(store_url)
    _, board5 = coalescing_runs()
    honest_baseline = board5[-1]["run_id"].iloc[0]
    for against in ("history", honest_baseline):
        code, out, err = gate(monkeypatch, capsys, url, "--candidate", "candidate-slower", "--against", against)
        assert code == 1 and err == "", out
        assert out.startswith("FAILED: 25 of 25 points slower beyond noise"), out
        assert "Left out of the history, more than 5 run-to-run floors from the baseline: lie-faster (on 25 points), " \
               "lie-slower (on 25 points)" in out
        assert "lie-" not in out.split("Bands made from")[1].split(".")[0]  # the bands: the honest runs only
    code, out, _ = gate(monkeypatch, capsys, url, "--candidate", "candidate-slower", "--against", "history")
    assert "passed over as baseline, far outside the other runs of its history: lie-slower, lie-faster" in out
    assert f"run {honest_baseline}" in out


@pytest.mark.slow
def test_a_single_bad_earlier_run_cannot_silence_it_either(monkeypatch, capsys, store_url):
    url = poisoned(store_url, {"bad-run": (1.6, "2026-11-24T08:00:00+00:00")})
    code, out, _ = gate(monkeypatch, capsys, url, "--candidate", "candidate-slower", "--against", "history")
    assert code == 1 and out.startswith("FAILED: 25 of 25 points slower beyond noise"), out
    assert "bad-run (on 25 points)" in out


@pytest.mark.slow
def test_compare_shows_the_imports_that_lie_as_left_out_of_the_history(monkeypatch, store_url):
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from tests import run_to_run

    url = poisoned(store_url)
    _, board5 = coalescing_runs()
    monkeypatch.setenv("PINPOINT_BACKEND", "replay")
    monkeypatch.setenv("PINPOINT_DB_URL", url)
    st.cache_resource.clear()
    at = AppTest.from_file(str(run_to_run.ASSETS.parent / "app.py"), default_timeout=120).run()
    at.switch_page("pages/compare.py").run()
    at.selectbox(key="compare_experiment").set_value("coalescing").run()
    at.selectbox(key="compare_baseline").set_value(board5[-1]["run_id"].iloc[0]).run()
    at.multiselect(key="compare_candidates").set_value(["candidate-slower"]).run()
    assert not at.exception, at.exception
    shown = " ".join(c.value for c in at.caption).replace("\\", "")
    assert "Left out of the history, more than 5 run-to-run floors from the baseline: lie-faster (on 25 points), " \
           "lie-slower (on 25 points)" in shown
    assert "an import that does not hold what was measured" in shown
    st.cache_resource.clear()
