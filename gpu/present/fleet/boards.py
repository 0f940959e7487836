"""A fleet's boards side by side: one value per (board, headline figure of a suite), each figure's median over the
boards of one GPU model, and each cell's deviation from it in units of that point's run-to-run floor; outliers and
groups in words, the provenance that differs, and each board's drift over time. No Streamlit, no CUDA.

Generic over experiments: a figure is one point key of a suite run (the experiment's KEY_COLUMNS), labelled and
judged as Compare labels and judges points (``compare.point_label``, ``compare.point_kind``, ``compare.floor``).
Every value is the measured GB/s of the point's row (host-memory latency too: bytes chased per second), so higher
is faster everywhere.

Which points are figures, and in which order, is a ``Plan`` (``gpu.present.fleet.plan``): from a suite, or for a
stored fleet from the parameters each of its runs was measured with; a view never parses a stored fleet's suite.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpu.core import schema
from gpu.core.boards import Board
from gpu.present.fleet.plan import NOT_RECORDED, Plan, stored_plan  # noqa: F401 (the Fleet page's names, here)
from gpu.results.analysis import bands, causes, compare, normal
from gpu.results.persistence.store import RunStore

UNIT = "GB/s"
OUTLIER_FLOORS = 1.0  # a cell further than one run-to-run floor from its model's median is named
GROUP_GAP_FLOORS = 2.0  # two groups: sorted values split by a gap wider than two floors, at least 2 boards a side
MIN_BOARDS = 2  # a model's median needs two boards; a lone board of its model is shown, not judged
PROVENANCE = {"driver": "driver_version", "PCIe": "pcie", "SM clock max (MHz)": "sm_clock_max_mhz",
              "memory clock max (MHz)": "mem_clock_max_mhz"}
ROW_FIELDS = ["run_id", "experiment", "gbps", "median_ms", "timer", "variant", "direction", "host_memory",
              "include_alloc", "chunks", "device_name", "gpu_index", "gpu_uuid", "peer_index", "peer_uuid", "link",
              "host", "timestamp", "driver_version", "pcie_gen", "pcie_width", "sm_clock_max_mhz", "mem_clock_max_mhz",
              "pcie_gbps_theoretical", "hbm_gbps_theoretical", "conditions"]


def model_name(device_name) -> str:
    """'NVIDIA H100 80GB HBM3' → 'H100 80GB HBM3': the vendor is the same on every row."""
    name = str(device_name or "unknown GPU")
    return name[len("NVIDIA "):] if name.startswith("NVIDIA ") else name


def _text(value) -> str:
    value = schema.key_value(value)
    return "—" if value is None else str(value)


# --- the points of a fleet -----------------------------------------------------------------------------------
def suite_keys(suite) -> dict[str, set[tuple]]:
    """experiment → the point keys a suite (or plan) measures (each a heatmap column). Node runs (a node's GPUs
    together) are not a board's figures: ``fleet_links`` shows them."""
    return {experiment: set(keys) for experiment, keys in Plan.of_suite(suite).keys.items()}


def points(frames: Iterable[pd.DataFrame], suite) -> pd.DataFrame:
    """One row per measured point of ``frames`` (runs of any experiments) that ``suite`` (a suite or a ``Plan``)
    names: its figure (id, label, kind and floor), its board and the run's provenance. Other points are left
    out."""
    suite = Plan.of_suite(suite)
    wanted = suite_keys(suite)
    parts = []
    for frame in frames:
        if frame.empty:
            continue
        for experiment, rows in frame.groupby("experiment", sort=False):
            if experiment not in wanted:
                continue
            keys = [tuple(schema.key_value(v) for v in values)
                    for values in zip(*(rows[c] for c in compare.key_columns(experiment)), strict=True)]
            keep = [k in wanted[experiment] for k in keys]
            if any(keep):
                part = rows.reindex(columns=_fields(suite))[keep].copy()
                part["key"] = [k for k, kept in zip(keys, keep, strict=True) if kept]
                parts.append(part)
    if not parts:
        return pd.DataFrame(columns=[*_fields(suite), "key", "figure", "label", "full_label", "kind", "floor",
                                     "board", "model", "pcie", "when"])
    table = pd.concat(parts, ignore_index=True)
    table["figure"] = [f"{e}|{k!r}" for e, k in zip(table["experiment"], table["key"], strict=True)]
    first = table.drop_duplicates("figure").set_index("figure")
    records = first.to_dict("index")
    labels = {f: compare.point_label(r["experiment"], r) for f, r in records.items()}
    kinds = {f: compare.point_kind(r["experiment"], r) for f, r in records.items()}
    table["label"] = table["figure"].map(_short_labels(labels, records))
    table["full_label"] = table["figure"].map(labels)
    table["kind"] = table["figure"].map(kinds)
    table["floor"] = table["kind"].map(compare.floor)  # between boards: the floor that counts boards
    # A row's board is its own device's (a peer row's source GPU), never its run's first row's.
    table["board"] = [Board.of(u, r) for u, r in zip(table["gpu_uuid"], table["run_id"], strict=True)]
    table["model"] = table["device_name"].map(model_name)
    table["pcie"] = [f"Gen{_text(g)} ×{_text(w)}" for g, w in zip(table["pcie_gen"], table["pcie_width"], strict=True)]
    table["when"] = pd.to_datetime(table["timestamp"], utc=True, errors="coerce", format="mixed")
    return table


