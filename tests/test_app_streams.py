"""The Streams and Memory modes pages through AppTest, in replay mode (recorded on an H200; no GPU here)."""

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parent.parent / "app.py")


@pytest.fixture(autouse=True)
def replay_mode(monkeypatch):
    monkeypatch.setenv("PINPOINT_BACKEND", "replay")


def open_page(page):
    at = AppTest.from_file(APP, default_timeout=90).run()
    at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def charts(at) -> dict:
    out = {}
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        out[spec["layout"]["title"]["text"].split("<br>")[0]] = spec
    return out


def gantt(at):
    return next(spec for title, spec in charts(at).items() if title.startswith("Timeline:"))


def lanes(figure):
    return {y for trace in figure["data"] for y in trace["y"]}


def test_streams_page_draws_the_timeline_one_lane_per_stream_and_states_the_efficiency():
    at = open_page("pages/streams.py")
    figure = gantt(at)
    assert "pinned · 4 streams × 16 chunks" in figure["layout"]["title"]["text"]
    assert "Replay of a run recorded on NVIDIA H200" in figure["layout"]["title"]["text"]
    assert lanes(figure) == {"stream 0", "stream 1", "stream 2", "stream 3"}
    names = {trace["name"] for trace in figure["data"]}
    assert {"copy H2D", "kernel", "copy D2H"} <= names
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Overlap efficiency"].endswith(" %") and float(metrics["Overlap efficiency"][:-1]) > 50
    assert float(metrics["Speedup over serial"][:-1]) > 1.5
    headline = " ".join(m.value for m in at.markdown)
    assert "**pinned**: the best" in headline and "× the duplex-aware bound" in headline
    # pageable is measured at its lesson only (16 chunks × 4 streams), which is within the noise of serial
    assert "**pageable**: **no measurable overlap**" in headline
    assert any(c.value.startswith("Pageable memory was measured at 16 chunks × 4 streams only") for c in at.caption)
    assert {"Pipeline time vs streams (dotted: serial, dashed: bound)",
            "Bidirectional copies: H2D and D2H at the same time on two streams"} <= set(charts(at))


def test_engine_lanes_and_other_recorded_configurations_redraw_from_the_recording():
    at = open_page("pages/streams.py")
    at.radio(key="streams_lanes").set_value("engine").run()
    assert lanes(gantt(at)) == {"copy engine H2D", "compute", "copy engine D2H"}
    at.select_slider(key="streams_focus_streams").set_value(16).run()
    at.select_slider(key="streams_focus_chunks").set_value(64).run()
    assert "16 streams × 64 chunks" in gantt(at)["layout"]["title"]["text"]
    assert sum(len(t["y"]) for t in gantt(at)["data"]) == 64 * 3


def test_a_staged_pipeline_is_offered_at_its_three_streams_and_draws_one_stage_per_lane():
    at = open_page("pages/streams.py")
    at.select_slider(key="streams_focus_chunks").set_value(64).run()
    at.select_slider(key="streams_focus_streams").set_value(3).run()
    # only the orders measured at 64 chunks × 3 streams are offered (the defaults: depth-first round-robin streams
    # are 1, 2, 4, 8, 16, so at 3 streams only the staged pipeline was measured)
    assert at.radio(key="streams_focus_order").options == ["one stream per stage (events chain each chunk)"]
    figure = gantt(at)
    assert "3 streams × 64 chunks · one stream per stage" in figure["layout"]["title"]["text"]
    ops = {trace["name"]: set(trace["y"]) for trace in figure["data"] if trace["name"] in ("copy H2D", "copy D2H")}
    assert ops == {"copy H2D": {"stream 0"}, "copy D2H": {"stream 2"}}
    sweep = next(spec for title, spec in charts(at).items() if title.startswith("Pipeline time vs streams"))
    diamonds = [t for t in sweep["data"] if "one stream per stage" in t["name"]]
    assert sorted(t["name"] for t in diamonds) == [f"{c} chunks, one stream per stage" for c in (16, 4, 64)]
    assert all(t["mode"] == "markers" and t["marker"]["symbol"] == "diamond" for t in diamonds)
    assert not at.exception


def test_pageable_memory_shows_little_overlap_in_the_recording():
    at = open_page("pages/streams.py")
    at.radio(key="streams_focus_host").set_value("pageable").run()
    assert next(m.value for m in at.metric if m.label == "Overlap efficiency") == "none measurable"
    pinned = open_page("pages/streams.py")
    assert float(next(m.value for m in pinned.metric if m.label == "Overlap efficiency")[:-1]) > 50


