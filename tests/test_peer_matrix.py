"""The Peers page's reading of a peer run (gpu.experiments.peers.matrix), its charts and its takeaway, on made-up nodes
of 2 and 8 GPUs (tests/peer_frames.py): the matrix, the links in words, the topology, the host links, latency in ns."""

import base64
import json
import math

import numpy as np
import pandas as pd
import pytest

from gpu.core.units import GiB, MiB
from gpu.experiments.peers import matrix as pm
from gpu.experiments.peers import view as charts
from tests.peer_frames import LATENCY_NS, NVLINK, THROUGH_HOST, peer_frame


@pytest.fixture(scope="module")
def two():
    return peer_frame(2)


@pytest.fixture(scope="module")
def eight():
    return peer_frame(8, slow=(2, 5), through_host=(6, 7))


def spec(figure) -> dict:
    return json.loads(figure.to_json())


def z_values(trace) -> np.ndarray:
    """The heatmap's cells (Plotly's JSON holds them as a base64 typed array)."""
    z = trace["z"]
    if isinstance(z, dict):
        shape = tuple(int(n) for n in str(z["shape"]).split(","))
        return np.frombuffer(base64.b64decode(z["bdata"]), dtype=z["dtype"]).reshape(shape).astype(float)
    return np.array([[math.nan if v is None else v for v in row] for row in z], dtype=float)


def test_latency_rows_hold_the_time_of_one_load_read_in_ns():
    rows = pd.DataFrame({"median_ms": [0.00083, 1e-6], "loads_per_sample": [8192, 8192]})
    assert pm.ns_per_access(rows).tolist() == pytest.approx([830.0, 1.0])


def test_the_default_view_is_the_batched_copy_engine_at_its_largest_size(two):
    view = pm.default_view(two)
    assert view == pm.View("ce_read", pm.BATCHED, 1 * GiB)
    assert view.words() == "copy engine, destination pulls · batched · 1 GiB"
    single_only = two[two["timer"] == pm.SINGLE]
    assert pm.default_view(single_only) == pm.View("ce_read", pm.SINGLE, 1 * GiB)
    assert pm.default_view(two[two["peer_index"].isna()]) is None  # host copies only: no matrix


def test_the_matrix_is_source_by_destination_over_every_gpu_with_an_empty_diagonal(eight):
    view = pm.default_view(eight)
    table = pm.matrix(eight, view)
    assert table.shape == (8, 8) and list(table.index) == list(range(8)) == list(table.columns)
    assert np.isnan(np.diag(table.to_numpy())).all()
    assert table.loc[2, 5] == pytest.approx(table.loc[5, 2] * 0.51)  # rows are sources: 2 → 5 is the slow one
    without = eight[~((eight["gpu_index"] == 3) & (eight["peer_index"] == 4))]
    assert math.isnan(pm.matrix(without, view).loc[3, 4]) and not math.isnan(pm.matrix(without, view).loc[4, 3])


@pytest.mark.parametrize(("link", "short", "words", "kind"), [
    ("NVLink 4 ×18", "NV18", "18 NVLinks (NVLink 4)", "NVLink 4"),
    ("NVLink x2", "NV2", "2 NVLinks", "NVLink"),
    ("NVLink 4 ×18 via NVSwitch", "NV18", "18 NVLinks (NVLink 4) via NVSwitch", "NVLink 4"),
    ("PCIe via host bridge", "PCIe", "PCIe via host bridge", "PCIe via host bridge"),
    ("through host (no peer access)", "host", "through host (no peer access)", "through host (no peer access)"),
    (None, "?", "link not named", "link not named"),
])
def test_a_link_is_read_from_its_words(link, short, words, kind):
    read = pm.link_of(link)
    assert (read.short, read.words, read.kind) == (short, words, kind)


def test_two_gpus_in_words(two):
    view = pm.default_view(two)
    assert pm.topology_sentences(two, view) == [
        "GPU 0 ↔ GPU 1: 18 NVLinks (NVLink 4), 391 GB/s one way, the only measured pair"]
    assert pm.slow_pairs(two, view).empty


def test_eight_gpus_in_words_name_the_slow_pair_against_its_link_type(eight):
    view = pm.default_view(eight)
    sentences = pm.topology_sentences(eight, view)
    assert len(sentences) == 28
    slow = next(s for s in sentences if s.startswith("GPU 2 ↔ GPU 5"))
    assert slow == "GPU 2 ↔ GPU 5: 18 NVLinks (NVLink 4), 199 GB/s one way (2 → 5; 5 → 2: 391 GB/s), 51 % of the " \
                   "median NVLink 4 pair: slow"
    assert "GPU 6 ↔ GPU 7: through host (no peer access), 47 GB/s one way, the only through host (no peer " \
           "access) pair" in sentences
    assert sum(s.endswith("100 % of the median NVLink 4 pair") for s in sentences) == 26
    assert list(zip(*[pm.slow_pairs(eight, view)[c] for c in ("a", "b")], strict=True)) == [(2, 5)]
    assert pm.topology_summary(eight, view) == ("28 pairs: 27 with 18 NVLinks (NVLink 4) at 199–391 GB/s one way; "
                                                "1 through host (no peer access) at 47 GB/s one way")


