"""The built-in talk and presentation mode (AppTest in replay), and the claims' verdicts computed from data."""

import json
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from gpu.core.errors import ClaimError
from gpu.experiments.transfers import view as transfers_view
from gpu.present import claims, talks
from gpu.service.backends import ReplayBackend, submit_values

APP = str(Path(__file__).resolve().parent.parent / "app.py")


@pytest.fixture(autouse=True)
def replay_mode(monkeypatch):
    monkeypatch.setenv("PINPOINT_BACKEND", "replay")


def test_the_built_in_talk_loads_and_every_scene_is_judged_from_the_recording():
    talk = talks.load()
    assert talk.title == "Claims about GPU memory, measured" and len(talk.scenes) == 6
    replay = ReplayBackend()
    lines = [talks.headline(s, submit_values(replay, s.experiment, s.params).outcome()) for s in talk.scenes]
    assert lines[0].startswith("Understated for large copies") and "at 1 GiB" in lines[0]
    assert lines[1].startswith("False at 1 GiB")
    assert lines[2].endswith("costs 3.4 % against the contiguous read (copy, 1 float/thread, 2,680 GB/s)")
    assert "stride 2 costs 1.14×" in lines[3] and "against the contiguous read (copy, 1 float/thread" in lines[3]
    assert lines[4].startswith("False: 683× slower than grid-stride + shuffle, the fastest reduction beside it")
    # "best" searches the Streams page's default grid, and says how many pipelines that was
    assert "3 streams (one per stage) × 64 chunks run 1.98×" in lines[5] and "the best of 15 pipelines" in lines[5]


def test_verdicts_follow_the_numbers_not_the_text():
    def transfers(pinned_ms):
        rows = []
        for size, pageable_ms in ((4096, 0.01), (1 << 30, 100.0)):
            rows += [{"variant": "pageable", "direction": "h2d", "bytes": size, "include_alloc": False,
                      "median_ms": pageable_ms},
                     {"variant": "pinned", "direction": "h2d", "bytes": size, "include_alloc": False,
                      "median_ms": pinned_ms(pageable_ms)}]
        return pd.DataFrame(rows)

    assert transfers_view.pinned_up_to_2x(transfers(lambda p: p / 2))["verdict"] == "About right"
    assert transfers_view.pinned_up_to_2x(transfers(lambda p: p / 6))["verdict"].startswith("Understated")
    assert transfers_view.pinned_up_to_2x(transfers(lambda p: p / 1.2))["verdict"] == "Overstated"
    with pytest.raises(ClaimError, match="both pinned and pageable"):
        transfers_view.pinned_up_to_2x(transfers(lambda p: p)[lambda f: f["variant"] == "pinned"])


def test_each_judge_is_its_experiment_s_own_and_found_through_the_registry():
    """The talk's judges live in their experiments' views; claims finds every one and says where it is written."""
    found = claims.judges()
    assert found["pinned_up_to_2x"] is transfers_view.pinned_up_to_2x
    assert set(found) == {"pinned_up_to_2x", "pinned_allocated_per_call", "misaligned_is_expensive",
                          "non_coalesced_costs_1_2x", "atomic_dot_is_fine", "streams_double_throughput"}
    assert set(claims.shared_figures()) == set(found)
    assert claims.judge_source("atomic_dot_is_fine") == "gpu/experiments/reduction/view.py"
    with pytest.raises(ClaimError, match="no experiment's view has a judge 'guess'"):
        claims.judge_source("guess")


@pytest.mark.parametrize("text,message", [
    ("title = 'x'\n", "at least one [[scene]]"),
    ("[[scene]]\nclaim='c'\nexperiment='mining'\njudge='pinned_up_to_2x'\nchart='speedup'\nheadline='h'\n",
     "unknown experiment 'mining'"),
    ("[[scene]]\nclaim='c'\nexperiment='transfers'\njudge='guess'\nchart='speedup'\nheadline='h'\n", "unknown judge"),
    ("[[scene]]\nclaim='c'\nexperiment='transfers'\njudge='pinned_up_to_2x'\nchart='speedup'\nheadline='{oops'\n",
     "not a valid template"),
    ("[[scene]]\nclaim='c'\nexperiment='transfers'\njudge='pinned_up_to_2x'\nchart='speedup'\nheadline='h'\n"
     "[scene.params]\nsizes=[10]\n", "must be at least 16 B"),
    ("not toml [", "talk.toml"),
])
def test_bad_talk_files_are_refused_with_the_reason(tmp_path, text, message):
    path = tmp_path / "talk.toml"
    path.write_text(text)
    with pytest.raises(talks.TalkError, match=message.replace("[", r"\[")):
        talks.load(path)


