"""The Roofline page through AppTest, in replay mode, on whatever recordings are bundled: today kernels without
ceiling recordings (the page says which it needs and places kernels by their own figures); once device copies and
FMA are recorded, the same tests check the roofs, the ridge and a fraction in every sentence."""

import json
from collections import Counter
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from gpu.experiments.device_copy import view as device_copy_chart
from gpu.experiments.fma import view as compute_chart
from gpu.present.charts import roofline as roofline_charts
from gpu.results import roofline as rl
from gpu.service.backends import ReplayBackend

APP = str(Path(__file__).resolve().parent.parent / "app.py")
PAGE = "pages/roofline.py"


@pytest.fixture(autouse=True)
def replay_mode(monkeypatch):
    monkeypatch.setenv("PINPOINT_BACKEND", "replay")


@pytest.fixture(scope="module")
def bundled():
    """What the page must show, worked out from the bundled recordings (its first device model with something to
    place: the peer recording's two H100s have none)."""
    data = ReplayBackend().data
    device = rl.device_models(data)[0]
    runs = rl.newest_runs(data, device)
    roofs = rl.measured_roofs(runs)
    return {"device": device, "runs": runs, "roofs": roofs, "points": rl.kernel_points(runs, roofs)}


def open_page(**params):
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    at.switch_page(PAGE).run()
    assert not at.exception, at.exception
    return at


def roofline_chart(at) -> dict:
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    found = [s for s in specs if s["layout"]["title"]["text"].startswith("Roofline")]
    assert len(found) == 1
    return found[0]


def test_replay_places_at_least_twelve_kernels_each_with_its_sentence(bundled):
    at = open_page()
    table = at.dataframe[0].value
    assert len(table) >= 12 and len(table) == len(bundled["points"])
    # the table shows each sentence's verdict beside its kernel: together, the sentence
    sentences = table["experiment"] + " · " + table["kernel"] + ": " + table["verdict"]
    assert set(sentences) == set(bundled["points"]["sentence"]) and sentences.is_unique
    if rl.ridges(bundled["roofs"]):  # with ceilings recorded, each verdict names its roof and the fraction reached
        drawn = "|".join(r.name for r in rl.memory_roofs(bundled["roofs"]) + [
            r for r in bundled["roofs"] if r.kind == "compute"])
        assert table["verdict"].str.match(rf"^(memory only|memory-bound|compute-bound).*[\d.,]+ % of the "
                                          rf"({drawn}) roof$").all(), table["verdict"].tolist()
    spec = roofline_chart(at)
    hovers = [h for trace in spec["data"] if trace.get("mode") in ("markers", "lines+markers")
              for h in (trace.get("hovertext") or []) if isinstance(trace.get("hovertext"), list)]
    placed = {h for h in hovers if " · " in h and ": " in h}
    assert len(placed) >= len(table)  # every kernel is a marker whose hover is its sentence
    assert spec["layout"]["xaxis"]["type"] == "log" and spec["layout"]["yaxis"]["type"] == "log"
    assert "Replay of a run recorded on" in spec["layout"]["title"]["text"]
    assert any(c.value.startswith(f"{len(table)} kernels placed") for c in at.caption)


def test_a_second_visitor_gets_the_same_page_without_placing_a_kernel_or_building_a_chart_again(monkeypatch):
    st.cache_data.clear()
    st.cache_resource.clear()
    calls = Counter()
    for module, name in [(rl, "measured_roofs"), (rl, "kernel_points"), (roofline_charts, "figure"),
                         (device_copy_chart, "figure"), (compute_chart, "figure")]:
        def spy(*args, real=getattr(module, name), called=f"{module.__name__}.{name}", **kwargs):
            calls[called] += 1
            return real(*args, **kwargs)
        monkeypatch.setattr(module, name, spy)
    first = open_page()
    worked_out = dict(calls)
    assert calls[f"{rl.__name__}.kernel_points"] == 1 and calls[f"{roofline_charts.__name__}.figure"] == 1
    second = open_page()
    assert calls == worked_out
    assert [c.proto.spec for c in second.get("plotly_chart")] == [c.proto.spec for c in first.get("plotly_chart")]


