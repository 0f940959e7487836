"""Progressive delivery on a real GPU: rows reach the client while the sweep runs, coarse sizes first, and the
final result holds the same measurements in point order."""

import time

import pytest

from gpu.core.units import KiB, MiB
from gpu.service.backends import submit_values

pytestmark = pytest.mark.gpu


def test_points_arrive_before_the_job_ends_coarse_first_and_the_result_is_in_point_order(live_backend):
    sizes = [4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB, 256 * MiB]
    modes, directions = ["pageable", "pinned"], ["h2d", "d2h"]
    handle = submit_values(live_backend, "transfers", {"sizes": sizes, "modes": modes, "directions": directions,
                                                       "profile": "interactive"})
    started = time.perf_counter()
    first_row_s, rows_while_running = None, 0
    while not handle.wait(0.002):
        if handle.rows and first_row_s is None:
            first_row_s = time.perf_counter() - started
        rows_while_running = len(handle.rows)
    total_s = time.perf_counter() - started
    frame = handle.outcome()
    print(f"\nfirst row after {first_row_s:.3f} s, {rows_while_running} of {len(frame)} rows seen before the end, "
          f"whole job {total_s:.2f} s")
    assert first_row_s is not None and first_row_s < total_s / 2
    assert 0 < rows_while_running
    streamed_sizes = [row["bytes"] for row in handle.rows]
    assert streamed_sizes[:4] == [4 * KiB] * 4 and streamed_sizes[4:8] == [256 * MiB] * 4  # both ends first
    assert [(r.bytes, r.variant, r.direction) for r in frame.itertuples()] == \
        [(s, m, d) for s in sizes for m in modes for d in directions]  # the final frame in point order
    streamed = {(r["bytes"], r["variant"], r["direction"]): r["median_ms"] for r in handle.rows}
    assert all(streamed[(r.bytes, r.variant, r.direction)] == r.median_ms for r in frame.itertuples())
    assert set(frame["stop_reason"]) <= {"converged", "budget", "timeout", "max_samples"}
    assert (frame["samples"] >= 5).all() and frame["verified"].all()


def test_the_gpu_pattern_check_names_a_word_a_copy_did_not_write():
    """The Transfers check runs on the GPU: one wrong word in 1 MiB is found and named, a right buffer passes."""
    answer = _one_job("tests.gpu.pattern_service:PatternCheckService", "pattern_check")
    assert answer["right"] == "passed"
    assert "1 of 262144 words wrong, first at word 1000" in answer["one_word_wrong"]
    assert "262144 of 262144 words wrong" in answer["other_seed"]


def test_the_stream_hold_keeps_a_python_pause_out_of_kernel_time_and_refuses_work_that_waits_on_it():
    """nvbench's blocking kernel: a 50 ms pause of the Python thread between the start event and the launch is
    not GPU time when the stream is held (it is without the hold); work that waits on its own held stream makes
    the hold time out, and that sample is refused, not reported."""
    answer = _one_job("tests.gpu.timer_service:TimerCheckService", "timer_check")
    assert answer["paused_unheld_ms"] >= 45  # the pause counted as GPU time: what the hold prevents
    assert answer["paused_held_ms"] < 5 and answer["paused_held_ms"] < 3 * answer["plain_ms"] + 0.05
    assert "hold timed out" in answer["waiting"]
    assert 0 < answer["after_ms"] < 5
    assert answer["timers"] == ["cuda_event_l2_flushed_held", "cuda_event_l2_flushed"]


def _one_job(service: str, kind: str) -> dict:
    """Run one job of a test service in its own worker (printed, for the GPU log)."""
    from gpu.service.client import WorkerClient

    client = WorkerClient(service=service)
    try:
        answer = client.run(kind)
    finally:
        client.close()
    print(f"\n{answer}")
    return answer
