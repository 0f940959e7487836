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
from gpu.service.backends import ReplayBackend


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
