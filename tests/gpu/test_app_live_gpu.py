"""The Transfers page measuring live through the worker (AppTest, on the GPU machine)."""

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

pytestmark = pytest.mark.gpu
APP = str(Path(__file__).resolve().parents[2] / "app.py")


def test_transfers_page_measures_live_and_keeps_results_across_reruns(monkeypatch):
    monkeypatch.setenv("PINPOINT_BACKEND", "auto")
    at = AppTest.from_file(APP, default_timeout=300).run()
    assert not at.exception, at.exception
    assert any("Live" in s.value for s in at.success), "banner should say Live"
    at.switch_page("pages/transfers.py").run()
    at.text_input(key="transfers_custom_sizes").input("64KiB, 1MiB, 16MiB").run()
    assert not at.get("plotly_chart")  # nothing is measured until asked
    at.button(key="transfers_measure").click().run()
    assert not at.exception, at.exception
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    shown = [e.value for e in at.error] + [i.value for i in at.info] + [w.value for w in at.warning]
    assert len(charts) == 3, shown
    assert charts[0]["layout"]["title"]["text"].count("Live NVIDIA") == 1
    numbers = at.dataframe[-1].value
    assert len(numbers) == 3 * 4 * 2
    # A chart-only rerun (here: the same page again) shows the kept result without measuring again.
    at.run()
    assert len(at.get("plotly_chart")) == 3 and len(at.dataframe[-1].value) == 3 * 4 * 2
    # A bad size is refused with the device's limit, before the worker allocates anything: a one-line warning,
    # and the slider's sizes and their chart stay (the fallback rule for every bad value).
    at.text_input(key="transfers_custom_sizes").input("4TiB").run()
    assert any("unknown unit" in w.value for w in at.warning) and not at.exception
    at.text_input(key="transfers_custom_sizes").input("4096GiB").run()
    assert any("does not fit in device memory" in w.value for w in at.warning) and not at.exception


@pytest.mark.parametrize("page,key,setup", [
    ("pages/coalescing.py", "coalescing", {"coalescing_elements": 1 << 20}),
    ("pages/reductions.py", "reduction", {"reduction_size": 1 << 20}),
    ("pages/occupancy.py", "occupancy_sweep", {}),
])
def test_kernel_pages_measure_live(monkeypatch, page, key, setup):
    monkeypatch.setenv("PINPOINT_BACKEND", "auto")
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.switch_page(page).run()
    for slider, value in setup.items():
        at.select_slider(key=slider).set_value(value).run()
    at.button(key=f"{key}_measure").click().run()
    assert not at.exception, at.exception
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert any("Live NVIDIA" in c["layout"]["title"]["text"] for c in charts), [e.value for e in at.error]


def test_streams_page_measures_live_and_draws_the_timeline(monkeypatch):
    monkeypatch.setenv("PINPOINT_BACKEND", "auto")
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.switch_page("pages/streams.py").run()
    at.select_slider(key="streams_size").set_value(64 << 20).run()
    at.pills(key="streams_chunks").set_value([1, 16]).run()
    at.pills(key="streams_streams").set_value([1, 4]).run()
    at.button(key="streams_measure").click().run()
    assert not at.exception, at.exception
    charts = {json.loads(c.proto.spec)["layout"]["title"]["text"].split("<br>")[0]: json.loads(c.proto.spec)
              for c in at.get("plotly_chart")}
    assert any(t.startswith("Timeline: pinned · 4 streams × 16 chunks") for t in charts), list(charts)
    assert any("Live NVIDIA" in c["layout"]["title"]["text"] for c in charts.values())
    assert any(m.label == "Overlap efficiency" for m in at.metric)


def test_memory_modes_page_measures_each_tab_live(monkeypatch):
    monkeypatch.setenv("PINPOINT_BACKEND", "auto")
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.switch_page("pages/memory_modes.py").run()
    at.select_slider(key="managed_size").set_value(64 << 20).run()
    at.pills(key="pools_sizes").set_value([4096, 1 << 20]).run()
    at.pills(key="batching_pieces_64").set_value([256, 65536]).run()
    for key in ("managed", "pools", "batching"):
        at.button(key=f"{key}_measure").click().run()
        assert not at.exception, at.exception
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
    assert len(titles) == 3 and all("Live NVIDIA" in t for t in titles), [e.value for e in at.error]


def test_moving_back_to_measured_points_reuses_them_at_once(monkeypatch):
    import time

    monkeypatch.setenv("PINPOINT_BACKEND", "auto")
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.switch_page("pages/transfers.py").run()
    at.text_input(key="transfers_custom_sizes").input("1MiB, 16MiB, 64MiB").run()
    at.button(key="transfers_measure").click().run()
    first = at.dataframe[-1].value
    at.text_input(key="transfers_custom_sizes").input("1MiB, 64MiB").run()
    started = time.perf_counter()
    at.button(key="transfers_measure").click().run()
    elapsed = time.perf_counter() - started
    assert any(c.value.startswith("Reused: all 16 points") for c in at.caption)
    again = at.dataframe[-1].value
    assert len(again) == 16 and set(again["size"]) <= set(first["size"])
    print(f"\nreused answer in {elapsed:.2f} s (the page's rerun included)")


def test_roofline_page_measures_its_suite_live_and_places_every_kernel_under_measured_roofs(monkeypatch):
    """Measure runs assets/suites/roofline.toml on the GPU (ceilings first), then places every kernel: the four
    roofs are measured in this sitting and at least 12 kernels stand under them, each with its sentence."""
    from gpu.experiments import suites

    monkeypatch.setenv("PINPOINT_BACKEND", "auto")
    at = AppTest.from_file(APP, default_timeout=600).run()
    at.switch_page("pages/roofline.py").run()
    at.button(key="roofline_measure").click().run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert any("Live" in c["layout"]["title"]["text"] for c in charts)
    placed = at.dataframe[0].value  # every placed kernel, with its sentence's verdict beside its name
    sentences = placed["experiment"] + " · " + placed["kernel"] + ": " + placed["verdict"]
    assert len(placed) >= 12 and placed["verdict"].str.contains(" % of the ").all()
    ceilings = at.dataframe[1].value
    assert {"HBM", "L2", "FP32 FMA", "FP64 FMA"} <= set(ceilings["roof"])
    assert any("ridge" in t.value for t in at.markdown), "the ridge is named"
    print(f"Roofline live: {len(placed)} kernels placed under {sorted(ceilings['roof'])} "
          f"({len(suites.load('roofline').runs)} experiments); e.g. {sentences.iloc[0]}")


def test_peers_page_measures_the_matrix_live_on_every_gpu(monkeypatch):
    """On a machine of two GPUs or more the Peers page's Measure runs the peer experiment on a worker holding every
    GPU and draws the matrix; on one GPU it says in one line that the matrix needs two."""
    monkeypatch.setenv("PINPOINT_BACKEND", "auto")
    from tests.gpu.test_peers_gpu import gpu_count

    at = AppTest.from_file(APP, default_timeout=300).run()
    at.switch_page("pages/peers.py").run()
    assert not at.exception, at.exception
    if gpu_count() < 2:
        assert any("needs two GPUs" in i.value for i in at.info), [i.value for i in at.info]
        return
    [measure] = [b for b in at.button if b.label == "Measure"]
    measure.click().run()
    assert not at.exception, at.exception
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    titles = [c["layout"]["title"]["text"] for c in charts]
    assert any(t.startswith("Peer bandwidth") and "Live" in t for t in titles), ([e.value for e in at.error], titles)
