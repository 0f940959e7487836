"""Which points of a measurement stopped above their profile's noise target, in one line a page shows under a live
result, so a spread is read as what it is (a busy link, the driver's staging) and not taken for a result.

No Streamlit, no CUDA: a results frame in the schema of ``gpu.core.schema`` in, a sentence (or None) out."""

from __future__ import annotations

import pandas as pd

from gpu.core import stats, text
from gpu.experiments import registry
from gpu.results.analysis.compare import point_kind, point_label

# Paths whose spread is their own (docs, "Live answers"): staged through the driver, timed on the host, or single
# copies short enough that issue cost sets their time. They are counted, not listed.
HOST_SIDE_KINDS = frozenset({"pageable", "host clock", "small copy", "medium copy", "managed migration"})
SHOWN = 3  # the noisiest points named; the rest are counted


def _targets(profiles: pd.Series) -> pd.Series:
    """Each row's noise target (its profile's ``max_noise``); NaN for a profile this version cannot read."""
    known = {}
    for spec in profiles.dropna().unique():
        try:
            known[spec] = stats.get_profile(spec).max_noise
        except ValueError:
            continue
    return profiles.map(known).astype(float)


def _label(row) -> str:
    """A point in a few words: its experiment's ``short_point_label`` where it declares one (Streams, whose rows carry
    seven key columns), else Compare's label."""
    short = getattr(registry.EXPERIMENTS.get(row["experiment"]), "short_point_label", None)
    return short(row) if short else point_label(row["experiment"], row)


def _shares_the_link(row) -> bool:
    """Copies in both directions at once: a bidirectional pair or a pipeline's round trip."""
    return row.get("direction") in ("both", "round_trip")


def noisy_points(frame: pd.DataFrame) -> str | None:
    """'2 points stopped above the 2 % noise target: …' naming the noisiest device-side points with their CV and
    saying what to do; host-side points above it are counted. None when every point is within its target."""
    if frame is None or frame.empty or not {"cv", "profile", "experiment"} <= set(frame.columns):
        return None
    targets = _targets(frame["profile"])
    noisy = frame[frame["cv"].astype(float) > targets]
    if noisy.empty:
        return None
    rows = [(row, point_kind(row["experiment"], row)) for row in noisy.to_dict("records")]
    device_side = sorted((row for row, kind in rows if kind not in HOST_SIDE_KINDS), key=lambda r: -float(r["cv"]))
    host_side = len(rows) - len(device_side)
    target = float(targets[noisy.index].max())
    limit = text.percent(target, 0 if round(target * 100, 6).is_integer() else 1)
    parts = []
    if device_side:
        named = ", ".join(f"{_label(r)} (cv {text.percent(float(r['cv']), 1)})"
                          for r in device_side[:SHOWN])
        more = f" and {len(device_side) - SHOWN:,} more" if len(device_side) > SHOWN else ""
        parts.append(f"{text.count(len(device_side), 'point')} stopped above the {limit} noise target: "
                     f"{named}{more}.")
        if any(_shares_the_link(r) for r in device_side):
            parts.append("Copies in both directions at once share the PCIe link, whose combined rate comes and goes "
                         "for seconds at a time on the machines measured; measure again, or read the spread.")
        elif all(str(r["profile"]).startswith(stats.INTERACTIVE.name) for r in device_side):
            parts.append("Measure again, or choose the precise profile.")
        else:
            parts.append("Measure again, or read the spread.")
    if host_side:
        where = f"above {limit} too" if device_side else f"above the {limit} noise target"
        parts.append(f"{text.count(host_side, 'pageable, small or host-timed point')} "
                     f"{'is' if host_side == 1 else 'are'} {where}: issue costs, the driver's staging and the host "
                     "set their spread.")
    return " ".join(parts)
