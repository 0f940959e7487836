"""The witness on every point, with a fake NVML (``tests.fake_nvml``): what it names, what it refuses, what it keeps,
and that the harness's rows carry it. No GPU, and no GPU setting is ever changed: faults come from the stand-in."""

import json
import os
import queue
import re
import subprocess
import time

import pytest

from gpu.core import conditions, schema
from gpu.device import telemetry, witness
from gpu.device.telemetry import Telemetry
from gpu.service.messages import Progress
from gpu.service.worker import JobProgress
from gpu.sweeps import harness
from tests import test_harness
from tests.fake_nvml import FakeNVML


def _point(tele: Telemetry, seconds: float = 0.15, during=None) -> dict:
    """One point as the harness measures it: start, samples for ``seconds`` (``during`` halfway), the summary."""
    tele.start_point()
    time.sleep(seconds / 2)
    if during is not None:
        during()
    time.sleep(seconds / 2)
    return tele.point_summary()


@pytest.fixture
def nvml():
    return FakeNVML()


@pytest.fixture
def tele(nvml):
    made = Telemetry("0000:01:00.0", nvml=nvml)
    yield made
    made.witness.close()


@pytest.fixture
def other_process():
    """A real process beside the test (a foreign pid with a name in /proc)."""
    process = subprocess.Popen(["sleep", "30"])
    yield process
    process.kill()
    process.wait()


def test_a_quiet_gpu_gives_a_clean_point_and_its_readings(tele):
    summary = _point(tele)
    assert summary["conditions"] == conditions.CLEAN and conditions.is_clean(summary["conditions"])
    raw = json.loads(summary["witness"])
    assert raw["sm_mhz"] == [1980, 1980, 1980] and raw["mem_mhz"][1] == 2619 and raw["power_w"][1] == 382
    assert raw["limit_w"] == 700 and raw["temp_c"] == [40, 40] and raw["pcie"] == [5, 16, 5, 16]
    assert raw["pcie_replay"] == 0 and raw["ecc"] == 0 and raw["n"] >= 2 and raw["interval_ms"] == 50
    assert summary["sm_clock_mhz"] == 1980 and summary["throttled"] is False


def test_the_thread_reads_nvml_at_most_every_50_ms(tele):
    started = time.monotonic()
    summary = _point(tele, seconds=0.5)
    elapsed = time.monotonic() - started
    readings = json.loads(summary["witness"])["n"]
    assert 3 <= readings <= elapsed / witness.INTERVAL_S + 3


def test_a_point_longer_than_the_idle_stop_keeps_its_readings(tele, monkeypatch):
    monkeypatch.setattr(witness, "IDLE_STOP_S", 0.05)
    readings = json.loads(_point(tele, seconds=0.6)["witness"])["n"]
    assert readings >= 6  # a point is no idle time: the thread read on through it


def test_the_thread_ends_once_points_stop_and_a_new_point_starts_it_again(tele, monkeypatch):
    monkeypatch.setattr(witness, "IDLE_STOP_S", 0.05)
    _point(tele)
    deadline = time.monotonic() + 2
    while tele.witness._thread is not None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert tele.witness._thread is None  # an idle worker reads nothing
    assert json.loads(_point(tele, seconds=0.3)["witness"])["n"] >= 4


def test_a_sweep_that_does_not_restart_per_point_gets_each_points_readings(tele, nvml):
    nvml.pcie = (4, 16)
    tele.point_summary()  # its first point began nowhere: the readings from here on are the next point's
    time.sleep(0.2)
    summary = tele.point_summary()
    assert json.loads(summary["witness"])["n"] >= 3 and summary["conditions"] == "PCIe Gen4 ×16 of Gen5 ×16"


def test_a_foreign_process_is_named_with_its_pid_and_name_and_our_own_pid_is_not(tele, nvml, other_process):
    nvml.pids = [os.getpid()]
    assert _point(tele)["conditions"] == conditions.CLEAN  # PinPoint's own worker is no foreign process
    nvml.pids = [os.getpid(), other_process.pid]
    summary = _point(tele)
    assert summary["conditions"] == f"shared with pid {other_process.pid} (sleep) for 100 % of samples"
    raw = json.loads(summary["witness"])
    assert raw["pids"][str(other_process.pid)][0] == "sleep"
    now = tele.now()
    assert now["others"] == [[other_process.pid, "sleep"]] and now["limit_w"] == 700 and now["sm_mhz"] == 1980


