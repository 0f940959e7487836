"""The app's live backends: one worker per device set it is asked for (real worker processes serving recorded numbers),
and what the app and the runner say where there is no GPU at all (not the GPU extra, which cannot help there)."""

from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from gpu import bench
from gpu.service import backends
from pages._ui import backends as ui
from tests.fake_service import TwoGpuRecordedService

APP = str(Path(__file__).resolve().parent.parent / "app.py")
FIRST, SECOND = (g["uuid"] for g in TwoGpuRecordedService.GPUS)


@pytest.fixture
def two_gpus(monkeypatch):
    monkeypatch.setenv("PINPOINT_BACKEND", "auto")
    monkeypatch.setenv("PINPOINT_WORKER_SERVICE", "tests.fake_service:TwoGpuRecordedService")
    monkeypatch.delenv("PINPOINT_DEVICE", raising=False)
    st.cache_resource.clear()
    yield
    st.cache_resource.clear()


@pytest.mark.slow
def test_the_app_keeps_one_worker_per_device_set_it_is_asked_for(two_gpus):
    pair, reason = ui.live_backend_for("0,1", need=2, job="the peers page")
    assert reason == "" and pair.indices == [0, 1] and pair.label() == "Live on GPUs 0,1 · NVIDIA H200 · desk-1"
    assert ui.live_backend_for([1, "GPU-aaaa"])[0] is pair and ui.live_backend_for("all")[0] is pair
    one = ui.live_backend_for("1")[0]
    assert one.indices == [1] and one is ui.live_backend_on(SECOND)[0]  # the sidebar's choice shares it
    default = ui.default_live_backend()[0]
    assert ui.live_backend_for(FIRST)[0] is default
    workers = {b.client.worker_pid for b in (pair, one, default)}
    assert len(workers) == 3


@pytest.mark.parametrize(("devices", "need", "message"), [
    ("0,0", 1, "'0,0' names GPU 0 twice; name each GPU once; the GPUs are: 0 · NVIDIA H200 · …0000a0a0 · desk-1; "
               "1 · NVIDIA H200 · …0000b1b1 · desk-1"),
    ("1", 2, "'1' names 1 GPU; the peers page needs two; the GPUs are: 0 · NVIDIA H200"),
    ("2", 1, "no GPU '2' here; the GPUs are: 0 · NVIDIA H200"),
])
@pytest.mark.slow
def test_a_bad_set_from_a_page_is_one_line(two_gpus, devices, need, message):
    backend, reason = ui.live_backend_for(devices, need=need, job="the peers page")
    assert backend is None and reason.startswith(message) and "\n" not in reason


@pytest.fixture
def no_gpu(monkeypatch, tmp_path):
    """This machine as it is (no PyCUDA), with the driver's traces looked for under an empty folder."""
    if backends.pycuda_installed():
        pytest.skip("PyCUDA is installed here: the no-GPU messages are for machines without it")
    monkeypatch.setenv("PINPOINT_BACKEND", "auto")
    monkeypatch.delenv("PINPOINT_WORKER_SERVICE", raising=False)
    monkeypatch.setattr(backends, "NVIDIA_GPU_SIGNS", (str(tmp_path / "dev" / "nvidia[0-9]*"),))
    st.cache_resource.clear()
    yield tmp_path
    st.cache_resource.clear()


def test_without_a_gpu_the_reason_is_the_missing_gpu_not_the_gpu_extra(no_gpu):
    assert backends.start_live() == (None, "no NVIDIA GPU on this machine")
    assert backends.start_live(devices="0,1") == (None, "no NVIDIA GPU on this machine")
    assert backends.replay_reason("no NVIDIA GPU on this machine") == \
        "no NVIDIA GPU on this machine: replaying recorded runs"
    (no_gpu / "dev").mkdir()
    (no_gpu / "dev" / "nvidia0").write_text("")  # a GPU is here: then the extra is what is missing
    assert backends.start_live() == (None, "PyCUDA is not installed (see requirements-gpu.txt)")


def test_the_runner_without_a_gpu_says_so(no_gpu, capsys):
    assert bench.main(["transfers", "--sizes", "4KiB", "--no-store"]) == 3
    assert capsys.readouterr().err == "error: the runner measures live and needs a GPU: no NVIDIA GPU on this machine\n"


def test_the_banner_without_a_gpu_says_it_replays_and_does_not_send_people_to_the_gpu_extra(no_gpu):
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert not at.exception, at.exception
    banner = next(i.value for i in at.info if "**Replay**" in i.value).replace("\\", "")
    assert "no NVIDIA GPU on this machine: replaying recorded runs" in banner
    assert "PyCUDA" not in banner and "requirements-gpu" not in banner
