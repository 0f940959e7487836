"""The Peers page through AppTest: replay without a peer recording (it says so), replay of made-up 2- and 8-GPU
nodes (tests/peer_frames.py, in a folder of their own through PINPOINT_REPLAY_DIR), the view in the address and
hostile values in it, the stage view, and live on machines of one and two GPUs (real worker processes serving
recorded numbers: tests.fake_service)."""

import json
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from gpu.experiments import registry
from gpu.experiments.peers import view as charts
from tests.peer_frames import write_recording

APP = str(Path(__file__).resolve().parent.parent / "app.py")
PAGE = "pages/peers.py"
NO_RECORDING = "No peer recording exists yet"


@pytest.fixture
def recordings(monkeypatch, tmp_path):
    """Replay of the recordings written into a folder of the test's own (the cached backends cleared around it)."""
    monkeypatch.setenv("PINPOINT_BACKEND", "replay")
    monkeypatch.setenv("PINPOINT_REPLAY_DIR", str(tmp_path))
    st.cache_resource.clear()
    st.cache_data.clear()
    yield tmp_path
    st.cache_resource.clear()
    st.cache_data.clear()


@pytest.fixture
def two_gpus(recordings):
    write_recording(recordings, 2)
    return recordings


@pytest.fixture
def eight_gpus(recordings):
    write_recording(recordings, 8, slow=(2, 5), through_host=(6, 7))
    return recordings


def open_page(**params):
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    at.switch_page(PAGE).run()
    assert not at.exception, at.exception
    return at


def figures(at) -> dict[str, dict]:
    """The page's charts by the first words of their title."""
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return {s["layout"]["title"]["text"].split(" (")[0].split("<br>")[0]: s for s in specs}


def link_notes(at) -> list[str]:
    return [w.value for w in at.warning if "Not used as written" in w.value]


def test_without_a_peer_recording_the_page_says_so_plainly(recordings):
    at = open_page()
    assert any(i.value.startswith(NO_RECORDING) for i in at.info)
    assert not at.get("plotly_chart") and not at.error and not at.warning


def test_the_bundled_recordings_hold_no_peer_run_yet_and_the_page_says_so(monkeypatch):
    """Until a peer recording is bundled, the page in the app's own replay says so (never a made-up matrix)."""
    from gpu.service.backends import ReplayBackend

    monkeypatch.setenv("PINPOINT_BACKEND", "replay")
    monkeypatch.delenv("PINPOINT_REPLAY_DIR", raising=False)
    bundled = (ReplayBackend().data["experiment"] == "peers").any()
    at = open_page()
    assert bundled == bool(at.get("plotly_chart"))
    assert bundled != any(i.value.startswith(NO_RECORDING) for i in at.info)


def test_two_gpus_replayed_draw_the_matrix_topology_sweep_and_host_links(two_gpus):
    at = open_page()
    banner = " ".join(i.value for i in at.info)
    assert "**Replay**" in banner and "NVIDIA H100 80GB HBM3 (2026-11-25)" in banner
    shown = figures(at)
    assert list(shown) == ["Peer bandwidth, source → destination", "Both directions at once, each direction",
                           "Latency into the peer's memory", "GPU 0 → GPU 1: bandwidth vs copy size",
                           "Host links: each GPU alone vs every GPU at once at 256 MiB"]
    matrix = shown["Peer bandwidth, source → destination"]
    assert "Replay of a run recorded on 2 × NVIDIA H100 80GB HBM3" in matrix["layout"]["title"]["text"]
    assert "batched · 1 GiB" in matrix["layout"]["title"]["text"]  # the default: the batched copy engine, largest
    assert matrix["data"][0]["text"] == [["same GPU", "391<br>NV18"], ["391<br>NV18", "same GPU"]]
    words = " ".join(m.value for m in at.markdown)
    assert "GPU 0 ↔ GPU 1\\: 18 NVLinks \\(NVLink 4\\), 391 GB/s one way, the only measured pair" in words
    assert "GPU 0 loses 18 % copying to the host when both GPUs do at once" in words
    assert len(at.dataframe[0].value) == 220 and not at.warning
    assert at.dataframe[0].proto.placeholder == "—"  # a latency row's GB/s reads "—", not "None"


