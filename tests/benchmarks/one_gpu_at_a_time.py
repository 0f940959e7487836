"""One measurement per GPU across processes, on the GPU (prints, does not assert): PinPoint's processes on one GPU take
turns (``gpu.service.host_locks``), so each figure is the figure alone.

(a) ``python -m gpu.bench transfers --sizes 1GiB --modes pinned --directions h2d --device D`` alone, then two of them
    started together: each one's GB/s, its ratio to the run alone, whether their measuring intervals overlapped, and
    whether the one that waited names the other's pid in its output.
(b) the app's backend in this process (``open_live`` + ``LiveBackend``, as the app starts it, named "the app") asked to
    measure the same request while a runner measures on the same GPU: it waits (its waiting text is printed), then
    measures; each figure against its run alone.

Measuring intervals are the times each process held the GPU's lock file, sampled every 10 ms by this script
(``host_locks.holders``); a job measures only while it holds it, so intervals that do not overlap mean measurements
that did not.

Run on the GPU machine: ``python3 tests/benchmarks/one_gpu_at_a_time.py [--device 0] [--repeats 1]``. Each runner's
output and a summary go to ``$OUT`` when it is set. Without a GPU, ``--simulate`` tries the script with recorded
points served by a stand-in worker (tests/fake_service.py: TwoGpuRecordedService), whose figures are not
measurements.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402

from gpu.service import host_locks  # noqa: E402

RUNNER_ARGS = ["transfers", "--sizes", "1GiB", "--modes", "pinned", "--directions", "h2d", "--no-store"]
APP_PARAMS = {"sizes": [1 << 30], "modes": ["pinned"], "directions": ["h2d"], "profile": "precise"}


class HolderWatch:
    """Samples every GPU lock's holder every 10 ms: for each pid, the first and last time it was seen holding."""

    def __init__(self):
        self.seen: dict[int, list[float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            for holder in host_locks.holders():
                if holder.pid is not None:
                    self.seen.setdefault(holder.pid, [now, now])[1] = now
            time.sleep(0.01)

    def interval(self, pid: int) -> tuple[float, float] | None:
        return tuple(self.seen[pid]) if pid in self.seen else None


def overlap(a, b) -> str:
    if a is None or b is None:
        return "unknown (an interval was not seen)"
    return "yes" if a[0] < b[1] and b[0] < a[1] else "no"


def start_runner(device: str, out_dir: Path, name: str, env: dict) -> tuple[subprocess.Popen, Path, Path]:
    parquet, log = out_dir / f"{name}.parquet", out_dir / f"{name}.log"
    command = [sys.executable, "-m", "gpu.bench", *RUNNER_ARGS, "--device", device, "--out", str(parquet)]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    return process, parquet, log


def figure(parquet: Path) -> float | None:
    try:
        return float(pd.read_parquet(parquet)["gbps"].median())
    except Exception:
        return None


def conditions_of(frame) -> str:
    """The run's points' conditions in one line (the witness's words; "not observed" without one)."""
    from gpu.core import conditions

    return conditions.summary(frame["conditions"]) if frame is not None and "conditions" in frame else "—"


def run_conditions(parquet: Path) -> str:
    try:
        return conditions_of(pd.read_parquet(parquet))
    except Exception:
        return "—"


def names_pid(log: Path, pid: int) -> bool:
    return f"(pid {pid}," in log.read_text(errors="replace")


def waited(log: Path) -> bool:
    return " is measuring for " in log.read_text(errors="replace")


def row(label: str, gbps: float | None, alone: float | None, interval, overlapped: str, named: str,
        conditions: str = "—") -> str:
    shown = f"{gbps:8.2f}" if gbps is not None else "  failed"
    ratio = f"{gbps / alone:6.3f}" if gbps is not None and alone else "     —"
    span = f"{interval[1] - interval[0]:6.1f} s" if interval else "      —"
    return f"{label:<34} {shown} {ratio}  {span}  {overlapped:<8} conditions: {conditions} · {named}"


def scenario_runners(device: str, out_dir: Path, env: dict, alone: float | None, repeat: int) -> list[str]:
    lines = []
    with HolderWatch() as watch:
        first, first_out, first_log = start_runner(device, out_dir, f"together{repeat}-a", env)
        second, second_out, second_log = start_runner(device, out_dir, f"together{repeat}-b", env)
        first.wait()
        second.wait()
    a, b = watch.interval(first.pid), watch.interval(second.pid)
    both = overlap(a, b)
    for process, out, log, other in ((first, first_out, first_log, second), (second, second_out, second_log, first)):
        named = ("waited; names the other's pid" if names_pid(log, other.pid) else "waited; does NOT name it") \
            if waited(log) else "did not wait"
        lines.append(row(f"runner {process.pid} (exit {process.returncode})", figure(out), alone,
                         watch.interval(process.pid), both, named, run_conditions(out)))
    return lines


def scenario_app(device: str, out_dir: Path, env: dict, alone: float | None, app_alone: float | None) -> list[str]:
    from gpu.service.backends import open_live, submit_values

    backend = open_live(device)
    backend.client.purpose, backend.client.wait_s = "the app", host_locks.APP_WAIT_S
    try:
        with HolderWatch() as watch:
            runner, runner_out, runner_log = start_runner(device, out_dir, "beside-app", env)
            deadline = time.monotonic() + 180
            while watch.interval(runner.pid) is None and runner.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)  # the app asks while the runner measures, as a person pressing Measure would
            handle = submit_values(backend, "transfers", APP_PARAMS)
            waited_text = ""
            while not handle.wait(0.05):
                waited_text = waited_text or handle.waiting
            frame = handle.outcome() if handle.error is None else None
            runner.wait()
        app_gbps = float(frame["gbps"].median()) if frame is not None else None
        error = f" ({handle.error})" if handle.error is not None else ""
        app_interval, runner_interval = watch.interval(os.getpid()), watch.interval(runner.pid)
        both = overlap(app_interval, runner_interval)
        app_named = f"waited: {waited_text}" if waited_text else "did not wait"
        runner_named = ("waited; names the app's pid" if names_pid(runner_log, os.getpid()) else
                        "waited; does NOT name it") if waited(runner_log) else "did not wait"
        return [row(f"the app (pid {os.getpid()}){error}", app_gbps, app_alone, app_interval, both, app_named,
                    conditions_of(frame)),
                row(f"runner {runner.pid} (exit {runner.returncode})", figure(runner_out), alone, runner_interval,
                    both, runner_named, run_conditions(runner_out))]
    finally:
        backend.client.close()


def app_alone(device: str) -> float | None:
    from gpu.service.backends import open_live, submit_values

    backend = open_live(device)
    try:
        return float(submit_values(backend, "transfers", APP_PARAMS).outcome()["gbps"].median())
    finally:
        backend.client.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="0")
    parser.add_argument("--repeats", type=int, default=1, help="how many times to start two runners together")
    parser.add_argument("--simulate", action="store_true",
                        help="no GPU: recorded points from a stand-in worker (figures are not measurements)")
    args = parser.parse_args()
    out_dir = Path(os.environ.get("OUT") or tempfile.mkdtemp(prefix="one-gpu-at-a-time-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    if args.simulate:
        env.update(PINPOINT_BACKEND="auto", PINPOINT_WORKER_SERVICE="tests.fake_service:TwoGpuRecordedService",
                   PINPOINT_FAKE_SECONDS_PER_POINT="2")
        os.environ.update({k: env[k] for k in ("PINPOINT_BACKEND", "PINPOINT_WORKER_SERVICE",
                                                "PINPOINT_FAKE_SECONDS_PER_POINT")})
    print(f"lock folder {host_locks.lock_dir()} · device {args.device} · logs in {out_dir}"
          + (" · SIMULATED (not measurements)" if args.simulate else ""))
    lines = [f"{'':<34} {'GB/s':>8} {'×alone':>6}  {'held':>8}  overlap  output", "-" * 100]
    process, parquet, log = start_runner(args.device, out_dir, "alone", env)
    process.wait()
    alone = figure(parquet)
    lines.append(row(f"runner alone (exit {process.returncode})", alone, alone, None, "—", "", run_conditions(parquet)))
    for repeat in range(args.repeats):
        lines += scenario_runners(args.device, out_dir, env, alone, repeat)
    in_app_alone = app_alone(args.device)
    lines.append(row("the app alone", in_app_alone, in_app_alone, None, "—", ""))
    lines += scenario_app(args.device, out_dir, env, alone, in_app_alone)
    table = "\n".join(lines)
    print(table)
    (out_dir / "one_gpu_at_a_time.txt").write_text(table + "\n")
    for log in sorted(out_dir.glob("*.log")):  # each runner's waiting text (if it waited) and its last lines
        said = log.read_text(errors="replace")
        waits = [part.strip() for part in re.split(r"[\r\n]", said) if " is measuring for " in part]
        tail = [re.sub(r".*\r", "", line) for line in said.splitlines()[-3:]]
        print(f"--- {log.name}\n" + "\n".join(waits[-1:] + tail))
    return 0


if __name__ == "__main__":
    sys.exit(main())
