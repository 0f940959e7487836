"""A node's GPUs and links from a peer run: the source × destination matrix, one pair's size sweep, the latency and
host-link tables, and the topology in words. Pure (pandas only); the Peers page, its charts and its takeaway read
the peer experiment's rows through it.

The rows (one per measured point, schema of ``gpu.core.schema``): ``gpu_index``/``gpu_uuid`` the source GPU,
``peer_index``/``peer_uuid`` the destination (empty for copies with the host), ``link`` the path between them in words
("NVLink 4 ×18", "PCIe via host bridge", "through host (no peer access)"), ``elements`` the copy size in bytes,
``bytes`` the bytes moved counted once (nvbandwidth's convention), ``timer`` the method (one copy, or a batch of
back-to-back copies). Variants:

* one direction at a time: ``ce_read`` (copy engine, the destination pulls), ``ce_write`` (copy engine, the source
  pushes), ``sm_read``, ``sm_write`` (an SM copy kernel over peer access);
* ``ce_bidir``: both directions of a pair at once, one row per direction with its own rate;
* ``latency``: a pointer chase in the peer's memory; ``elements`` the working set (the chain's buffer),
  ``median_ms`` the time of one dependent load (a sample's time ÷ its loads, ``loads_per_sample``), ``bytes`` one 8-byte
  pointer; ``ns_per_access`` reads it;
* ``h2d_all``, ``d2h_all``: every GPU copying with the host at once, one row per GPU; ``h2d_alone``, ``d2h_alone``:
  each GPU alone, in the same sitting.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import pandas as pd

from gpu.core import text
from gpu.core.links import Link, link_of
from gpu.core.units import format_bytes
from gpu.experiments import peers

ONE_WAY = ("ce_read", "ce_write", "sm_read", "sm_write")
BIDIRECTIONAL = "ce_bidir"
LATENCY = "latency"
SWEPT = (*ONE_WAY, BIDIRECTIONAL)  # the variants of a pair's size sweep (latency is read in ns, not GB/s)
HOST = {"h2d": ("h2d_alone", "h2d_all"), "d2h": ("d2h_alone", "d2h_all")}  # direction → (alone, all at once)
LABELS = peers.SHORT_LABELS  # the declaration's words for each variant, short
HOST_WORDS = {"h2d": "copying from the host", "d2h": "copying to the host"}
SINGLE, BATCHED = "cuda_event", "cuda_event_batched_held"
CHASE = "cuda_event_held"  # the latency chase: one held launch a sample
METHODS = {BATCHED: "batched", SINGLE: "single copy", CHASE: "one launch a sample"}  # timer → words, preferred first
TIMER_OF = {"batched": BATCHED, "single": SINGLE}  # a method's short name (as links write it) → its timer
SLOW = 0.90  # a pair below this fraction of its link type's median is named as slow
HOST_LOSS = 0.05  # a GPU that loses more than this with every GPU copying at once is named


# --- what the rows hold ---------------------------------------------------------------------------------------
def ns_per_access(rows: pd.DataFrame) -> pd.Series:
    """The latency rows' reading, in ns per dependent load: their ``median_ms`` is already per load (the experiment
    divides each sample by its loads, as nvbandwidth reports its chase), so ns = median_ms × 10⁶. The one place
    that reads the convention."""
    return rows["median_ms"] * 1e6


def gpus(frame: pd.DataFrame) -> list[int]:
    """Every GPU the run names, as a source or as a destination."""
    found = pd.concat([frame["gpu_index"], frame["peer_index"]]).dropna()
    return sorted({int(v) for v in found})


def pair_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows between two GPUs (a peer named), with ``source`` and ``destination`` as whole numbers."""
    rows = frame[frame["peer_index"].notna() & frame["gpu_index"].notna()]
    return rows.assign(source=rows["gpu_index"].astype(int), destination=rows["peer_index"].astype(int))


