"""The worker's host pool on a real GPU (pytest -m gpu on the GPU machine): Transfers and Streams take their host
buffers, page-locked and pageable, from the pool that an earlier job or the app's warm-up filled, and still verify
every point. Each test has a fresh worker of its own, so that what the pool holds is only what the test put there."""

import pytest

from gpu.core.units import KiB, MiB
from gpu.experiments import REGISTRY
from gpu.service.backends import LiveBackend, submit_values
from gpu.service.client import WorkerClient

pytestmark = pytest.mark.gpu

# A small request of each, and how many pooled buffers a job of it asks for: Transfers one host buffer per kind
# (pinned-and-mapped, write-combined, pageable); Streams a pinned and a pageable input and output, and the
# bidirectional copies' output pattern and read-back.
SMALL_JOBS = [("transfers", {"sizes": [4 * KiB, 16 * MiB], "profile": "interactive"}, 3),
              ("streams", {"size_bytes": 64 * MiB, "chunks": [16], "streams": [4], "profile": "interactive"}, 6)]


@pytest.fixture
def fresh_backend():
    client = WorkerClient()
    try:
        yield LiveBackend(client)
    finally:
        client.close()


def host_pool(backend) -> dict:
    return backend.client.run("memory")["host_pool"]


@pytest.mark.parametrize("experiment,params,buffers", SMALL_JOBS)
def test_a_second_job_takes_every_host_buffer_from_the_pool_and_verifies(fresh_backend, experiment, params, buffers):
    start = host_pool(fresh_backend)
    first = submit_values(fresh_backend, experiment, params).outcome()
    after_first = host_pool(fresh_backend)
    second = submit_values(fresh_backend, experiment, params).outcome()
    after_second = host_pool(fresh_backend)
    print(f"\n{experiment}: pool {start} → {after_first} → {after_second}")
    assert after_first["missed"] - start["missed"] == buffers  # a fresh worker: nothing of these sizes held yet
    assert after_second["missed"] == after_first["missed"]  # the second job pinned and faulted in nothing new
    assert after_second["lent"] - after_first["lent"] >= buffers
    assert after_second["held_bytes"] == after_first["held_bytes"] > 0
    assert after_first["held_bytes"] > after_first["locked_bytes"]  # pageable buffers are held too
    assert first["verified"].all() and second["verified"].all() and len(first) == len(second) > 0


def test_after_the_apps_warm_up_a_default_transfers_and_streams_measure_take_every_buffer_from_the_pool(
        fresh_backend):
    declared = sum(nbytes for entry in REGISTRY if hasattr(entry.sweep_module(), "pooled_host_buffers")
                   for nbytes, _ in entry.sweep_module().pooled_host_buffers(entry.module.parse_params({})))
    warmed = fresh_backend.warm().outcome()["pooled_bytes"]
    print(f"\nwarmed {warmed / MiB:.0f} MiB of {declared / MiB:.0f} MiB declared; pool {host_pool(fresh_backend)}")
    assert warmed == declared  # the H200 hosts' pinned budget and memory leave room for all of it
    for experiment in ("transfers", "streams"):
        before = host_pool(fresh_backend)
        frame = submit_values(fresh_backend, experiment, {"profile": "interactive"}).outcome()
        after = host_pool(fresh_backend)
        print(f"{experiment}: {len(frame)} rows, pool {after}")
        assert frame["verified"].all()
        assert after["missed"] == before["missed"] and after["lent"] > before["lent"]
        assert after["held_bytes"] == warmed
