"""A simulated fleet, for tests and the scale benchmark only: recorded H200 runs re-served as if many boards had
measured them, each board with its own fake UUID and host, and chosen boards slowed by a factor.

Nothing here is ever bundled or shown as a measurement: the rows say ``backend="simulated"``, their UUIDs start
with ``GPU-sim``, and only tests and ``tests/benchmarks/`` use them (as ``fake_service.RecordedService`` replays
recordings to drive the live pages without a GPU).
"""

from __future__ import annotations

import uuid

import numpy as np
import pandas as pd

from gpu.core import schema
from gpu.service.backends import REPLAY_DIR, ReplayBackend


def board_uuid(index: int) -> str:
    """A fake board UUID in NVML's form, one per index (``GPU-sim00003-…``)."""
    return f"GPU-sim{index:05d}-0000-4000-8000-{index:012d}"


def board_host(index: int, gpus_per_node: int = 8) -> str:
    return f"node-{index // gpus_per_node}"


def recorded(experiment: str) -> pd.DataFrame:
    """The committed H200 recording of ``experiment`` (the newest, as replay serves it)."""
    data = ReplayBackend().data
    rows = data[data["experiment"] == experiment]
    newest = rows.sort_values("timestamp")["run_id"].iloc[-1]
    return rows[rows["run_id"] == newest].reset_index(drop=True)


def as_board(frame: pd.DataFrame, index: int, slowdown: float = 1.0, when: str | None = None,
             run_id: str | None = None) -> pd.DataFrame:
    """``frame``'s points as board ``index`` would report them: its own UUID, host and run id, every time
    multiplied by ``slowdown`` (so GB/s divided by it)."""
    out = frame.copy()
    for column in ("median_ms", "min_ms", "max_ms"):
        out[column] = out[column] * slowdown
    out["gbps"] = out["gbps"] / slowdown
    out["samples_ms"] = [list(np.asarray(s, dtype=float) * slowdown) for s in out["samples_ms"]]
    out["gpu_uuid"] = board_uuid(index)
    out["host"] = board_host(index)
    out["backend"] = "simulated"
    out["run_id"] = run_id or uuid.uuid4().hex[:12]
    if when is not None:
        out["timestamp"] = when
    return schema.validate(out)


class SimulatedBoard:
    """A worker service (``PINPOINT_WORKER_SERVICE=tests.simulated_fleet:SimulatedBoard``) that answers experiment
    jobs with the recorded H200 points as one simulated board would: the board is the one CUDA_VISIBLE_DEVICES
    names (an index, or a ``GPU-sim…`` UUID), slowed where ``PINPOINT_SIM_SLOW`` says (``"3:1.3,5:1.1"``: board 3
    takes 1.3× as long), each point after ``PINPOINT_SIM_SECONDS_PER_POINT``; ``PINPOINT_SIM_HANG`` (``"2:reduction"``)
    makes a board's experiment run until it is cancelled. ``PINPOINT_SIM_BOARDS`` boards are visible."""

    def __init__(self, device=None):
        import os

        from gpu.core import devices

        if device is not None:  # the runner's --device: refused with the list, as on a GPU machine
            devices.choose(device, self.visible_gpus())
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip() or "0"
        self.index = int(visible[7:12]) if visible.startswith("GPU-sim") else int(visible)
        self.slowdown = _board_table(os.environ.get("PINPOINT_SIM_SLOW", "")).get(self.index, 1.0)
        self.hang = _board_table(os.environ.get("PINPOINT_SIM_HANG", ""), str).get(self.index)
        self.seconds = float(os.environ.get("PINPOINT_SIM_SECONDS_PER_POINT", "0"))
        self.recordings: dict[str, pd.DataFrame] = {}  # an experiment's recordings, read at its first job

    @staticmethod
    def visible_gpus() -> list[dict]:
        import os

        count = int(os.environ.get("PINPOINT_SIM_BOARDS", "2"))
        return [{"index": i, "name": "NVIDIA H200", "uuid": board_uuid(i), "host": board_host(i)} for i in range(count)]

    def hello(self) -> dict:
        import os

        columns = ["device_name", "compute_capability", "sm_count", "memory_total_bytes", "driver_version", "pcie_gen",
                   "pcie_width"]
        facts = self.recorded("reduction").iloc[0][columns].to_dict()
        facts.update(gpu_uuid=board_uuid(self.index), host=board_host(self.index))
        return {"facts": facts, "limits": {}, "pid": os.getpid(), "gpus": self.visible_gpus()}

    def handle(self, job, progress, should_cancel):
        import datetime as dt
        import time

        from gpu.core.errors import JobCancelled, ValidationError
        from gpu.experiments import get_experiment

        if job["kind"] != "experiment":
            raise ValidationError([f"unknown job kind '{job['kind']}'"])
        module = get_experiment(job["experiment"])
        params = module.parse_params(job["params"])
        wanted = set(params.points())
        rows = self.recorded(module.NAME)
        keys = list(zip(*(rows[c] for c in module.KEY_COLUMNS), strict=True))
        # The newest recording of each point (transfers' single and batched copies are two recordings).
        chosen = rows[[key in wanted for key in keys]].sort_values("timestamp").drop_duplicates(
            subset=module.KEY_COLUMNS, keep="last")
        for i in range(len(chosen)):
            if should_cancel():
                raise JobCancelled()
            progress(i, len(chosen), f"point {i}")
            time.sleep(self.seconds)
        while self.hang == module.NAME and not should_cancel():
            time.sleep(0.05)
        if should_cancel():
            raise JobCancelled()
        now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        return as_board(chosen.reset_index(drop=True), self.index, self.slowdown, when=now).assign(
            experiment=module.NAME)

    def recorded(self, experiment: str) -> pd.DataFrame:
        """Every committed recording of ``experiment`` (its files only: one board of 64 simulated stays small)."""
        if experiment not in self.recordings:
            paths = sorted(REPLAY_DIR.glob(f"{experiment}_*.parquet"))
            frames = [schema.read_results(p) for p in paths]
            self.recordings[experiment] = pd.concat([f[f["experiment"] == experiment] for f in frames],
                                                    ignore_index=True)
        return self.recordings[experiment]

    def after_error(self, exc) -> bool:
        return True

    def close(self) -> None:
        pass


def _board_table(spec: str, kind=float) -> dict:
    table = {}
    for item in spec.split(","):
        if ":" in item:
            board, value = item.split(":", 1)
            table[int(board)] = kind(value)
    return table
