"""The bundled peer recordings: the two-H200 one of 2026-11-28 (every SM chasing in turn, every power of two from 4 KiB
to 1 GiB) replays, imports and opens the Peers page by default; the two-H100 one of 2026-11-25 stays choosable; the
live estimate prices by the recording of the machine's GPU model, else the fullest, the newest among equals; Compare
labels a pair of the two as across models."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from gpu.core import conditions, schema
from gpu.core.errors import ImportProblem
from gpu.experiments.peers import cost as peer_cost
from gpu.results.analysis import pairing
from gpu.results.exchange import contract, imports
from gpu.results.persistence.store import RunStore
from gpu.service.backends import ReplayBackend

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
H200 = ROOT / "assets/replay/peers_nvidia-h200_2026-11-28.parquet"
H100 = ROOT / "assets/replay/peers_nvidia-h100-80gb-hbm3_2026-11-25.parquet"
H200_RUN, H100_RUN = "99ae3b159589", "ad18b444a718"


@pytest.fixture(autouse=True)
def replay_mode(monkeypatch):
    monkeypatch.setenv("PINPOINT_BACKEND", "replay")
    monkeypatch.delenv("PINPOINT_REPLAY_DIR", raising=False)
    st.cache_resource.clear()
    yield
    st.cache_resource.clear()


def test_the_h200_recording_replays_whole_with_its_provenance():
    rows = schema.read_results(H200)  # as replay reads it
    assert len(rows) == 722 and set(rows["run_id"]) == {H200_RUN}
    first = rows.iloc[0]
    assert (first["device_name"], first["driver_version"], first["git_commit"]) == \
        ("NVIDIA H200", "580.159.04", "116c1bf8b798")
    assert str(first["timestamp"]).startswith("2026-11-28T17:55")
    assert sorted(set(rows.loc[rows["variant"] != "latency", "bytes"])) == [2 ** k for k in range(12, 31)]
    assert set(rows["link"].dropna()) == {"NVLink 4 ×18 via NVSwitch"}
    chase = rows[rows["variant"] == "latency"]
    assert set(chase["loads_per_sample"]) == {2048.0}  # every SM in turn, 2,048 loads a launch
    settled = chase[chase["elements"] >= 2 ** 20]  # the chain's buffer, 1 MiB and up
    assert 828.7 <= settled["median_ms"].min() * 1e6 and settled["median_ms"].max() * 1e6 < 829.4



def test_the_h200_recordings_host_link_points_name_no_nvlink_cause():
    """The recording follows the per-point rule: its host-link points (whose data never crosses NVLink) read no NVLink
    counters, so none names one; the one host-link point not clean saw the GPU busy between points. Its pair points
    count the node's NVLink CRC errors as before."""
    from gpu.experiments import peers

    rows = schema.read_results(H200)
    crossing = rows.apply(lambda row: peers.crosses_nvlink(row.to_dict()), axis=1)
    assert set(rows.loc[~crossing, "variant"]) == set(peers.HOST_VARIANTS)
    host = rows[~crossing]
    assert not any("NVLink" in cause for value in host["conditions"] for cause in conditions.causes(value))
    assert not any("nvlink" in json.loads(w) for w in host["witness"])  # not read at all
    [busy] = host[~host["conditions"].map(conditions.is_clean)].itertuples()
    assert (busy.variant, busy.gpu_index, busy.bytes) == ("h2d_all", 1, 4096)
    assert busy.conditions == "GPU busy 68 % (memory 0 %) between points"
    pairs = rows[crossing]
    not_clean = pairs[~pairs["conditions"].map(conditions.is_clean)]
    assert (len(not_clean), len(pairs)) == (397, 418)
    assert all(cause.startswith("NVLink ") and " CRC errors +" in cause
               for value in not_clean["conditions"] for cause in conditions.causes(value))


def test_the_h200_recording_imports_into_a_store_as_it_replays(tmp_path):
    read = imports.read_upload(H200.name, path=H200)  # its manifest's point count and content hash checked
    assert '"sizes":[4096,8192,16384,' in read.attrs["params"][H200_RUN]
    store = RunStore(f"sqlite:///{tmp_path}/runs.sqlite")
    store.save(read, "import")
    stored = store.load(H200_RUN)
    assert len(stored) == 722 and set(stored["device_name"]) == {"NVIDIA H200"}
    np.testing.assert_allclose(stored.sort_values(["variant", "timer", "gpu_index", "bytes", "working_set_bytes"])[
        "gbps"].to_numpy(dtype=float), schema.read_results(H200).sort_values(
        ["variant", "timer", "gpu_index", "bytes", "working_set_bytes"])["gbps"].to_numpy(dtype=float))


