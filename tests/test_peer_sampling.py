"""A node of more GPUs than ``whole_matrix_gpus`` (4 by default) is measured on a sampled plan: the copy engine's pull
on every ordered pair and the other pair copies on a sample that grows with the GPUs, so an 8-GPU node's run stays
near a 4-GPU node's. A slow link must still be found: a simulated 8-GPU node (tests/simulated_fleet.peer_frame, made-up
NVLink figures) with one link slowed to 0.51×, on a pair the sample leaves out, is named by the fleet's link check."""

from __future__ import annotations

import pandas as pd
import pytest

from gpu.experiments import peers, suites
from gpu.experiments.peers import cost as peer_cost
from gpu.present.fleet import links as fleet_links
from tests.simulated_fleet import NVLINK, peer_frame

SLOW = {(4, 7): 1 / 0.51}  # boards 4 → 7: GPUs 2 → 5 of the 8-GPU node (boards 2–9)


def health_params():
    """The health suite's peer parameters: the experiment's defaults, as the Peers page's Measure."""
    return suites.load("health").run_for("peers").checked().params


def test_the_sampled_plan_names_a_slow_link_the_sample_leaves_out():
    params = health_params()
    frame = peer_frame(list(range(2, 10)), params, SLOW, host="node-3", run_id="node3peers")
    measured = {(int(r.gpu_index), int(r.peer_index)) for r in frame[frame["variant"] == "ce_write"].itertuples()}
    assert (2, 5) not in measured and len(measured) == 16  # the sample: each GPU to the next and 4 GPUs away
    assert len(frame[frame["variant"] == "ce_read"]) == 56  # the pull: every ordered pair
    table = fleet_links.links([frame])
    [figure] = [f for f, label in zip(table["figure"], table["label"], strict=True) if label.startswith("ce_read")][:1]
    judged = fleet_links.judge(table, figure)
    slow = judged[judged["slow"]]
    assert list(zip(slow["host"], slow["gpu_index"], slow["peer_index"], strict=True)) == [("node-3", 2, 5)]
    assert fleet_links.slow_link_sentences(judged) == [
        f"node-3: GPU 2 → GPU 5 at 0.51× the {NVLINK} median (199 GB/s against 391 GB/s; ce_read 256 MiB batched; "
        "44 % of 18 NVLink 4 links); conditions not observed."]


def test_an_eight_gpu_node_costs_less_than_twice_a_four_gpu_node_and_a_third_of_its_whole_matrix():
    """Priced by the bundled 2 × H100 recording (``peer_cost``): the sampled 8-GPU plan against a 4-GPU node's whole
    matrix and the 8-GPU node's whole matrix."""
    recorded = peer_cost.pricing_run(pd.read_parquet(
        "assets/replay/peers_nvidia-h100-80gb-hbm3_2026-11-25.parquet"))
    params = health_params()

    def seconds(gpus: int, **changes) -> float:
        import dataclasses

        return peer_cost.estimate(peers.with_devices(dataclasses.replace(params, **changes), range(gpus)),
                                  recorded).seconds

    four, eight, whole = seconds(4), seconds(8), seconds(8, whole_matrix_gpus=8)
    assert eight < 2 * four and eight < whole / 2.5
    assert eight == pytest.approx(12.2, abs=1.0) and four == pytest.approx(7.7, abs=1.0)
