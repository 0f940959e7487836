"""Every run PinPoint can show or compare: the runs store's, and the recordings bundled with the app
(``assets/replay`` for the pages' replay, ``assets/runs`` for reviews, ``assets/fleet`` and ``assets/noise`` for
the Fleet page's bundled boards, so each of them opens in Compare), which stay files in git and are marked as
bundled. A bundled run id belongs to its file: a stored run with that id and other content is refused, so
what the catalog lists and what it loads are always the same run. No Streamlit, no CUDA."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gpu.core import boards, paths, schema
from gpu.core.access import Actor
from gpu.core.text import shorten
from gpu.results.exchange import runfiles, sqlite_store
from gpu.results.persistence import legacy
from gpu.results.persistence.store import RunStore, SaveResult, StoreError

ASSETS = paths.ASSETS
BUNDLED_DIRS = (ASSETS / "replay", ASSETS / "runs", ASSETS / "fleet", ASSETS / "noise")
# The Fleet page's bundled boards: loaded like the others (so Compare opens the runs the Fleet page links to), listed
# only where asked (``runs(with_reference=True)``), so the Runs page, Compare's lists and a run's history stay the
# review recordings.
REFERENCE_DIRS = ("fleet", "noise")
CATALOG_COLUMNS = ["run_id", "experiment", "device_name", "driver_version", "host", "timestamp", "points", "label",
                   "notes", "origin", "profile", "git_commit", "source", "gpu_uuid", "boards", "fleet_id", "suite"]


def read_bundled(directories=BUNDLED_DIRS, already_read: dict[Path, pd.DataFrame] | None = None) \
        -> tuple[dict[str, pd.DataFrame], dict[str, str], list[str]]:
    """run_id → frame and run_id → file name for every bundled recording, and the files that could not be read.
    ``already_read``: file → its validated frame, as the replay backend read it (read once per server, not again)."""
    already_read = {Path(path).resolve(): frame for path, frame in (already_read or {}).items()}

    def read(path: Path) -> pd.DataFrame:
        frame = already_read.get(path.resolve())
        return legacy.read_results(path) if frame is None else frame
    return _read_each(directories, read)


# What a catalog row (Catalog.bundled_rows) reads of a bundled run: listing runs (``pinpoint runs``) reads these
# columns alone. The samples are most of a file; reading and checking every recording whole cost ~1 s of CPU.
LISTED_COLUMNS = ["run_id", "experiment", "device_name", "driver_version", "host", "timestamp", "profile",
                  "git_commit", "gpu_uuid", "peer_uuid"]
LISTED_REQUIRED = ["run_id", "experiment", "device_name", "timestamp"]


def read_bundled_listing(directories=BUNDLED_DIRS) -> tuple[dict[str, pd.DataFrame], dict[str, str], list[str]]:
    """read_bundled's answer for a list of the runs only: each run's frame holds the LISTED_COLUMNS (empty where its
    file has none; a CSV file is read whole). A catalog made from it lists runs (``Catalog.runs``), never loads one."""
    return _read_each(directories, _listed_columns)


def _listed_columns(path: Path) -> pd.DataFrame:
    import pyarrow.parquet as pq

    if path.suffix == ".csv":
        return legacy.read_results(path)
    try:
        arrow_schema = pq.read_schema(path)
        names = set(arrow_schema.names)
        frame = pd.read_parquet(path, columns=[c for c in LISTED_COLUMNS if c in names])
        raw = (arrow_schema.metadata or {}).get(schema.PROVENANCE_KEY)
    except Exception as exc:  # a damaged file: one line, as read_results gives it
        raise schema.SchemaError(f"cannot read results from {path}: {exc}") from exc
    if raw is not None and "run_id" in frame.columns:  # provenance kept once per run: put back on the rows listed
        block = schema.checked_provenance_block(raw, frame["run_id"], str(path))
        frame = schema.join_provenance_frame(frame, {r: {c: v for c, v in p.items() if c in LISTED_COLUMNS}
                                              for r, p in block.items()}, str(path))
        names |= {c for p in block.values() for c in p}
    if missing := [c for c in LISTED_REQUIRED if c not in names]:
        raise schema.SchemaError(f"results are missing {', '.join(missing)}")
    return frame.reindex(columns=LISTED_COLUMNS)  # a column the file lacks is empty, as validate makes it


def _read_each(directories, read) -> tuple[dict[str, pd.DataFrame], dict[str, str], list[str]]:
    """Each recording of ``directories`` read by ``read(path)``, split into its runs; a SchemaError is a problem."""
    frames, files, problems = {}, {}, []
    for directory in directories:
        for path in sorted(Path(directory).glob("*.parquet")) + sorted(Path(directory).glob("*.csv")):
            try:
                frame = read(path)
            except schema.SchemaError as exc:
                problems.append(f"{path.name}: {exc}")
                continue
            for run_id, part in frame.groupby("run_id", sort=False):
                if str(run_id) in frames:  # a run bundled twice (a review run among the noise runs): the first dir's
                    continue
                frames[str(run_id)] = part.reset_index(drop=True)
                files[str(run_id)] = f"{Path(directory).name}/{path.name}"
    return frames, files, problems


class Catalog:
    def __init__(self, store: RunStore | None = None, directories=BUNDLED_DIRS, bundled=None):
        self.store = store if store is not None else RunStore()
        self.bundled, self.files, self.problems = bundled if bundled is not None else read_bundled(directories)
        self._bundled_rows: list[dict] | None = None  # bundled_rows(), made on first use

    def is_reference(self, run_id: str) -> bool:
        """A bundled run of ``REFERENCE_DIRS`` (the Fleet page's boards)."""
        return run_id in self.files and self.files[run_id].split("/")[0] in REFERENCE_DIRS

    def bundled_rows(self) -> list[dict]:
        """Every bundled run as a catalog row. Made once per catalog (the bundled runs never change; naming each
        run's boards cost every Runs, Compare and Fleet page view ~0.05 s of CPU); callers must not change it."""
        if self._bundled_rows is None:
            rows = []
            for run_id, frame in self.bundled.items():
                first = frame.iloc[0]
                rows.append({"run_id": run_id, "experiment": first["experiment"], "device_name": first["device_name"],
                             "driver_version": first["driver_version"], "host": first["host"],
                             "timestamp": first["timestamp"], "points": len(frame),
                             "label": f"bundled: {self.files[run_id]}",
                             "notes": None, "origin": "bundled", "profile": first["profile"],
                             "git_commit": first["git_commit"], "source": "bundled",
                             "gpu_uuid": boards.one_board(frame), "boards": tuple(boards.run_boards(frame)),
                             "fleet_id": None, "suite": None})
            self._bundled_rows = rows
        return self._bundled_rows

    def runs(self, experiment: str | None = None, with_store: bool = True, with_reference: bool | set = False) \
            -> pd.DataFrame:
        """Stored and bundled runs, newest first; ``with_store=False``: the bundled ones only (what a page still
        serves when the store failed). ``with_reference``: the Fleet page's bundled boards too (True), or those of
        them whose ids are in the set (the runs a link names)."""
        stored = (self.store.runs(experiment) if with_store else pd.DataFrame(columns=CATALOG_COLUMNS)) \
            .assign(origin="stored")
        rows = [row for row in self.bundled_rows()
                if not (experiment and row["experiment"] != experiment)
                and not (self.is_reference(row["run_id"]) and not (with_reference is True or (
                    with_reference and row["run_id"] in with_reference)))]
        bundled = pd.DataFrame(rows, columns=CATALOG_COLUMNS)
        # A bundled run imported into the store is listed once, as stored (it keeps the store's label).
        bundled = bundled[~bundled["run_id"].isin(set(stored["run_id"]))]
        parts = [p for p in (stored.reindex(columns=CATALOG_COLUMNS), bundled) if not p.empty]
        if not parts:
            return pd.DataFrame(columns=CATALOG_COLUMNS)
        table = pd.concat(parts, ignore_index=True)
        return table.sort_values("timestamp", ascending=False).reset_index(drop=True)

    def save(self, frame: pd.DataFrame, source: str, label: str | None = None, notes: str | None = None,
             replace: bool = False, fleet: tuple[str, str] | None = None, suite_text: str | None = None,
             actor: Actor | None = None, lease=None, params: dict | None = None,
             gpus: str | None = None) -> list[SaveResult]:
        """The store's save, refusing a run that would shadow a bundled run of the same id with other content."""
        self._refuse_shadowing(frame)
        return self.store.save(frame, source, label, notes, replace=replace, fleet=fleet, suite_text=suite_text,
                               actor=actor, lease=lease, params=params, gpus=gpus)

    def trash(self, actor: Actor, run_ids: list[str]) -> list[str]:
        """The store's trash, naming a bundled run (a file in git, which no one trashes) as such."""
        for run_id in run_ids:
            if run_id in self.bundled and not self.store.has_run(run_id):
                raise StoreError(f"run {shorten(run_id)} is bundled with PinPoint ({self.files[run_id]}, a file in "
                                 "git): it cannot be moved to the trash; nothing was changed")
        return self.store.trash(actor, run_ids)

    def _refuse_shadowing(self, frame: pd.DataFrame) -> None:
        for run_id, part in frame.groupby("run_id", sort=False):
            bundled = self.bundled.get(str(run_id))
            if bundled is not None and runfiles.manifest(part)[str(run_id)] != runfiles.manifest(bundled)[str(run_id)]:
                raise StoreError(f"run {shorten(str(run_id))} is bundled with PinPoint ({self.files[str(run_id)]}) "
                                 "and this one differs from it: a stored run cannot shadow a bundled one; give it "
                                 "another run id")

    def import_store(self, name: str, path, actor: Actor | None = None) -> list[SaveResult]:
        """Every run of another PinPoint runs store (a fleet's SQLite file brought back from a GPU machine), each
        with its label, notes, fleet id and suite, through the import contract (``sqlite_store.read_store``) and stored
        in one transaction: the whole file or nothing."""
        batches = sqlite_store.read_store(name, path)
        for frame, *_ in batches:
            self._refuse_shadowing(frame)
        return self.store.save_batches(batches, "import", actor=actor)

    def load(self, run_id: str) -> pd.DataFrame:
        """A run by id, bundled or stored; gpu.results.persistence.store.StoreError when there is none."""
        if run_id in self.bundled:
            return self.bundled[run_id]
        return self.store.load(run_id)