def test_the_ceilings_are_shown_or_the_recordings_they_need_are_named(bundled):
    at = open_page()
    warnings = " ".join(w.value for w in at.warning)
    ridge = rl.ridge_sentence(bundled["device"], rl.ridges(bundled["roofs"]))
    if ridge is None:  # no ceiling recordings bundled: the page says what it needs; no fraction of a missing roof
        assert "Not measured for this GPU" in warnings
        if not rl.memory_roofs(bundled["roofs"]):
            assert bundled["points"]["fraction"].isna().all()
    else:
        assert any(ridge.split(":")[0] in m.value and "ridge" in m.value for m in at.markdown)
        assert bundled["points"]["fraction"].notna().all()
        assert len(at.dataframe) >= 2 and len(at.dataframe[1].value) == len(bundled["roofs"])


def test_each_roof_is_named_on_the_chart_and_a_cache_figure_below_dram_is_named_not_drawn(bundled):
    at = open_page()
    spec = roofline_chart(at)
    labels = [a["text"] for a in spec["layout"].get("annotations", [])]
    for roof in rl.memory_roofs(bundled["roofs"]) + [r for r in bundled["roofs"] if r.kind == "compute"]:
        assert any(label.startswith(f"{roof.name} {rl.roof_rate(roof)}") for label in labels), (roof.name, labels)
    for ridge in rl.ridges(bundled["roofs"]):
        assert any(label.startswith(f"ridge {rl.number(ridge.intensity)} FLOP/B") for label in labels), labels
    warnings = " ".join(w.value for w in at.warning)
    for cache, dram in rl.unused_roofs(bundled["roofs"]):  # the bundled H200 L2 figure (8 MiB copies) is one
        assert f"The {cache.name} figure" in warnings and f"below the {dram.name} roof" in warnings
        assert not any(t.get("name", "").startswith(f"{cache.name} roof") for t in spec["data"])
        assert not any(f"of the {cache.name} roof" in v for v in at.dataframe[0].value["verdict"])
    ceilings = at.dataframe[1].value
    assert set(ceilings["used"]) <= {"yes", "no: below the DRAM roof"}
    assert (ceilings["used"] == "yes").sum() == len(rl.memory_roofs(bundled["roofs"])) + sum(
        r.kind == "compute" for r in bundled["roofs"])


@pytest.mark.parametrize("key", ["roofline_device", "roofline_kernel"])
@pytest.mark.parametrize("value", ["<script>alert(1)</script>" * 40, "NVIDIA H999", "**bold** `x`"])
def test_a_hostile_link_value_is_named_in_one_short_line_never_a_traceback(key, value):
    at = open_page(**{key: value})
    notes = [w.value for w in at.warning if "Not used as written" in w.value]
    assert len(notes) == 1 and key.replace("_", "\\_") in notes[0]
    assert len(notes[0]) < 400 and "<script>" not in notes[0]  # plain text, cut short
    assert roofline_chart(at)  # the page goes on with its default


def test_a_link_highlights_a_kernel_and_a_bad_value_is_named_not_a_traceback(bundled):
    kernel = bundled["points"]["kernel"].iloc[0]
    at = open_page(roofline_kernel=kernel)
    assert at.selectbox(key="roofline_kernel").value == kernel
    assert any(trace.get("name") == "highlighted" for trace in roofline_chart(at)["data"])
    at = open_page(roofline_kernel="no such kernel <b>x</b>")
    assert at.selectbox(key="roofline_kernel").value == "(none)"
    assert any("roofline\\_kernel" in w.value for w in at.warning)


def test_the_stage_view_shows_one_chart_and_its_takeaway(bundled):
    at = open_page(present="1")
    spec = roofline_chart(at)
    assert 480 < spec["layout"]["height"] <= 640 and len(at.get("plotly_chart")) == 1
    assert not any("is below the" in w.value for w in at.warning)  # an unused cache figure is named at the desk
    assert not at.dataframe  # tables are for the desk
    takeaway = " ".join(m.value for m in at.markdown if m.value.startswith("###"))
    ridge = rl.ridge_sentence(bundled["device"], rl.ridges(bundled["roofs"]))
    assert ("ridge" in takeaway) if ridge else ("No ceilings are recorded" in takeaway)


