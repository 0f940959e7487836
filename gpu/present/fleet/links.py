"""Each node's links against the fleet: the pairs of a node run (rows keyed by a GPU and its peer, ``peer_index``),
each ordered pair's GB/s against the median of the same link type (the row's ``link``: "NVLink 4 ×18", "PCIe via
host bridge", …) on GPUs of the same model across every node of the fleet, and the slow links named in words
("node-3: GPU 2 → GPU 5 at 0.51× the NVLink 4 ×18 median"). No Streamlit, no CUDA.

A figure is one point of the node run without its pair (the experiment, and its key columns other than the two GPU
indices: variant, size, timer), labelled by the experiment's ``point_label`` of a row without GPUs ('ce_write 256 MiB
batched'; ``compare.point_label``'s generic words where it declares none); each figure has its own matrix. A link
is slow when it is more than ``SLOW_FLOORS`` run-to-run floors (Compare's floor for the point's kind, between boards)
below its median; a link type measured on fewer than ``MIN_LINKS`` pairs across the fleet is shown, not judged. Rows
with no peer (a node's host links) are not links between GPUs and are left out.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from gpu.core import schema
from gpu.present.fleet.boards import model_name
from gpu.results.analysis import causes, compare, normal
from gpu.results.analysis.bands import against_median

SLOW_FLOORS = 1.0
MIN_LINKS = 3
PAIR = ("gpu_index", "peer_index")
UNKNOWN_LINK = "unknown link"
COLUMNS = ["host", "model", "link", "experiment", "figure", "label", "gpu_index", "peer_index", "gpu_uuid",
           "peer_uuid", "value", "kind", "floor", "run_id", "when", "conditions"]


def _keyed_by_pair(experiment: str) -> bool:
    try:
        return set(PAIR) <= set(compare.key_columns(experiment))
    except Exception:  # an experiment this PinPoint does not know: not a link
        return False


def links(frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """One row per measured ordered pair of GPUs and figure, from the newest run of each (node, experiment)."""
    parts = []
    for frame in frames:
        if frame.empty or "peer_index" not in frame.columns:
            continue
        for experiment, rows in frame.groupby("experiment", sort=False):
            if not _keyed_by_pair(experiment):
                continue
            rows = rows[rows["peer_index"].notna() & rows["gpu_index"].notna()]
            rows = rows[rows["peer_index"].astype(float) != rows["gpu_index"].astype(float)]
            if not rows.empty:
                parts.append(_pairs(experiment, rows))
    if not parts:
        return pd.DataFrame(columns=COLUMNS)
    table = pd.concat(parts, ignore_index=True)
    runs = table.drop_duplicates("run_id").sort_values("when", kind="stable").drop_duplicates(
        ["host", "experiment"], keep="last")["run_id"]
    return table[table["run_id"].isin(set(runs))].reset_index(drop=True)


def _pairs(experiment: str, rows: pd.DataFrame) -> pd.DataFrame:
    others = [c for c in compare.key_columns(experiment) if c not in PAIR]
    out = pd.DataFrame({
        "host": rows["host"].astype(str), "model": rows["device_name"].map(model_name),
        "link": rows["link"].where(rows["link"].notna() & (rows["link"].astype(str) != ""), UNKNOWN_LINK)
        if "link" in rows else UNKNOWN_LINK,
        "experiment": experiment, "gpu_index": rows["gpu_index"].astype(int),
        "peer_index": rows["peer_index"].astype(int),
        "gpu_uuid": rows.get("gpu_uuid"), "peer_uuid": rows.get("peer_uuid"), "value": rows["gbps"].astype(float),
        "run_id": rows["run_id"].astype(str), "when": pd.to_datetime(rows["timestamp"], utc=True, errors="coerce",
                                                                     format="mixed")})
    records = rows.to_dict("records")
    out["figure"] = [f"{experiment}|{tuple(schema.key_value(r.get(c)) for c in others)!r}" for r in records]
    out["label"] = [compare.point_label(experiment, {**r, "gpu_index": None, "peer_index": None}) for r in records]
    out["kind"] = [compare.point_kind(experiment, r) for r in records]
    out["floor"] = out["kind"].map(compare.floor)
    out["conditions"] = causes.of_frame(rows).to_numpy()
    return out[COLUMNS]


def figures(table: pd.DataFrame) -> pd.DataFrame:
    """The figures measured (id, label), the one measured on the most pairs first."""
    if table.empty:
        return pd.DataFrame(columns=["figure", "label", "pairs"])
    counted = table.groupby(["figure", "label"], sort=False).size().rename("pairs").reset_index()
    return counted.sort_values("pairs", ascending=False, kind="stable").reset_index(drop=True)


def judge(table: pd.DataFrame, figure: str) -> pd.DataFrame:
    """The pairs of ``figure``, each against the median of its link type on its GPU model across the fleet:
    ``median``, ``links`` (pairs of that type), ``ratio``, ``deviation`` (in floors; NaN where not judged) and
    ``slow``."""
    rows = table[table["figure"] == figure].copy()
    if rows.empty:
        return rows.assign(median=[], links=[], ratio=[], deviation=[], slow=[])
    by_type = rows.groupby(["model", "link"])["value"]
    rows["median"] = by_type.transform("median")
    rows["links"] = by_type.transform("count")
    against_median(rows, rows["links"] >= MIN_LINKS)
    rows["slow"] = rows["deviation"] < -SLOW_FLOORS
    return rows.sort_values(["host", "gpu_index", "peer_index"]).reset_index(drop=True)


def hosts(judged: pd.DataFrame) -> list[str]:
    """The nodes, those with a slow link first (slowest first), then by name."""
    if judged.empty:
        return []
    worst = judged.groupby("host")["ratio"].min()
    slow = set(judged.loc[judged["slow"], "host"])
    return sorted(worst.index, key=lambda h: (h not in slow, worst[h] if h in slow else 0, h))


def node_matrix(judged: pd.DataFrame, host: str, column: str = "ratio") -> pd.DataFrame:
    """``column`` of one node's pairs as a source × destination table over every GPU of the node (the diagonal
    empty)."""
    mine = judged[judged["host"] == host]
    gpus = sorted(set(mine["gpu_index"]) | set(mine["peer_index"]))
    wide = mine.pivot_table(index="gpu_index", columns="peer_index", values=column, aggfunc="first")
    return wide.reindex(index=gpus, columns=gpus)


def _gbps(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 10 else f"{value:.0f}"


def slow_link_sentences(judged: pd.DataFrame, limit: int | None = None) -> list[str]:
    """One sentence per slow link, slowest first, with what the witness saw on it: 'node-3: GPU 2 → GPU 5 at 0.51× the
    NVLink 4 ×18 median (201 GB/s against 394 GB/s; ce_write · 268,435,456 elements); NVLink 2 CRC errors +12.'
    ('no cause observed', 'conditions not observed')."""
    slow = judged[judged["slow"]].sort_values("ratio", kind="stable")
    seen = slow["conditions"] if "conditions" in slow else pd.Series([None] * len(slow), index=slow.index)
    sentences = [f"{r.host}: GPU {r.gpu_index} → GPU {r.peer_index} at {r.ratio:.2f}× the {r.link} median "
                 f"({_gbps(r.value)} GB/s against {_gbps(r.median)} GB/s; {r.label}{_limit_words(r)}); "
                 f"{causes.board_cause([c])}."
                 for r, c in zip(slow.itertuples(), seen, strict=True)]
    return sentences[:limit] if limit else sentences


def _limit_words(link) -> str:
    """'; 45 % of 18 NVLink 4 links': the pair's figure against its link's limit (``normal.words``), where known."""
    said = normal.words({"direction": "peer", "link": link.link, "gbps": link.value}, recordings=())
    return f"; {said}" if said else ""


def summary(judged: pd.DataFrame) -> str:
    """The matrix in one sentence: how many links of how many nodes, and how many are slow."""
    if judged.empty:
        return "No node run of this fleet measured links between GPUs."
    nodes, pairs, slow = judged["host"].nunique(), len(judged), int(judged["slow"].sum())
    types = ", ".join(f"{n} {link}" for link, n in judged["link"].value_counts().items())
    verdict = (f"{slow} {'is' if slow == 1 else 'are'} more than {SLOW_FLOORS:g} run-to-run floor below the median "
               "of its link type" if slow else f"every judged link is within {SLOW_FLOORS:g} run-to-run floor of the "
               "median of its link type")
    return f"{pairs} links between GPUs on {nodes} node{'s' if nodes != 1 else ''} ({types}): {verdict}."
