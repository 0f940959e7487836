"""Fleet: every board of a fleet against the median of its GPU model (a heatmap in run-to-run floors), the boards
that are off named in words with the provenance that differs, boards of one model that fall into groups, each
board's drift over time, and a board opened against the fleet's median board in Compare. A stored fleet's figures come
from the parameters each of its runs was measured with (read from the store with its points): a view never parses
the fleet's suite; a run whose parameters cannot be read is named in one line, and the rest of the fleet shown."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from gpu.core.text import plain
from gpu.experiments import suites
from gpu.present.charts import fleet as fleet_charts
from gpu.present.fleet import boards as fleet_results
from gpu.results.exchange.catalog import BUNDLED_DIRS
from gpu.results.persistence.store import StoreError
from pages import _fleet_links as fleet_links_section
from pages import _ui as ui

BUNDLED = "bundled boards"
STORED = "stored runs: every board's newest"
BUNDLED_SUITE = "health"
MAX_PROBLEMS = 10  # runs named for parameters that cannot be read; the rest counted
STAGE_HEATMAP_PX = 600  # with the title and a two-line takeaway, the stage fits 1920×960

page = ui.Page("Fleet: which boards are off")
catalog = page.catalog()
try:
    stored = catalog.store.runs()
except StoreError as exc:
    ui.show_reasons([str(exc)], "The runs store cannot be read")
    st.stop()


@st.cache_resource(show_spinner=False)
def health_plan() -> fleet_results.Plan:
    """The built-in health suite's figures (a file shipped with PinPoint, read once per process): what the bundled
    boards and every stored board's newest runs are judged on."""
    return fleet_results.Plan.of_suite(suites.load(BUNDLED_SUITE))


@st.cache_resource(show_spinner="Reading the bundled boards…")
def bundled_fleet():
    """The runs bundled with PinPoint as one fleet (the catalog's bundled runs: assets/fleet, the replay recordings,
    review runs and the noise runs of more H200 boards, read once for Compare and this page), judged on the health
    suite's figures they hold; and each run's file."""
    plan = health_plan()
    return fleet_results.build(fleet_results.points(catalog.bundled.values(), plan), plan), catalog.files, plan


@st.cache_resource(show_spinner="Reading the fleet's runs…", max_entries=8, ttl=600)
def stored_fleet(fleet_id: str, suite_name: str, _run_ids: tuple, fingerprint: tuple):
    """A stored fleet: its runs' parameters and points, each read in bulk once per fleet and store state
    (``fingerprint``); every stored board's newest runs are judged on the health suite's figures."""
    plan = health_plan() if fleet_id == STORED else \
        fleet_results.stored_plan(catalog.store, list(_run_ids), suite_name)
    return fleet_results.build(fleet_results.stored_points(catalog.store, list(_run_ids), plan), plan), plan


@st.cache_resource(show_spinner=False, max_entries=64, ttl=600)
def board_history(board: str, fleet_id: str, _plan, _run_ids: tuple, fingerprint: tuple):
    """The points of a board's other stored runs (its drift), read when the board is shown, once per store state
    and fleet (whose figures ``_plan`` names)."""
    return fleet_results.stored_points(catalog.store, list(_run_ids), _plan)


@st.cache_resource(show_spinner=False, max_entries=8, ttl=600)
def fleet_words(_fleet, key: tuple) -> dict:
    """What the page says of a whole fleet, worked out once per fleet for all sessions (``key``: the choice and
    the store state the fleet was read in): outliers and groups in words, the provenance that differs, the boards
    with drift and the furthest outliers. Shared: callers must not change them."""
    return {"sentences": fleet_results.outlier_sentences(_fleet), "grouped": fleet_results.group_sentences(_fleet),
            "provenance": fleet_results.provenance_differences(_fleet),
            "drifting": fleet_results.drift_summary(_fleet), "outliers": fleet_results.outliers(_fleet)}


@st.cache_resource(show_spinner=False, max_entries=16, ttl=600)
def shared_heatmap(_fleet, key: tuple, title: str, *args, **kwargs):
    """The fleet's heatmap, built once per fleet (``key`` as fleet_words') and arguments for all sessions."""
    return fleet_charts.heatmap_figure(_fleet, title, *args, **kwargs)


def heatmap(fleet, key: tuple, title: str, *args, **kwargs):
    """A copy of the shared heatmap, the caller's own (ui.chart restyles it on stage)."""
    return go.Figure(shared_heatmap(fleet, key, title, *args, **kwargs))


