"""The Runs and Compare pages through AppTest (replay mode, a throwaway store per test)."""

import json
import re
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from gpu.results.exchange.catalog import BUNDLED_DIRS
from gpu.results.persistence.store import RunStore

APP = str(Path(__file__).resolve().parent.parent / "app.py")
MANAGED = next(BUNDLED_DIRS[1].glob("managed_*.parquet"))


@pytest.fixture(autouse=True)
def fresh_store(monkeypatch, tmp_path):
    monkeypatch.setenv("PINPOINT_BACKEND", "replay")
    monkeypatch.setenv("PINPOINT_DB_URL", f"sqlite:///{tmp_path}/runs.sqlite")
    st.cache_resource.clear()
    st.cache_data.clear()
    yield RunStore(f"sqlite:///{tmp_path}/runs.sqlite")
    st.cache_resource.clear()
    st.cache_data.clear()


def open_page(page):
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def unescaped(markdown: str) -> str:
    """Text shown through gpu.core.text.plain, without its backslashes."""
    return re.sub(r"\\(.)", r"\1", markdown)


def readme_compare_pair() -> tuple[str, str]:
    """The run ids of the README tour's Compare step: the baseline recording and the candidate rerun it names."""
    from gpu.core import schema

    readme = (Path(APP).parent / "README.md").read_text()
    step = readme.split("\n7. ", 1)[1].split("\n8. ", 1)[0]
    baseline = re.search(r"(\d{4}-\d\d-\d\d) as the baseline", step).group(1)
    candidate = re.search(r"`(assets/runs/[^`]+\.parquet)`", step).group(1)
    [baseline_file] = Path(APP).parent.glob(f"assets/replay/transfers_nvidia-h200_{baseline}.parquet")
    return tuple(str(schema.read_results(path)["run_id"].iloc[0])
                 for path in (baseline_file, Path(APP).parent / candidate))


def test_compare_opens_the_readmes_pair_like_for_like_and_says_what_it_can_detect():
    from gpu.results.analysis import compare

    at = open_page("pages/compare.py")
    baseline, candidate = readme_compare_pair()
    assert at.selectbox(key="compare_baseline").value == baseline
    assert at.multiselect(key="compare_candidates").value == [candidate]
    assert not at.toggle(key="compare_normalized").value
    diff = at.dataframe[0].value.set_index("field")
    assert not bool(diff.loc["device_name", "differs"])  # one GPU model, so nothing needs normalising
    detect = next(unescaped(m.value) for m in at.markdown
                  if m.value.startswith("What this comparison can detect"))
    # two runs make no history: the pair's pageable copies are judged by the pageable floor (−42 % … +72.5 %)
    assert f"pageable copies (26 points) {compare.floor_text('pageable')}" in detect, detect
    assert detect.index("pinned copies") < detect.index("pageable copies")  # the most sensitive kind first


def test_compare_draws_the_default_pair_with_verdict_counts():
    at = open_page("pages/compare.py")
    assert at.selectbox(key="compare_experiment").value == "transfers"
    headline = next(m.value for m in at.markdown if "points slower beyond noise" in m.value)
    metrics = {m.label: m.value for m in at.metric}
    assert int(metrics["Points compared"]) > 100
    verdicts = ("Slower beyond noise", "Faster beyond noise", "Within run-to-run noise", "Same within noise")
    assert sum(int(metrics[k]) for k in verdicts) == int(metrics["Points compared"])
    assert int(metrics["Within run-to-run noise"]) > 0  # the default pair, H200 a day apart, moves between runs
    assert f"{metrics['Slower beyond noise']} of {metrics['Points compared']} points slower" in headline \
        or (metrics["Slower beyond noise"] == "0" and "none of" in headline)
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert charts[0]["layout"]["title"]["text"].startswith("Candidate speed vs baseline, per point<br>")
    diff = at.dataframe[0].value.set_index("field")
    assert bool(diff.loc["timestamp", "differs"])
    assert any(b.label.startswith("Download the review report") for b in at.get("download_button"))


