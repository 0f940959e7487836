"""Each node's links against the fleet (gpu/present/fleet/links.py, its chart and the Fleet page's section), and
``check`` on a node run's pair-keyed points. The peer frames are made up (tests/simulated_fleet.peer_frame: a
healthy NVLink pair at 396 GB/s), one link of an 8-GPU node slowed to 0.51×."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import streamlit as st

from gpu import bench
from gpu.experiments import peers
from gpu.present.charts.fleet_links import link_matrix_figure
from gpu.present.fleet import links as fleet_links
from gpu.results.persistence.store import RunStore
from tests import fleet_page_helper as helper
from tests.simulated_fleet import NVLINK, peer_frame
from tests.test_url_state import open_with

SLOW = {(4, 7): 1 / 0.51}  # boards 4 → 7: GPUs 2 → 5 of the 8-GPU node (boards 2–9)


def params(*variants):
    return peers.parse_params({"sizes": [268435456], "variants": list(variants) or ["ce_write", "h2d_all"],
                               "methods": ["batched"], "profile": "interactive", "whole_matrix_gpus": 8})


def node_frames(slow=SLOW, when="2026-11-25T10:00:00+00:00"):
    return [peer_frame([0, 1], params(), host="node-0", when=when, run_id="node0peers"),
            peer_frame(list(range(2, 10)), params(), slow, host="node-3", when=when, run_id="node3peers")]


def ce_write(table):
    [figure] = [f for f, label in zip(table["figure"], table["label"], strict=True) if label.startswith("ce_write")][:1]
    return fleet_links.judge(table, figure)


def test_each_pair_is_judged_against_the_median_of_its_link_type_and_the_slow_link_is_named():
    table = fleet_links.links(node_frames())
    assert len(table) == 2 + 56  # ordered pairs only: the host-link rows have no peer
    judged = ce_write(table)
    assert set(judged["link"]) == {NVLINK} and judged["median"].to_numpy() == pytest.approx(396.0)
    slow = judged[judged["slow"]]
    assert list(zip(slow["host"], slow["gpu_index"], slow["peer_index"], strict=True)) == [("node-3", 2, 5)]
    assert slow["ratio"].iloc[0] == pytest.approx(0.51)
    assert fleet_links.slow_link_sentences(judged) == [
        f"node-3: GPU 2 → GPU 5 at 0.51× the {NVLINK} median (202 GB/s against 396 GB/s; ce_write 256 MiB "
        "batched; 45 % of 18 NVLink 4 links); conditions not observed."]
    assert fleet_links.summary(judged).startswith(f"58 links between GPUs on 2 nodes (58 {NVLINK}): 1 is more")
    assert fleet_links.hosts(judged) == ["node-3", "node-0"]  # the node with a slow link first
    matrix = fleet_links.node_matrix(judged, "node-3")
    assert matrix.shape == (8, 8) and matrix.loc[2, 5] == pytest.approx(0.51)
    assert all(math.isnan(matrix.loc[i, i]) for i in range(8)) and matrix.drop(index=2).notna().sum().sum() == 49


def test_link_types_are_judged_apart_and_a_rare_type_is_shown_not_judged():
    pcie = peer_frame([10, 11], params(), host="node-9", link="PCIe via host bridge", run_id="pcie")
    pcie = pcie.assign(median_ms=pcie["median_ms"] * 8, gbps=pcie["gbps"] / 8)  # 49.5 GB/s: slow for NVLink
    judged = ce_write(fleet_links.links([*node_frames(slow={}), pcie]))
    assert not judged["slow"].any()
    over_pcie = judged[judged["host"] == "node-9"]
    assert over_pcie["median"].to_numpy() == pytest.approx(49.5) and over_pcie["deviation"].isna().all()


def test_the_newest_node_run_counts_and_host_links_are_no_links():
    earlier = node_frames(slow={}, when="2026-11-20T10:00:00+00:00")
    earlier = [f.assign(run_id=f["run_id"] + "-old") for f in earlier]
    judged = ce_write(fleet_links.links([*earlier, *node_frames()]))
    assert set(judged["run_id"]) == {"node0peers", "node3peers"} and judged["slow"].sum() == 1
    assert fleet_links.links([peer_frame([0, 1], params("h2d_all"), host="node-0")]).empty


def test_the_link_matrix_chart_writes_gb_s_in_cells_and_escapes_the_host():
    frames = node_frames()
    frames[1] = frames[1].assign(host="<b>node-3</b>")
    judged = ce_write(fleet_links.links(frames))
    figure = link_matrix_figure(judged, "<b>node-3</b>", "links of <b>node-3</b>")
    heat = figure.data[0]
    assert list(heat.x) == [f"GPU {i}" for i in range(8)] and heat.text[2][5] == "202" and heat.text[0][0] == ""
    assert heat.z[2][5] == pytest.approx(0.51) and heat.zmid == 1
    assert "<b>" not in heat.customdata[2][5] and "0.51× the median of its link type" in heat.customdata[2][5]
    assert "<b>" not in figure.layout.title.text


@pytest.mark.slow
def test_the_fleet_page_shows_each_nodes_link_matrix_and_names_the_slow_link(monkeypatch, tmp_path):
    url = f"sqlite:///{tmp_path}/runs.sqlite"
    monkeypatch.setenv("PINPOINT_BACKEND", "replay")
    monkeypatch.setenv("PINPOINT_DB_URL", url)
    st.cache_resource.clear()
    store = helper.fill_store(url, boards=4)
    for frame in node_frames():  # as a fleet stores a node run: with its parameters, measured on the node's GPUs
        store.save(frame, "fleet", fleet=("sim-fleet", "health"), gpus="node",
                   params={frame["run_id"].iloc[0]: dataclasses.asdict(params())})
    try:
        at = open_with("pages/fleet.py")
        assert not at.exception
        shown = "\n".join([m.value for m in at.markdown] + [c.value for c in at.caption])
        assert "58 links between GPUs on 2 nodes" in shown
        assert "node\\-3\\: GPU 2 → GPU 5 at 0\\.51× the NVLink 4 ×18 median" in shown
        assert at.selectbox(key="fleet_link_node").value == "node-3"
        assert at.selectbox(key="fleet_link_figure").value.startswith("peers|('ce_write'")
        [matrix] = [json.loads(c.proto.spec) for c in at.get("plotly_chart")
                    if json.loads(c.proto.spec)["layout"]["title"]["text"].startswith("node-3: ce_write")]
        assert len(matrix["data"][0]["x"]) == 8
        at.selectbox(key="fleet_link_node").set_value("node-0").run()
        [matrix] = [json.loads(c.proto.spec) for c in at.get("plotly_chart")
                    if json.loads(c.proto.spec)["layout"]["title"]["text"].startswith("node-0")]
        assert len(matrix["data"][0]["x"]) == 2
        # the board heatmap keeps its one-GPU figures: the pairs are not board columns
        [heat] = [json.loads(c.proto.spec) for c in at.get("plotly_chart")
                  if "deviation from the median" in json.loads(c.proto.spec)["layout"]["title"]["text"]]
        assert not any("ce_write" in x for x in heat["data"][0]["x"])
    finally:
        st.cache_resource.clear()


@pytest.mark.slow
def test_check_judges_a_node_run_by_pair(monkeypatch, capsys, tmp_path):
    url = f"sqlite:///{tmp_path}/runs.sqlite"
    store = RunStore(url)
    store.save(peer_frame(list(range(2, 10)), params("ce_write"), {}, host="node-3", run_id="peers-before",
                          when="2026-11-20T10:00:00+00:00"), "import")
    store.save(peer_frame(list(range(2, 10)), params("ce_write"), SLOW, host="node-3", run_id="peers-after",
                          when="2026-11-25T10:00:00+00:00"), "import")
    store.close()
    monkeypatch.setenv("PINPOINT_DB_URL", url)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    junit = tmp_path / "junit.xml"
    code = bench.main(["check", "--candidate", "peers-after", "--against", "peers-before", "--junit", str(junit)])
    out, err = capsys.readouterr()
    assert code == 1, err
    assert out.startswith("FAILED: 1 of 56 points slower beyond noise")
    assert 'name="GPU 2 → GPU 5 ce_write 256 MiB batched"' in junit.read_text()  # the slower point is the pair
    code = bench.main(["check", "--candidate", "peers-before", "--against", "peers-after"])
    assert code == 0
