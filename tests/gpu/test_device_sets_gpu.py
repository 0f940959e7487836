"""Device sets on a machine with two GPUs (run on the GPU machine: pytest -m gpu): a one-GPU job on GPU 1 measures
while GPU 0 measures alone, and a job on GPU 1 waits, saying why, while a job on the pair holds it. Skipped with the
reason where fewer than two GPUs are visible."""

import time

import pytest

from gpu.core.units import GiB, KiB
from gpu.experiments import device_copy, peers
from gpu.service.backends import submit_values
from tests.gpu.test_peers_gpu import gpu_count

pytestmark = pytest.mark.gpu

LONG = {"sizes": [1 * GiB], "variants": ["copy_engine", "sm_copy"], "methods": ["single", "batched"],
        "profile": "precise/timeout_s=2"}  # a few seconds on an H100
SHORT = {"sizes": [4 * KiB], "variants": ["copy_engine"], "methods": ["single"], "profile": "interactive"}


@pytest.fixture(scope="module")
def backends():
    from gpu.service.backends import open_live

    if gpu_count() < 2:
        pytest.skip(f"device sets across GPUs need two GPUs; this machine has {gpu_count()}")
    opened = {"0": open_live(devices="0"), "1": open_live(devices="1"),
              "pair": open_live(devices="0,1", need=2, job="peers")}
    for backend in opened.values():  # each worker started and its kernels compiled before anything is timed
        submit_values(backend, device_copy.NAME, SHORT).outcome()
    yield opened
    for backend in opened.values():
        backend.client.close()


def test_a_job_on_gpu_1_runs_while_gpu_0_measures_alone(backends):
    long = submit_values(backends["0"], device_copy.NAME, LONG)
    time.sleep(0.5)  # GPU 0 is measuring
    assert not long.finished
    short = submit_values(backends["1"], device_copy.NAME, SHORT)
    short.outcome()
    assert not long.finished, "the job on GPU 1 waited for GPU 0's job"
    assert set(long.outcome()["gpu_index"].dropna().astype(int)) == {0}
    assert set(short.outcome()["gpu_index"].dropna().astype(int)) == {1}


def test_a_job_on_gpu_1_waits_for_a_job_on_the_pair_and_says_so(backends):
    pair = submit_values(backends["pair"], peers.NAME,
                         {"sizes": [1 * GiB], "variants": ["ce_read", "ce_write", "ce_bidir"],
                          "methods": ["batched"], "profile": "precise/timeout_s=2"})
    time.sleep(0.5)
    assert not pair.finished
    single = submit_values(backends["1"], device_copy.NAME, SHORT)
    seen = ""
    while not single.finished:
        seen = seen or single.waiting
        time.sleep(0.02)
    assert pair.finished, "the job on GPU 1 measured while the pair job held GPU 1"
    assert "GPU" in seen and "waiting" in seen, seen
    frame = pair.outcome()
    assert {(int(a), int(b)) for a, b in zip(frame["gpu_index"], frame["peer_index"], strict=True)} == {(0, 1), (1, 0)}
    single.outcome()