fleets = (stored.dropna(subset=["fleet_id"]).groupby("fleet_id").agg(suite=("suite", "first"),
                                                                      newest=("timestamp", "max"))
          .sort_values("newest", ascending=False))
# Every stored board's newest runs as one fleet, fleet id or not (runs imported with `gpu.bench … --label` have none).
newest_stored = fleet_results.newest_runs(stored, health_plan().experiments) if not stored.empty else []
choices = [*fleets.index, *([STORED] if newest_stored else []), BUNDLED]
page.link_notes()
controls = ui.Section(page)
# A store of ordinary runs (no fleet id: a user's own imports and saved measurements) of one board is no fleet to
# judge: the bundled boards stay the default until the store holds a fleet, or newest runs of two boards or more.
newest = stored[stored["run_id"].isin(newest_stored)]
stored_boards = newest["gpu_uuid"].fillna(newest["host"].astype(str) + " · " + newest["device_name"].astype(str)) \
    .nunique() if newest_stored else 0
choice = controls.selectbox("Fleet", choices, "fleet_choice",
                            format_func=lambda c: c if c in (BUNDLED, STORED)
                            else f"{c} (suite {fleets.loc[c, 'suite']})",
                            index=0 if len(fleets) or stored_boards >= 2 else choices.index(BUNDLED))
if choice == BUNDLED and fleets.empty and stored_boards < 2 and not stored.empty and ui.desk():
    st.caption(f"The runs store holds {len(stored)} run{'s' if len(stored) != 1 else ''} but no fleet and no two "
               "boards to set side by side (a fleet is measured by `pinpoint fleet`), so these are the boards bundled "
               f"with PinPoint; “{STORED}” in the menu judges the stored runs instead.")

files: dict[str, str] = {}
try:
    fingerprint = (catalog.store.describe(), len(stored), str(stored["stored_at"].max()))
    if choice == BUNDLED:
        fleet, files, plan = bundled_fleet()
    elif choice == STORED:
        fleet, plan = stored_fleet(choice, BUNDLED_SUITE, tuple(newest_stored), fingerprint)
    else:
        fleet, plan = stored_fleet(choice, str(fleets.loc[choice, "suite"]),
                                    tuple(stored.loc[stored["fleet_id"] == choice, "run_id"]), fingerprint)
except (suites.SuiteError, StoreError) as exc:
    ui.show_reasons([str(exc)], "The fleet cannot be shown")
    st.stop()
for problem in plan.problems[:MAX_PROBLEMS]:  # runs left out: each named in one line, the rest is shown
    st.warning(plain(problem, None))
if len(plan.problems) > MAX_PROBLEMS:
    st.warning(f"{len(plan.problems) - MAX_PROBLEMS} more runs left out for their parameters.")
if fleet.empty:
    st.info(f"The stored runs hold none of the {BUNDLED_SUITE} suite's figures: choose “{BUNDLED}” to see the boards "
            "bundled with PinPoint." if choice == STORED else
            f"The runs of {plain(choice)} hold none of the figures of its suite.")
    page.sync()
    st.stop()

boards = fleet.boards
models = boards.groupby("model").size()

name = {BUNDLED: "Bundled boards", STORED: "Stored boards"}.get(choice, choice)
title = f"{name}: deviation from the median of each model (or group)"
fleet_key = (choice, fingerprint)  # what fleet_words() and heatmap() know the fleet by
said = fleet_words(fleet, fleet_key)
sentences, grouped = said["sentences"], said["grouped"]
named_boards = int(boards["named"].sum())
unnamed = len(boards) - named_boards
counted = (f"{named_boards} board{'s' if named_boards != 1 else ''} with a GPU UUID"
           + (f" and {unnamed} run{'s' if unnamed != 1 else ''} without one (each its own row: a run without a UUID "
              f"may be any board of its host, {', '.join(sorted(set(boards.loc[~boards['named'], 'host'])))})"
              if unnamed else ""))