def test_the_stage_names_every_roof_and_ridge_it_draws_and_every_colour(bundled):
    spec = roofline_chart(open_page(present="1"))
    labels = " ".join(a["text"] for a in spec["layout"]["annotations"])
    drawn = [t for t in spec["data"] if t.get("mode") == "lines" and " roof: " in t.get("name", "")]
    assert drawn
    for trace in drawn:  # 'L2 roof: 8,135 GB/s' is drawn, so 'L2 8,135 GB/s' is written on the chart
        assert trace["name"].replace(" roof:", "") in labels, trace["name"]
    ridges = [t for t in spec["data"] if t.get("name", "").startswith("ridge: ")]
    assert len(ridges) == len(rl.ridges(bundled["roofs"]))  # the takeaway quotes every ridge, so each is drawn
    for ridge in rl.ridges(bundled["roofs"]):
        assert f"ridge {rl.number(ridge.intensity)} FLOP/B" in labels
    # every colour of a point is named in the legend: each experiment placed has a legend entry
    named = {t["name"] for t in spec["data"] if t.get("mode") == "markers" and t.get("showlegend", True)}
    assert set(bundled["points"]["experiment"]) <= named


def test_links_set_the_gpu_and_present_a_highlighted_kernel(bundled):
    kernel = bundled["points"]["kernel"].iloc[0]
    at = open_page(present="1", roofline_device=bundled["device"], roofline_kernel=kernel)
    assert not any("Not used as written" in w.value for w in at.warning)
    assert at.selectbox(key="roofline_device").value == bundled["device"]
    assert any(trace.get("name") == "highlighted" for trace in roofline_chart(at)["data"])
    takeaway = " ".join(m.value for m in at.markdown if m.value.startswith("###"))
    sentence = bundled["points"].loc[bundled["points"]["kernel"] == kernel, "sentence"].iloc[0]
    assert sentence.split(":")[0].split(" · ")[-1] in takeaway.replace("\\", "")


@pytest.mark.slow
def test_live_measure_runs_the_suite_one_experiment_after_another_and_places_what_answered(monkeypatch):
    """Through a real worker process that serves recorded numbers (tests.fake_service): no GPU here."""
    import streamlit as st

    from gpu.core import text
    from gpu.experiments import suites

    monkeypatch.setenv("PINPOINT_BACKEND", "auto")
    monkeypatch.setenv("PINPOINT_WORKER_SERVICE", "tests.fake_service:RecordedService")
    st.cache_resource.clear()
    try:
        at = AppTest.from_file(APP, default_timeout=180).run()
        at.switch_page(PAGE).run()
        assert not at.exception, at.exception
        assert not at.get("plotly_chart") and any("Press **Measure**" in i.value for i in at.info)
        at.button(key="roofline_measure").click().run()
        assert not at.exception, at.exception
        suite = suites.load("roofline")
        steps = [c.value for c in at.caption if "measuring" in c.value]
        runs = len(suite.runs)
        assert steps == [f"{i}/{runs}: measuring {text.plain(r.experiment)}…" for i, r in enumerate(suite.runs, 1)]
        spec = roofline_chart(at)
        assert "Live on NVIDIA H200" in spec["layout"]["title"]["text"]
        table = at.dataframe[0].value
        # the worker's recorded numbers hold the suite's coalescing and reduction points: those are placed
        assert {"coalescing", "reduction"} <= set(table["experiment"]) <= set(suite.experiments)
        assert len(table) >= 12 and table["verdict"].str.len().gt(10).all()
    finally:
        st.cache_resource.clear()


@pytest.mark.parametrize("present", ["0", "1"])
def test_a_gpu_with_nothing_to_place_is_not_offered_and_a_link_to_it_says_why_over_a_drawn_chart(bundled, present):
    """The peer recording's H100s have no kernel or ceiling: the menu leaves them out, and a link naming one (as
    the menu once offered) is told why in one line while the page draws the GPU it can."""
    data = ReplayBackend().data
    peers_only = str(data.loc[data["experiment"] == "peers", "device_name"].iloc[0])
    assert peers_only not in rl.device_models(data)
    at = open_page(roofline_device=peers_only, present=present)
    notes = [n.value for n in (at.toast if present == "1" else at.warning) if "Not used as written" in n.value]
    assert len(notes) == 1 and "nothing to place on a roofline was recorded on this GPU model (only peers)" in \
        notes[0].replace("\\", "")
    assert at.selectbox(key="roofline_device").value == bundled["device"]
    assert peers_only not in at.selectbox(key="roofline_device").options
    assert roofline_chart(at)  # never a blank page
    assert "roofline_kernel" not in " ".join(notes)
