import subprocess
import sys
from pathlib import Path

from gpu import bench
from gpu.core.units import GiB, KiB


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


def test_int_lists_accept_powers_and_ranges():
    assert bench.int_list("2^20, 2^28") == [1 << 20, 1 << 28]
    assert bench.int_list("32:128:32") == [32, 64, 96, 128]
    assert bench.int_list("1,2,4") == [1, 2, 4]


def test_kernel_subcommands_build_the_page_parameters():
    args = bench.parse_args(["coalescing", "--elements", "2^24", "--block-sizes", "128,256",
                             "--groups", "copy,strided"])
    [job] = bench.experiment_jobs(args)
    assert job["elements"] == 1 << 24 and job["block_sizes"] == [128, 256] and job["groups"] == ["copy", "strided"]
    args = bench.parse_args(["reduction", "--sizes", "2^20,2^28", "--variants", "grid_stride,gpuarray_dot"])
    [job] = bench.experiment_jobs(args)
    assert job["sizes"] == [1 << 20, 1 << 28] and job["variants"] == ["grid_stride", "gpuarray_dot"]
    args = bench.parse_args(["occupancy", "--extra-registers", "0,64", "--dynamic-shared", "0,32768"])
    jobs = bench.experiment_jobs(args)
    assert [(j["extra_registers"], j["dynamic_shared_bytes"]) for j in jobs] == [(0, 0), (0, 32768), (64, 0),
                                                                                 (64, 32768)]
    assert jobs[0]["block_sizes"] == list(range(32, 1025, 32))


def test_bad_numbers_exit_2_with_a_message():
    done = run_cli("reduction", "--sizes", "huge")
    assert done.returncode == 2 and "huge" in done.stderr