def test_eight_gpus_replayed_read_as_a_matrix_with_the_slow_pair_named(eight_gpus):
    at = open_page()
    matrix = figures(at)["Peer bandwidth, source → destination"]
    heatmap = matrix["data"][0]
    assert heatmap["x"] == [f"GPU {g}" for g in range(8)] and len(heatmap["text"]) == 8
    assert heatmap["text"][2][5] == "199<br>NV18" and heatmap["text"][7][6] == "47<br>host"
    assert matrix["layout"]["xaxis"]["title"]["text"] == "destination GPU"
    assert [w.value for w in at.warning] == [
        "1 pair below 90 % of the median pair of its link type: GPU 2 ↔ GPU 5 (51 %)"]
    words = " ".join(m.value for m in at.markdown)
    assert "28 pairs\\: 27 with 18 NVLinks" in words
    assert at.expander[-1].label == "Every pair (28)"
    assert at.selectbox(key="peers_pair").options[:2] == ["GPU 0 → GPU 1", "GPU 0 → GPU 2"]
    assert len(at.selectbox(key="peers_pair").options) == 56


def test_the_view_is_kept_in_the_address_and_restored_from_it(two_gpus):
    at = open_page(peers_variant="ce_write", peers_method="single", peers_size=str(1 << 20), peers_pair="1-0")
    assert not link_notes(at)
    shown = figures(at)
    assert "copy engine, source pushes · single copy · 1 MiB" in shown["Peer bandwidth, source → destination"][
        "layout"]["title"]["text"]
    assert "GPU 1 → GPU 0: bandwidth vs copy size" in shown
    assert at.query_params["peers_variant"] == "ce_write" and at.query_params["peers_pair"] == "1-0"
    at.radio(key="peers_variant").set_value("sm_write").run()
    assert at.query_params["peers_variant"] == "sm_write" and at.query_params["peers_size"] == str(1 << 20)


@pytest.mark.parametrize("key", ["peers_variant", "peers_method", "peers_size", "peers_pair"])
@pytest.mark.parametrize("value", ["<script>alert(1)</script>" * 40, "9-9", "**bold** `x`"])
@pytest.mark.slow
def test_a_hostile_link_value_is_named_in_one_short_line_never_a_traceback(two_gpus, key, value):
    at = open_page(**{key: value})
    notes = link_notes(at)
    assert len(notes) == 1 and key.replace("_", "\\_") in notes[0]
    assert len(notes[0]) < 400 and "<script>" not in notes[0]
    assert "Peer bandwidth, source → destination" in figures(at)  # the page goes on with its default


def test_the_stage_shows_the_matrix_and_its_takeaway_only(eight_gpus):
    at = open_page(present="1", peers_pair="2-5")
    [matrix] = figures(at).values()
    assert matrix["layout"]["height"] == charts.STAGE_MATRIX_HEIGHT
    assert matrix["data"][0]["textfont"]["size"] >= 20
    takeaway = [m.value for m in at.markdown if m.value.startswith("###")]
    assert len(takeaway) == 1 and "GPU 2 → GPU 5 is slow at 199" in takeaway[0].replace("\u00a0", " ")
    assert not at.dataframe and not link_notes(at)
    assert at.query_params["peers_pair"] == "2-5"  # the pair's sweep is for the desk: its setting is kept


@pytest.fixture
def live(monkeypatch):
    def start(service: str):
        monkeypatch.setenv("PINPOINT_BACKEND", "auto")
        monkeypatch.setenv("PINPOINT_WORKER_SERVICE", f"tests.fake_service:{service}")
        monkeypatch.delenv("PINPOINT_DEVICE", raising=False)
        st.cache_resource.clear()
    yield start
    st.cache_resource.clear()


