"""Which runs Compare opens by default, and what size of change a comparison can tell from noise. Pure pandas: no
Streamlit, no CUDA.

* **Like for like**: the default pair is the newest run that has an earlier run of the same experiment on the same
  GPU model measuring some of its points, against the nearest such earlier run. Two models differ by their hardware
  as much as by anything under review, so a pair across models is never a default: it is the user's pick, then
  normalized to each device's limit or labelled as across models (``across_models``).
* **What a comparison can detect**: each point's run-to-run band (``gpu.results.analysis.bands``) is the change that
  unchanged software reaches from run to run; a smaller change reads "within run-to-run noise". ``detectable`` says it
  per kind of point, from the bands of the comparison itself (a history where there is one, else the measured floors).
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from gpu.core import text
from gpu.results.analysis.bands import _when, band_text

# How a kind of point (``points.point_kind``) reads in a sentence.
KIND_NAMES = {"pageable": "pageable copies", "pinned": "pinned copies", "mapped": "mapped copies",
              "small copy": "small copies", "medium copy": "medium copies", "kernel": "kernels",
              "short kernel": "short kernels", "managed migration": "managed migrations",
              "host clock": "host-clock points"}


def like_pair(runs: pd.DataFrame, point_keys: Callable[[str], set]) -> tuple[str, str] | None:
    """(baseline id, candidate id): the newest run of ``runs`` (a listing of one experiment's runs, as
    ``Catalog.runs`` gives it) that has an earlier run on the same GPU model sharing some of its points
    (``point_keys(run_id)``), against the nearest such earlier run; None when no two runs of one model share a point."""
    if runs.empty:
        return None
    listed = runs.assign(when=runs["timestamp"].map(_when)).dropna(subset=["when"])
    listed = listed.sort_values("when", ascending=False, kind="stable")
    for position, newer in enumerate(listed.itertuples()):
        for older in listed.iloc[position + 1:].itertuples():
            if older.device_name != newer.device_name or older.when >= newer.when:
                continue
            if not point_keys(newer.run_id).isdisjoint(point_keys(older.run_id)):
                return older.run_id, newer.run_id
    return None


def across_models(baseline: pd.DataFrame, candidate: pd.DataFrame) -> str | None:
    """'NVIDIA H200 against NVIDIA H100 80GB HBM3' when two runs are of two GPU models, None when of one."""
    first, second = (str(frame["device_name"].iloc[0]) if not frame.empty else "" for frame in (baseline, candidate))
    return None if first == second else f"{second} against {first}"


def detectable(table: pd.DataFrame) -> pd.DataFrame:
    """Per kind of point of a comparison (``compare.compare``): how many points, and the widest slowdown and speedup
    that its run-to-run bands still call noise (``slower``, ``faster``: fractions, positive), the band's change
    limits. A change beyond them is told from noise at every point of the kind."""
    columns = ["kind", "points", "slower", "faster"]
    if table.empty or "run_to_run_low" not in table:
        return pd.DataFrame(columns=columns)
    banded = table.dropna(subset=["run_to_run_low", "run_to_run_high"])
    rows = [{"kind": kind, "points": len(part), "slower": float(-part["run_to_run_low"].min()),
             "faster": float(part["run_to_run_high"].max())} for kind, part in banded.groupby("kind", sort=False)]
    return pd.DataFrame(rows, columns=columns).sort_values("slower", kind="stable").reset_index(drop=True)


def detectable_line(table: pd.DataFrame) -> str:
    """'What this comparison can detect: a change inside these bands is within run-to-run noise here: mapped copies
    (18 points) −3.0 % … +3.0 %; …; pageable copies (26 points) −42.0 % … +72.5 %.', from its own bands."""
    kinds = detectable(table)
    if kinds.empty:
        return ""
    parts = [f"{KIND_NAMES.get(row.kind, row.kind)} ({text.count(row.points, 'point')}) "
             f"{band_text(-row.slower, row.faster)}" for row in kinds.itertuples()]
    return "What this comparison can detect: a change inside these bands is within run-to-run noise here: " \
        + "; ".join(parts) + "."