def methods(frame: pd.DataFrame, variant: str) -> list[str]:
    """The timers a variant was measured with, batched first."""
    measured = set(frame.loc[frame["variant"] == variant, "timer"])
    return [t for t in METHODS if t in measured] + sorted(t for t in measured if t not in METHODS)


def sizes(frame: pd.DataFrame, variant: str, timer: str) -> list[int]:
    """The copy sizes (bytes) measured for a variant with a timer, smallest first."""
    rows = frame[(frame["variant"] == variant) & (frame["timer"] == timer)]
    return sorted({int(v) for v in rows["elements"].dropna()})


@dataclass(frozen=True)
class View:
    """One slice of the matrix: a variant, timed one way, at one copy size."""

    variant: str
    timer: str
    size: int

    def words(self) -> str:
        """"copy engine, destination pulls · batched · 256 MiB"."""
        return f"{LABELS.get(self.variant, self.variant)} · {METHODS.get(self.timer, self.timer)} · " \
               f"{format_bytes(self.size)}"


def default_view(frame: pd.DataFrame) -> View | None:
    """The copy engine, batched where measured, at its largest size: the figure nvbandwidth's matrix prints."""
    pairs = pair_rows(frame)
    for variant in (*ONE_WAY, BIDIRECTIONAL):
        for timer in methods(pairs, variant):
            measured = sizes(pairs, variant, timer)
            if measured:
                return View(variant, timer, measured[-1])
    return None


def matrix_rows(frame: pd.DataFrame, view: View) -> pd.DataFrame:
    """The view's rows, one per ordered pair (the newest where a point was measured twice)."""
    rows = pair_rows(frame)
    rows = rows[(rows["variant"] == view.variant) & (rows["timer"] == view.timer) & (rows["elements"] == view.size)]
    return rows.drop_duplicates(["source", "destination"], keep="last").sort_values(["source", "destination"])


def matrix(frame: pd.DataFrame, view: View, values: pd.Series | None = None) -> pd.DataFrame:
    """Source (rows) × destination (columns) over every GPU of the run: GB/s, or ``values`` (aligned with
    ``matrix_rows``, e.g. ns per access); NaN on the diagonal and for pairs not measured."""
    rows = matrix_rows(frame, view)
    shown = rows["gbps"] if values is None else values.loc[rows.index]
    every = gpus(frame)
    table = pd.DataFrame(math.nan, index=every, columns=every)
    for source, destination, value in zip(rows["source"], rows["destination"], shown, strict=True):
        table.loc[source, destination] = float(value)
    return table


def latency_view(frame: pd.DataFrame) -> View | None:
    """The latency rows' largest working set (far beyond the caches: the peer's memory itself)."""
    rows = pair_rows(frame)
    rows = rows[rows["variant"] == LATENCY]
    if rows.empty:
        return None
    timer = methods(rows, LATENCY)[0]
    return View(LATENCY, timer, sizes(rows, LATENCY, timer)[-1])


def pair_sweep(frame: pd.DataFrame, source: int, destination: int) -> pd.DataFrame:
    """One ordered pair's bandwidth rows (every swept variant, every method), by variant, timer and size."""
    rows = pair_rows(frame)
    rows = rows[(rows["source"] == source) & (rows["destination"] == destination) & rows["variant"].isin(SWEPT)]
    return rows.sort_values(["variant", "timer", "elements"])


def ordered_pairs(frame: pd.DataFrame) -> list[tuple[int, int]]:
    """The ordered pairs the run measured, in source then destination order."""
    rows = pair_rows(frame)
    return sorted({(int(s), int(d)) for s, d in zip(rows["source"], rows["destination"], strict=True)})