@pytest.mark.slow
def test_compare_h100_against_h200_names_both_devices_and_normalizes():
    from gpu.core import schema

    h100 = schema.read_results(next(BUNDLED_DIRS[1].glob("transfers_nvidia-h100*.parquet")))["run_id"].iloc[0]
    at = open_page("pages/compare.py")
    assert "NVIDIA H200" in at.selectbox(key="compare_baseline").options[
        at.selectbox(key="compare_baseline").index]
    at.multiselect(key="compare_candidates").set_value([h100]).run()
    # a pair across GPU models, picked by hand, is labelled as such until normalised
    assert any(unescaped(m.value).startswith("**Across GPU models (NVIDIA H100 80GB HBM3 against NVIDIA H200), "
                                             "not normalized: ") for m in at.markdown)
    diff = at.dataframe[0].value.set_index("field")
    assert diff.loc["device_name", "baseline"] == "NVIDIA H200"
    assert diff.loc["device_name", "candidate"] == "NVIDIA H100 80GB HBM3" and bool(diff.loc["device_name", "differs"])
    at.toggle(key="compare_normalized").set_value(True).run()
    chart = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert chart["layout"]["title"]["text"].startswith("Normalized")
    assert not any("Across GPU models" in m.value for m in at.markdown)
    assert chart["layout"]["yaxis"]["title"]["text"] == "change in % of own device's limit"


def open_across_models(experiment: str) -> AppTest:
    """Compare on an experiment whose bundled runs are of two GPU models: no pair by default, one picked by hand."""
    at = open_page("pages/compare.py")
    at.selectbox(key="compare_experiment").set_value(experiment).run()
    assert at.multiselect(key="compare_candidates").value == []
    assert any(f"No two runs of {experiment} on one GPU model" in i.value for i in at.info)
    candidates = at.multiselect(key="compare_candidates")
    candidates.set_value([candidates.options[0].rsplit(" · ", 1)[1]]).run()  # a label ends with its run id
    assert not at.exception, at.exception
    return at


@pytest.mark.slow
def test_the_ratio_chart_names_each_series_and_shows_the_verdict_as_the_shape():
    at = open_page("pages/compare.py")
    chart = json.loads(at.get("plotly_chart")[0].proto.spec)
    points = [t for t in chart["data"] if t.get("legendgroup") == "series"]
    names = {t["name"] for t in points}
    # mode × direction, the modes named as on the other pages
    assert {"pinned H2D", "pageable (NumPy) D2H", "mapped zero-copy H2D", "pinned write-combined D2H"} <= names, names
    assert not any("pinned_wc" in n or n.startswith("mapped ") and "zero-copy" not in n for n in names)
    colours = [t["marker"]["color"] for t in points]
    assert len(set(colours)) == len(colours)  # one colour per series
    # each colour's legend entry is a plain square (the legend draws a trace's first symbol, here a gap point's)…
    assert all(t["marker"]["symbol"][0] == "square" and t["x"][0] is None for t in points)
    shapes = {s for t in points for s in t["marker"]["symbol"][1:]}  # …and the points carry the verdict's shape
    assert shapes <= {"triangle-down", "diamond-open", "circle-open", "triangle-up"} and len(shapes) >= 2
    assert "shape: ▼ slower beyond noise · ◇ within run-to-run noise · ○ same within noise · ▲ faster beyond noise" \
        in chart["layout"]["title"]["text"]
    assert chart["layout"]["xaxis"]["type"] == "log" and "1 GiB" in chart["layout"]["xaxis"]["ticktext"]


@pytest.mark.slow
def test_kernel_points_are_labelled_by_what_differs_and_coloured_by_variant():
    at = open_across_models("coalescing")
    chart = json.loads(at.get("plotly_chart")[0].proto.spec)
    points = [t for t in chart["data"] if t.get("legendgroup") == "series"]
    assert {"strided", "offset", "copy_f4"} <= {t["name"] for t in points}
    strided = next(t for t in points if t["name"] == "strided")
    assert "block 256 · stride 16" in strided["x"]  # the vector size, the same everywhere, is left out
    axis = chart["layout"]["xaxis"]
    assert axis["type"] == "category" and "block 256 · stride 16" in axis["categoryarray"]
    assert axis.get("showticklabels", True) is not False


@pytest.mark.slow
def test_normalize_changes_the_headline_and_the_counters_too():
    at = open_across_models("coalescing")

    def counters():
        return {m.label: int(m.value) for m in at.metric}

    raw = counters()
    raw_line = next(m.value for m in at.markdown if "beyond noise" in m.value)
    at.toggle(key="compare_normalized").set_value(True).run()
    normalized = counters()
    line = next(m.value for m in at.markdown if "beyond noise" in m.value)
    assert line.startswith("**Normalized to each device") and line != raw_line
    assert normalized != raw, (raw, normalized)  # an H100 against an H200: raw speed and share of limit differ
    assert sum(v for k, v in normalized.items() if k != "Points compared") == normalized["Points compared"]
    assert f"{normalized['Faster beyond noise']} faster" in line or normalized["Faster beyond noise"] == 0