def test_a_process_that_joins_halfway_is_named_for_part_of_the_samples(tele, nvml, other_process):
    summary = _point(tele, seconds=0.4, during=lambda: setattr(nvml, "pids", [other_process.pid]))
    share = int(re.fullmatch(rf"shared with pid {other_process.pid} \(sleep\) for (\d+) % of samples",
                             summary["conditions"]).group(1))
    assert 0 < share < 100


def test_sw_power_cap_in_part_of_the_samples_is_named_with_its_share(tele, nvml):
    summary = _point(tele, seconds=0.4, during=lambda: setattr(nvml, "reasons", 0x4 | 0x1))
    share = int(re.fullmatch(r"SW power cap in (\d+) % of samples", summary["conditions"]).group(1))
    assert 0 < share < 100 and summary["throttled"] is True
    assert json.loads(summary["witness"])["reasons"]["SW power cap"] >= 1


def test_idle_and_clock_setting_bits_are_no_cause_and_every_slowdown_has_its_name(tele, nvml):
    nvml.reasons = 0x1 | 0x2 | 0x100  # GPU idle, application clocks, display clock: settings, not slowdowns
    assert _point(tele)["conditions"] == conditions.CLEAN
    nvml.reasons = 0x8 | 0x10 | 0x20 | 0x40 | 0x80
    causes = conditions.causes(_point(tele)["conditions"])
    assert causes == [f"{word} in 100 % of samples" for word in ("HW slowdown", "sync boost", "SW thermal",
                                                                 "HW thermal", "power brake")]


def test_a_downtrained_pcie_link_is_named_against_its_maximum(tele, nvml):
    nvml.pcie = (4, 8)
    summary = _point(tele)
    assert summary["conditions"] == "PCIe Gen4 ×8 of Gen5 ×16"
    assert json.loads(summary["witness"])["pcie"] == [4, 8, 5, 16]


def test_nvlink_crc_replay_and_recovery_errors_over_a_point_are_named_per_link(tele, nvml):
    nvml.nvlink_links = [0, 3]
    nvml.nvlink = {(3, 2): 5, (3, 3): 1, (0, 0): 7}
    assert _point(tele)["conditions"] == conditions.CLEAN  # counts before the point are no cause

    def errors():
        nvml.nvlink[(3, 2)] += 10
        nvml.nvlink[(3, 3)] += 2  # CRC flit + data errors count together
        nvml.nvlink[(0, 0)] += 1

    summary = _point(tele, during=errors)
    assert conditions.causes(summary["conditions"]) == ["NVLink 0 replays +1", "NVLink 3 CRC errors +12"]
    assert json.loads(summary["witness"])["nvlink"] == {"0": {"replay": 1}, "3": {"crc": 12}}


def test_nvlink_errors_are_not_read_for_a_measurement_that_does_not_cross_nvlink(tele, nvml):
    """A node's links count corrected CRC errors while a shared-memory kernel runs on one GPU (seen on 4 × H200):
    the harness sets ``judge_nvlink`` from the experiment's USES_NVLINK, so only a peer copy names them, and only a
    peer copy pays for reading them (72 NVML calls a reading on an H200)."""
    nvml.nvlink_links = [7]
    nvml.nvlink = {(7, 2): 0}
    tele.witness.judge_nvlink = False
    summary = _point(tele, during=lambda: nvml.nvlink.update({(7, 2): 3}))
    assert summary["conditions"] == conditions.CLEAN
    assert "nvlink" not in json.loads(summary["witness"])
    tele.witness.judge_nvlink = True
    summary = _point(tele, during=lambda: nvml.nvlink.update({(7, 2): 5}))
    assert conditions.causes(summary["conditions"]) == ["NVLink 7 CRC errors +2"]


class _CountingNVML(FakeNVML):
    """Counts the NVLink error-counter calls, and can refuse the PCIe replay counter."""

    def __init__(self):
        super().__init__()
        self.nvlink_reads = 0
        self.refuse_replay = False

    def nvmlDeviceGetNvLinkErrorCounter(self, handle, link, counter):
        self.nvlink_reads += 1
        return super().nvmlDeviceGetNvLinkErrorCounter(handle, link, counter)

    def nvmlDeviceGetPcieReplayCounter(self, handle):
        if self.refuse_replay:
            raise RuntimeError("GPU is lost")
        return super().nvmlDeviceGetPcieReplayCounter(handle)


@pytest.fixture
def counted():
    nvml = _CountingNVML()
    nvml.nvlink_links = [0, 5]
    made = Telemetry("0000:01:00.0", nvml=nvml)
    yield made, nvml
    made.witness.close()


