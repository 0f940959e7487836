"""Transfers and the worker on a real GPU (run on the GPU machine: pytest -m gpu)."""

import subprocess
import sys

import pytest

from gpu.core import schema
from gpu.core.errors import ValidationError, WorkerError
from gpu.core.units import GiB, KiB, MiB
from gpu.experiments import transfers
from gpu.service.backends import submit_values
from gpu.sweeps import harness

pytestmark = pytest.mark.gpu


def test_every_mode_and_direction_round_trips_bit_exact(live_backend):
    # Odd sizes (4 KiB + 16 B) catch tails; every point is verified word for word inside the worker,
    # and a wrong word fails the job, so a complete frame means every copy was exact.
    sizes = [16, 4 * KiB + 16, 1 * MiB, 64 * MiB]
    frame = submit_values(live_backend, "transfers", {"sizes": sizes, "include_alloc": [False, True],
                                                      "profile": "interactive"}).outcome()
    assert len(frame) == len(sizes) * len(transfers.MODES) * 2 * 2
    assert frame["verified"].all()
    assert set(frame["variant"]) == set(transfers.MODES)
    assert (frame["gbps"] > 0).all()
    schema.validate(frame)


def test_pinned_h2d_reaches_80_percent_of_theoretical_pcie(live_backend):
    frame = submit_values(live_backend, "transfers",
                          {"sizes": [256 * MiB, 1 * GiB], "modes": ["pinned"],
                           "directions": ["h2d"], "profile": "precise/timeout_s=5"}).outcome()
    theoretical = frame["pcie_gbps_theoretical"].iloc[0]
    print("\npinned H2D GB/s:", frame["gbps"].round(2).tolist(), "theoretical:", round(theoretical, 2))
    assert theoretical > 0
    assert (frame["gbps"] >= 0.8 * theoretical).all()


def test_worker_survives_a_faulting_kernel(live_backend):
    client = live_backend.client
    pid_before, restarts_before = client.worker_pid, client.restarts
    with pytest.raises(WorkerError) as failure:
        client.run("fault")
    assert failure.value.fatal
    assert "illegal" in str(failure.value).lower()
    assert client.run("health")["ok"]
    assert client.worker_pid != pid_before
    assert client.restarts == restarts_before + 1
    frame = submit_values(live_backend, "transfers", {"sizes": [1 * MiB], "profile": "interactive"}).outcome()
    assert len(frame) == len(transfers.MODES) * 2


def test_two_hundred_jobs_leave_device_and_host_memory_where_they_began(live_backend):
    client = live_backend.client
    params = {"sizes": [64 * KiB, 4 * MiB], "include_alloc": [False, True], "profile": "interactive/max_samples=20"}
    submit_values(live_backend, "transfers", params).outcome()  # first job pays one-off costs (streams, caches)
    before = client.run("memory")
    for _ in range(200):
        submit_values(live_backend, "transfers", params).outcome()
    after = client.run("memory")
    print(f"\ndevice free before/after: {before['free_device_bytes']}/{after['free_device_bytes']}; "
          f"worker RSS before/after: {before['rss_bytes'] / MiB:.1f}/{after['rss_bytes'] / MiB:.1f} MiB")
    assert after["free_device_bytes"] == before["free_device_bytes"]
    # 200 jobs each pinned 24 buffers of up to 4 MiB: a leak would add ~19 GiB; allow allocator noise.
    assert after["rss_bytes"] - before["rss_bytes"] < 64 * MiB


def test_oversized_request_is_refused_before_any_allocation(live_backend):
    client = live_backend.client
    before = client.run("memory")
    with pytest.raises(ValidationError) as refused:
        submit_values(live_backend, "transfers", {"sizes": [before["total_device_bytes"] * 2]}).outcome()
    assert "does not fit in device memory" in str(refused.value)
    assert client.run("memory")["free_device_bytes"] == before["free_device_bytes"]


def test_a_sessions_new_job_cancels_its_previous_one(live_backend):
    long_job = submit_values(live_backend, "transfers", {"sizes": [4 * KiB * 2**i for i in range(16)],
                                                         "profile": "precise"}, session="talk")
    while long_job.state != "running":
        long_job.wait(0.05)
    replacement = submit_values(live_backend, "transfers",
                                {"sizes": [1 * MiB], "profile": "interactive"}, session="talk")
    assert long_job.wait(60), "the replaced job did not stop at its next point"
    assert long_job.state == "cancelled"
    assert len(replacement.outcome()) == len(transfers.MODES) * 2


def test_runner_writes_the_frame_the_page_draws(tmp_path):
    out = tmp_path / "run.parquet"
    done = subprocess.run([sys.executable, "-m", "gpu.bench", "transfers", "--sizes", "4KiB,1MiB",
                           "--modes", "pinned,pageable", "--profile", "interactive", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    frame = schema.read_results(out)
    assert len(frame) == 2 * 2 * 2
    assert frame["device_name"].iloc[0] and frame["backend"].iloc[0] == "live"
    assert str(frame["gpu_uuid"].iloc[0]).startswith("GPU-")  # the board, from NVML


def test_batched_copies_beat_single_ones_at_1_mib_pinned_and_both_verify(live_backend):
    frame = submit_values(live_backend, "transfers",
                          {"sizes": [1 * MiB], "modes": ["pinned"], "methods": ["single", "batched"],
                           "profile": "precise/timeout_s=2"}).outcome()
    assert frame["verified"].all() and len(frame) == 4
    by = frame.set_index(["direction", "timer"])
    for direction in transfers.DIRECTIONS:
        single, batched = by.loc[(direction, "cuda_event")], by.loc[(direction, "cuda_event_batched_held")]
        print(f"\n1 MiB pinned {direction}: single {single['gbps']:.2f} GB/s, batched {batched['gbps']:.2f} GB/s "
              f"({int(batched['param_value'])} copies per sample, cv {batched['cv']:.2%})")
        assert batched["gbps"] > single["gbps"]
        assert int(batched["param_value"]) * batched["median_ms"] >= harness.BATCH_MS * 0.99


def test_every_timing_from_the_grid_verifies_and_the_skipped_ones_are_noted(live_backend):
    raw = {"sizes": [4 * KiB, 1 * MiB], "modes": ["pageable", "pinned"], "include_alloc": [False, True],
           "methods": ["single", "batched"], "profile": "interactive"}
    handle = submit_values(live_backend, "transfers", raw)
    frame = handle.outcome()
    params = transfers.parse_params(raw)
    # measured coarse first, D2H before H2D, given back in the grid's order: every point once, none of the skipped
    assert list(zip(*(frame[c] for c in transfers.KEY_COLUMNS), strict=True)) == params.points()
    assert len(frame) == 2 * 2 * 3 * 2 and frame["verified"].all()
    assert handle.notes == [f"8 points skipped: {transfers.BATCHED_COPY_ONLY}"]
    batched = frame[frame["timer"].str.startswith("cuda_event_batched")]
    assert set(batched["timer"]) == {"cuda_event_batched", "cuda_event_batched_held"}
    assert (batched["param"] == "copies per sample").all() and (batched["param_value"] >= 1).all()