def test_host_links_name_the_gpu_that_loses_when_all_copy(two, eight):
    table = pm.host_links(two)
    assert set(table["direction"]) == {"h2d", "d2h"} and set(table["size"]) == {256 * MiB}
    loser = table[(table["gpu"] == 0) & (table["direction"] == "d2h")].iloc[0]
    assert loser["loss"] == pytest.approx(0.18)
    assert pm.host_sentence(two) == ("GPU 0 loses 18 % copying to the host when both GPUs do at once (45.2 GB/s "
                                     "against 55.1 alone, 256 MiB).")
    assert "when all 8 GPUs do at once" in pm.host_sentence(eight)
    assert pm.host_sentence(peer_frame(2, host_loser=None)) == (
        "No GPU loses more than 5 % of its host bandwidth when both GPUs do at once (256 MiB).")
    assert pm.host_sentence(two[two["peer_index"].notna()]) is None


def test_the_takeaway_says_the_rates_the_link_both_ways_and_latency(two, eight):
    assert charts.takeaway(two) == (
        "At 1 GiB (copy engine, destination pulls, batched) GPU 0 and GPU 1 copy 391 GB/s one way over NVLink 4 ×18; "
        "both ways at once 783 GB/s a pair; latency into the peer's memory 830 ns.")
    line = charts.takeaway(eight)
    assert line.startswith("At 1 GiB (copy engine, destination pulls, batched) 54 ordered pairs copy 199–391 GB/s "
                           "one way over NVLink 4 ×18; 2 ordered pairs go through host (no peer access) at 47 GB/s; "
                           "GPU 2 → GPU 5 is slow at 199 GB/s, 51 % of the median NVLink 4 pair;")
    pushed = charts.takeaway(two, pm.View("ce_write", pm.SINGLE, 1 * MiB))
    assert pushed.startswith("At 1 MiB (copy engine, source pushes, single copy) GPU 0 and GPU 1 copy 79 GB/s")
    assert charts.takeaway(two[two["peer_index"].isna()]) is None


def test_the_matrix_figure_has_a_cell_per_pair_with_its_link_and_a_diagonal_that_says_same_gpu(eight):
    view = pm.default_view(eight)
    figure = spec(charts.matrix_figure(eight.assign(backend="replay"), view))
    [heatmap] = figure["data"]
    z = z_values(heatmap)
    assert z.shape == (8, 8) and np.isnan(np.diag(z)).all()
    assert heatmap["x"] == heatmap["y"] == [f"GPU {g}" for g in range(8)]
    assert heatmap["text"][0][1] == "391<br>NV18" and heatmap["text"][6][7] == "47<br>host"
    assert heatmap["text"][3][3] == "same GPU"  # the empty diagonal explained, not a blank cell
    assert "GPU 2 → GPU 5<br>199.3 GB/s one way" in heatmap["customdata"][2][5]
    assert "link: NVLink 4 ×18" in heatmap["customdata"][2][5]
    assert figure["layout"]["xaxis"]["title"]["text"] == "destination GPU"
    assert figure["layout"]["yaxis"]["title"]["text"] == "source GPU"
    assert figure["layout"]["yaxis"]["autorange"] == "reversed"  # GPU 0 at the top, as nvbandwidth prints it
    assert "Replay of a run recorded on 8 × NVIDIA H100 80GB HBM3 · node-1" in figure["layout"]["title"]["text"]


def test_an_unmeasured_pair_is_marked_not_invented(two):
    view = pm.default_view(two)
    one_way = two[~((two["gpu_index"] == 1) & (two["peer_index"] == 0))]
    heatmap = spec(charts.matrix_figure(one_way, view))["data"][0]
    assert heatmap["text"][1][0] == "—" and math.isnan(z_values(heatmap)[1][0])
    assert spec(charts.matrix_figure(two, view))["layout"]["xaxis"]["domain"][1] < 0.5  # two GPUs: compact cells
    assert pm.topology_sentences(one_way, view)[0].endswith("(measured in one direction only), the only measured pair")