def test_a_point_that_follows_at_once_opens_on_the_last_points_closing_counters(counted):
    """A peer point's opening NVLink reading (72 NVML calls on an H200) is the last point's closing one when it
    follows at once: each point then reads them once, not twice."""
    tele, nvml = counted
    _point(tele, seconds=0.02)
    first = nvml.nvlink_reads
    assert first == 2 * 2 * 4  # opened and closed: 2 links × 4 counters each time
    _point(tele, seconds=0.02)
    assert nvml.nvlink_reads - first == 2 * 4  # closed only


def test_a_count_between_two_points_falls_in_the_next_points_window(counted):
    tele, nvml = counted
    assert _point(tele, seconds=0.02)["conditions"] == conditions.CLEAN
    nvml.nvlink[(5, 2)] = 4  # between the first point's end and the second's start
    nvml.replay += 2
    summary = _point(tele, seconds=0.02)
    assert conditions.causes(summary["conditions"]) == ["PCIe replays +2", "NVLink 5 CRC errors +4"]
    assert _point(tele, seconds=0.02)["conditions"] == conditions.CLEAN  # counted once, not again


def test_counters_are_read_anew_after_a_gap_a_refusal_or_a_change_of_judge(counted, monkeypatch):
    tele, nvml = counted
    _point(tele, seconds=0.02)
    monkeypatch.setattr(witness, "COUNTERS_REUSE_S", 0.01)
    time.sleep(0.05)  # an idle worker between jobs: its counts are nobody's point
    read = nvml.nvlink_reads
    nvml.nvlink[(0, 0)] = 9
    assert _point(tele, seconds=0.02)["conditions"] == conditions.CLEAN
    assert nvml.nvlink_reads - read == 2 * 2 * 4
    monkeypatch.setattr(witness, "COUNTERS_REUSE_S", 1.0)
    nvml.refuse_replay = True  # the closing reading is not whole: the next point reads its own
    refused = _point(tele, seconds=0.02)
    assert "NVML readings refused" in refused["conditions"]
    nvml.refuse_replay = False
    nvml.replay += 1
    read = nvml.nvlink_reads
    assert conditions.causes(_point(tele, seconds=0.02)["conditions"]) == []
    assert nvml.nvlink_reads - read == 2 * 2 * 4
    tele.witness.judge_nvlink = False  # the next job's data does not cross NVLink: no NVLink reading at all
    read = nvml.nvlink_reads
    _point(tele, seconds=0.02)
    assert nvml.nvlink_reads == read


def test_only_the_peers_experiment_declares_that_its_data_crosses_nvlink():
    from gpu.experiments import registry

    assert {e.name for e in registry.REGISTRY if getattr(e.module, "USES_NVLINK", False)} == {"peers"}


def test_nvlink_not_supported_on_one_gpu_is_no_cause(tele, nvml):
    nvml.nvlink_links = []
    summary = _point(tele)
    assert summary["conditions"] == conditions.CLEAN and "nvlink" not in json.loads(summary["witness"])


def test_volatile_ecc_errors_and_pcie_replays_over_a_point_are_named(tele, nvml):
    def errors():
        nvml.ecc = [1, 1]
        nvml.replay += 3

    summary = _point(tele, during=errors)
    assert conditions.causes(summary["conditions"]) == ["PCIe replays +3", "ECC volatile errors +2"]


def test_a_busy_gpu_between_points_is_named_only_when_pinpoint_was_idle_long_enough(tele, nvml, monkeypatch):
    nvml.util = (90, 40)
    assert _point(tele)["conditions"] == conditions.CLEAN  # the first point: PinPoint's own work may be in it
    assert _point(tele)["conditions"] == conditions.CLEAN  # straight after a point: its own work is in it
    monkeypatch.setattr(witness, "UTIL_WINDOW_S", 0.05)
    time.sleep(0.1)
    assert _point(tele)["conditions"] == "GPU busy 90 % (memory 40 %) between points"


def test_without_pynvml_the_point_is_measured_and_not_observed(monkeypatch):
    monkeypatch.setattr(telemetry, "pynvml", None)
    tele = Telemetry("0000:01:00.0")
    summary = _point(tele)
    assert summary["conditions"] == conditions.NOT_OBSERVED and not conditions.is_clean(summary["conditions"])
    assert json.loads(summary["witness"]) == {"observed": False, "why": "pynvml not installed"}
    assert tele.now() == {}


def test_nvml_that_does_not_start_leaves_points_not_observed():
    nvml = FakeNVML(fail_after=0)
    summary = _point(Telemetry("0000:01:00.0", nvml=nvml))
    assert summary["conditions"] == conditions.NOT_OBSERVED


