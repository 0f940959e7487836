"""Fleets through a real Dask scheduler and real workers, each its own process (``dask scheduler``, ``dask worker``),
and through ``--cluster local``: simulated boards (tests/simulated_fleet.py: recorded H200 points re-served per
board) stand in for GPUs. A worker killed mid-run fails its GPU with the reason while the others finish, nothing
partial is stored, and the same fleet id measures only what is missing. Bad input is refused in one line."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpu.core import devices
from gpu.core.errors import DeviceNotFound
from gpu.experiments import suites
from gpu.fleet import run as fleet_run
from gpu.fleet.task import TaskFailed, gpu_for_worker
from gpu.results.persistence.store import RunStore
from tests.conftest import new_postgres_database
from tests.simulated_fleet import board_uuid

ROOT = Path(__file__).resolve().parent.parent
DASK = [sys.executable, "-m", "dask"]  # the `dask` command, wherever Dask is installed
SIMULATED = "tests.simulated_fleet:SimulatedBoard"
FLEET = [sys.executable, "-m", "gpu.bench", "fleet"]  # the runner's `fleet` command
HEALTH = suites.load("health")
POINTS = {run.experiment: len(run.points()) for run in HEALTH.gpu_runs}
ONE_GPU_RUNS = len(HEALTH.gpu_runs)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment(**extra) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PINPOINT_WORKER_SERVICE": SIMULATED,
           "DASK_DISTRIBUTED__WORKER__DAEMON": "False", "PINPOINT_BACKEND": "auto"}
    env.update({k: str(v) for k, v in extra.items()})
    return env


class Cluster:
    """A scheduler and workers as separate processes, stopped at the end."""

    def __init__(self, tmp_path: Path):
        self.port = free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.log = tmp_path / "dask.log"
        self.processes: list[subprocess.Popen] = []
        self.workers: dict[int, subprocess.Popen] = {}
        self.scheduler = self._start([*DASK, "scheduler", "--host", "127.0.0.1", "--port", str(self.port),
                                      "--no-dashboard"], environment())
        self._wait_for_port()

    def _start(self, command, env) -> subprocess.Popen:
        process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=self.log.open("a"), stderr=subprocess.STDOUT,
                                   start_new_session=True)
        self.processes.append(process)
        return process

    def _wait_for_port(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.1)
        raise AssertionError(f"the Dask scheduler did not start: {self.log.read_text()[-2000:]}")

    def add_worker(self, board: int, **env) -> None:
        """One worker for simulated board ``board`` (its CUDA_VISIBLE_DEVICES), as the docs' tcp:// commands start
        them: one process per GPU, holding GPU=1."""
        self.workers[board] = self._start(
            [*DASK, "worker", self.address, "--nthreads", "1", "--resources", "GPU=1", "--no-nanny",
             "--name", f"board-{board}", "--no-dashboard"], environment(CUDA_VISIBLE_DEVICES=board, **env))

    def wait_for_workers(self, count: int) -> None:
        from distributed import Client

        with Client(self.address, timeout=20) as client:
            client.wait_for_workers(count, timeout=60)

    def kill_worker(self, board: int) -> None:
        os.killpg(self.workers[board].pid, signal.SIGKILL)
        self.workers[board].wait(10)

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)


@pytest.fixture
def cluster(tmp_path):
    started = Cluster(tmp_path)
    yield started
    started.stop()


def fleet(store_url: str, *args, env=None, timeout=180, wait=True):
    command = [*FLEET, *args]
    process = subprocess.Popen(command, cwd=ROOT, env=environment(PINPOINT_DB_URL=store_url, **(env or {})),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if not wait:
        return process
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


def stored(url: str, fleet_id: str):
    return RunStore(url).runs(fleet_id=fleet_id)


@pytest.mark.slow  # a Dask cluster, one worker killed, the fleet resumed
def test_a_killed_worker_fails_its_gpu_the_others_finish_nothing_partial_is_stored_and_the_fleet_resumes(
        cluster, tmp_path):
    url = f"sqlite:///{tmp_path}/runs.sqlite"
    cluster.add_worker(0)
    cluster.add_worker(1)
    cluster.add_worker(2, PINPOINT_SIM_SECONDS_PER_POINT=0.5)  # 16 transfers points: 8 s, killed inside them
    cluster.wait_for_workers(3)
    process = fleet(url, "health", "--cluster", cluster.address, "--fleet-id", "review-1", wait=False)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:  # boards 0 and 1 finish their suites while board 2 is still in transfers
        runs = stored(url, "review-1") if Path(f"{tmp_path}/runs.sqlite").exists() else None
        if runs is not None and len(runs) >= 2 * ONE_GPU_RUNS:
            break
        time.sleep(0.2)
    assert board_uuid(2) not in set(stored(url, "review-1")["gpu_uuid"])
    cluster.kill_worker(2)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1, err
    assert "left the cluster" in err and "the other GPUs go on" in err
    assert "node-0 (3 GPUs): node runs not run: NVIDIA H200" in err  # its peer matrix needs every GPU of the node
    assert f"…{board_uuid(2)[-8:]}" in out and "failed: NVIDIA H200" in out
    runs = stored(url, "review-1")
    assert sorted(runs["gpu_uuid"].value_counts().items()) == [(board_uuid(0), 5), (board_uuid(1), 5)]
    for row in runs.itertuples():  # every stored run is whole: each point of its suite run
        assert row.points == POINTS[row.experiment] and row.suite == "health" and row.source == "fleet"
    first_ids = set(runs["run_id"])

    cluster.add_worker(2)  # the board is back: the same fleet id measures only its five runs
    cluster.wait_for_workers(3)
    code, out, err = fleet(url, "health", "--cluster", cluster.address, "--fleet-id", "review-1")
    assert code == 0, err
    assert err.count("already stored in fleet review-1: not measured again") == 2
    runs = stored(url, "review-1")
    # and the node's peer matrix, which waited for its three GPUs: 6 pairs × 4 variants, 3 GPUs × 4 host links
    assert len(runs) == 3 * ONE_GPU_RUNS + 1 and first_ids < set(runs["run_id"])
    assert set().union(*runs["boards"]) == {board_uuid(i) for i in range(3)}  # the node run names all three
    assert "16 runs stored" not in out and "6 runs stored (59 of 59 points sent)" in out


@pytest.mark.slow  # a Dask cluster and a task left to run past its limit
def test_a_task_past_its_time_limit_fails_that_pair_and_its_gpu_goes_on(cluster, tmp_path):
    suite = tmp_path / "quick.toml"
    suite.write_text('profile = "interactive"\ntimeout_s = 3\n[[run]]\nexperiment = "reduction"\n'
                     '[run.params]\nsizes = [268435456]\nvariants = ["warp_shuffle"]\n'
                     '[[run]]\nexperiment = "host_latency"\n[run.params]\nsizes = [1048576]\nvariants = ["mapped"]\n')
    cluster.add_worker(0, PINPOINT_SIM_HANG="0:reduction")
    cluster.add_worker(1)
    cluster.wait_for_workers(2)
    url = f"sqlite:///{tmp_path}/runs.sqlite"
    code, out, err = fleet(url, str(suite), "--cluster", cluster.address, "--fleet-id", "t1")
    assert code == 1, err
    assert "timed out: reduction did not finish within 3 s" in out
    runs = stored(url, "t1")
    assert sorted(zip(runs["gpu_uuid"], runs["experiment"], strict=True)) == sorted(
        [(board_uuid(0), "host_latency"), (board_uuid(1), "host_latency"), (board_uuid(1), "reduction")])


@pytest.mark.slow  # a LocalCluster and PostgreSQL
def test_a_local_cluster_has_one_worker_per_gpu_and_stores_into_postgresql(postgres_url):
    url = new_postgres_database(postgres_url)
    code, out, err = fleet(url, "health", "--cluster", "local", "--fleet-id", "local-1",
                           env={"PINPOINT_SIM_BOARDS": 2, "PINPOINT_SIM_SLOW": "1:1.25"})
    assert code == 0, err
    runs = stored(url, "local-1")
    assert len(runs) == 2 * ONE_GPU_RUNS + 1 and set().union(*runs["boards"]) == {board_uuid(0), board_uuid(1)}
    slow = RunStore(url).load(runs[(runs["gpu_uuid"] == board_uuid(1)) & (runs["experiment"] == "reduction")]
                              ["run_id"].iloc[0])
    fast = RunStore(url).load(runs[(runs["gpu_uuid"] == board_uuid(0)) & (runs["experiment"] == "reduction")]
                              ["run_id"].iloc[0])
    assert slow["median_ms"].iloc[0] == pytest.approx(1.25 * fast["median_ms"].iloc[0])


@pytest.mark.parametrize(("args", "env", "expected"), [
    pytest.param(["health", "--cluster", "tcp://127.0.0.1:{closed}"], {}, "it cannot be reached (Connection refused)",
                 marks=pytest.mark.slow),
    (["health", "--cluster", "slurm"], {"PATH": "/nonexistent"}, "Slurm is not installed here (no sbatch on PATH)"),
    (["health", "--cluster", "kubernetes"], {}, "unknown cluster 'kubernetes'"),
    (["nightly"], {}, "no suite 'nightly'"),
    (["health", "--fleet-id", "../etc"], {}, "fleet id '../etc' must be"),
])
@pytest.mark.slow
def test_bad_fleet_input_is_refused_in_one_line_before_any_gpu_work(tmp_path, args, env, expected):
    args = [a.format(closed=free_port()) for a in args]
    started = time.monotonic()
    code, out, err = fleet(f"sqlite:///{tmp_path}/runs.sqlite", *args, env=env, timeout=60)
    assert code == 2 and expected in err, err
    assert "Traceback" not in err and time.monotonic() - started < 20


def test_a_suite_with_errors_is_refused_with_its_lines(tmp_path):
    suite = tmp_path / "bad.toml"
    suite.write_text('[[run]]\nexperiment = "transfers"\n[run.params]\nsizes = [0]\n[[run]]\nexperiment = "x"\n')
    code, out, err = fleet(f"sqlite:///{tmp_path}/runs.sqlite", str(suite), "--cluster", "tcp://127.0.0.1:1")
    assert code == 2 and f"{suite}: line 4: transfers: size 0 B must be at least 16 B" in err
    assert f"{suite}: line 6: unknown experiment 'x'" in err and "no Dask scheduler" not in err


def test_a_device_that_does_not_exist_lists_the_gpus_that_do(tmp_path):
    result = subprocess.run([sys.executable, "-m", "gpu.bench", "reduction", "--device", "7", "--no-store"],
                            cwd=ROOT, env=environment(PINPOINT_SIM_BOARDS=2), capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2, result.stderr
    assert "no GPU '7' here; the GPUs are: 0 · NVIDIA H200 · …00000000 · node-0; 1 · NVIDIA H200" in result.stderr


# --- units ---------------------------------------------------------------------------------------------------------
def test_a_device_is_chosen_by_index_or_by_uuid_prefix():
    gpus = [{"index": 0, "name": "NVIDIA H200", "uuid": "GPU-0818954e-1111-2222-3333-444444444444"},
            {"index": 1, "name": "NVIDIA H200", "uuid": "GPU-08f00000-1111-2222-3333-555555555555"}]
    assert devices.choose(None, gpus) == 0 and devices.choose("1", gpus) == 1
    assert devices.choose("GPU-0818954e", gpus) == 0 and devices.choose("08f0", gpus) == 1
    with pytest.raises(DeviceNotFound, match="matches 2 GPUs"):
        devices.choose("GPU-08", gpus)
    with pytest.raises(DeviceNotFound, match="no GPU '2' here; the GPUs are: 0 · NVIDIA H200 · …44444444"):
        devices.choose("2", gpus)
    with pytest.raises(DeviceNotFound, match="no CUDA GPU is visible"):
        devices.choose("0", [])


def test_a_worker_that_sees_several_gpus_takes_the_one_at_its_place():
    assert gpu_for_worker(None, "0") is None and gpu_for_worker("3", "board-9") is None
    assert gpu_for_worker("0,1,2,3", "SLURMCluster-4-2") == "2" and gpu_for_worker("GPU-a,GPU-b", 1) == "GPU-b"
    with pytest.raises(TaskFailed, match="cannot tell which is its own"):
        gpu_for_worker("0,1", "tcp://10.0.0.1:4000-worker")
    with pytest.raises(TaskFailed, match="cannot tell which is its own"):
        gpu_for_worker("0,1", "node-5")


def test_a_fleet_id_names_its_suite_and_start_and_cannot_change_suite(tmp_path):
    import datetime as dt

    from gpu.core.errors import FleetError
    from gpu.results.exchange.catalog import Catalog
    from tests.simulated_fleet import as_board, recorded

    assert fleet_run.new_fleet_id(HEALTH, dt.datetime(2026, 11, 25, 4, 12, tzinfo=dt.UTC)) == "health-20261125T0412Z"
    catalog = Catalog(RunStore(f"sqlite:///{tmp_path}/runs.sqlite"))
    catalog.save(as_board(recorded("reduction"), 0), "fleet", fleet=("f1", "nightly"))
    with pytest.raises(FleetError, match="fleet f1 was measured with suite nightly, not health"):
        fleet_run.stored_pairs(catalog, "f1", HEALTH)


def test_the_progress_bar_names_each_gpus_state_and_a_log_gets_a_line_only_when_it_changes():
    import io

    stream = io.StringIO()
    progress = fleet_run.Progress(stream)
    gpus = [fleet_run.FleetGpu("tcp://a:1", device_name="NVIDIA H200", gpu_uuid=board_uuid(0), host="node-0"),
            fleet_run.FleetGpu("tcp://b:1", device_name="NVIDIA H200", gpu_uuid=board_uuid(1), host="node-0")]
    gpus[0].current, gpus[1].todo = HEALTH.runs[0], list(HEALTH.runs)
    for _ in range(3):
        progress.bar(gpus, 10)
    gpus[1].failed["transfers"], gpus[1].lost, gpus[1].todo = "transfers: gone", "gone", []
    progress.bar(gpus, 10)
    assert stream.getvalue().splitlines() == [
        "[..............................] 0/10 runs · GPU 0 measuring transfers · GPU 1 waiting",
        "[###...........................] 1/10 runs · GPU 0 measuring transfers · GPU 1 failed"]
    many = [fleet_run.FleetGpu(f"tcp://{i}:1") for i in range(9)]
    progress.bar(many, 9)
    assert stream.getvalue().splitlines()[-1].endswith("0/9 runs · 9 done")


@pytest.mark.slow  # a fleet through the runner's command
def test_a_fleets_store_file_imports_with_its_fleet_id_and_a_foreign_sqlite_file_is_refused(tmp_path):
    import sqlite3

    from gpu import bench
    from gpu.results.exchange.catalog import Catalog
    from tests.simulated_fleet import as_board, recorded

    gpu_machine = tmp_path / "fleet_h100.sqlite"
    source = Catalog(RunStore(f"sqlite:///{gpu_machine}"))
    for board in (0, 1):
        source.save(as_board(recorded("reduction"), board), "fleet", "health suite", fleet=("f-1", "health"))
    source.store.close()
    before = gpu_machine.read_bytes()
    os.environ["PINPOINT_DB_URL"] = f"sqlite:///{tmp_path}/team.sqlite"
    try:
        assert bench.main(["import", str(gpu_machine)]) == 0
        foreign = tmp_path / "other.sqlite"
        with sqlite3.connect(foreign) as connection:
            connection.execute("CREATE TABLE notes (id INTEGER, text TEXT)")
        assert bench.main(["import", str(foreign)]) == 2
    finally:
        os.environ.pop("PINPOINT_DB_URL")
    team = RunStore(f"sqlite:///{tmp_path}/team.sqlite").runs(fleet_id="f-1")
    assert set(team["gpu_uuid"]) == {board_uuid(0), board_uuid(1)} and set(team["suite"]) == {"health"}
    assert set(team["label"]) == {"health suite"} and gpu_machine.read_bytes() == before


def test_the_gpus_are_listed_even_when_the_main_module_is_an_app_script(monkeypatch, tmp_path):
    """Under Streamlit or AppTest the main module is app.py; a spawned child must not run it (it did, on a GPU)."""
    import types

    from gpu.fleet.cluster import visible_gpus

    script = tmp_path / "app_script.py"
    script.write_text("raise SystemExit('an app script ran in a spawned child')\n")
    fake_main = types.ModuleType("__main__")
    fake_main.__file__ = str(script)
    monkeypatch.setitem(sys.modules, "__main__", fake_main)
    monkeypatch.setenv("PINPOINT_SIM_BOARDS", "3")
    assert [g["uuid"] for g in visible_gpus(SIMULATED)] == [board_uuid(i) for i in range(3)]
