"""Is this normal? A headline figure against its physical limit and against the bundled recording of the same GPU
model and point: "54.7 GB/s: 87 % of PCIe Gen5 ×16, 0.99× the bundled H200 recording". One function, ``normal``,
which every page's headline, the talk, Compare and the Fleet page call. No Streamlit, no CUDA.

Every number comes from measured rows or from the limits the device reported with them:

* **PCIe** (host ↔ device copies): the row's ``pcie_gbps_theoretical``, which the run derived from the generation
  and width the device reported (``pcie_gen``, ``pcie_width``) after line encoding; both directions of the link for a
  point that moves data both ways;
* **HBM** (work on the device): the row's ``hbm_gbps_theoretical`` (memory clock × bus width the device reported);
* **NVLink** (copies between GPUs): the link count and generation NVML reported, in the row's ``link`` text ("NVLink 4
  ×18"), times the per-link rate of that generation per direction (``NVLINK_GBPS_PER_LINK``, NVIDIA's published rate,
  as ``schema`` holds PCIe's per-lane rates);
* **the bundled recording**: the recorded run bundled with PinPoint (``assets/replay``, then ``assets/runs``) of the
  same experiment on the same GPU model that measured the same point with the same timer; left out where there is
  none, or where the figure is that recording's own.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import pandas as pd

from gpu.core import schema, text
from gpu.core.links import link_of
from gpu.experiments import registry
from gpu.results.analysis import points
from gpu.results.exchange.catalog import ASSETS, read_bundled

# GB/s per link and direction by NVLink generation (NVIDIA's figures: NVLink 4 is 18 links × 25 GB/s = 450 GB/s one
# way on an H100 SXM; NVLink 5 doubles the per-link rate).
NVLINK_GBPS_PER_LINK = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 50.0}
HOST_DIRECTIONS = ("h2d", "d2h", "round_trip", "both")


@dataclass(frozen=True)
class Limit:
    name: str  # "PCIe Gen5 ×16", "HBM", "18 NVLink 4 links"
    gbps: float


def _number(value) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number if math.isfinite(number) and number > 0 else math.nan


def limit_of(row) -> Limit | None:
    """The physical limit of a row's figure (see the module's text), None where the row records none."""
    direction = row.get("direction")
    if direction == "peer":
        link = link_of(row.get("link"))
        generation = link.kind.removeprefix("NVLink ").strip()
        rate = NVLINK_GBPS_PER_LINK.get(int(generation)) if generation.isdigit() else None
        if not link.count or rate is None:
            return None
        return Limit(f"{link.count} NVLink {generation} links", link.count * rate)
    gbps = _number(points.limit_gbps(row)) if direction in (*HOST_DIRECTIONS, "device") else math.nan
    if math.isnan(gbps):
        return None
    if direction == "device":
        return Limit("HBM", gbps)
    gen, width = schema.key_value(row.get("pcie_gen")), schema.key_value(row.get("pcie_width"))
    name = f"PCIe Gen{gen} ×{width}" if gen is not None and width is not None else "PCIe"
    return Limit(f"both directions of {name}" if direction in ("round_trip", "both") else name, gbps)


def model_name(device_name) -> str:
    name = str(device_name or "")
    return name.removeprefix("NVIDIA ").split(" ")[0] or "GPU"


def _key(row, experiment: str) -> tuple:
    return tuple(schema.key_value(row.get(c)) for c in points.key_columns(experiment))


def _index(frames) -> dict[tuple, dict]:
    """(experiment, device, point key, timer) → the first recording's row of that point."""
    index: dict[tuple, dict] = {}
    for frame in frames:
        if frame.empty or frame["experiment"].iloc[0] not in registry.EXPERIMENTS:
            continue
        experiment = frame["experiment"].iloc[0]
        for row in frame.to_dict("records"):
            timer = schema.key_value(row.get("timer"))
            index.setdefault((experiment, row["device_name"], _key(row, experiment), timer), row)
    return index


@functools.lru_cache(maxsize=1)
def _bundled() -> dict[tuple, dict]:
    """The points of the bundled recordings pages replay and reviews compare, indexed (read once per process)."""
    frames, _, _ = read_bundled((ASSETS / "replay", ASSETS / "runs"))
    return _index(frames.values())


def read_bundled_points() -> None:
    """Read and index the bundled recordings now, once per process (a page readies them while a live job measures,
    so its first result's comparison does not wait for them)."""
    _bundled()


def bundled_row(row, recordings=None) -> dict | None:
    """The row of the bundled recording of ``row``'s experiment and GPU model that measured its point with its
    timer (the first such recording: replay before review runs); None where none did, or where ``row`` is from that
    recording. ``recordings``: frames to look in instead of the bundled ones."""
    experiment = row.get("experiment")
    if not experiment or experiment not in registry.EXPERIMENTS:
        return None
    index = _bundled() if recordings is None else _index(recordings)
    timer = schema.key_value(row.get("timer"))
    found = index.get((experiment, row.get("device_name"), _key(row, experiment), timer))
    return None if found is None or found["run_id"] == row.get("run_id") else found


def _gbps(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.2f}" if value < 10 else f"{value:.1f}"


def words(row, recordings=None) -> str:
    """'87 % of PCIe Gen5 ×16, 0.99× the bundled H100 recording': ``normal`` without the figure itself ('' when
    neither the limit nor a bundled recording is known)."""
    gbps = _number(row.get("gbps"))
    if math.isnan(gbps):
        return ""
    parts = []
    limit = limit_of(row)
    if limit is not None:
        parts.append(f"{text.percent(gbps / limit.gbps)} of {limit.name}")
    reference = bundled_row(row, recordings)
    recorded = _number(reference.get("gbps")) if reference else math.nan
    if not math.isnan(recorded):
        parts.append(f"{gbps / recorded:.2f}× the bundled {model_name(row.get('device_name'))} recording")
    return ", ".join(parts)


def normal(row, recordings=None) -> str:
    """'54.7 GB/s: 87 % of PCIe Gen5 ×16, 0.99× the bundled H200 recording': a measured row's figure against its
    limit and the bundled recording of its model and point (each part only where known); '' for a row without GB/s."""
    gbps = _number(row.get("gbps"))
    if math.isnan(gbps):
        return ""
    said = words(row, recordings)
    return f"{_gbps(gbps)} GB/s" + (f": {said}" if said else "")


def headline_row(frame: pd.DataFrame) -> dict | None:
    """The row a page's headline figure comes from, generically: the fastest point of the largest size measured
    (``bytes``), not including allocation; None for an empty frame or one without GB/s."""
    if frame.empty or "gbps" not in frame:
        return None
    rows = frame[frame["gbps"].notna()]
    if "include_alloc" in rows:
        copy_only = rows[rows["include_alloc"].fillna(False).astype(bool) == False]  # noqa: E712 (a column)
        rows = copy_only if not copy_only.empty else rows
    if "bytes" in rows and rows["bytes"].notna().any():
        rows = rows[rows["bytes"] == rows["bytes"].max()]
    if rows.empty:
        return None
    return rows.loc[rows["gbps"].idxmax()].to_dict()


def is_this_normal(frame: pd.DataFrame, recordings=None) -> str | None:
    """``normal`` of a run's headline row (``headline_row``), for a page's headline or takeaway."""
    row = headline_row(frame)
    return normal(row, recordings) if row else None