def test_nvml_failing_mid_run_names_what_was_refused_and_never_says_clean(tele, nvml):
    assert _point(tele)["conditions"] == conditions.CLEAN
    summary = _point(tele, during=lambda: setattr(nvml, "fail_after", nvml.calls))
    assert not conditions.is_clean(summary["conditions"])
    assert "NVML readings refused: " in summary["conditions"] and "SM clock" in summary["conditions"]
    after = _point(tele)  # NVML gone for good: nothing answers
    assert after["conditions"] == conditions.NOT_OBSERVED
    assert set(json.loads(after["witness"])["refused"]) >= {"sm_mhz", "pids", "reasons"}


@pytest.mark.parametrize("garbage, refused", [
    ({"sm_mhz": -5}, "SM clock"), ({"mem_mhz": "fast"}, "memory clock"), ({"power_mw": 10**12}, "power"),
    ({"temp_c": 900}, "temperature"), ({"pids": [-1]}, "processes"), ({"pcie": (4, 99)}, "PCIe link"),
    ({"reasons": -1}, "clock-event reasons"), ({"replay": -7}, "PCIe replays"),
])
def test_garbage_readings_are_refused_by_name(tele, nvml, garbage, refused):
    for name, value in garbage.items():
        setattr(nvml, name, value)
    summary = _point(tele)
    assert refused in summary["conditions"] and summary["conditions"].startswith("NVML readings refused: ")
    assert not conditions.is_clean(summary["conditions"])


def test_unknown_reason_bits_are_a_refused_reading_beside_the_known_ones(tele, nvml):
    nvml.reasons = 0x4 | 0x40000000
    causes = conditions.causes(_point(tele)["conditions"])
    assert causes == ["SW power cap in 100 % of samples", "clock-event reasons refused (unknown bits 0x40000000)"]


def test_a_busy_point_stays_small(tele, nvml, other_process):
    nvml.pids = [other_process.pid, 4_000_001, 4_000_002, 4_000_003, 4_000_004]
    nvml.reasons, nvml.pcie, nvml.nvlink_links = 0x4 | 0x20, (4, 8), list(range(18))
    summary = _point(tele, during=lambda: nvml.nvlink.update({(link, 2): 3 for link in range(18)}))
    assert "shared with 2 more processes" in summary["conditions"] and "pid 4000001 (?)" in summary["conditions"]
    assert len(summary["witness"]) < 1024 and len(summary["conditions"]) < 1024


def test_the_switch_turns_the_witness_off_and_points_are_not_observed(nvml, monkeypatch):
    monkeypatch.setenv("PINPOINT_WITNESS", "0")
    tele = Telemetry("0000:01:00.0", nvml=nvml)
    summary = _point(tele)
    assert summary["conditions"] == conditions.NOT_OBSERVED and summary["sm_clock_mhz"] == 1980
    assert "PINPOINT_WITNESS=0" in json.loads(summary["witness"])["why"]


def test_the_harness_rows_carry_conditions_and_witness(nvml, other_process):
    log = []
    gpu = test_harness._device(log)
    gpu.telemetry = Telemetry("0000:01:00.0", nvml=nvml)
    nvml.pids = [other_process.pid]
    rows = harness.run(test_harness.FakeSweep, test_harness.Params(), gpu, lambda *a: None, lambda: False)
    assert len(rows) == 6
    assert all(r["conditions"] == f"shared with pid {other_process.pid} (sleep) for 100 % of samples" for r in rows)
    assert all(json.loads(r["witness"])["n"] >= 2 for r in rows)
    frame = schema.make_frame([{**r, "run_id": "r1", "experiment": "fake"} for r in rows], {})
    assert list(frame["conditions"]) == [r["conditions"] for r in rows]
    gpu.telemetry.witness.close()


class _HalfOverNVLink(test_harness.FakeSweep):
    """Variant "a" crosses NVLink (a peer copy), "b" does not (a host-link copy of the same run); the node's links
    count a CRC error during every sample, as an H200 node's do whatever the point."""

    USES_NVLINK = True
    nvml = None

    @staticmethod
    def crosses_nvlink(columns):
        return columns["variant"] == "a"

    def measure(self, point):
        def sample() -> float:
            type(self).nvml.nvlink[(7, 2)] += 1
            return float(point.state[1])

        return sample


