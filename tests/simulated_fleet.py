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
from gpu.core.schema import key_value
from gpu.experiments.order import row_keys
from gpu.service.backends import REPLAY_DIR, ReplayBackend


def board_uuid(index: int) -> str:
    """A fake board UUID in NVML's form, one per index (``GPU-sim00003-…``)."""
    return f"GPU-sim{index:05d}-0000-4000-8000-{index:012d}"


def board_host(index: int, gpus_per_node: int = 8) -> str:
    """The node of board ``index``: ``PINPOINT_SIM_NODES`` ("2,8": boards 0–1 on node-0, 2–9 on node-1) where it is
    set, else ``gpus_per_node`` boards a node."""
    import os

    sizes = [int(n) for n in os.environ.get("PINPOINT_SIM_NODES", "").split(",") if n.strip()]
    first = 0
    for node, size in enumerate(sizes):
        if index < first + size:
            return f"node-{node}"
        first += size
    return f"node-{index // gpus_per_node}"


# Made-up peer figures (GB/s) of a healthy NVLink pair and host link, for the simulated node runs and tests only.
PEER_GBPS = {"ce_read": 391.0, "ce_write": 396.0, "sm_read": 369.0, "sm_write": 369.0, "ce_bidir": 391.0,
             "latency": 0.0096, "h2d_all": 53.0, "d2h_all": 50.0, "h2d_alone": 55.0, "d2h_alone": 55.0}
NVLINK = "NVLink 4 ×18"


