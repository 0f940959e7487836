"""The runner's device set: ``--devices 0,1`` (or ``--gpus``), ``--devices all``, beside ``--device``; each bad value
is one line on stderr and exit 2, before any worker starts (a CPU stand-in pretends the GPUs)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu import bench
from gpu.experiments import get_experiment
from gpu.service import backends
from tests.fake_service import GpuSetService

ROOT = Path(__file__).resolve().parent.parent
LISTING = "0 · NVIDIA H100 80GB HBM3 · …000000a0 · node-0; 1 · NVIDIA H100 80GB HBM3 · …000000a1 · node-0"


@pytest.fixture
def two_gpus(monkeypatch):
    """A pretend node of two GPUs; the runner's look at the machine's GPUs answers from it without a process."""
    monkeypatch.setenv("PINPOINT_BACKEND", "auto")
    monkeypatch.setenv("PINPOINT_WORKER_SERVICE", "tests.fake_service:GpuSetService")
    monkeypatch.setenv("PINPOINT_FAKE_GPUS", "2")
    monkeypatch.setattr(backends, "visible_gpus", lambda service: GpuSetService.visible_gpus())


@pytest.mark.parametrize(("flags", "message"), [
    (["--devices", "0,0"], f"error: '0,0' names GPU 0 twice; name each GPU once; the GPUs are: {LISTING}"),
    (["--gpus", "5"], f"error: no GPU '5' here; the GPUs are: {LISTING}"),
    (["--devices", ","], f"error: ',' names no GPU; give indices (0,1), board UUIDs or 'all'; the GPUs are: {LISTING}"),
    (["--devices", "0,1,2"], f"error: '0,1,2' names 3 GPUs; this machine has 2: {LISTING}"),
    (["--devices", "all"], "error: 'all' names 2 GPUs; transfers measures on one: give one index or UUID"),
    (["--devices", "GPU-0000000"], "error: GPU 'GPU-0000000' matches 2 GPUs; give more of its UUID: 0 · NVIDIA"),
    (["--device", "0", "--devices", "1"], "error: give --device (one GPU) or --devices (a set), not both"),
])
def test_each_bad_device_set_is_one_line_and_exit_2(two_gpus, capsys, flags, message):
    assert bench.main(["transfers", "--sizes", "4KiB", "--no-store", *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err


def test_a_hostile_device_set_reaches_the_terminal_without_escape_sequences(two_gpus, capsys):
    assert bench.main(["transfers", "--no-store", "--devices", "\x1b]0;owned\x07\x1b[2J" + "9" * 3000]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and err.count("\n") == 1 and len(err) < 500
    assert "no GPU ']0;owned[2J9999" in err


def test_an_experiment_that_needs_a_pair_names_the_one_gpu_a_machine_has(two_gpus, capsys, monkeypatch):
    monkeypatch.setenv("PINPOINT_FAKE_GPUS", "1")
    monkeypatch.setattr(get_experiment("transfers"), "MIN_GPUS", 2, raising=False)
    assert bench.main(["transfers", "--sizes", "4KiB", "--no-store"]) == 2
    assert capsys.readouterr().err == ("error: transfers needs two GPUs; this machine has 1: "
                                       "0 · NVIDIA H100 80GB HBM3 · …000000a0 · node-0\n")
    monkeypatch.setenv("PINPOINT_FAKE_GPUS", "2")
    assert bench.main(["transfers", "--sizes", "4KiB", "--no-store", "--device", "1"]) == 2
    assert capsys.readouterr().err == f"error: '1' names 1 GPU; transfers needs two; the GPUs are: {LISTING}\n"


@pytest.fixture
def recorded_pair(monkeypatch):
    """Two GPUs whose worker serves the committed recordings, so the runner measures end to end."""
    monkeypatch.setenv("PINPOINT_BACKEND", "auto")
    monkeypatch.setenv("PINPOINT_WORKER_SERVICE", "tests.fake_service:TwoGpuRecordedService")


def test_a_set_of_one_measures_on_that_gpu(recorded_pair, capsys):
    assert bench.main(["transfers", "--sizes", "4KiB", "--modes", "pinned", "--no-store", "--gpus", "1"]) == 0
    assert "Live on NVIDIA H200 · …0000b1b1 · desk-1 · profile precise" in capsys.readouterr().err


def test_an_experiment_that_needs_several_gpus_holds_all_of_them_by_default(recorded_pair, capsys, monkeypatch):
    monkeypatch.setattr(get_experiment("transfers"), "MIN_GPUS", 2, raising=False)
    assert bench.main(["transfers", "--sizes", "4KiB", "--modes", "pinned", "--no-store"]) == 0
    assert "Live on GPUs 0,1 · NVIDIA H200 · desk-1 · profile precise" in capsys.readouterr().err


def test_the_runner_exits_2_on_a_bad_set_from_the_command_line():
    done = subprocess.run([sys.executable, "-m", "gpu.bench", "reduction", "--devices", "1,1", "--no-store"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PINPOINT_BACKEND": "auto", "PYTHONPATH": str(ROOT),
                               "PINPOINT_WORKER_SERVICE": "tests.fake_service:GpuSetService",
                               "PINPOINT_FAKE_GPUS": "2"})
    assert done.returncode == 2
    assert done.stderr == f"error: '1,1' names GPU 1 twice; name each GPU once; the GPUs are: {LISTING}\n"


def test_the_peers_experiment_takes_every_gpu_and_names_the_one_a_machine_has(two_gpus, capsys, monkeypatch):
    monkeypatch.setenv("PINPOINT_FAKE_GPUS", "1")
    assert bench.main(["peers", "--no-store"]) == 2
    assert capsys.readouterr().err == ("error: peers needs two GPUs; this machine has 1: "
                                       "0 · NVIDIA H100 80GB HBM3 · …000000a0 · node-0\n")