def test_live_on_one_gpu_says_in_one_line_that_the_matrix_needs_two(live):
    live("RecordedService")
    at = AppTest.from_file(APP, default_timeout=180).run()
    at.switch_page(PAGE).run()
    assert not at.exception, at.exception
    reasons = [i.value for i in at.info if "needs two GPUs" in i.value]
    assert len(reasons) == 1 and "\n" not in reasons[0] and reasons[0].startswith(
        "The peer matrix needs two GPUs; this machine has 1 GPU")
    assert not [b for b in at.button if b.label == "Measure"] and not at.get("plotly_chart")


@pytest.mark.slow
def test_live_on_two_gpus_offers_measure(live):
    live("TwoGpuRecordedService")
    at = AppTest.from_file(APP, default_timeout=180).run()
    at.switch_page(PAGE).run()
    assert not at.exception, at.exception
    assert not [i for i in at.info if "needs two GPUs" in i.value]
    if "peers" in registry.BY_NAME:
        assert [b for b in at.button if b.label == "Measure"] and not at.error
    else:  # the experiment not declared: the request is refused by name, never with a traceback
        assert any("unknown experiment" in e.value and "peers" in e.value for e in at.error)


def test_live_measure_gives_the_matrix_first_and_offers_every_size_with_its_estimated_time(live):
    """A live Measure with the page's defaults asks for the declaration's defaults (the matrix at 256 MiB, as the
    health suite), and the full sweep is one choice away, each saying before it starts how long it should take: an
    estimate from the sampling times of the bundled recording of the live GPUs' model (these two H200s: the 2 × H200
    one, not the 2 × H100 one), said to be one."""
    from gpu.experiments import peers

    live("TwoGpuRecordedService")
    at = AppTest.from_file(APP, default_timeout=180).run()
    at.switch_page(PAGE).run()
    assert not at.exception, at.exception
    scope = at.radio(key="peers_scope")
    assert scope.value == "matrix" and len(scope.options) == 2 and scope.options[0] == "The matrix at 256 MiB"
    assert list(scope.proto.captions) == ["about 1 s, 16 points", "about 46 s, 380 points"]
    [said] = [c.value.replace("\\", "") for c in at.caption if "an estimate" in c.value]  # shown as plain text
    assert said == ("about 1 s for 16 points (an estimate: each point at what it took in a recorded run, 2 × NVIDIA "
                    "H200, 2026-11-28, profile interactive)")
    at.button(key="peers_measure").click().run()
    assert not at.exception and not at.error, (at.exception, at.error)
    numbers = at.dataframe[-1].value
    assert len(numbers) == 16 and not at.get("plotly_chart")[0].proto.spec.count("4 KiB")
    assert set(peers.parse_params({}).variants) == {"ce_read", "ce_write", "ce_bidir", "latency",
                                                    *peers.HOST_VARIANTS}
    at.radio(key="peers_scope").set_value("sweep").run()
    [said] = [c.value.replace("\\", "") for c in at.caption if "an estimate" in c.value]
    assert said.startswith("about 46 s for 380 points") and at.query_params["peers_scope"] == "sweep"
    assert len(at.dataframe[-1].value) == 16  # nothing measured until Measure is pressed again


@pytest.fixture
def scheduled_node(live, monkeypatch):
    """A live node of four GPUs whose peer rows arrive as a real run's do, spread over 2 s (tests.fake_service:
    ScheduledPeerService), each run stamped with one time so that two runs' pages can be compared."""
    monkeypatch.setenv("PINPOINT_FAKE_GPUS", "4")
    monkeypatch.setenv("PINPOINT_FAKE_FIRST_S", "0.1")
    monkeypatch.setenv("PINPOINT_FAKE_LAST_S", "2.0")
    monkeypatch.setenv("PINPOINT_FAKE_TIMESTAMP", "2026-11-28T12:00:00")
    live("ScheduledPeerService")