def test_bidirectional_and_latency_matrices(two):
    view = pm.default_view(two)
    both = charts.bidirectional_view(two, view)
    assert both == pm.View("ce_bidir", pm.BATCHED, 1 * GiB)
    heatmap = spec(charts.bidirectional_figure(two, both))["data"][0]
    assert "the pair both ways: 782.6 GB/s" in heatmap["customdata"][0][1]
    latency = pm.latency_view(two)
    assert latency == pm.View("latency", "cuda_event_held", 1 * GiB)  # the largest working set
    heatmap = spec(charts.latency_figure(two, latency))["data"][0]
    assert z_values(heatmap)[0][1] == pytest.approx(LATENCY_NS)
    assert heatmap["reversescale"] is True and heatmap["colorbar"]["title"]["text"] == "ns"
    # lower is better: pairs that all answer alike sit mid-scale, not at the worst colour
    assert (heatmap["zmin"], heatmap["zmax"]) == (0, pytest.approx(2 * LATENCY_NS))


def test_one_pair_sweep_draws_every_variant_with_both_methods_told_apart(two):
    figure = spec(charts.pair_sweep_figure(two, 1, 0))
    names = [t["name"] for t in figure["data"]]
    assert len(names) == len(pm.SWEPT) * 2 and names[0] == "copy engine, destination pulls · batched"
    looks = {(t["marker"]["symbol"], t["line"]["dash"]) for t in figure["data"]}
    assert len(looks) == len(names)  # no line hides under another of the same look
    assert figure["layout"]["xaxis"]["type"] == "log" and "GPU 1 → GPU 0" in figure["layout"]["title"]["text"]
    assert "1 MiB" in figure["layout"]["xaxis"]["ticktext"]


def test_host_figure_and_numbers_table(two):
    figure = spec(charts.host_figure(two))
    assert [t["name"] for t in figure["data"]] == ["alone", "every GPU at once"] * 2
    table = charts.numbers_table(two)
    latency = table[table["copy"] == "latency (pointer chase)"]
    assert latency["ns per access"].round(0).tolist() == [747.0, 830.0, 747.0, 830.0] and latency["GB/s"].isna().all()
    host = table[table["copy"] == "host → GPU, alone"]
    assert set(host["from"]) == {"host"} and set(host["to"]) == {"GPU 0", "GPU 1"}


def test_the_stage_matrix_reads_from_the_back_of_the_room(eight):
    figure = spec(charts.for_stage(charts.matrix_figure(eight, pm.default_view(eight))))
    assert figure["layout"]["height"] == charts.STAGE_MATRIX_HEIGHT
    assert figure["data"][0]["textfont"]["size"] >= 20


def test_link_text_from_a_run_shows_as_typed_in_the_chart():
    frame = peer_frame(2)
    frame["link"] = frame["link"].where(frame["link"].isna(), "<a href='x'>NVLink</a> 4 ×18")
    heatmap = spec(charts.matrix_figure(frame, pm.default_view(frame)))["data"][0]
    assert "<a href" not in heatmap["customdata"][0][1] and "&lt;a href" in heatmap["customdata"][0][1]


def test_fixtures_cover_the_frame_contract():
    frame = peer_frame(2)
    assert set(frame["variant"]) == {*pm.SWEPT, pm.LATENCY, *(v for pair in pm.HOST.values() for v in pair)}
    assert NVLINK in set(frame["link"]) and THROUGH_HOST in set(peer_frame(2, through_host=(0, 1))["link"])


def test_a_pair_named_two_ways_takes_its_most_common_link_text_and_the_first_in_order_on_a_tie(two):
    """Each ordered pair's link as its rows name it most often; where two texts are as common, the first in order
    (as pandas' ``mode`` orders them); a pair none of whose rows names a link has none."""
    rows = two.copy()
    one = rows.index[(rows["gpu_index"] == 0) & (rows["peer_index"] == 1)]
    other = rows.index[(rows["gpu_index"] == 1) & (rows["peer_index"] == 0)]
    rows.loc[one[:2], "link"] = "PCIe x16 via host bridge"  # outnumbered by NVLINK
    rows.loc[other, "link"] = None
    links = pm.pair_links(rows)
    assert list(links) == [(0, 1), (1, 0)]
    assert links[(0, 1)] == pm.link_of(NVLINK) and links[(1, 0)] == pm.link_of(None)
    half = len(one) // 2
    rows.loc[one[:half], "link"], rows.loc[one[half:2 * half], "link"] = "Z link", "A link"
    rows.loc[one[2 * half:], "link"] = None
    assert pm.pair_links(rows)[(0, 1)] == pm.link_of("A link")


def test_the_preview_of_a_partial_run_is_the_matrix_of_its_full_frame(eight):
    """While measuring, the page draws the matrix from only the columns it reads: the same figure as from every
    column; before any copy between GPUs there is none."""
    partial = eight.iloc[: len(eight) // 3].assign(backend="live")
    expected = charts.matrix_figure(partial, pm.default_view(partial))
    assert charts.matrix_preview(partial).to_json() == expected.to_json()
    assert charts.matrix_preview(partial[partial["peer_index"].isna()]) is None