def peer_frame(boards: list[int], params, slow_links: dict | None = None, run_id: str | None = None,
               when: str | None = None, link: str = NVLINK, host: str | None = None) -> pd.DataFrame:
    """A made-up node run of the peer experiment (``gpu.experiments.peers``) over ``boards`` (simulated board
    numbers, in the node's order), its rows as the sweep (``peers/sweep.py``) makes them, in the order of
    ``Params.points()``: where ``params`` name no GPUs, the whole set (as the worker's ``with_devices``), every ordered
    pair for each pair variant and every GPU for each host-link variant; the latency chase's ``median_ms`` per access
    (``bytes`` 8). ``slow_links``: {(source board, destination board): factor} multiplies a pair's times (2 halves its
    GB/s). ``host``: the node's name (else each board's ``board_host``)."""
    import datetime as dt

    from gpu.experiments import peers
    from gpu.sweeps.harness import copies_per_sample

    slow_links = slow_links or {}
    params = peers.with_devices(params, range(len(boards)))
    base = ReplayBackend().data
    provenance = base[base["experiment"] == "reduction"].iloc[0][schema.PROVENANCE_COLUMNS].to_dict()
    when = when or dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    rows = []
    for variant, source, peer, size, timer in params.points():
        nbytes = peers.bytes_moved(variant, size)
        factor = slow_links.get((boards[source], boards[peer]), 1.0) if peer is not None else 1.0
        ms = nbytes / (PEER_GBPS[variant] * 1e9) * 1e3 * factor
        row = {**provenance, "run_id": run_id or uuid.uuid4().hex[:12], "experiment": peers.NAME,
               "variant": variant, "direction": peers.DIRECTIONS.get(variant, "peer"), "bytes": nbytes,
               "elements": size, "median_ms": ms, "min_ms": ms * 0.99, "max_ms": ms * 1.01, "cv": 0.003, "samples": 5,
               "gbps": nbytes / ms / 1e6, "stop_reason": "converged", "profile": params.profile, "timer": timer,
               "verified": True, "samples_ms": [ms] * 5, "gpu_index": source, "gpu_uuid": board_uuid(boards[source]),
               "host": host or board_host(boards[source]), "backend": "simulated", "timestamp": when}
        if peer is not None:
            row.update(peer_index=peer, peer_uuid=board_uuid(boards[peer]), link=link)
        if variant.startswith("sm_"):
            row["block_size"] = 256
        if variant == "latency":
            row.update(loads_per_sample=peers.CHASE_STEPS)
        elif timer == peers.TIMERS["batched"]:
            row.update(copies_per_sample=copies_per_sample(lambda n, ms=ms: n * ms))
        rows.append(row)
    frame = schema.make_frame(rows, {})
    frame["run_id"] = run_id or frame["run_id"].iloc[0]
    return frame


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
    makes a board's experiment run until it is cancelled. ``PINPOINT_SIM_BOARDS`` boards are visible.

    With ``devices`` (a node run: every GPU that CUDA_VISIBLE_DEVICES names, by position) it holds those boards
    together and answers the peer experiment with ``peer_frame`` (``PINPOINT_SIM_SLOW_LINK``: "3>5:2" makes the
    copies from board 3 to board 5 take twice as long). ``PINPOINT_SIM_LOG``: a file where each job appends its
    boards, experiment, start and end (one JSON line), to check which jobs ran at once."""

    def __init__(self, device=None, devices=None):
        import os

        from gpu.core import devices as gpu_devices

        if device is not None:  # the runner's --device: refused with the list, as on a GPU machine
            gpu_devices.choose(device, self.visible_gpus())
        listed = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",") if v.strip()] or ["0"]
        boards = [int(v[7:12]) if v.startswith("GPU-sim") else int(v) for v in listed]
        self.visible = boards
        self.boards = [boards[i] for i in devices] if devices is not None else boards[:1]
        self.index = self.boards[0]
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
        from tests.fake_service import RecordedService

        # An H200's limits, as its worker reports them: a fleet task checks a suite's run against them.
        # The boards this process sees, by their place in CUDA_VISIBLE_DEVICES, as CUDA numbers them: each one's lock
        # is its board's, whichever worker holds it.
        visible = [{"index": i, "name": "NVIDIA H200", "uuid": board_uuid(b), "host": board_host(b)}
                   for i, b in enumerate(self.visible)]
        return {"facts": facts, "limits": RecordedService._limits(), "pid": os.getpid(), "gpus": visible,
                "gpu_indices": list(range(len(self.boards)))}

    def handle(self, job, progress, should_cancel):
        import time

        from gpu.core.errors import ValidationError

        if job["kind"] != "experiment":
            raise ValidationError([f"unknown job kind '{job['kind']}'"])
        started = time.time()
        try:
            return self._measure(job, progress, should_cancel)
        finally:
            self._log(job["request"].experiment, started, time.time())

    def _log(self, experiment: str, started: float, ended: float) -> None:
        import json
        import os

        path = os.environ.get("PINPOINT_SIM_LOG")
        if path:
            line = json.dumps({"boards": self.boards, "experiment": experiment, "start": started, "end": ended})
            with open(path, "a", encoding="utf-8") as log:
                log.write(line + "\n")

    def _measure(self, job, progress, should_cancel):
        import datetime as dt
        import os
        import time

        from gpu.core.errors import JobCancelled, ValidationError
        from gpu.experiments import get_experiment
        from gpu.service.worker import checked

        request = checked(job)  # as the GPU worker: a checked request, never parsed again
        module = get_experiment(request.experiment)
        params = request.params
        if "peer_index" in module.KEY_COLUMNS:
            # as the GPU worker: parameters that name no GPUs measure the worker's whole set
            params = getattr(module, "with_devices", lambda p, _: p)(params, range(len(self.boards)))
            if len(self.boards) < 2:
                raise ValidationError([f"{module.NAME} needs two GPUs; this worker holds one"])
            time.sleep(self.seconds * 4)
            while self.hang == module.NAME and not should_cancel():
                time.sleep(0.05)
            if should_cancel():
                raise JobCancelled()
            slow = {}
            for item in os.environ.get("PINPOINT_SIM_SLOW_LINK", "").split(","):
                if ">" in item and ":" in item:
                    pair, factor = item.split(":")
                    source, peer = pair.split(">")
                    slow[(int(source), int(peer))] = float(factor)
            return peer_frame(self.boards, params, slow)
        wanted = {tuple(key_value(v) for v in point) for point in params.points()}
        rows = self.recorded(module.NAME)
        keys = row_keys(rows, module)  # an empty coordinate (NaN in a frame) is None, as in the points
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
