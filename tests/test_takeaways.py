"""Stage takeaways: one sentence per page, computed from the frame shown (replay recordings here)."""

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from gpu.experiments import registry
from gpu.experiments.streams import view as streams_view
from gpu.experiments.transfers import BATCHED_TIMERS
from gpu.experiments.transfers import view as transfers_view
from gpu.service.backends import ReplayBackend

APP = str(Path(__file__).resolve().parent.parent / "app.py")


@pytest.fixture(scope="module")
def recorded():
    data = ReplayBackend().data

    def run(experiment):
        rows = data[data["experiment"] == experiment]
        rows = rows[~rows["timer"].isin(BATCHED_TIMERS)]  # the single-copy sweep, as the latency view shows it
        return rows[rows["run_id"] == rows["run_id"].iloc[0]]
    return run


def test_transfers_takeaway_reads_the_ratio_from_the_data_and_follows_it(recorded):
    frame = recorded("transfers")
    h2d = frame[(frame["direction"] == "h2d") & ~frame["include_alloc"].astype(bool)]
    ms = h2d.pivot_table(index="bytes", columns="variant", values="median_ms")
    expected = ms["pageable"].iloc[-1] / ms["pinned"].iloc[-1]
    text = transfers_view.takeaway(frame)
    assert text.startswith(f"Host → device: pinned copies {expected:.1f}× as fast as pageable at 1 GiB")
    assert "allocated per copy (0.35 s each), 0.3" in text  # the recording holds per-call allocation, and its cost
    slower = frame.copy()
    slower.loc[(slower["variant"] == "pinned") & (slower["bytes"] == slower["bytes"].max()), "median_ms"] *= 10
    assert transfers_view.takeaway(slower) != text  # different data, different sentence
    assert transfers_view.takeaway(frame[frame["variant"] == "pinned"]) is None  # nothing to compare with


@pytest.mark.parametrize("experiment,words", [
    ("coalescing", ["Against the contiguous read (copy, 1 float/thread, 2,680 GB/s), "
                                          "stride 2 costs 1.14×", "64 floats apart cost 8.0×",
                                          "misaligned reads cost at most 3.4 %"]),
    ("reduction", ["The best of our reductions here (grid-stride + shuffle) reads",
                                        "atomicAdd per element is",
                                        "slower than grid-stride + shuffle (268,435,456 floats, block 256)"]),
    ("occupancy", ["memory-bound copy peaks at", "latency-bound chase peaks at", " % occupancy)"]),
    ("streams", ["Pinned:", "as fast as one stream (overlap efficiency"]),
    ("managed", ["first touch moves", "once resident"]),
])
def test_each_page_has_a_computed_takeaway(recorded, experiment, words):
    function = registry.view_of(experiment).takeaway  # each experiment's view holds its own, found by the registry
    text = function(recorded(experiment))
    assert all(w in text for w in words), text
    assert function(recorded(experiment).iloc[0:0]) is None


def test_on_stage_a_page_keeps_its_main_controls_folds_the_rest_and_puts_the_takeaway_under_the_chart():
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["present"] = "1"
    at.run()
    at.switch_page("pages/transfers.py").run()
    assert not at.exception, at.exception
    more = [e for e in at.expander if e.label == "More settings"]
    assert len(more) == 1  # custom sizes, modes and directions fold away…
    assert [w.key for w in more[0].text_input] == ["transfers_custom_sizes"]
    assert {w.key for w in more[0].get("button_group")} == {"transfers_modes", "transfers_directions"}
    assert at.select_slider(key="transfers_size_range") and at.toggle(key="transfers_include_alloc")  # …these stay
    headings = [m.value for m in at.markdown if m.value.startswith("### ")]
    # a number and its unit never break apart on stage: a no-break space between them
    assert len(headings) == 1 and "as fast as pageable at 1\u00a0GiB, 0.84× at 4\u00a0KiB" in headings[0]
    assert len(at.get("plotly_chart")) == 1 and not at.dataframe  # chart first; the tables are for the desk
    assert json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["font"]["size"] == 20

    desk = AppTest.from_file(APP, default_timeout=120).run()
    desk.switch_page("pages/transfers.py").run()
    assert not [m for m in desk.markdown if m.value.startswith("### ")] and desk.dataframe
    assert len(desk.get("plotly_chart")) > 1 and "More settings" not in [e.label for e in desk.expander]


def test_the_streams_takeaway_names_a_pipeline_that_can_overlap(recorded):
    from gpu.core import overlap

    frame = recorded("streams")
    text = streams_view.takeaway(frame)
    table = overlap.pipeline_table(frame)
    for host in set(table["host_memory"]):
        best = overlap.best_pipeline(table[table["host_memory"] == host])
        assert best["streams"] >= 2 and best["chunks"] >= 2  # one chunk or one stream cannot overlap anything
        config = overlap.config_text(best["streams"], best["chunks"], best["issue_order"])
        assert f"{host}: {config}" in text.lower() or f"{host}: no measurable overlap ({config}" in text.lower()