def test_replay_lists_the_peer_recordings_newest_first_so_the_page_opens_on_the_h200():
    listed = ReplayBackend().recordings("peers")
    assert listed["run_id"].tolist()[:2] == [H200_RUN, H100_RUN]
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("pages/peers.py").run()
    assert not at.exception, at.exception
    menu = at.selectbox(key="peers_recording")
    assert menu.value == H200_RUN  # the H100 one stays choosable, second
    assert [o.split(" · ")[0] for o in menu.options][:2] == ["NVIDIA H200", "NVIDIA H100 80GB HBM3"]
    shown = " ".join(m.value for m in at.markdown).replace("\\", "")
    assert "latency into the peer's memory 829 ns" in shown
    menu.set_value(H100_RUN).run()
    assert not at.exception, at.exception
    assert "latency into the peer's memory 851 ns" in " ".join(m.value for m in at.markdown).replace("\\", "")


def listing(*runs) -> pd.DataFrame:
    """Peer rows of made-up runs: (run_id, device, timestamp, points)."""
    return pd.DataFrame([{"experiment": "peers", "run_id": run_id, "device_name": device, "timestamp": when}
                         for run_id, device, when, points in runs for _ in range(points)])


def test_the_estimate_prices_by_the_same_model_then_the_fullest_then_the_newest():
    data = ReplayBackend().data
    assert set(peer_cost.pricing_run(data, "NVIDIA H200")["run_id"]) == {H200_RUN}
    assert set(peer_cost.pricing_run(data, "NVIDIA H100 80GB HBM3")["run_id"]) == {H100_RUN}
    assert set(peer_cost.pricing_run(data, "NVIDIA A100-SXM4-80GB")["run_id"]) == {H200_RUN}  # 722 points to 380
    runs = listing(("old", "H200", "2026-11-20T10:00:00+00:00", 5), ("new", "H200", "2026-11-28T10:00:00Z", 5),
                   ("full", "H100", "2026-11-19T10:00:00+00:00", 9))
    assert set(peer_cost.pricing_run(runs, "H200")["run_id"]) == {"new"}  # equals: the newest
    assert set(peer_cost.pricing_run(runs, "B200")["run_id"]) == {"full"}  # no such model: the fullest


def test_the_h200_recording_prices_the_matrix_and_the_full_sweep_from_its_own_points():
    from gpu.experiments import peers

    recorded = peer_cost.pricing_run(ReplayBackend().data, "NVIDIA H200")
    matrix = peer_cost.estimate(peers.with_devices(peers.parse_params({}), [0, 1]), recorded)
    sweep = peer_cost.estimate(peers.with_devices(peers.parse_params(peers.FULL_SWEEP), [0, 1]), recorded)
    assert (matrix.points, matrix.priced, sweep.points, sweep.priced) == (16, 16, 380, 380)  # every point priced
    assert matrix.basis == "2 × NVIDIA H200, 2026-11-28, profile interactive"
    assert 0.5 < matrix.seconds < 3 and 30 < sweep.seconds < 60, (matrix.seconds, sweep.seconds)


def test_compare_labels_the_h200_and_h100_peer_recordings_a_pair_across_models():
    h200, h100 = schema.read_results(H200), schema.read_results(H100)
    assert pairing.across_models(h100, h200) == "NVIDIA H200 against NVIDIA H100 80GB HBM3"
    listed = pd.DataFrame([{"run_id": r["run_id"].iloc[0], "device_name": r["device_name"].iloc[0],
                            "timestamp": r["timestamp"].iloc[0]} for r in (h200, h100)])
    assert pairing.like_pair(listed, lambda run_id: {"same point"}) is None  # never a default pair