def test_only_the_points_whose_data_crosses_nvlink_are_judged_by_its_counters(nvml):
    """A peers run's host-link points (h2d_all, d2h_all, …) named the node's NVLink CRC counts as their cause (52 of
    the 382 naming NVLink in the first 2 × H200 recording of 2026-11-28) while their data never crossed NVLink: an
    experiment declares which points' data does (``crosses_nvlink``), and only those read and judge NVLink's
    counters."""
    nvml.nvlink_links = [7]
    nvml.nvlink = {(7, 2): 0}
    _HalfOverNVLink.nvml = nvml
    gpu = test_harness._device([])
    gpu.telemetry = Telemetry("0000:01:00.0", nvml=nvml)
    try:
        rows = harness.run(_HalfOverNVLink, test_harness.Params(), gpu, lambda *a: None, lambda: False)
    finally:
        gpu.telemetry.witness.close()
    assert sorted({r["variant"] for r in rows}) == ["a", "b"] and len(rows) == 6
    for row in rows:
        if row["variant"] == "a":
            assert conditions.causes(row["conditions"])[0].startswith("NVLink 7 CRC errors +"), row
            assert "nvlink" in json.loads(row["witness"])
        else:
            assert row["conditions"] == conditions.CLEAN, row
            assert "nvlink" not in json.loads(row["witness"])
    assert harness.judges_nvlink(_HalfOverNVLink, {"variant": "a"})
    assert not harness.judges_nvlink(_HalfOverNVLink, {"variant": "b"})
    assert not harness.judges_nvlink(test_harness.FakeSweep, {"variant": "a"})  # no USES_NVLINK: never


def test_the_peers_declaration_says_its_pair_copies_cross_nvlink_and_its_host_copies_do_not():
    from gpu.experiments import peers
    from gpu.experiments.peers import sweep as peers_sweep

    assert all(harness.judges_nvlink(peers_sweep.PeersSweep, {"variant": v}) for v in peers.PAIR_VARIANTS)
    assert not any(harness.judges_nvlink(peers_sweep.PeersSweep, {"variant": v}) for v in peers.HOST_VARIANTS)


def test_progress_messages_carry_the_latest_reading_and_a_failing_reading_sends_none():
    events = queue.Queue()
    JobProgress(events, 7, lambda: {"sm_mhz": 1980, "others": [[1039, "python3"]]})(1, 4, "point")
    sent = events.get_nowait()
    assert isinstance(sent, Progress) and sent.conditions_now == {"sm_mhz": 1980, "others": [[1039, "python3"]]}

    def broken():
        raise RuntimeError("NVML gone")

    JobProgress(events, 7, broken)(2, 4, "point")
    assert events.get_nowait().conditions_now == {}
    JobProgress(events, 7)(3, 4, "point")
    assert events.get_nowait().conditions_now == {}


@pytest.mark.slow
def test_the_client_keeps_the_workers_latest_reading_on_the_job_handle():
    from gpu.service.client import WorkerClient

    client = WorkerClient(service="tests.fake_service:FakeService", start_timeout=60)
    try:
        job = client.submit("steps", {"n": 2, "seconds": 0.01})
        job.outcome()
        assert job.conditions_now == {"gpu": 0, "sm_mhz": 1980, "others": [[1039, "python3"]],
                                      "reasons": ["SW power cap"]}
    finally:
        client.close()


def test_a_process_name_is_one_plain_line_without_the_causes_separator(tmp_path, monkeypatch):
    real_open = open

    def fake_open(path, *args, **kwargs):
        if str(path) == "/proc/4242/comm":
            path = tmp_path / "comm"
            path.write_text("evil; name\x1b[31m\n")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", fake_open)
    assert witness.process_name(4242) == "evil, name?[31m"
    assert witness.process_name(4_000_999) == "?"


def test_another_pinpoint_worker_waiting_its_turn_is_no_cause_but_a_foreign_process_is(tele, nvml, other_process):
    """NVML lists every process with a context: a PinPoint worker that waits for the GPU's lock is idle (workers
    measure only while they hold it), so it is kept in the readings, not named as sharing the GPU."""
    from gpu.core import gpu_workers

    waiting = subprocess.Popen(["sleep", "30"])
    mark = gpu_workers.mark(waiting.pid)
    try:
        assert waiting.pid in gpu_workers.marked()
        nvml.pids = [waiting.pid]
        summary = _point(tele)
        assert summary["conditions"] == conditions.CLEAN
        assert json.loads(summary["witness"])["pinpoint_waiting"] == [waiting.pid]
        nvml.pids = [waiting.pid, other_process.pid]
        assert conditions.causes(_point(tele)["conditions"]) == [
            f"shared with pid {other_process.pid} (sleep) for 100 % of samples"]
    finally:
        gpu_workers.unmark(mark)
        waiting.kill()
        waiting.wait()
    assert waiting.pid not in gpu_workers.marked()