def test_the_full_pageable_grid_is_one_toggle_away_and_kept_in_the_url():
    at = open_page("pages/streams.py")
    at.toggle(key="streams_pageable_grid").set_value(True).run()
    assert not at.exception
    assert at.query_params.get("streams_pageable_grid") in ("1", "true", "True", ["1"], ["true"])
    at.radio(key="streams_focus_host").set_value("pageable").run()
    at.select_slider(key="streams_focus_chunks").set_value(64).run()
    assert "pageable · 4 streams × 64 chunks" in gantt(at)["layout"]["title"]["text"]


def test_compute_bound_intensity_changes_the_bound_to_the_kernel():
    at = open_page("pages/streams.py")
    at.pills(key="streams_host").set_value(["pinned"]).run()
    at.select_slider(key="streams_intensity").set_value(8192).run()
    assert not at.exception
    breakdown = next(spec for title, spec in charts(at).items() if title.startswith("Where the time goes"))
    bars = dict(zip(breakdown["data"][0]["y"], breakdown["data"][0]["x"], strict=True))
    assert bars["bound: copy engines"] == bars["all kernels alone"] > bars["all H2D alone"]
    assert bars["bound: duplex link"] < bars["all kernels alone"]  # the link is not what limits this pipeline


@pytest.mark.parametrize("typed,message", [
    ("3", "3 chunks do not divide 256 MiB"),
    ("100", "chunk count 100 must be from 1 to 64"),
    ("three", "is not a list of whole chunk counts"),
])
def test_bad_chunk_counts_get_a_clear_message(typed, message):
    at = open_page("pages/streams.py")
    at.text_input(key="streams_chunks_typed").input(typed).run()
    assert not at.exception
    assert any(message in e.value for e in at.error), [e.value for e in at.error]


def test_more_streams_than_chunks_is_allowed_with_a_warning():
    at = open_page("pages/streams.py")
    at.pills(key="streams_chunks").set_value([4]).run()
    at.pills(key="streams_streams").set_value([2, 8]).run()
    assert not at.exception
    assert any("8 streams for at most 4 chunks" in w.value for w in at.warning)
    # The focus defaults to the most streams measured: 8 streams for 4 chunks put work on 4 of them only.
    assert "8 streams × 4 chunks" in gantt(at)["layout"]["title"]["text"]
    assert lanes(gantt(at)) == {f"stream {i}" for i in range(4)}


def test_memory_modes_page_draws_all_three_sections_from_the_recordings():
    at = open_page("pages/memory_modes.py")
    titles = set(charts(at))
    assert {"Managed memory: a kernel reading the buffer (GB/s, log scale)",
            "Allocate → copy → free: time per iteration",
            "K small copies vs one copy (effective GB/s of all K pieces)"} == titles
    text = " ".join(m.value for m in at.markdown)
    assert "256 MiB: first touch" in text and "resident" in text
    assert "**pinned**: per call ÷ pooled" in text and "from 1 MiB up, allocating per call costs more" in text
    assert "Each separate copy costs about" in text
    managed = next(spec for title, spec in charts(at).items() if title.startswith("Managed"))
    first_touch = next(t for t in managed["data"] if t["name"].startswith("managed, first touch"))
    resident = next(t for t in managed["data"] if t["name"] == "managed, already resident")
    assert first_touch["text"][0] and float(resident["text"][0].replace(",", "")) > 100 * float(
        first_touch["text"][0].replace(",", ""))


def test_batching_offers_the_piece_sizes_that_fit_the_chosen_count():
    at = open_page("pages/memory_modes.py")
    at.select_slider(key="batching_count").set_value(1024).run()
    assert not at.exception and not at.error
    table = at.dataframe[-1].value
    assert len(table) == 9 and set(table["pieces"]) == {1024}  # 4 B … 256 KiB: 1024 × 256 KiB = 256 MiB


def test_settings_not_recorded_are_named_not_invented():
    at = open_page("pages/streams.py")
    at.select_slider(key="streams_intensity").set_value(2048).run()  # recorded for pinned memory only
    assert not at.exception
    assert any("not recorded, so not shown" in c.value for c in at.caption)
    assert "pinned" in gantt(at)["layout"]["title"]["text"]