def test_a_latency_figure_may_be_its_samples_mean_and_nothing_else_may():
    """The chase's figure is the mean of its launches (the contract takes it, as the H100 recording's older median);
    a copy's figure is its samples' median, and a latency figure that is neither is refused by row and column."""
    rows = schema.read_results(H200).reset_index(drop=True)
    chase = int(rows.index[rows["variant"] == "latency"][0])
    samples = np.asarray(rows.at[chase, "samples_ms"])
    assert np.median(samples) != samples.mean()
    contract.check(rows.copy(), "h200.parquet")  # as recorded: every latency row its launches' mean
    contract.check(rows.assign(median_ms=np.where(rows.index == chase, np.median(samples),
                                                          rows["median_ms"])), "h200.parquet")
    off = rows.assign(median_ms=np.where(rows.index == chase, samples.mean() * 1.001, rows["median_ms"]))
    with pytest.raises(ImportProblem, match=f"row {chase + 1} .*column median_ms"):
        contract.check(off, "h200.parquet")
    copy = int(rows.index[(rows["variant"] == "ce_read") & (rows["samples"] > 2)][0])
    values = np.asarray(rows.at[copy, "samples_ms"])
    assert not np.isclose(np.median(values), values.mean(), rtol=1e-6)
    meaned = rows.assign(median_ms=np.where(rows.index == copy, values.mean(), rows["median_ms"]))
    with pytest.raises(ImportProblem, match=f"row {copy + 1} .*column median_ms"):
        contract.check(meaned, "h200.parquet")


def test_compare_lists_both_peer_recordings_and_says_a_pair_of_them_is_across_models(monkeypatch, tmp_path):
    monkeypatch.setenv("PINPOINT_DB_URL", f"sqlite:///{tmp_path}/runs.sqlite")
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["compare_experiment"] = "peers"
    at.run()
    at.switch_page("pages/compare.py").run()
    assert not at.exception, at.exception
    baseline = at.selectbox(key="compare_baseline")
    listed = {label.rsplit(" · ", 1)[-1] for label in at.multiselect(key="compare_candidates").options}
    assert {H200_RUN, H100_RUN} <= listed | {baseline.value}
    # no default pair: the two were measured on two GPU models
    assert any("No two runs of peers on one GPU model measured the same points" in i.value.replace("\\", "")
               for i in at.info)
    other = H100_RUN if baseline.value == H200_RUN else H200_RUN
    at.multiselect(key="compare_candidates").set_value([other]).run()
    assert not at.exception, at.exception
    models = {H200_RUN: "NVIDIA H200", H100_RUN: "NVIDIA H100 80GB HBM3"}
    said = f"**Across GPU models ({models[other]} against {models[baseline.value]}), not normalized: "
    assert any(m.value.replace("\\", "").startswith(said) for m in at.markdown), [m.value for m in at.markdown][:5]


def test_on_stage_the_recording_menu_folds_away_and_a_two_gpu_matrix_leaves_room_for_its_conditions():
    """Two peer recordings bring a menu of them: on stage it folds into More settings, and the two-GPU matrix is
    drawn shorter than an eight-GPU one, so the matrix, its takeaway and the line of conditions the H200 recording
    brings (NVLink CRC errors) fit 1920×960 (the browser's stage-state check measures it)."""
    import json

    from gpu.experiments.peers import view as charts

    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["present"] = "1"
    at.run()
    at.switch_page("pages/peers.py").run()
    assert not at.exception, at.exception
    [menu] = [e for e in at.expander if e.label == "More settings"]
    assert [s.key for s in menu.selectbox] == ["peers_recording"] and menu.selectbox[0].value == H200_RUN
    [matrix] = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert matrix["layout"]["height"] == charts.STAGE_SMALL_MATRIX_HEIGHT < charts.STAGE_MATRIX_HEIGHT
    assert matrix["data"][0]["textfont"]["size"] >= 20
    assert any("points not clean: NVLink" in m.value.replace("\\", "") for m in at.markdown)


def test_a_small_copys_rates_read_with_two_significant_digits_not_as_zero():
    """At 4 KiB a peer copy moves 0.2–0.4 GB/s: cells and the takeaway said "0" when every figure was rounded whole."""
    from gpu.experiments.peers import matrix as pm
    from gpu.experiments.peers import view as charts

    rows = schema.read_results(H200)
    view = pm.View("ce_read", "cuda_event_batched_held", 4096)
    cells = pm.matrix_rows(rows, view)
    assert len(cells) == 2 and (cells["gbps"] < 1).all()
    said = charts.takeaway(rows, view)
    low, high = sorted(charts.rate(v) for v in cells["gbps"])
    assert f"copy {low} GB/s one way" in said or f"copy {low}–{high} GB/s one way" in said, said
    assert low.startswith("0.") and len(low) == 4  # 0.23, not 0
    figure = charts.matrix_figure(rows, view)
    shown = [t for line in figure.data[0].text for t in line if t]
    assert any(t.startswith(low) for t in shown), shown  # "0.31!<br>NV18": "!" marks a point not clean
    assert [charts.rate(v) for v in (391.4, 12.3, 2.34, 0.234, 0.0)] == ["391", "12", "2.3", "0.23", "0"]