def _short_labels(labels: dict[str, str], records: dict[str, dict]) -> dict[str, str]:
    """Each figure's label without the parts (' · '-separated) that every figure of its experiment shares
    ('strided · block 256 · 67,108,864 elements · stride 64' → 'strided · stride 64'); the first part stays."""
    by_experiment: dict[str, list[str]] = {}
    for figure, record in records.items():
        by_experiment.setdefault(record["experiment"], []).append(figure)
    short = {}
    for figures in by_experiment.values():
        split = {f: labels[f].split(" · ") for f in figures}
        shared = set.intersection(*(set(parts[1:]) for parts in split.values())) if len(figures) > 1 else \
            set(next(iter(split.values()))[1:])
        for figure, parts in split.items():
            short[figure] = " · ".join([parts[0], *(p for p in parts[1:] if p not in shared)])
    return short


def stored_points(store: RunStore, run_ids: list[str], suite) -> pd.DataFrame:
    """``points`` of stored runs, through the store's bulk read (only the fields the Fleet page needs, not the
    samples): a fleet's history is hundreds of runs, and ``RunStore.load`` of each would take seconds."""
    return points([store.points(run_ids, _fields(suite), samples=False)], suite)


def _fields(suite) -> list[str]:
    """The row fields a fleet reads: ``ROW_FIELDS`` and every key column of the plan's experiments."""
    return list(dict.fromkeys(ROW_FIELDS + [c for experiment in Plan.of_suite(suite).experiments
                                            for c in compare.key_columns(experiment)]))


# --- the fleet: boards, cells, deviations -------------------------------------------------------------------
@dataclass
class Fleet:
    cells: pd.DataFrame  # one row per (board, figure): the newest value, the model's median, ratio, deviation
    boards: pd.DataFrame  # one row per board: label, model, host, uuid, runs, provenance
    figures: pd.DataFrame  # one row per figure, in suite order: id, label, kind, floor, experiment
    history: pd.DataFrame  # every point of the boards over time (the drift)

    @property
    def empty(self) -> bool:
        return self.cells.empty


def build(table: pd.DataFrame, suite, history: pd.DataFrame | None = None) -> Fleet:
    """The fleet of ``table`` (``points`` of its runs): each board's newest value of each figure, judged against
    the median of the boards of its model. ``history``: more points of the same boards (earlier runs), for drift."""
    history = table if history is None else pd.concat([table, history], ignore_index=True).drop_duplicates(
        subset=["run_id", "figure"])
    order = {f"{experiment}|{key!r}": i for i, (experiment, key) in enumerate(
        (experiment, key) for experiment, keys in Plan.of_suite(suite).keys.items() for key in keys)}
    if table.empty:
        empty = pd.DataFrame()
        return Fleet(empty, empty, empty, history)
    newest = table.sort_values("when", kind="stable").drop_duplicates(["board", "figure"], keep="last")
    cells = newest[["board", "figure", "experiment", "label", "full_label", "kind", "floor", "model", "gbps", "run_id",
                    "when"]].assign(conditions=causes.of_frame(newest))
    cells = cells.rename(columns={"gbps": "value"}).reset_index(drop=True)
    by_model = cells.groupby(["model", "figure"])["value"]
    cells["median"] = by_model.transform("median")
    cells["boards_of_model"] = by_model.transform("count")
    # Where a model's boards fall into two groups on a figure, a board is judged against the median of its own
    # group: the model's median would sit in the gap and name every board of both groups.
    cells["group"] = ""
    for _, part in cells.groupby(["model", "figure"], sort=False):
        split = _split(part)
        if split is not None:
            low, high = split
            cells.loc[low.index, ["group", "median"]] = ["low", float(low["value"].median())]
            cells.loc[high.index, ["group", "median"]] = ["high", float(high["value"].median())]
    bands.against_median(cells, cells["boards_of_model"] >= MIN_BOARDS)
    figures = (cells.drop_duplicates("figure")[["figure", "experiment", "label", "full_label", "kind", "floor"]]
               .assign(order=lambda f: f["figure"].map(order)).sort_values("order").reset_index(drop=True))
    boards = _boards(newest)
    cells["row"] = cells["board"].map(boards.set_index("board")["row"])
    return Fleet(cells, boards, figures.drop(columns="order"), history)