if ui.presenting():  # the heatmap takes what the title and the takeaway leave of 960 px
    rows_shown = fleet_charts.stage_rows(fleet, STAGE_HEATMAP_PX)
    # The title names the boards, not the machine they were recorded on (a host name such as "vm" read as a kind of
    # board); the rows leave out the one host they share.
    part = "" if len(rows_shown) == len(boards) else f" ({len(rows_shown)} furthest of {len(boards)})"
    ui.plot(heatmap(fleet, fleet_key, f"{name}{part}: floors from the median", STAGE_HEATMAP_PX,
                            rows_shown, stage=True), key="fleet_heatmap")
    more = f" {len(sentences) - 1} more boards are beyond a floor." if len(sentences) > 1 else ""
    sizes = sorted(fleet.figures["floor"].unique())
    floors = fleet_results.percent(sizes[0]) + (f" to {fleet_results.percent(sizes[-1])}" if len(sizes) > 1 else "")
    ui.takeaway(plain(sentences[0] + more, None) if sentences
                else plain(f"{named_boards} boards with a UUID and {unnamed} runs without one: each within one "
                           f"run-to-run floor ({floors}) of its model's median"
                           f"{' or its group' + chr(39) + 's' if grouped else ''}.", None))
    page.sync()
    st.stop()

left, right = st.columns([5, 2])
with left:
    ui.chart(heatmap(fleet, fleet_key, title), key="fleet_heatmap")
with right:
    st.markdown("**Provenance: what differs**")
    provenance = said["provenance"]
    differing = provenance[provenance["differs"] != ""]
    if differing.empty:
        st.caption("Every board of a model records the same driver, PCIe link and clocks.")
    shown = (differing if not differing.empty else provenance).drop(columns=["model"])
    st.dataframe(shown[["board", "differs", *fleet_results.PROVENANCE]] if not differing.empty
                 else shown.drop(columns=["differs"]), hide_index=True, key="fleet_provenance",
                 height=min(640, 38 + 35 * len(shown)))

intro = (f"**{plain(counted, None)}** ({', '.join(f'{n} {plain(m)}' for m, n in models.items())}) on "
         f"{len(fleet.figures)} figures of the {plain(plan.title)} suite. Each cell is a board's newest value "
         f"({fleet_results.UNIT}) against the median of the boards of its model (of its group, where the model's "
         "boards split into two groups on that figure), in units of that point's run-to-run floor (Compare's, "
         f"which counts boards): here {fleet_results.floor_words(fleet)}. **Red is slower, blue faster**, white "
         f"within noise; the colours end at ±{fleet_charts.scale_end(fleet):g} floors, the largest deviation "
         "(at least one floor). An empty cell was not measured, and · marks a board that is the only one of its "
         "model to measure that figure (shown, not judged). Hover a cell for its value.")
if choice == STORED:
    intro += (" **Stored boards**: the newest stored run of each board (GPU UUID) and experiment of the health "
              "suite, with or without a fleet id; for runs without a UUID, the newest of each host and GPU model.")
if choice == BUNDLED:
    intro += (" **The bundled boards** are recorded real runs: the health suite run by `python -m gpu.bench fleet` "
              "on an H100 80GB HBM3 and an H200 on 2026-11-25 (assets/fleet, fleet id fleet-2026-11-25), "
              "the H200 replay recordings (assets/replay), the "
              "review runs (assets/runs: H100 80GB HBM3 and one H200 transfers run) and the runs of assets/noise "
              "(H200 boards, three of which record a gpu_uuid, and an earlier H100 transfers run). A run without a "
              "gpu_uuid cannot be matched to a board, so it is its own row, named by its run id.")
st.markdown(intro)

st.subheader("Outliers")
if sentences:
    st.markdown("\n".join(f"- {plain(s, None)}" for s in sentences))
    st.caption(f"A cell is an outlier beyond {fleet_results.OUTLIER_FLOORS:g} run-to-run floor of its model's median "
               f"(of its group's, where the model splits); a floor is {fleet_results.floor_words(fleet)}. Each board "
               "is named once, by its furthest cell.")
else:
    st.markdown("Every board sits within one run-to-run floor of its model's median (of its group's, where the "
                f"model splits); a floor is {plain(fleet_results.floor_words(fleet), None)}.")
st.subheader("Groups")
if grouped:
    st.markdown("\n".join(f"- {plain(s, None)}" for s in grouped))
else:
    st.markdown("No model's boards fall into groups.")
st.caption(f"Two groups: a model's values of a figure, sorted, split at their widest gap when it is wider than "
           f"{fleet_results.GROUP_GAP_FLOORS:g} run-to-run floors of the median and leaves at least two boards on "
           "each side. Each board of a group is judged against its group's median.")

fleet_links_section.show(controls, catalog, stored, choice, plan, choice == BUNDLED, BUNDLED_DIRS)