def followed(monkeypatch) -> dict:
    """What the page's measure flow does while following each job: its polls, its partial draws (the rows each
    drew), whether the job had ended when the runs store was opened, and the job's rows at its end. Setting
    ``preview`` False follows the next job without partial draws."""
    from pages._ui import backends, measure

    seen = {"preview": True}
    follow, run_catalog = measure.follow, backends.run_catalog

    def counted_follow(handle, preview=None, *args, **kwargs):
        seen.update(polls=0, drawn=[], store_opened_while_measuring=[], handle=handle)
        wait = handle.wait

        def counted_wait(timeout=None):
            seen["polls"] += 1
            return wait(timeout)

        def counted_preview(frame, suffix):
            seen["drawn"].append(len(frame))
            return preview(frame, suffix)

        handle.wait = counted_wait
        follow(handle, counted_preview if seen["preview"] else None, *args, **kwargs)
        seen["rows"] = len(handle.rows)

    def noted_catalog():
        if "handle" in seen:
            seen["store_opened_while_measuring"].append(not seen["handle"].wait(0))
        return run_catalog()

    monkeypatch.setattr(measure, "follow", counted_follow)
    monkeypatch.setattr(measure, "run_catalog", noted_catalog)
    return seen


def final_page(at) -> tuple[list[str], str]:
    """The page's charts (Plotly JSON) and its numbers table (as CSV: a latency row's empty GB/s compares equal)."""
    return [c.proto.spec for c in at.get("plotly_chart")], at.dataframe[-1].value.to_csv(index=False)


def test_a_live_measure_draws_the_first_cells_at_once_then_redraws_at_most_once_a_second(scheduled_node,
                                                                                       monkeypatch):
    """64 points over 2 s: the partial matrix is drawn as soon as the first cells come, then at most once a second
    (not at every poll), the runs store is opened while the job measures (not after it), and the final page is the
    one a Measure without any partial draw gives."""
    at = AppTest.from_file(APP, default_timeout=180).run()
    at.switch_page(PAGE).run()
    at.session_state["reuse_points"] = False  # each Measure measures
    seen = followed(monkeypatch)
    at.button(key="peers_measure").click().run()
    assert not at.exception and not at.error, (at.exception, at.error)
    drawn = seen["drawn"]
    assert seen["rows"] == 64 and drawn and drawn[0] < 64  # a partial matrix, before the run's end
    assert all(a < b for a, b in zip(drawn, drawn[1:], strict=False))  # each redraw with new cells
    assert len(drawn) <= 4 and len(drawn) < seen["polls"]  # over 2 s: its first draw, then one a second at most
    assert seen["store_opened_while_measuring"][:1] == [True]
    shown = final_page(at)
    assert len(at.dataframe[-1].value) == 64 and "GPU 3" in shown[0][0]

    seen["preview"] = False
    at.button(key="peers_measure").click().run()
    assert not seen["drawn"] and seen["rows"] == 64
    assert final_page(at) == shown  # the partial draws leave no trace on the final page


def test_what_fails_while_the_page_readies_its_end_leaves_the_measurement_whole(scheduled_node, monkeypatch):
    """Reading the bundled comparison while a job measures is a head start only: where it fails, the job is followed
    to its end and its result shown, as without it."""
    from gpu.results.analysis import normal

    def unreadable():
        raise OSError("assets/replay: permission denied")

    monkeypatch.setattr(normal, "read_bundled_points", unreadable)
    at = AppTest.from_file(APP, default_timeout=180).run()
    at.switch_page(PAGE).run()
    at.button(key="peers_measure").click().run()
    assert not at.exception and not at.error, (at.exception, at.error)
    assert len(at.dataframe[-1].value) == 64 and at.get("plotly_chart")