def _boards(newest: pd.DataFrame) -> pd.DataFrame:
    """One row per board (host · model · UUID tail; 'no UUID · run …' for a run that records none), with the
    provenance of its newest run; per model the boards with a UUID first, then by host."""
    rows = []
    for board, part in newest.sort_values("when").groupby("board", sort=False):
        last = part.iloc[-1]
        tail = board.tail if board.named else f"no UUID · run {board.run_id}"
        rows.append({"board": board, "row": f"{last['host']} · {last['model']} · {tail}", "model": last["model"],
                     "named": board.named, "host": str(last["host"]), "gpu_uuid": board.uuid,
                     "runs": ", ".join(sorted(part["run_id"].astype(str).unique())),
                     "driver": _text(last["driver_version"]), "PCIe": last["pcie"],
                     "SM clock max (MHz)": _text(last["sm_clock_max_mhz"]),
                     "memory clock max (MHz)": _text(last["mem_clock_max_mhz"])})
    # per model, the boards with a UUID first, then the runs without one (which may be any board of their host)
    table = pd.DataFrame(rows).sort_values(["model", "named", "host", "row"], ascending=[True, False, True, True]) \
        .reset_index(drop=True)
    # Two boards whose rows read alike (one host, one model, runs without a UUID) stay two rows.
    table["row"] = table["row"].where(~table["row"].duplicated(keep=False),
                                      table["row"] + " · " + table.groupby("row").cumcount().add(1).astype(str))
    return table


def provenance_differences(fleet: Fleet) -> pd.DataFrame:
    """Per board, the provenance fields (driver, PCIe generation and width, clocks); ``differs`` names the fields
    where a board's value is not the most common one among the boards of its model."""
    if fleet.empty:
        return pd.DataFrame()
    table = fleet.boards[["row", "model", *PROVENANCE]].copy()
    differs = []
    for _, board in table.iterrows():
        peers = table[table["model"] == board["model"]]
        differs.append(", ".join(f for f in PROVENANCE if len(peers) > 1 and board[f] != peers[f].mode().iloc[0]))
    table["differs"] = differs
    return table.rename(columns={"row": "board"})


def matrix(fleet: Fleet, column: str = "deviation") -> pd.DataFrame:
    """``column`` of each cell as a board × figure table (rows in board order, columns in suite order)."""
    wide = fleet.cells.pivot_table(index="row", columns="figure", values=column, aggfunc="first", dropna=False)
    return wide.reindex(index=list(fleet.boards["row"]), columns=list(fleet.figures["figure"]))


# --- outliers in words ---------------------------------------------------------------------------------------
def outliers(fleet: Fleet, threshold: float = OUTLIER_FLOORS) -> pd.DataFrame:
    """The cells further than ``threshold`` floors from their model's median, furthest first."""
    if fleet.empty:
        return fleet.cells
    far = fleet.cells[fleet.cells["deviation"].abs() > threshold]
    return far.reindex(far["deviation"].abs().sort_values(ascending=False).index)


def percent(fraction: float) -> str:
    """A floor as a percentage: 0.035 → '3.5 %', 0.545 → '54.5 %'."""
    return f"{fraction * 100:.3g} %"