# --- links in words (a row's link text is read by gpu.core.links) ---------------------------------------
def pair_links(frame: pd.DataFrame) -> dict[tuple[int, int], Link]:
    """Each ordered pair's link, as its rows name it (the most common text, where rows differ)."""
    rows = pair_rows(frame)
    named: dict[tuple[int, int], Counter] = {}
    for source, destination, link in zip(rows["source"], rows["destination"], rows["link"], strict=True):
        counts = named.setdefault((int(source), int(destination)), Counter())
        if isinstance(link, str):
            counts[link] += 1
    # the most common text, the first in order where several are as common (as pandas' mode)
    return {pair: link_of(min(counts, key=lambda t: (-counts[t], t)) if counts else None)
            for pair, counts in sorted(named.items())}


def gpu_names(frame: pd.DataFrame) -> str:
    """"2 × NVIDIA H100 80GB HBM3" (or each model with its count, on a mixed node)."""
    models = frame.drop_duplicates("gpu_index").groupby("device_name").size()
    if models.empty:
        models = frame.groupby("device_name").size().clip(upper=1)
    return ", ".join(f"{count} × {name}" for name, count in models.items())


# --- the topology in words ---------------------------------------------------------------------------------------
def pair_table(frame: pd.DataFrame, view: View) -> pd.DataFrame:
    """One row per unordered pair measured both ways or one way: ``a``, ``b`` (a < b), the rates each way, the
    slower (``one_way``, what the pair can be counted on for), its link and the fraction of the median pair of its
    link type."""
    rows = matrix_rows(frame, view)
    links = pair_links(frame)
    rates = {(int(s), int(d)): float(g) for s, d, g in zip(rows["source"], rows["destination"], rows["gbps"],
                                                           strict=True)}
    out = []
    for a, b in sorted({tuple(sorted(p)) for p in rates}):
        forward, backward = rates.get((a, b), math.nan), rates.get((b, a), math.nan)
        link = links.get((a, b)) or links.get((b, a)) or link_of(None)
        out.append({"a": a, "b": b, "forward": forward, "backward": backward,
                    "one_way": min(v for v in (forward, backward) if not math.isnan(v)), "link": link.text,
                    "kind": link.kind, "words": link.words})
    table = pd.DataFrame(out, columns=["a", "b", "forward", "backward", "one_way", "link", "kind", "words"])
    if table.empty:
        return table.assign(of_median=pd.Series(dtype=float), alone_in_kind=pd.Series(dtype=bool))
    medians = table.groupby("kind")["one_way"].transform("median")
    return table.assign(of_median=table["one_way"] / medians,
                        alone_in_kind=table.groupby("kind")["one_way"].transform("size") == 1)


def topology_sentences(frame: pd.DataFrame, view: View) -> list[str]:
    """"GPU 0 ↔ GPU 1: 18 NVLinks, 391 GB/s one way, the only measured pair", one per pair; one way is the slower
    direction (the other named where it differs by more than 5 %), compared with the median pair of the same link
    type."""
    table = pair_table(frame, view)
    several = len(table) > 1
    lines = []
    for row in table.itertuples():
        line = f"GPU {row.a} ↔ GPU {row.b}: {row.words}, {row.one_way:,.0f} GB/s one way"
        other = max(row.forward, row.backward)
        if not math.isnan(row.forward) and not math.isnan(row.backward) and other > row.one_way * 1.05:
            slower, faster = (f"{row.a} → {row.b}", f"{row.b} → {row.a}") if row.forward < row.backward else \
                (f"{row.b} → {row.a}", f"{row.a} → {row.b}")
            line += f" ({slower}; {faster}: {other:,.0f} GB/s)"
        elif math.isnan(row.forward) or math.isnan(row.backward):
            line += " (measured in one direction only)"
        if not several:
            line += ", the only measured pair"
        elif row.alone_in_kind:
            line += f", the only {row.kind} pair"
        else:
            line += f", {text.percent(row.of_median)} of the median {row.kind} pair"
            if row.of_median < SLOW:
                line += ": slow"
        lines.append(line)
    return lines