st.subheader("One board: drift, and Compare against the median board")
rows = list(boards["row"])
drifting = said["drifting"]
# the board shown first: the furthest outlier, else a board with drift to show, else the first
first_board = (said["outliers"]["board"].iloc[0] if sentences
               else drifting["board"].iloc[0] if not drifting.empty else boards["board"].iloc[0])
default_board = rows.index(boards.set_index("board").loc[first_board, "row"])
row = controls.selectbox("Board", rows, "fleet_board", index=default_board)
board = boards.loc[boards["row"] == row, "board"].iloc[0]
measured = list(dict.fromkeys(fleet.cells.loc[fleet.cells["board"] == board, "experiment"]))
mine_cells = fleet.cells[fleet.cells["board"] == board]
furthest = mine_cells.loc[mine_cells["deviation"].abs().idxmax(), "experiment"] \
    if mine_cells["deviation"].notna().any() else measured[0]
# by default, the experiment of its furthest figure
experiment = controls.selectbox("Experiment to compare", measured, "fleet_compare_experiment",
                                index=measured.index(furthest))
page.sync()

earlier = None
if choice != BUNDLED and board.named:  # the board's other stored runs of the suite's experiments
    others = stored[stored["boards"].map(lambda named: board.uuid in named)
                    & stored["experiment"].isin(plan.experiments)
                    & ~stored["run_id"].isin(set(fleet.history["run_id"]))]
    earlier = board_history(board, choice, plan, tuple(others["run_id"]), fingerprint)
drift = fleet_results.drift(fleet, board, earlier)
repeated = drift.groupby("figure")["run_id"].transform("count") >= 2 if not drift.empty else pd.Series(dtype=bool)
if drift.empty or not repeated.any():
    others = [boards.set_index("board").loc[b, "row"] for b in drifting["board"]]
    st.caption("This board has one run of each figure: its drift needs two or more. "
               + (f"Boards with drift: {plain(', '.join(others), None)}." if others
                  else "No board of this fleet has two runs of a figure."))
else:
    ui.chart(ui.cached_figure(fleet_charts.drift_figure)(drift[repeated], row), key="fleet_drift")
    worst = drift[repeated].loc[drift[repeated]["floors"].abs().idxmax()]
    st.caption(f"{drift[repeated]['run_id'].nunique()} runs of this board (of "
               f"{drift[repeated]['experiment'].nunique()} experiments); its largest move from its own median: "
               f"{plain(worst['label'], None)} {worst['change']:+.1%} ({worst['floors']:+.1f} one-board floors).")

listed = set(catalog.runs(with_reference=True)["run_id"])
mine = fleet.cells[(fleet.cells["board"] == board) & (fleet.cells["experiment"] == experiment)]
candidate = str(mine["run_id"].iloc[0]) if not mine.empty else None
nearest = fleet_results.median_board(fleet, board, experiment, listed)
if nearest is None:
    st.caption(f"No other {plain(boards.loc[boards['board'] == board, 'model'].iloc[0])} board has a run of "
               f"{plain(experiment)} that Compare lists and that shares a point with this board's (the same sizes, "
               "settings and timer): there is no median board to compare with.")
else:
    baseline, baseline_board = nearest
    baseline_row = boards.loc[boards["board"] == baseline_board, "row"].iloc[0]
    st.caption(f"The fleet's median board for {plain(experiment)}: {plain(baseline_row, None)}, whose run shares "
               f"points (settings and timer) with this board's and whose figures sit nearest the medians (run "
               f"{plain(baseline)}). Compare takes runs, so it compares that run "
               f"with this board's run {plain(candidate)}, never a made-up median run.")
    if candidate not in listed:
        st.caption(f"Compare lists the runs store and the bundled runs; this board's run "
                   f"{plain(candidate)} ({plain(files.get(candidate, 'stored'), None)}) is not among them.")
    elif baseline == candidate:
        st.caption("This board is the median board.")
    else:
        st.page_link("pages/compare.py", label="Open in Compare: this board against the median board",
                     icon=":material/compare_arrows:",
                     query_params={"compare_experiment": experiment, "compare_baseline": baseline,
                                   "compare_candidates": candidate})

with st.expander("Every board and its runs"):
    table = boards[["row", "model", "host", "gpu_uuid", "runs"]].rename(columns={"row": "board"})
    if files:
        table["files"] = [", ".join(files.get(r, "stored") for r in runs.split(", ")) for runs in table["runs"]]
    st.dataframe(table, hide_index=True, key="fleet_boards")