def floor_words(fleet: Fleet) -> str:
    """The sizes of the fleet's run-to-run floors and how many figures each applies to, largest share first:
    '3.5 % (14 figures), 54.5 % (8 figures: pageable copies) and 16 % (1 figure)'."""
    counts = fleet.figures["floor"].value_counts()
    parts = [f"{percent(floor)} ({n} figure{'s' if n != 1 else ''})" for floor, n in counts.items()]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _figure_words(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"


def outlier_sentences(fleet: Fleet, threshold: float = OUTLIER_FLOORS, limit: int | None = None) -> list[str]:
    """One sentence per board with an outlier: its furthest cell against the model's median, the provenance that
    its run records unlike the other boards of its model (when any does), and how many more cells are out."""
    far = outliers(fleet, threshold)
    if far.empty:
        return []
    boards = fleet.boards.set_index("board")
    sentences = []
    for board, part in far.groupby("board", sort=False):
        cell = part.iloc[0]
        info = boards.loc[board]
        who = board.words(info["host"]) if board.named else \
            f"The {info['model']} of run {board.run_id} on {info['host']}"
        side = "slower" if cell["deviation"] < 0 else "faster"
        whose = f"the {cell['group']} group of {info['model']} boards'" if cell["group"] else f"the {info['model']}"
        seen = causes.board_cause(part["conditions"])  # what the witness saw on its off cells, or that it saw none
        # the figure against its limit and the bundled recording of its model, from its measured row
        row = fleet.history[(fleet.history["run_id"] == cell["run_id"]) & (fleet.history["figure"] == cell["figure"])]
        limits = normal.words(row.iloc[0].to_dict()) if not row.empty else ""
        sentence = (f"{who}: {cell['label']} ({cell['experiment']}) {_figure_words(cell['value'])} {UNIT}"
                    f"{f' ({limits})' if limits else ''}, "
                    f"{cell['ratio']:.2f}× {whose} median of {_figure_words(cell['median'])} "
                    f"({abs(cell['deviation']):.1f} run-to-run floors of {percent(cell['floor'])} {side}); {seen}.")
        sentence += " " + _provenance_words(fleet, board)
        if len(part) > 1:
            sentence += f" {len(part) - 1} more of its figures are beyond {threshold:g} floor" + \
                        ("s" if threshold != 1 else "") + "."
        sentences.append(sentence)
    return sentences[:limit] if limit else sentences


def _provenance_words(fleet: Fleet, board: str) -> str:
    table = fleet.boards
    mine = table[table["board"] == board].iloc[0]
    peers = table[(table["model"] == mine["model"]) & (table["board"] != board)]
    if peers.empty:
        return "No other board of its model to compare its provenance with."
    ours, theirs = [], []
    for field in PROVENANCE:
        common = peers[field].mode().iloc[0]
        if mine[field] != common:
            name = field.split(" (")[0]
            unit = " MHz" if "MHz" in field else ""
            ours.append(f"{name} {mine[field]}{unit}")
            theirs.append(f"{common}{unit}" if field != "PCIe" else f"{name} {common}")
    if not ours:
        return "Its run records the same driver, PCIe link and clocks as the others."
    return f"Its run records {', '.join(ours)}, the others {', '.join(theirs)}."


# --- groups --------------------------------------------------------------------------------------------------
def groups(fleet: Fleet, gap_floors: float = GROUP_GAP_FLOORS) -> pd.DataFrame:
    """Boards of one model that fall into two groups on a figure. The rule: sort the model's values of the figure;
    where the widest gap between neighbours is larger than ``gap_floors`` run-to-run floors (of the median) and
    leaves at least two boards on each side, the boards below it and above it are two groups. One row per
    (model, figure) that splits, with each group's boards and median."""
    rows = []
    if fleet.empty:
        return pd.DataFrame(rows)
    for (model, figure), part in fleet.cells.groupby(["model", "figure"], sort=False):
        split = _split(part, gap_floors)
        if split is None:
            continue
        low, high = split
        rows.append({"model": model, "figure": figure, "label": part["label"].iloc[0],
                     "low": float(low["value"].median()), "high": float(high["value"].median()),
                     "low_boards": list(low["row"]), "high_boards": list(high["row"]),
                     "gap": float(high["value"].median() / low["value"].median() - 1)})
    return pd.DataFrame(rows)


def _split(part: pd.DataFrame, gap_floors: float = GROUP_GAP_FLOORS) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """The cells of one (model, figure) below and above their widest gap, when it splits them into two groups
    (``groups`` gives the rule); None otherwise."""
    if len(part) < 4:
        return None
    part = part.sort_values("value")
    values = part["value"].to_numpy()
    gaps = np.diff(values)
    cut = int(np.argmax(gaps[1:-1])) + 1
    if gaps[cut] <= gap_floors * part["floor"].iloc[0] * float(np.median(values)):
        return None
    return part.iloc[:cut + 1], part.iloc[cut + 1:]


def group_sentences(fleet: Fleet) -> list[str]:
    found = groups(fleet)
    return [f"{g['label']} on {g['model']} boards: {len(g['low_boards'])} at {_figure_words(g['low'])} {UNIT}, "
            f"{len(g['high_boards'])} at {_figure_words(g['high'])} {UNIT} ({g['gap']:+.1%} apart)."
            for g in found.to_dict("records")]


# --- drift and the median board ---------------------------------------------------------------------------
def drift(fleet: Fleet, board: str, earlier: pd.DataFrame | None = None) -> pd.DataFrame:
    """A board's figures over time: each run's value, and its change from the board's own median of that figure
    (over every run of it) in percent and in one-board run-to-run floors (where one was measured). ``earlier``:
    more ``points`` of the board (its other stored runs), read for this board only."""
    mine = fleet.history[fleet.history["board"] == board]
    if earlier is not None and not earlier.empty:
        mine = pd.concat([mine, earlier[earlier["board"] == board]], ignore_index=True).drop_duplicates(
            subset=["run_id", "figure"])
    mine = mine.sort_values("when", kind="stable")
    if mine.empty:
        return pd.DataFrame(columns=["when", "figure", "experiment", "label", "value", "change", "floors", "run_id"])
    out = mine[["when", "figure", "experiment", "label", "kind", "gbps", "run_id"]].rename(
        columns={"gbps": "value"}).copy()
    out["median"] = out.groupby("figure")["value"].transform("median")
    out["change"] = out["value"] / out["median"] - 1
    out["floors"] = out["change"] / out["kind"].map(lambda k: compare.floor(k, one_board=True))
    return out.reset_index(drop=True)


def drift_summary(fleet: Fleet) -> pd.DataFrame:
    """Per board with two or more runs of a figure: the runs, and the largest drift from its own median (in
    percent and one-board floors), so a page can say which boards moved: ``drift`` of every board at once."""
    history = fleet.history.sort_values("when", kind="stable").reset_index(drop=True)
    history = history[history.groupby(["board", "figure"], sort=False)["run_id"].transform("count") >= 2]
    if history.empty:
        return pd.DataFrame(columns=["board", "runs", "figure", "change", "floors"])
    change = history["gbps"] / history.groupby(["board", "figure"], sort=False)["gbps"].transform("median") - 1
    floors = change / history["kind"].map({k: compare.floor(k, one_board=True) for k in history["kind"].unique()})
    worst = floors.abs().groupby(history["board"], sort=False).idxmax().to_numpy()  # of equals, the oldest
    table = history.loc[worst, ["board", "label"]].assign(change=change.loc[worst], floors=floors.loc[worst])
    table.insert(1, "runs", history.groupby("board", sort=False)["run_id"].nunique().to_numpy())
    return fleet.boards[["board"]].merge(table.rename(columns={"label": "figure"}), on="board")  # in board order


def median_board(fleet: Fleet, board: str, experiment: str, listed: set[str] | None = None) -> tuple[str, str] | None:
    """For Compare (which takes two runs, never a made-up median): the run of ``experiment`` of the board of
    ``board``'s model that shares a point with the board's run and whose figures sit nearest the medians (smallest
    mean |deviation| in floors), and that board; among the runs in ``listed`` (those Compare can open) when given.
    None when there is no such run."""
    cells = fleet.cells
    model = cells.loc[cells["board"] == board, "model"].iloc[0]
    figures = set(cells.loc[(cells["board"] == board) & (cells["experiment"] == experiment), "figure"])
    # only runs that share a point with the board's run (the same settings and timer): Compare compares points
    peers = cells[(cells["model"] == model) & cells["figure"].isin(figures) & (cells["board"] != board)]
    if listed is not None:
        peers = peers[peers["run_id"].isin(listed)]
    if peers.empty:
        return None
    distance = peers.assign(far=(peers["ratio"] - 1).abs() / peers["floor"]).groupby(["board", "run_id"])["far"].mean()
    nearest_board, run_id = distance.idxmin()
    return run_id, nearest_board


def newest_runs(runs: pd.DataFrame, experiments) -> list[str]:
    """The stored runs that make every stored board a fleet, with or without a fleet id: per board (its GPU UUID)
    and experiment of ``experiments``, the newest run; for runs that record no UUID, the newest per host, GPU model
    and experiment (a run without a UUID cannot be matched to a board, so each host's newest stands for it)."""
    table = runs[runs["experiment"].isin(list(experiments))].copy()
    if table.empty:
        return []
    named = table["gpu_uuid"].map(lambda u: isinstance(u, str) and bool(u))
    table["identity"] = np.where(named, table["gpu_uuid"].astype(str),
                                 "host " + table["host"].astype(str) + " · " + table["device_name"].astype(str))
    table["when"] = pd.to_datetime(table["timestamp"], utc=True, errors="coerce", format="mixed")
    newest = table.sort_values("when", kind="stable").drop_duplicates(["identity", "experiment"], keep="last")
    return list(newest["run_id"].astype(str))