@pytest.mark.slow
def test_the_points_table_shows_microseconds_and_small_p_values_as_people_read_them():
    at = open_page("pages/compare.py")
    table = next(d.value for d in at.dataframe if "p (Mann-Whitney)" in d.value.columns)
    small = table[table["point"].str.startswith("4 KiB ")]
    assert small["baseline"].str.endswith(" µs").all() and small["candidate"].str.endswith(" µs").all()
    assert table[table["point"].str.startswith("1 GiB ")]["baseline"].str.endswith(" ms").all()
    p = table["p (Mann-Whitney)"]
    assert (p == "< 0.001").any() and not (p == "0").any()


@pytest.mark.slow
def test_the_history_of_the_h200_shows_two_days():
    at = open_page("pages/compare.py")
    at.selectbox(key="compare_history_device").set_value("NVIDIA H200").run()
    assert not at.exception
    charts = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
    assert any(t.endswith("on NVIDIA H200") for t in charts), charts
    assert any("2 runs;" in m.value for m in at.markdown)


@pytest.mark.slow
def test_runs_lists_stored_and_bundled_runs_and_moves_one_to_the_trash_with_confirmation(fresh_store):
    from gpu.core import schema

    [result] = fresh_store.save(schema.read_results(MANAGED).assign(run_id="storedrun01"), "import",
                                label="after driver 580")
    at = open_page("pages/runs.py")
    table = at.dataframe[0].value
    assert {"stored", "bundled"} == set(table["origin"])
    at.text_input(key="runs_filter_label").input("driver 580").run()
    assert at.dataframe[0].value["run_id"].tolist() == ["storedrun01"]
    assert at.button(key="runs_trash").disabled  # nothing happens without the confirmation
    at.checkbox(key="runs_trash_sure_storedrun01").check().run()
    at.button(key="runs_trash").click().run()
    assert not at.exception
    assert not fresh_store.has_run("storedrun01")
    assert fresh_store.trashed()["run_id"].tolist() == ["storedrun01"]


def test_a_bundled_run_cannot_be_trashed_and_a_filter_narrows_the_table():
    at = open_page("pages/runs.py")
    at.multiselect(key="runs_filter_device_name").set_value(["NVIDIA H100 80GB HBM3"]).run()
    table = at.dataframe[0].value
    # the review runs of 2026-11-23, with coalescing re-recorded and device copies and FMA added on 2026-11-25, and
    # the two-H100 peer recording of 2026-11-25
    assert set(table["device_name"]) == {"NVIDIA H100 80GB HBM3"} and len(table) == 12
    assert any("cannot be moved to the trash" in c.value for c in at.caption)
    import datetime as dt

    at.date_input(key="runs_filter_dates").set_value((dt.date(2026, 11, 21), dt.date(2026, 11, 21))).run()
    assert len(at.dataframe[0].value) == 0  # the H100 runs were measured on the 23rd and the 25th


def test_a_page_opened_with_a_run_id_shows_that_run_like_a_replay(fresh_store):
    from gpu.core import schema

    fresh_store.save(schema.read_results(MANAGED).assign(run_id="storedrun02"), "import")
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["run"] = "storedrun02"
    at.run()
    at.switch_page("pages/memory_modes.py").run()
    assert not at.exception, at.exception
    assert any("**Stored run** storedrun02" in i.value and "H100" in i.value for i in at.info)
    charts = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
    assert any(t.startswith("Managed memory") and "H100" in t for t in charts)


def test_an_unknown_run_id_in_the_address_is_named_and_the_page_still_works():
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["run"] = "nosuchrun"
    at.run()
    assert not at.exception
    assert any("Run nosuchrun from the address cannot be shown" in w.value for w in at.warning)


def test_a_broken_store_url_leaves_the_app_alive_with_a_message(monkeypatch):
    monkeypatch.setenv("PINPOINT_DB_URL", "postgresql+psycopg://team:secret@127.0.0.1:1/nowhere")
    st.cache_resource.clear()
    at = open_page("pages/runs.py")
    assert any("cannot open the runs store" in e.value and "secret" not in e.value for e in at.error)
    at = open_page("pages/transfers.py")  # other pages are untouched
    assert at.get("plotly_chart")
