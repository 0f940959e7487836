import subprocess
import sys
from pathlib import Path

from gpu import bench
from gpu.units import GiB, KiB


def test_cli_parameters_become_experiment_params():
    args = bench.parse_args(["transfers", "--sizes", "4KiB:16KiB,1GiB", "--modes", "pinned, mapped",
                             "--include-alloc", "both", "--profile", "interactive"])
    params = bench.transfer_params(args)
    assert params["sizes"] == [4 * KiB, 8 * KiB, 16 * KiB, GiB]
    assert params["modes"] == ["pinned", "mapped"]
    assert params["include_alloc"] == [False, True] and params["profile"] == "interactive"


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "gpu.bench", *args], capture_output=True, text=True, timeout=120,
                          env={"PINPOINT_BACKEND": "replay", "PATH": "/usr/bin:/bin"},
                          cwd=Path(__file__).resolve().parent.parent)


def test_bad_sizes_exit_2_with_a_message():
    done = run_cli("transfers", "--sizes", "lots")
    assert done.returncode == 2 and "'lots' is not a size" in done.stderr


def test_without_a_gpu_the_runner_refuses_to_invent_numbers(tmp_path):
    done = run_cli("transfers", "--sizes", "4KiB", "--out", str(tmp_path / "x.parquet"))
    assert done.returncode == 3 and "needs a GPU" in done.stderr
    assert not (tmp_path / "x.parquet").exists()
