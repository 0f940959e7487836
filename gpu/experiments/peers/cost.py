"""How long a peers request will take, estimated before it starts from a recorded run: every point of the request is
priced at what the same point (variant, size, timer) cost in the recording — its samples' GPU time (``samples_ms``
times the copies or loads of one sample, and one warm-up sample more) plus the host's time per sample — and the
points are summed. An estimate, said as one: the recording's machine, profile and PinPoint version measured it, not
this machine now."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpu.core import text
from gpu.experiments import peers

# Host time a sample costs beyond its GPU time (queueing behind the stream hold, events, Python), per sample: fitted
# so that the bundled 2 × H100 recording's full sweep (26.1 s of sampled GPU time, 27,578 samples with warm-ups over
# 380 points) comes to the 48–50 s that sweep took from a live Measure on that machine.
SAMPLE_HOST_S = 0.0008
KEY = ["variant", "elements", "timer"]


@dataclass(frozen=True)
class Estimate:
    seconds: float
    points: int
    priced: int  # points the recording priced; the others are counted at the mean of those
    basis: str  # the recording in words: "2 × NVIDIA H100 80GB HBM3, 2026-11-25, profile interactive"


def point_costs(recorded: pd.DataFrame) -> pd.Series:
    """Seconds one point of each (variant, elements, timer) took in ``recorded`` (peers rows), the mean over its
    pairs or GPUs."""
    rows = recorded[recorded["experiment"] == peers.NAME] if "experiment" in recorded else recorded
    if rows.empty:
        return pd.Series(dtype=float)
    per_sample = np.where(rows["timer"].astype(str).str.contains("batched") | (rows["variant"] == "latency"),
                          pd.to_numeric(rows["copies_per_sample"], errors="coerce").fillna(
                              pd.to_numeric(rows["loads_per_sample"], errors="coerce")).fillna(1.0), 1.0)
    sampled_s = rows["samples_ms"].map(lambda v: float(np.sum(v))) * per_sample / 1e3
    samples = rows["samples"].astype(float).clip(lower=1)
    seconds = sampled_s * (samples + 1) / samples + (samples + 1) * SAMPLE_HOST_S
    return seconds.groupby([rows[c] for c in KEY]).mean()


def basis(recorded: pd.DataFrame) -> str:
    """The recording an estimate comes from, in words (plain text: its stored names are shortened, not escaped)."""
    first = recorded.iloc[0]
    gpus = recorded["gpu_index"].nunique() if "gpu_index" in recorded else 1
    day = str(first.get("timestamp") or "")[:10]
    return ", ".join(part for part in (f"{gpus} × {text.shorten(first.get('device_name') or 'GPU', 60)}", day,
                                       f"profile {text.shorten(first.get('profile') or '?', 40)}") if part)


def pricing_run(recorded: pd.DataFrame, device_name: str | None = None) -> pd.DataFrame:
    """The peer run to price a request by: among ``recorded`` rows, the runs of this device's model
    (``device_name``) where one exists, else all; of those the one with the most points (a full sweep prices every
    point), the newest among equals (the method as it measures now); empty without one."""
    rows = recorded[recorded["experiment"] == peers.NAME] if "experiment" in recorded else recorded
    if rows.empty or "run_id" not in rows:
        return rows
    same = rows[rows["device_name"] == device_name] if device_name and "device_name" in rows else rows.iloc[:0]
    rows = same if not same.empty else rows
    when = (pd.to_datetime(rows["timestamp"], utc=True, errors="coerce", format="mixed") if "timestamp" in rows
            else pd.Series(pd.NaT, index=rows.index))
    runs = pd.DataFrame({"points": rows.groupby("run_id").size(), "when": when.groupby(rows["run_id"]).max()})
    best = runs.sort_values(["points", "when"], ascending=False, na_position="last").index[0]
    return rows[rows["run_id"] == best]


def estimate(params: peers.Params, recorded: pd.DataFrame) -> Estimate | None:
    """The time ``params`` (its GPUs named: ``peers.with_devices``) should take, priced by the peers run ``recorded``
    (one run's rows); None without a recording."""
    costs = point_costs(recorded)
    if costs.empty:
        return None
    points = list(params.points())
    found = [costs.get((variant, int(size), timer)) for variant, _, _, size, timer in points]
    priced = [c for c in found if c is not None and np.isfinite(c)]
    if not priced:
        return None
    mean = float(np.mean(priced))
    seconds = float(sum(priced)) + mean * (len(points) - len(priced))
    return Estimate(seconds, len(points), len(priced), basis(recorded))


def duration(seconds: float) -> str:
    """'about 2 s', 'about 49 s', 'about 3 min'."""
    if seconds < 90:
        return f"about {max(1, round(seconds))} s"
    return f"about {round(seconds / 60)} min"


def sentence(found: Estimate | None) -> str:
    """The estimate in one line of plain text, said to be one (or why there is none)."""
    if found is None:
        return "No peer recording to estimate its time from."
    unpriced = found.points - found.priced
    extra = f"; {text.count(unpriced, 'point')} not in it counted at its mean" if unpriced else ""
    return (f"{duration(found.seconds)} for {text.count(found.points, 'point')} (an estimate: each point at what it "
            f"took in a recorded run, {found.basis}{extra})")
