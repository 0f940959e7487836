"""A simulated fleet at scale: N boards (default 64), each a real ``dask worker`` process holding GPU=1 with its own
fake UUID (tests/simulated_fleet.py: recorded H200 points re-served, one board slowed), a real ``dask scheduler``
process, and the fleet driver running the health suite into a SQLite store. Prints (asserts nothing):

* the wall time for N boards × the health suite, from the driver's start to the last run stored;
* the scheduler's overhead per task: the time the driver waits for a task beyond the task's own compute time on
  its worker (Dask's task stream), median and 95th percentile;
* rows stored, checked against what the boards sent, and against the store's own count.

Usage: python3 tests/benchmarks/fleet_scale.py [--boards 64] [--seconds-per-point 0]
"""

from __future__ import annotations

import argparse
import io
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from distributed import Client, get_task_stream  # noqa: E402

from gpu.experiments import suites  # noqa: E402
from gpu.fleet import run as fleet_run  # noqa: E402
from gpu.results.exchange.catalog import Catalog  # noqa: E402
from gpu.results.persistence.store import RunStore  # noqa: E402

SIMULATED = "tests.simulated_fleet:SimulatedBoard"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--boards", type=int, default=64)
    parser.add_argument("--seconds-per-point", type=float, default=0.0)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="pinpoint-fleet-scale-"))
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PINPOINT_WORKER_SERVICE": SIMULATED,
           "DASK_DISTRIBUTED__WORKER__DAEMON": "False", "PINPOINT_SIM_SLOW": f"{args.boards // 2}:1.3",
           "PINPOINT_SIM_SECONDS_PER_POINT": str(args.seconds_per_point)}
    dask = [sys.executable, "-m", "dask"]  # the `dask` command, wherever Dask is installed (the GPU machine too)
    log = (folder / "dask.log").open("w")
    processes = [subprocess.Popen([*dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                                  env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)]
    started = time.perf_counter()
    try:
        for board in range(args.boards):
            processes.append(subprocess.Popen(
                [*dask, "worker", address, "--nthreads", "1", "--resources", "GPU=1", "--no-nanny", "--name",
                 f"board-{board}", "--no-dashboard"], env={**env, "CUDA_VISIBLE_DEVICES": str(board)},
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        with Client(address, timeout=60) as client:
            client.wait_for_workers(args.boards, timeout=600)
            print(f"{args.boards} workers up in {time.perf_counter() - started:.1f} s", file=sys.stderr)
            url = f"sqlite:///{folder}/runs.sqlite"
            catalog = Catalog(RunStore(url))
            suite = suites.load("health")
            os.environ["PINPOINT_WORKER_SERVICE"] = SIMULATED
            submitted, done = {}, {}
            original_submit = client.submit

            def timed_submit(*a, **k):  # when the driver asked for each task, by key
                future = original_submit(*a, **k)
                submitted[future.key] = time.time()
                future.add_done_callback(lambda f: done.setdefault(f.key, time.time()))
                return future

            client.submit = timed_submit
            with get_task_stream(client) as stream:
                result = fleet_run.run_fleet(client, suite, catalog, "scale-1", SIMULATED,
                                             progress=fleet_run.Progress(io.StringIO()))
            compute = {}
            for record in stream.data:
                spans = [s for s in record.get("startstops", ()) if s.get("action") == "compute"]
                if spans:
                    compute[record["key"]] = sum(s["stop"] - s["start"] for s in spans)
            overheads = [done[k] - submitted[k] - compute[k] for k in compute if k in submitted and k in done
                         and not str(k).startswith("pinpoint-identify")]
            first = [done[k] - submitted[k] for k in submitted if str(k).startswith("pinpoint-identify") and k in done]
            stored_rows = sum(RunStore(url).runs(fleet_id="scale-1")["points"])
            print(f"boards: {args.boards} · suite: health ({len(suite.runs)} experiments, "
                  f"{sum(len(r.points()) for r in suite.runs)} points a board) · seconds a point: "
                  f"{args.seconds_per_point}")
            print(f"wall time, driver start to last run stored: {result.wall_s:.1f} s "
                  f"({result.wall_s / max(1, args.boards):.3f} s per board)")
            if overheads:
                overheads.sort()
                p95 = overheads[min(len(overheads) - 1, int(0.95 * len(overheads)))]
                print(f"scheduler overhead per measuring task (the driver's wait beyond its compute on the worker), "
                      f"{len(overheads)} tasks: median {statistics.median(overheads) * 1e3:.1f} ms, "
                      f"p95 {p95 * 1e3:.1f} ms")
            if first:
                print(f"first task per worker (imports PinPoint, starts its GPU worker process, reports the board): "
                      f"median {statistics.median(first):.2f} s, slowest {max(first):.2f} s")
            print(f"runs stored: {result.runs_stored} of {args.boards * len(suite.runs)} · rows sent "
                  f"{result.rows_sent}, stored {result.rows_stored}, in the store {stored_rows} -> "
                  f"{'match' if result.rows_sent == result.rows_stored == stored_rows else 'MISMATCH'}")
            print(f"failures: {len(result.failures)}")
            return 0
    finally:
        for process in reversed(processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    sys.exit(main())