def open_talk(**params):
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    at.switch_page("pages/talk.py").run()
    assert not at.exception, at.exception
    return at


def scene_text(at):
    titles = [m.value for m in at.markdown if m.value.startswith("# ")]
    headlines = [m.value for m in at.markdown if m.value.startswith("## ")]
    return titles, headlines


def test_every_scene_of_the_talk_renders_a_chart_and_a_verdict_in_replay():
    at = open_talk(present="1")
    seen = []
    for number in range(1, 7):
        titles, headlines = scene_text(at)
        assert at.query_params["scene"] == str(number)
        assert len(titles) == 1 and len(headlines) == 1 and not headlines[0].startswith("## No verdict"), headlines
        chart = json.loads(at.get("plotly_chart")[0].proto.spec)
        assert "Replay of a run recorded on" in chart["layout"]["title"]["text"]
        assert chart["layout"]["font"]["size"] == 20  # stage size
        assert any("**Bundled recording**" in c.value for c in at.caption)
        seen.append(titles[0])
        if number < 6:
            at.button(key="talk_next").click().run()
    assert at.button(key="talk_next").disabled and len(set(seen)) == 6
    at.button(key="talk_prev").click().run()
    assert at.query_params["scene"] == "5"


def test_a_link_to_a_scene_opens_it_and_a_replay_offers_no_live_measure():
    at = open_talk(scene="6")
    titles, headlines = scene_text(at)
    assert titles[0] == "# Overlapping copies and compute with streams doubles throughput"
    assert "streams (one per stage) ×" in headlines[0]
    # no live GPU here: nothing to measure, so no "Measure live" button and no "press m" in the source line
    assert "talk_measure" not in [b.key for b in at.button]
    assert {"talk_prev", "talk_next"} <= {b.key for b in at.button}
    assert not any("press **m**" in c.value for c in at.caption)
    assert any("**Bundled recording**" in c.value for c in at.caption)
    bad = open_talk(scene="lots")
    assert any("is not a scene number" in w.value for w in bad.warning)


def test_presentation_mode_hides_the_chrome_and_shows_the_headline():
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["present"] = "1"
    at.run()
    at.switch_page("pages/transfers.py").run()
    assert not at.exception
    assert not any("not measured now" in i.value for i in at.info)  # the banner gives way to the chart…
    html = " ".join(h.proto.body for h in at.get("html"))
    assert 'data-testid="stSidebar"' in html and "display: none" in html
    chart = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert "Replay of a run recorded on" in chart["layout"]["title"]["text"]  # …which still names its source
    assert chart["layout"]["font"]["size"] == 20
    at.button(key="present_leave").click().run()
    assert "present" not in at.query_params and any("not measured now" in i.value for i in at.info)


def test_the_talk_leaves_the_stage_with_escape_and_notes_name_parameters_readably():
    at = open_talk(present="1")
    assert "display: none" in " ".join(h.proto.body for h in at.get("html"))  # stage: sidebar hidden
    at.button(key="present_leave").click().run()
    assert "present" not in at.query_params
    assert "display: none" not in " ".join(h.proto.body for h in at.get("html"))  # desk styling, sidebar back
    assert json.loads(at.get("plotly_chart")[0].proto.spec)["layout"].get("height") != 480
    notes = " ".join(c.value for c in at.caption if "Parameters:" in c.value)
    assert "sizes 4 KiB, 64 KiB, 1 MiB" in notes and "{" not in notes


def test_described_parameters_write_byte_sizes_as_sizes_and_counts_as_counts():
    assert talks.describe_params({"sizes": [4096, 1 << 30], "include_alloc": [False, True]}, "transfers") == \
        "sizes 4 KiB, 1 GiB · include alloc no, yes"
    assert talks.describe_params({"sizes": [16777216], "variants": ["warp_shuffle"]}, "reduction") == \
        "sizes 16,777,216 · variants warp_shuffle"


def test_the_dot_product_chart_names_the_grey_bar_only_when_it_draws_it():
    from gpu.experiments.reduction import view

    frame = submit_values(ReplayBackend(), "reduction", {"sizes": [1 << 24]}).outcome()
    with_library = view.reduction_figure(frame)
    without = view.reduction_figure(frame[frame["variant"] != "gpuarray_dot"])
    assert "grey" in with_library.layout.title.text and "#7F7F7F" in with_library.data[0].marker.color
    assert "grey" not in without.layout.title.text and "#7F7F7F" not in without.data[0].marker.color
