"""The peers experiment on a machine with two GPUs (run on the GPU machine: pytest -m gpu). Skipped with the reason
where fewer than two GPUs are visible."""

import os
import subprocess
import sys
from functools import lru_cache

import pytest

from gpu.core import schema
from gpu.core.errors import ValidationError
from gpu.core.units import GiB, KiB, MiB
from gpu.experiments import peers
from gpu.service.backends import submit_values

pytestmark = pytest.mark.gpu


@lru_cache(maxsize=1)
def gpu_count() -> int:
    """GPUs this machine shows, counted in a subprocess (the test process stays CUDA-free)."""
    probe = subprocess.run([sys.executable, "-c", "import pycuda.driver as d; d.init(); print(d.Device.count())"],
                           capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    return int(probe.stdout.strip()) if probe.stdout.strip().isdigit() else 0


two_gpus = pytest.mark.skipif("gpu_count() < 2", reason="the peers experiment needs two GPUs; fewer are visible")


@pytest.fixture(scope="module")
def pair_backend():
    from gpu.service.backends import LiveBackend
    from gpu.service.client import WorkerClient

    if gpu_count() < 2:
        pytest.skip(f"the peers experiment needs two GPUs; this machine has {gpu_count()}")
    client = WorkerClient(service_options={"devices": [0, 1]})
    yield LiveBackend(client)
    client.close()


@two_gpus
def test_the_worker_holds_both_gpus_and_names_each_with_its_link(pair_backend):
    info = pair_backend.client.info
    assert info["gpu_indices"] == [0, 1] and info["gpu_index"] == 0
    assert [d["index"] for d in info["devices"]] == [0, 1]
    assert all(d["uuid"] and d["name"] and d["limits"]["free_device_bytes"] > 0 for d in info["devices"])
    assert info["devices"][0]["uuid"] != info["devices"][1]["uuid"]
    print("\nlinks:", info["links"])
    assert {(link["source"], link["destination"]) for link in info["links"]} == {(0, 1), (1, 0)}
    assert all(link["link"] for link in info["links"])  # NVLink, a PCIe path, or "through host"


@two_gpus
def test_every_variant_verifies_on_both_pairs_and_both_gpus(pair_backend):
    sizes = [4 * KiB, 1 * MiB, 256 * MiB]
    frame = submit_values(pair_backend, peers.NAME, {**peers.FULL_SWEEP, "sizes": sizes,
                                                     "profile": "interactive"}).outcome()
    schema.validate(frame)
    params = peers.with_devices(peers.parse_params({**peers.FULL_SWEEP, "sizes": sizes}), [0, 1])
    keys = {tuple(schema.key_value(v) for v in k) for k in params.points()}
    got = {tuple(schema.key_value(v) for v in k) for k in zip(*(frame[c] for c in peers.KEY_COLUMNS), strict=True)}
    assert got == keys and frame["verified"].all()
    info = {d["index"]: d["uuid"] for d in pair_backend.client.info["devices"]}
    assert (frame["gpu_uuid"] == frame["gpu_index"].map(info)).all()  # each row names the GPU it measured
    pairs = frame[frame["peer_index"].notna()]
    assert (pairs["peer_uuid"] == pairs["peer_index"].map(info)).all() and (pairs["link"].str.len() > 0).all()
    at = frame[frame["elements"] == 256 * MiB].set_index(["variant", "gpu_index", "peer_index", "timer"])
    batched = peers.TIMERS["batched"]
    lines = []
    for variant in ("ce_read", "ce_write", "sm_read", "sm_write", "ce_bidir"):
        for a, b in ((0, 1), (1, 0)):
            lines.append(f"{variant} {a}→{b}: {at.loc[(variant, a, b, batched), 'gbps']:,.1f} GB/s")
    for a, b in ((0, 1), (1, 0)):
        lines.append(f"latency {a}→{b}: {at.loc[('latency', a, b, peers.LATENCY_TIMER), 'median_ms'] * 1e6:,.0f} ns")
    host = frame[(frame["elements"] == 256 * MiB) & frame["peer_index"].isna() & (frame["timer"] == batched)]
    lines += [f"{r.variant} GPU {int(r.gpu_index)}: {r.gbps:,.1f} GB/s" for r in host.itertuples()]
    print("\n" + "\n".join(lines))
    nvlink = str(pairs["link"].iloc[0]).startswith("NVLink")
    if nvlink:  # 18 NVLink 4 links: nvbandwidth measures ~391 GB/s one way
        assert at.loc[("ce_read", 0, 1, batched), "gbps"] > 200
    latency_ns = at.loc[("latency", 0, 1, peers.LATENCY_TIMER), "median_ms"] * 1e6
    assert 100 < latency_ns < 10_000


@two_gpus
def test_the_defaults_measure_the_matrix_at_one_size_and_the_chase_walks_from_every_sm(pair_backend):
    frame = submit_values(pair_backend, peers.NAME, {"profile": "interactive"}).outcome()
    schema.validate(frame)
    assert len(frame) == 4 * 2 + 4 * 2 and frame["verified"].all() and set(frame["elements"]) == {peers.MATRIX_SIZE}
    latency = frame[frame["variant"] == "latency"]
    sm_count = int(frame["sm_count"].iloc[0])
    for row in latency.itertuples():  # whole rotations over the SMs; the figure is their mean
        assert row.samples % sm_count == 0 and row.median_ms == pytest.approx(sum(row.samples_ms) / row.samples)
        print(f"\nlatency {row.gpu_index}→{int(row.peer_index)}: {row.median_ms * 1e6:,.1f} ns, every SM's launch "
              f"{row.min_ms * 1e6:,.1f}–{row.max_ms * 1e6:,.1f} ns over {row.samples} launches")


@two_gpus
def test_bad_pairs_and_sizes_get_one_line_each_and_the_worker_is_kept(pair_backend):
    too_big = 64 * GiB  # a source and a destination of this size do not fit the GPU: 64 GiB on an H100, 128 on an H200
    while 2 * too_big <= pair_backend.known_limits().total_device_bytes:
        too_big *= 2
    cases = [({"pairs": ["0-0"]}, "names GPU 0 twice"),
             ({"gpus": [0, 7]}, "GPU 7 is not in this set"),
             ({"sizes": [too_big]}, "of device memory")]
    for raw, expected in cases:
        with pytest.raises(ValidationError) as caught:
            submit_values(pair_backend, peers.NAME, {"variants": ["ce_read"], "sizes": [4 * KiB], **raw}).outcome()
        print(f"\n{raw}: {caught.value}")
        assert expected in str(caught.value) and "Traceback" not in str(caught.value)
    assert "GPU 0 (" in str(caught.value)  # the memory reason names the GPU
    frame = submit_values(pair_backend, peers.NAME,
                          {"variants": ["ce_write"], "sizes": [64 * KiB], "methods": ["single"],
                           "profile": "interactive"}).outcome()
    assert len(frame) == 2 and frame["verified"].all()  # the same worker measures on


def test_a_one_gpu_worker_says_the_peers_experiment_needs_two():
    from gpu.service.backends import LiveBackend
    from gpu.service.client import WorkerClient

    client = WorkerClient(service_options={"device": 0})
    try:
        with pytest.raises(ValidationError) as caught:
            submit_values(LiveBackend(client), peers.NAME, {"sizes": [4 * KiB]}).outcome()
        print(f"\n{caught.value}")
        assert "peers needs two GPUs; this set has 1: GPU 0 (" in str(caught.value)
        assert client.run("health")["ok"]  # the worker is kept
    finally:
        client.close()
