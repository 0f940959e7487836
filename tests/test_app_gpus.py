"""Several GPUs on one machine: the sidebar offers them by model, UUID tail and host, each GPU gets its own worker
process, and the banner names the GPU that measures (a real worker process serving recorded numbers; no GPU here)."""

from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from tests.fake_service import TwoGpuRecordedService

APP = str(Path(__file__).resolve().parent.parent / "app.py")
FIRST, SECOND = (g["uuid"] for g in TwoGpuRecordedService.GPUS)


@pytest.fixture(autouse=True)
def two_gpus(monkeypatch):
    monkeypatch.setenv("PINPOINT_BACKEND", "auto")
    monkeypatch.setenv("PINPOINT_WORKER_SERVICE", "tests.fake_service:TwoGpuRecordedService")
    monkeypatch.delenv("PINPOINT_DEVICE", raising=False)
    st.cache_resource.clear()
    yield
    st.cache_resource.clear()


@pytest.mark.slow
def test_the_sidebar_offers_each_gpu_and_each_gets_its_own_worker():
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert not at.exception, at.exception
    choice = at.selectbox(key="gpu_choice")
    assert choice.value == FIRST
    assert choice.options == ["0 · NVIDIA H200 · …0000a0a0 · desk-1", "1 · NVIDIA H200 · …0000b1b1 · desk-1"]
    assert any("measuring on NVIDIA H200 · …0000a0a0 · desk-1" in s.value.replace("\\", "") for s in at.success)
    first_worker = next(c.value for c in at.sidebar.caption if "GPU worker" in c.value)
    choice.set_value(SECOND).run()
    assert not at.exception, at.exception
    assert any("measuring on NVIDIA H200 · …0000b1b1 · desk-1" in s.value.replace("\\", "") for s in at.success)
    second_worker = next(c.value for c in at.sidebar.caption if "GPU worker" in c.value)
    assert "…0000b1b1" in second_worker and second_worker.split("pid ")[1] != first_worker.split("pid ")[1]


def test_pinpoint_device_starts_the_app_on_that_gpu(monkeypatch):
    monkeypatch.setenv("PINPOINT_DEVICE", "GPU-bbbb")
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert not at.exception, at.exception
    assert at.selectbox(key="gpu_choice").value == SECOND
    assert any("measuring on NVIDIA H200 · …0000b1b1" in s.value.replace("\\", "") for s in at.success)


def test_a_pinpoint_device_that_is_not_there_is_named_and_the_app_replays(monkeypatch):
    monkeypatch.setenv("PINPOINT_DEVICE", "5")
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert not at.exception, at.exception
    named = "no GPU '5' here; the GPUs are: 0 · NVIDIA H200 · …0000a0a0 · desk-1; 1 · NVIDIA H200"
    assert any(named in i.value.replace("\\", "") for i in at.info)
