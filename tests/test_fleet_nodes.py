"""Fleets of nodes through a real Dask scheduler and real workers (separate processes), simulated boards standing in
for GPUs: a suite's node run (``gpus = "node"``, the peer matrix) runs once per node, on one worker holding all the
node's GPUs, only after the node's one-GPU runs and never beside them (the simulated boards log when each job ran);
a node with one GPU reports "no peer" and goes on; a fleet id resumes node runs by node."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpu.experiments import peers as peers_experiment
from gpu.experiments import suites
from gpu.fleet import nodes as fleet_nodes
from gpu.fleet import run as fleet_run
from gpu.results.persistence.store import RunStore, canonical_params
from tests.simulated_fleet import board_uuid
from tests.test_fleet import Cluster, fleet, stored

SUITE = """profile = "interactive"
timeout_s = 60
[[run]]
experiment = "reduction"
[run.params]
sizes = [268435456]
variants = ["warp_shuffle"]
[[run]]
experiment = "host_latency"
[run.params]
sizes = [1048576]
variants = ["mapped"]
[[run]]
experiment = "peers"
gpus = "node"
timeout_s = {peer_timeout}
[run.params]
sizes = [268435456]
variants = ["ce_write", "ce_read", "h2d_all", "h2d_alone"]
methods = ["batched"]
"""


def suite_file(tmp_path: Path, peer_timeout: int = 60) -> Path:
    path = tmp_path / "nodes.toml"
    path.write_text(SUITE.format(peer_timeout=peer_timeout))
    return path


def jobs(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.mark.slow  # a Dask cluster of simulated nodes
def test_a_node_run_waits_for_its_nodes_one_gpu_runs_and_never_runs_beside_them(tmp_path):
    log = tmp_path / "jobs.jsonl"
    cluster = Cluster(tmp_path)
    try:
        for board in range(10):  # node-0: boards 0–1; node-1: boards 2–9, board 9 slower than the rest
            cluster.add_worker(board, PINPOINT_SIM_NODES="2,8", PINPOINT_SIM_LOG=log,
                               PINPOINT_SIM_SECONDS_PER_POINT=5 if board == 9 else 0.2)
        cluster.wait_for_workers(10)
        url = f"sqlite:///{tmp_path}/runs.sqlite"
        code, out, err = fleet(url, str(suite_file(tmp_path)), "--cluster", cluster.address, "--fleet-id", "n1",
                               env={"PINPOINT_SIM_NODES": "2,8"})
    finally:
        cluster.stop()
    assert code == 0, err
    assert "node-0 (2 GPUs): peers on the node's GPUs together" in err
    assert "node-1 (8 GPUs): peers on the node's GPUs together" in err
    runs = stored(url, "n1")
    assert len(runs) == 10 * 2 + 2
    peers = runs[runs["experiment"] == "peers"].set_index("host")
    # every ordered pair × 2 copy variants, every GPU × 2 host-link variants; on 8 GPUs the sampled plan: the pull on
    # every ordered pair, the push on 16 of them (each GPU to the next and to the one 4 away)
    assert peers.loc["node-0", "points"] == 2 * 2 + 2 * 2 and peers.loc["node-1", "points"] == 56 + 16 + 8 * 2
    # each run keeps the parameters its suite run asked for, and how the suite ran it
    asked = RunStore(url).run_params(list(runs["run_id"])).set_index("run_id")
    for run in suites.load(str(suite_file(tmp_path))).runs:
        mine = asked.loc[list(runs.loc[runs["experiment"] == run.experiment, "run_id"])]
        assert set(mine["params"]) == {canonical_params(run.checked().plain())} and set(mine["gpus"]) == {run.gpus}

    done = jobs(log)
    node_jobs = [j for j in done if len(j["boards"]) > 1]
    assert sorted(tuple(j["boards"]) for j in node_jobs) == [(0, 1), tuple(range(2, 10))]
    for node in node_jobs:
        mine = [j for j in done if len(j["boards"]) == 1 and j["boards"][0] in node["boards"]]
        assert len(mine) == 2 * len(node["boards"])
        assert all(j["end"] <= node["start"] for j in mine)  # after every one-GPU run of its GPUs: never beside one
    node0 = next(j for j in node_jobs if j["boards"] == [0, 1])
    slow = [j for j in done if j["boards"] == [9]]
    assert node0["start"] < max(j["end"] for j in slow)  # node-0 did not wait for node-1's slow board


@pytest.mark.slow  # a Dask cluster of simulated nodes
def test_a_one_gpu_node_has_no_peer_and_a_node_run_resumes_by_node(tmp_path):
    url = f"sqlite:///{tmp_path}/runs.sqlite"
    nodes = {"PINPOINT_SIM_NODES": "1,2"}  # node-0: board 0 alone; node-1: boards 1–2
    cluster = Cluster(tmp_path)
    try:
        cluster.add_worker(0, **nodes)
        cluster.add_worker(1, PINPOINT_SIM_HANG="1:peers", **nodes)  # node-1's peer matrix does not finish
        cluster.add_worker(2, **nodes)
        cluster.wait_for_workers(3)
        code, out, err = fleet(url, str(suite_file(tmp_path, peer_timeout=3)), "--cluster", cluster.address,
                               "--fleet-id", "n2", env=nodes)
    finally:
        cluster.stop()
    assert code == 1, err
    no_peer = [line for line in err.splitlines() if "no peer" in line]
    assert no_peer == ["node-0 (1 GPU): peers: no peer (it measures 2 or more GPUs of a node together): not measured, "
                       "the node goes on"]
    assert "failed: node-1 (2 GPUs): peers: timed out: peers did not finish within 3 s" in out
    assert "node-0" not in "".join(line for line in out.splitlines() if "failed:" in line)  # no peer is no failure
    runs = stored(url, "n2")
    assert len(runs) == 3 * 2 and "peers" not in set(runs["experiment"])

    cluster = Cluster(tmp_path)  # the same fleet id again: only node-1's peer matrix is missing
    try:
        for board in range(3):
            cluster.add_worker(board, **nodes)
        cluster.wait_for_workers(3)
        code, out, err = fleet(url, str(suite_file(tmp_path, peer_timeout=3)), "--cluster", cluster.address,
                               "--fleet-id", "n2", env=nodes)
    finally:
        cluster.stop()
    assert code == 0, err
    assert err.count("already stored in fleet n2: not measured again") == 3
    assert "1 runs stored (8 of 8 points sent)" in out  # 2 ordered pairs × 2 variants, 2 GPUs × 2 host links
    runs = stored(url, "n2")
    peers = runs[runs["experiment"] == "peers"]
    assert list(peers["host"]) == ["node-1"] and len(runs) == 3 * 2 + 1

    code, out, err = _again(url, tmp_path, nodes)
    assert code == 0 and "node-1 (2 GPUs): peers already stored in fleet n2" in err and "0 runs stored" in out


def _again(url: str, tmp_path: Path, nodes: dict):
    cluster = Cluster(tmp_path)
    try:
        for board in range(3):
            cluster.add_worker(board, **nodes)
        cluster.wait_for_workers(3)
        return fleet(url, str(suite_file(tmp_path, peer_timeout=3)), "--cluster", cluster.address, "--fleet-id",
                     "n2", env=nodes)
    finally:
        cluster.stop()


# --- units ---------------------------------------------------------------------------------------------------------
def test_a_suite_asks_for_a_nodes_gpus_with_gpus_node_checked_with_its_line():
    suite = suites.parse(SUITE.format(peer_timeout=60), "n.toml")
    assert [r.gpus for r in suite.runs] == ["one", "one", "node"]
    assert [r.experiment for r in suite.gpu_runs] == ["reduction", "host_latency"]
    assert [r.experiment for r in suite.node_runs] == ["peers"] and suite.node_runs[0].min_gpus == 2
    for text, expected in [
        ('[[run]]\nexperiment = "reduction"\ngpus = "all"\n', 'n.toml: line 3: gpus must be "one"'),
        ('[[run]]\nexperiment = "reduction"\ngpus = 8\n', "(all GPUs of a node together), not 8"),
        ('[[run]]\nexperiment = "peers"\n[run.params]\nsizes = [1024]\n',
         'n.toml: line 2: peers measures 2 or more GPUs together: give gpus = "node"'),
    ]:
        with pytest.raises(suites.SuiteError) as caught:
            suites.parse(text, "n.toml")
        assert any(expected in reason for reason in caught.value.reasons), caught.value.reasons


def test_the_health_suite_measures_the_peer_matrix_once_per_node():
    health = suites.load("health")
    peers = health.run_for("peers")
    assert peers.on_node and health.node_runs == (peers,) and len(health.gpu_runs) == 5
    assert peers.points() == []  # its pairs are the node's: the worker names its GPUs (with_devices)
    params = peers_experiment.parse_params(peers.params)
    assert params.gpus == [] and params.pairs == []  # so the node run measures every GPU the worker holds
    node = list(peers_experiment.with_devices(params, range(8)).points())  # a node of 8 GPUs
    assert {p[0] for p in node} == {"ce_write", "ce_read", "ce_bidir", "latency", "h2d_all", "d2h_all", "h2d_alone",
                                    "d2h_alone"}
    assert {p[3] for p in node} == {256 << 20} and {p[4] for p in node} == {"cuda_event_batched_held",
                                                                            peers_experiment.LATENCY_TIMER}
    every = {(a, b) for a in range(8) for b in range(8) if a != b}
    assert {(p[1], p[2]) for p in node if p[0] == "ce_read"} == every  # the copy engine's pull: every ordered pair
    sampled = {(a, (a + shift) % 8) for a in range(8) for shift in (1, 4)}  # the others: a sample growing with n
    assert {(p[1], p[2]) for p in node if p[0] == "ce_write"} == sampled and len(sampled) == 16
    assert {p[1] for p in node if p[0] == "h2d_all"} == set(range(8)) and len(node) == 56 + 16 * 3 + 8 * 4
    four = list(peers_experiment.with_devices(params, range(4)).points())  # up to 4 GPUs: every pair, every copy
    assert len(four) == 12 * 4 + 4 * 4


def test_nodes_are_the_gpus_of_one_host_in_the_fleets_order():
    gpus = [fleet_run.FleetGpu(f"tcp://w:{i}", host=f"node-{i // 3}", gpu_uuid=board_uuid(i)) for i in range(5)]
    nodes = fleet_nodes.group_by_host(gpus)
    assert [(n.host, n.uuids) for n in nodes] == [("node-0", [board_uuid(i) for i in range(3)]),
                                                  ("node-1", [board_uuid(3), board_uuid(4)])]
    assert not nodes[0].gpus_finished or not any(g.todo for g in gpus)
    gpus[4].todo = ["reduction"]
    assert nodes[0].gpus_finished and not nodes[1].gpus_finished