def topology_summary(frame: pd.DataFrame, view: View) -> str | None:
    """"28 pairs: 27 with 18 NVLinks (NVLink 4) at 199–391 GB/s one way; 1 through host (no peer access) at 47 GB/s",
    for a node of many pairs (its sentences are listed apart)."""
    table = pair_table(frame, view)
    if table.empty:
        return None
    parts = []
    for words, part in sorted(table.groupby("words"), key=lambda item: -len(item[1])):
        low, high = f"{part['one_way'].min():,.0f}", f"{part['one_way'].max():,.0f}"
        joined = "with " if words[:1].isdigit() else "" if words.startswith("through") else \
            "by a " if words == "link not named" else "over "
        parts.append(f"{len(part)} {joined}{words} at {low if low == high else f'{low}–{high}'} GB/s one way")
    return f"{text.count(len(table), 'pair')}: " + "; ".join(parts)


def slow_pairs(frame: pd.DataFrame, view: View) -> pd.DataFrame:
    """The pairs below ``SLOW`` of the median pair of their link type, slowest first."""
    table = pair_table(frame, view)
    return table[~table["alone_in_kind"] & (table["of_median"] < SLOW)].sort_values("of_median")


# --- the node's host links --------------------------------------------------------------------------------------
def host_links(frame: pd.DataFrame) -> pd.DataFrame:
    """Per GPU and direction, alone against every GPU at once: ``gpu``, ``direction``, ``alone``, ``together`` (GB/s)
    and ``loss`` (the fraction lost together), at the largest size measured both ways, batched where it was."""
    out = []
    for direction, (alone_variant, all_variant) in HOST.items():
        rows = frame[frame["variant"].isin((alone_variant, all_variant)) & frame["gpu_index"].notna()]
        if rows.empty:
            continue
        timer = next((t for t in METHODS if t in set(rows["timer"])), rows["timer"].iloc[0])
        rows = rows[rows["timer"] == timer]
        both = set(rows.loc[rows["variant"] == alone_variant, "elements"]) & \
            set(rows.loc[rows["variant"] == all_variant, "elements"])
        if not both:
            continue
        size = max(both)
        rows = rows[rows["elements"] == size]
        for gpu, part in rows.groupby(rows["gpu_index"].astype(int)):
            alone = part.loc[part["variant"] == alone_variant, "gbps"]
            together = part.loc[part["variant"] == all_variant, "gbps"]
            if alone.empty or together.empty:
                continue
            out.append({"gpu": gpu, "direction": direction, "size": int(size), "timer": timer,
                        "alone": float(alone.iloc[-1]), "together": float(together.iloc[-1])})
    table = pd.DataFrame(out, columns=["gpu", "direction", "size", "timer", "alone", "together"])
    return table.assign(loss=1 - table["together"] / table["alone"])


def host_sentence(frame: pd.DataFrame) -> str | None:
    """The GPU that loses most copying with the host while every GPU does (where one loses more than
    ``HOST_LOSS``), or that none does; None without host rows."""
    table = host_links(frame)
    if table.empty:
        return None
    count = table["gpu"].nunique()
    everyone = "both GPUs do" if count == 2 else f"all {count} GPUs do"
    losers = table[table["loss"] > HOST_LOSS].sort_values("loss", ascending=False)
    if losers.empty:
        return (f"No GPU loses more than {text.percent(HOST_LOSS)} of its host bandwidth when {everyone} at once "
                f"({format_bytes(table['size'].max())}).")
    worst = losers.iloc[0]
    line = (f"GPU {worst['gpu']} loses {text.percent(worst['loss'])} {HOST_WORDS[worst['direction']]} when "
            f"{everyone} at once ({worst['together']:,.1f} GB/s against {worst['alone']:,.1f} alone, "
            f"{format_bytes(worst['size'])})")
    others = losers.iloc[1:]
    if not others.empty:
        named = ", ".join(f"GPU {r.gpu} {text.percent(r.loss)} {HOST_WORDS[r.direction]}"
                          for r in others.head(3).itertuples())
        line += f"; also {named}" + (" …" if len(others) > 3 else "")
    return line + "."
