"""The runs store: every run a team measures, with every sample, in SQLite (default) or PostgreSQL. This module holds
one concern, the runs repository (save, list, load, the bulk points and parameters reads, each fleet's suite text);
the engine is ``gpu.results.persistence.database``, the tables and migrations
``gpu.results.persistence.migrations``, and the changes after a save (trash, restore, purge, labels, the audit trail)
``gpu.results.persistence.changes``, whose names it re-exports.
No Streamlit and no CUDA here.

Opening never writes: listing, loading and exporting work on a read-only file or a SELECT-only role, and on a store
of an older schema version as it is; migrations run before the first write (or ``python -m gpu.bench migrate``).

A file's runs are saved in one transaction: stored whole or not at all. A run is its content
(``gpu.results.exchange.runfiles`` content hash): saving a run_id that is stored with the same content changes nothing
and says so (imports are idempotent, also when two processes race for it); with different content it is refused, saying
so, unless ``replace`` is asked for, which swaps it in the same transaction. One run is one experiment, one device model
and one timestamp; it may span several boards (a peer matrix of a node), each of which it records (``run_boards``).
Database failures become ``StoreError`` with one line for the person.

Changing (``gpu.results.persistence.changes.CheckedChanges``, part of ``RunStore``): every change takes the actor
(``gpu.core.access``) and calls ``require`` before it touches anything; it is recorded in the audit trail
(``audit_trail``) in its own transaction. ``trash`` moves runs out of the runs tables into
the trash (so no reader of runs has to leave them out), ``restore`` brings them back, ``purge`` deletes them, and
trashed runs older than ``PINPOINT_TRASH_DAYS`` (``trash_days``) are purged whenever the trash changes or by
``purge_expired``; ``set_label`` relabels a run. Bad input is one ``StoreError`` line and changes nothing.

Parameters: every writer gives each run the parameters it was measured with (``params``: run id → the checked
request's plain values, or a list of them; ``params_by_run`` makes it from a frame and its requests), kept as canonical
JSON in ``runs.params`` (at most ``MAX_PARAMS_CHARS``); a fleet run also how its suite ran it (``gpus``). They are no
part of a run's content: a run stored with the same points is the same run.

Reading: ``runs`` lists runs (``gpu_uuid``: the run's one board, empty when it names none or several; ``boards``:
every board it names; ``method_version``: the run's method version, from its rows, empty when unknown); ``load``
gives one run as a results frame (its provenance, kept once in ``runs.provenance``, back on every row); ``points``
gives the rows of many runs at once, only the fields asked for and without samples when asked (the Fleet page reads
hundreds of runs so); ``run_params`` gives the parameters of many runs at once, next to it (a value over
``MAX_PARAMS_CHARS`` is never read: its length is).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass

import pandas as pd
import sqlalchemy as sa

from gpu.core import method_versions, schema
from gpu.core.access import Actor, require
from gpu.core.errors import AccessRefused, StoreError
from gpu.core.schema import frame_rows
from gpu.core.text import shorten
from gpu.results.exchange import runfiles
from gpu.results.persistence import legacy, migrations
from gpu.results.persistence.changes import (  # noqa: F401 (the trash's names, as callers and tests know them here)
    AUDIT_COLUMNS,
    MAX_LABEL_CHARS,
    POINT_COLUMNS,
    TRASH_COLUMNS,
    TRASH_DAYS,
    CheckedChanges,
    check_text,
    to_trash,
    trash_days,
)
from gpu.results.persistence.database import (  # noqa: F401 (the engine's names, as callers and tests know them here)
    ANSWER_TIMEOUT_S,
    APP_NAME,
    CONNECT_TIMEOUT_S,
    STATEMENT_TIMEOUT_S,
    Database,
    default_url,
)
from gpu.results.persistence.migrations import (  # noqa: F401 (the tables and steps, as callers and tests know them here)
    ADDED_IN_V2,
    ADDED_IN_V7,
    ADDED_IN_V8,
    ADDED_IN_V9,
    ADDED_IN_V10,
    AUDIT,
    AUDITED_SINCE,
    BOARDS,
    FLEET_SUITES,
    META,
    METADATA,
    MIGRATIONS,
    POINTS,
    RUNS,
    SCHEMA_VERSION,
    TRASH,
    TRASH_POINTS,
    _create_v1,
    canonical_params,
    now_text,
    point_conditions,
    read_version,
    record,
    restored_row,
    stored_provenance,
    stored_rows,
)

MAX_NOTES_CHARS = 4096
MAX_SUITE_CHARS = 1_000_000  # a suite's text, as a suite file is read (gpu.experiments.suites.MAX_SUITE_BYTES)
MAX_RUN_SPAN_S = 6 * 3600
MAX_PARAMS_CHARS = 65_536  # a run's parameters as JSON: a few hundred characters in practice
# What saving a run of each source is, as an action, and where its actor is when none is given.
SAVE_ACTION = {"import": "import", "live": "measure", "runner": "measure", "fleet": "measure"}
SAVE_ACTOR_SOURCE = {"import": "cli", "live": "app", "runner": "cli", "fleet": "fleet"}
GPUS = ("one", "node")  # how a fleet's suite ran a run (``runs.gpus``)
# What ``runs`` lists: every column but a run's parameters (``run_params`` reads those, for the runs asked) and its
# provenance (read with its points).
RUN_COLUMNS = [c.name for c in RUNS.columns if c.name not in ADDED_IN_V7 | ADDED_IN_V10] + ["gpu_uuid", "boards"]
PARAMS_COLUMNS = ["run_id", "experiment", "timestamp", "gpus", "params", "params_chars"]
BULK_RUNS = 500  # run ids per query of a bulk read
SAMPLES_KEY = '"samples_ms":['


def params_by_run(frame: pd.DataFrame, *requests) -> dict[str, object]:
    """run id → the parameters ``requests`` (checked requests: ``Request``) measured, for every run of ``frame``:
    one request's plain values, or a list of them when one run was measured by several (a runner invocation)."""
    values = [r.plain() for r in requests]
    value = values[0] if len(values) == 1 else values
    return {str(run_id): value for run_id in dict.fromkeys(frame["run_id"])} if values else {}


def checked_params(run_id: str, value) -> str | None:
    """A run's parameters as ``runs.params`` keeps them (canonical JSON of an object, or a list of objects), from
    plain values or JSON text (an import's); ``StoreError`` naming the run otherwise."""
    if value is None:
        return None
    if isinstance(value, str):
        if len(value) > MAX_PARAMS_CHARS:
            raise StoreError(f"run {shorten(run_id)}: its parameters are {len(value):,} characters of JSON, over the "
                             f"limit of {MAX_PARAMS_CHARS:,}")
        try:
            value = json.loads(value)
        except (ValueError, RecursionError) as exc:  # nested past the parser's depth is not JSON it reads
            raise StoreError(f"run {shorten(run_id)}: its parameters are not JSON ({shorten(str(exc), 80)})") from None
    if not (isinstance(value, dict) or isinstance(value, list) and value and all(isinstance(v, dict) for v in value)):
        raise StoreError(f"run {shorten(run_id)}: its parameters are {shorten(value)}, not an object of parameters "
                         "(or a list of them)")
    try:
        text = canonical_params(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise StoreError(f"run {shorten(run_id)}: its parameters cannot be kept as JSON ({shorten(str(exc), 80)})") \
            from None
    if len(text) > MAX_PARAMS_CHARS or "\x00" in text:
        raise StoreError(f"run {shorten(run_id)}: its parameters are {len(text):,} characters of JSON, over the limit "
                         f"of {MAX_PARAMS_CHARS:,}, or hold a NUL character")
    return text


@dataclass(frozen=True)
class SaveResult:
    run_id: str
    stored: bool  # False: that run_id was already in the store with the same content, nothing was written
    points: int
    replaced: bool = False

    def message(self) -> str:
        if self.replaced:
            return f"replaced run {self.run_id} ({self.points} points); the replaced one is in the trash"
        return (f"stored run {self.run_id} ({self.points} points)" if self.stored else
                f"run {self.run_id} is already in the store with the same content: nothing was written")


class RunStore(CheckedChanges, Database):
    """One store (a database URL). Thread-safe through SQLAlchemy's pool; every write is one transaction.
    Opening only reads; the first write migrates."""

    def _opened(self, exists: bool) -> None:
        self.version = read_version(self) if exists else 0

    def migrate(self, actor: Actor | None = None) -> int:
        """Bring the store to SCHEMA_VERSION (one migrator at a time across processes); the version reached. A new
        store is made by its first write, whoever writes; upgrading a store that holds runs is an admin's action
        (``actor``: the person at this shell when not given). The audit trail records it."""
        if self.version >= SCHEMA_VERSION:
            return self.version
        actor = actor or Actor.local("cli")
        if self.version:
            require(actor, "migrate")
        self.version = migrations.migrate(self, actor)
        return self.version

    # --- writing ---------------------------------------------------------------------------------------------
    def save(self, frame: pd.DataFrame, source: str, label: str | None = None, notes: str | None = None,
             replace: bool = False, fleet: tuple[str, str] | None = None, suite_text: str | None = None,
             actor: Actor | None = None, lease=None, params: dict | None = None, gpus: str | None = None) \
            -> list[SaveResult]:
        """Store every run of ``frame`` (validated against the schema) in one transaction: all or nothing.
        A run stored with the same content is reported and left as it is; with different content it is
        refused unless ``replace``, which moves the stored one to the trash. ``fleet``: (fleet id, suite name) when
        a fleet measured the run; ``suite_text``: that suite's text, kept once per fleet (a fleet holds one suite:
        another text is refused). ``actor`` must be allowed to import (source import) or measure (live, runner,
        fleet); without one it is the person at this machine, from where the source says (``SAVE_ACTOR_SOURCE``).
        The audit trail records what was stored, in the same transaction. ``lease``: the fleet's
        ``leases.FleetLease``, checked in the same transaction (a command whose lease another one took stores
        nothing). ``params``: run id → the parameters each run was measured with (``params_by_run``); ``gpus``: how a
        fleet's suite ran them (``GPUS``)."""
        return self.save_batches([(frame, label, notes, fleet, suite_text, params, gpus)], source, replace, actor,
                                 lease)

    def save_batches(self, batches: list[tuple], source: str, replace: bool = False, actor: Actor | None = None,
                     lease=None) \
            -> list[SaveResult]:
        """``save`` of several frames, each with its own (label, notes, fleet, suite text[, params, gpus]), in one
        transaction: another store's file is imported whole or not at all."""
        actor = actor or Actor.local(SAVE_ACTOR_SOURCE.get(source, "cli"))
        require(actor, SAVE_ACTION.get(source, "import"))
        prepared, kept_suites = [], []
        for frame, label, notes, fleet, suite_text, *more in batches:
            params, gpus = (*more, None, None)[:2]
            if gpus is not None and gpus not in GPUS:
                raise StoreError(f"gpus must be one of {', '.join(GPUS)}, not {shorten(gpus)}")
            check_text("label", label, MAX_LABEL_CHARS)
            check_text("notes", notes, MAX_NOTES_CHARS)
            if fleet is not None:
                check_text("fleet id", fleet[0], RUNS.c.fleet_id.type.length)
                check_text("suite", fleet[1], MAX_LABEL_CHARS)
                check_text("suite text", suite_text, MAX_SUITE_CHARS)
                if suite_text is not None:
                    kept_suites.append((fleet[0], fleet[1], suite_text))
            frame = schema.validate(frame)
            prepared += [self._prepare(str(run_id), part.reset_index(drop=True), source, label, notes, fleet,
                                       checked_params(str(run_id), (params or {}).get(str(run_id))), gpus)
                         for run_id, part in frame.groupby("run_id", sort=False)]
        self.migrate(actor)
        for attempt in range(2):
            try:
                with self.engine.begin() as connection:
                    if lease is not None and not lease.holds(connection):
                        raise StoreError(f"fleet {shorten(lease.fleet_id)}'s lease is held by another command now: "
                                         "nothing was written")
                    for kept in kept_suites:
                        _keep_suite(connection, *kept)
                    results = [self._save_one(connection, *run, replace=replace, actor=actor) for run in prepared]
                    changed = [r for r in results if r.stored]
                    if changed:
                        record(connection, actor, SAVE_ACTION.get(source, "import"), [r.run_id for r in changed],
                               f"{source}: " + "; ".join(r.message() for r in changed))
                    return results
            except sa.exc.IntegrityError:
                # Another process stored one of these run_ids between our check and our insert; our
                # transaction rolled back whole. Once more, now seeing theirs.
                if attempt:
                    raise StoreError("another process kept storing the same runs at the same moment: nothing "
                                     "was written; try again") from None
            except sa.exc.SQLAlchemyError as exc:
                raise self.failure(exc, "storing runs") from None
        raise AssertionError("unreachable")

    def _save_one(self, connection, run: dict, boards: list[dict], points: list[dict], digest: str,
                  replace: bool = False, actor: Actor | None = None) -> SaveResult:
        run_id = run["run_id"]
        stored = _rows_of(connection, [run_id]).get(run_id, [])
        exists = bool(stored) or connection.execute(sa.select(RUNS.c.run_id).where(RUNS.c.run_id == run_id)).first()
        if exists:
            if runfiles.content_hash(stored) == digest:
                return SaveResult(run_id, False, run["points"])
            if not replace:
                raise StoreError(f"run {run_id} is already in the store with different content (stored: "
                                 f"{len(stored)} points, new: {run['points']} points): it differs, so nothing was "
                                 "written; replace it explicitly (--replace, or the Runs page's replace box)")
            # Replacing is trashing the stored run: the trash's role, and its own audit row (in this transaction).
            if not actor.may("replace"):
                raise AccessRefused(f"run {run_id} was not replaced, and nothing was written: "
                                    f"{actor.why_not('replace')} (it moves the stored run to the trash)")
            to_trash(connection, run_id, actor, "replaced")
            record(connection, actor, "trash", [run_id], f"trashed run {run_id} ({len(stored)} points): replaced by "
                   f"an import of {run['points']} points")
        connection.execute(RUNS.insert(), [run])
        if boards:
            connection.execute(BOARDS.insert(), boards)
        connection.execute(POINTS.insert(), points)
        return SaveResult(run_id, True, run["points"], replaced=bool(exists))

    @staticmethod
    def _prepare(run_id: str, part: pd.DataFrame, source: str, label, notes, fleet=None, params=None, gpus=None) \
            -> tuple[dict, list[dict], list[dict], str]:
        """The run's ``runs`` row, its ``run_boards`` rows, its ``points`` rows and its content hash."""
        if len(run_id) > RUNS.c.run_id.type.length or "\x00" in run_id:
            raise StoreError(f"run id {shorten(run_id)} is longer than {RUNS.c.run_id.type.length} characters or "
                             "holds a NUL character")
        for column, what in (("experiment", "experiments"), ("device_name", "devices")):
            values = {str(v) for v in part[column]}
            if len(values) != 1:
                raise StoreError(f"run {shorten(run_id)} mixes {what} ({', '.join(shorten(v) for v in sorted(values))}"
                                 f"): one run is one experiment on one device at one time")
        start, furthest, span = run_times(part["timestamp"])
        if span > MAX_RUN_SPAN_S:
            raise StoreError(f"run {shorten(run_id)} has points measured {span / 3600:,.1f} h apart "
                             f"({shorten(part['timestamp'].iloc[furthest])}): one run is one time")
        first = part.iloc[0]
        run = {"run_id": run_id, "experiment": str(first["experiment"]), "source": source, "timestamp": start,
               "stored_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "points": len(part),
               "label": label, "notes": notes, "fleet_id": fleet[0] if fleet else None,
               "suite": fleet[1] if fleet else None, "params": params, "gpus": gpus,
               "method_version": method_versions.of_run(part),
               **{c: None if pd.isna(first[c]) or first[c] == "" else str(first[c]) for c in
                  ("device_name", "driver_version", "cuda_version", "pycuda_version", "host", "git_commit",
                   "profile")}}
        rows = frame_rows(part)
        boards, kept = stored_rows(rows)
        run["provenance"], kept = stored_provenance(kept)
        for column, value in [*run.items(), *(("gpu_uuid", uuid) for _, uuid in boards)]:
            if isinstance(value, str) and "\x00" in value:
                raise StoreError(f"run {shorten(run_id)}: {column} holds a NUL character")
        points = [{"run_id": run_id, "idx": i, "variant": row["variant"], "direction": row["direction"],
                   "bytes": row["bytes"], "median_ms": row["median_ms"], "gbps": row["gbps"],
                   "row_json": json.dumps(row, separators=(",", ":"), allow_nan=False),
                   "conditions": point_conditions(row)} for i, row in enumerate(kept)]
        board_rows = [{"run_id": run_id, "position": i, "gpu_index": index, "gpu_uuid": uuid}
                      for i, (index, uuid) in enumerate(boards)]
        return run, board_rows, points, runfiles.content_hash(rows)

    # --- reading (never writes) ------------------------------------------------------------------------------
    def count_points(self) -> tuple[int, int]:
        """How many points the store holds and the characters of their rows, read without reading the rows."""
        if self.version == 0:
            return 0, 0
        try:
            with self.engine.connect() as connection:
                found = connection.execute(sa.select(sa.func.count(), sa.func.coalesce(
                    sa.func.sum(sa.func.length(POINTS.c.row_json)), 0))).first()
        except sa.exc.SQLAlchemyError as exc:
            raise self.failure(exc, "counting points") from None
        return int(found[0]), int(found[1])

    def fleet_suite(self, fleet_id: str) -> tuple[str, str] | None:
        """(suite name, suite text) that fleet ``fleet_id`` was measured with; None when the store keeps none
        (a fleet stored before fleets kept their suite's text, or no such fleet)."""
        if self.version < 4:
            return None
        try:
            with self.engine.connect() as connection:
                found = connection.execute(sa.select(FLEET_SUITES.c.name, FLEET_SUITES.c.toml)
                                           .where(FLEET_SUITES.c.fleet_id == fleet_id)).first()
        except sa.exc.SQLAlchemyError as exc:
            raise self.failure(exc, "reading a fleet's suite") from None
        return (found[0], found[1]) if found else None

    def has_run(self, run_id: str) -> bool:
        if self.version == 0:
            return False
        try:
            with self.engine.connect() as connection:
                return connection.execute(sa.select(RUNS.c.run_id).where(RUNS.c.run_id == run_id)).first() \
                    is not None
        except sa.exc.SQLAlchemyError as exc:
            raise self.failure(exc, "reading it") from None

    def runs(self, experiment: str | None = None, fleet_id: str | None = None) -> pd.DataFrame:
        """The stored runs, newest first; of one experiment and/or one fleet when asked. ``boards``: the UUIDs of
        every board a run names (as devices and peers), ``gpu_uuid``: its one board (empty for none or several)."""
        if self.version == 0:
            return pd.DataFrame(columns=RUN_COLUMNS)
        # Opening never writes, so a store of an older version is read as it is: its missing columns stay empty.
        columns = [c for c in RUNS.columns if (self.version >= 2 or c.name not in ADDED_IN_V2)
                   and c.name not in ADDED_IN_V7 | ADDED_IN_V10 and (self.version >= 9 or c.name not in ADDED_IN_V9)]
        if self.version == 2:
            columns.append(sa.column("gpu_uuid"))  # version 2 kept a run's (first row's) board in runs
        query = sa.select(*columns).order_by(RUNS.c.timestamp.desc())
        if experiment:
            query = query.where(RUNS.c.experiment == experiment)
        if fleet_id is not None:
            if self.version < 2:
                return pd.DataFrame(columns=RUN_COLUMNS)
            query = query.where(RUNS.c.fleet_id == fleet_id)
        try:
            with self.engine.connect() as connection:
                rows = [dict(r) for r in connection.execute(query).mappings().all()]
                boards = self._boards(connection, None if experiment is None and fleet_id is None
                                      else [r["run_id"] for r in rows]) if self.version >= 3 else {}
        except sa.exc.SQLAlchemyError as exc:
            raise self.failure(exc, "listing runs") from None
        for row in rows:
            uuids = tuple(dict.fromkeys(boards.get(row["run_id"], {}).values())) if self.version >= 3 else \
                ((row["gpu_uuid"],) if row.get("gpu_uuid") else ())
            row["boards"], row["gpu_uuid"] = uuids, uuids[0] if len(uuids) == 1 else None
            row.setdefault("method_version", None)  # a store before version 9 keeps none: unknown, as after it
        return pd.DataFrame(rows, columns=RUN_COLUMNS)

    def run_params(self, run_ids: list[str]) -> pd.DataFrame:
        """The bulk parameters read, beside ``points``: of each of ``run_ids`` its experiment, timestamp, ``gpus`` and
        ``params`` (the JSON text; None when not recorded, or when longer than ``MAX_PARAMS_CHARS``, which is then
        never read: ``params_chars`` says how long it is). One query per ``BULK_RUNS`` runs; unknown ids give no row.
        A store before version 7 records none."""
        rows: list[dict] = []
        if self.version and run_ids:
            chars = sa.func.length(RUNS.c.params) if self.version >= 7 else sa.null()
            columns = [RUNS.c.run_id, RUNS.c.experiment, RUNS.c.timestamp,
                       (RUNS.c.gpus if self.version >= 7 else sa.null()).label("gpus"),
                       (sa.case((chars <= MAX_PARAMS_CHARS, RUNS.c.params)) if self.version >= 7 else sa.null())
                       .label("params"), chars.label("params_chars")]
            try:
                with self.engine.connect() as connection:
                    for start in range(0, len(run_ids), BULK_RUNS):
                        chunk = [str(r) for r in run_ids[start:start + BULK_RUNS]]
                        rows += [dict(r) for r in connection.execute(sa.select(*columns).where(
                            RUNS.c.run_id.in_(chunk))).mappings()]
            except sa.exc.SQLAlchemyError as exc:
                raise self.failure(exc, "reading runs' parameters") from None
        return pd.DataFrame(rows, columns=PARAMS_COLUMNS)

    def kept_params(self, run_ids: list[str]) -> dict[str, str]:
        """run id → the parameters (JSON text) the store keeps for each of ``run_ids`` that has them: what an export
        of those runs carries in its manifest."""
        asked = self.run_params(run_ids)
        return {str(r): p for r, p in zip(asked["run_id"], asked["params"], strict=True) if isinstance(p, str)}

    def _boards(self, connection, run_ids: list[str] | None) -> dict[str, dict]:
        """run_id → {ordinal: UUID} of ``run_ids`` (every run when None), in each run's order."""
        if self.version < 3:
            return {}
        found: dict[str, dict] = {}
        chunks = [None] if run_ids is None else [run_ids[i:i + BULK_RUNS] for i in range(0, len(run_ids), BULK_RUNS)]
        for chunk in chunks:
            query = sa.select(BOARDS.c.run_id, BOARDS.c.gpu_index, BOARDS.c.gpu_uuid).order_by(BOARDS.c.run_id,
                                                                                             BOARDS.c.position)
            if chunk is not None:
                query = query.where(BOARDS.c.run_id.in_(chunk))
            for run_id, index, uuid in connection.execute(query):
                found.setdefault(run_id, {})[index] = uuid
        return found

    def load(self, run_id: str) -> pd.DataFrame:
        """A stored run as a results frame (every sample included)."""
        rows = []
        if self.version:
            try:
                with self.engine.connect() as connection:
                    rows = _rows_of(connection, [run_id], self.version).get(run_id, [])
            except sa.exc.SQLAlchemyError as exc:
                raise self.failure(exc, "loading a run") from None
            except ValueError as exc:
                raise StoreError(f"stored run {shorten(run_id)} cannot be read: {shorten(str(exc), 200)}") from None
        if not rows:
            raise StoreError(f"no stored run with id {shorten(run_id)}")
        try:
            for i, row in enumerate(rows):  # stored before imports checked samples: say so, not crash later
                samples = row.get("samples_ms")
                if not isinstance(samples, list) or not samples or not all(
                        isinstance(v, int | float) and not isinstance(v, bool) for v in samples):
                    raise ValueError(f"point {i + 1}: samples_ms is {shorten(samples)}, not a list of sample times; "
                                     "import the run again from its file")
            return schema.validate(pd.DataFrame(rows))
        except (ValueError, schema.SchemaError) as exc:  # a row written by hand or by a damaged copy
            raise StoreError(f"stored run {shorten(run_id)} cannot be read: {shorten(str(exc), 200)}") from None

    def points(self, run_ids: list[str], fields: list[str] | None = None, samples: bool = True) -> pd.DataFrame:
        """The bulk points read: the rows of many stored runs as one frame (one query per ``BULK_RUNS`` runs), each
        with its board UUIDs; only ``fields`` (schema columns) when given, and without reading the samples when
        ``samples`` is False (most of a row's length, and of the time to parse it). Rows are not validated:
        a caller that needs whole runs uses ``load``. Unknown run ids give no rows."""
        rows: list[dict] = []
        if self.version and run_ids:
            try:
                with self.engine.connect() as connection:
                    for start in range(0, len(run_ids), BULK_RUNS):
                        found = _rows_of(connection, list(run_ids[start:start + BULK_RUNS]), self.version, samples)
                        rows += [row for part in found.values() for row in part]
            except sa.exc.SQLAlchemyError as exc:
                raise self.failure(exc, "reading points") from None
            except ValueError as exc:
                raise StoreError(f"stored points cannot be read: {shorten(str(exc), 200)}") from None
        columns = fields or schema.COLUMNS
        return pd.DataFrame([{f: row.get(f) for f in columns} for row in rows], columns=columns)


def _rows_of(connection, run_ids: list[str], version: int = SCHEMA_VERSION, samples: bool = True) \
        -> dict[str, list[dict]]:
    """run_id → its stored rows, in point order, as the results schema has them (the run's provenance and board
    UUIDs put back). ValueError (a ``SchemaError``) naming the run for a provenance block that cannot be used."""
    query = sa.select(POINTS.c.run_id, POINTS.c.row_json).where(POINTS.c.run_id.in_(run_ids)) \
        .order_by(POINTS.c.run_id, POINTS.c.idx)
    texts = connection.execute(query).all()
    boards: dict[str, dict] = {}
    if version >= 3 and texts:
        for run_id, index, uuid in connection.execute(
                sa.select(BOARDS.c.run_id, BOARDS.c.gpu_index, BOARDS.c.gpu_uuid).where(BOARDS.c.run_id.in_(run_ids))):
            boards.setdefault(run_id, {})[index] = uuid
    kept_once: dict[str, dict] = {}
    if version >= 10 and texts:
        for run_id, text in connection.execute(sa.select(RUNS.c.run_id, RUNS.c.provenance).where(
                RUNS.c.run_id.in_(run_ids) & RUNS.c.provenance.is_not(None))):
            kept_once[run_id] = schema.checked_provenance(text, f"run {shorten(run_id)}")
    found: dict[str, list[dict]] = {}
    for run_id, text in texts:
        row = restored_row(text if samples else _without_samples(text), boards.get(run_id, {}),
                           kept_once.get(run_id), f"run {shorten(run_id)}")
        if version < 11:  # a store not yet migrated: its rows' legacy param/param_value read by axis name
            row = legacy.map_row(row, f"run {shorten(run_id)}")
        found.setdefault(run_id, []).append(row)
    return found


def _without_samples(text: str) -> str:
    """A stored row's JSON without its samples: the array holds numbers only, so it ends at the first ']' after
    its start."""
    start = text.find(SAMPLES_KEY)
    if start < 0:
        return text
    end = text.find("]", start)
    return text[:start] + '"samples_ms":null' + text[end + 1:]


def run_times(timestamps: pd.Series) -> tuple[str | None, int, float]:
    """A run's time: its earliest timestamp (as written), the position of the one furthest from it, and the
    span in seconds. A runner invocation stamps each of its jobs with that job's start, so a run's points may
    carry a few times minutes apart; rows further apart than ``MAX_RUN_SPAN_S`` are two recordings under one
    id. Missing times count as none."""
    parsed = pd.to_datetime(timestamps.astype(object).where(timestamps.notna(), None), utc=True, errors="coerce",
                            format="ISO8601")
    if parsed.isna().all():
        return None, 0, 0.0
    earliest, latest = parsed.idxmin(), parsed.idxmax()
    position = timestamps.index.get_loc
    return (str(timestamps.loc[earliest]), position(latest),
            float((parsed.max() - parsed.min()).total_seconds()))


def suite_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _keep_suite(connection, fleet_id: str, name: str, text: str) -> None:
    """The fleet's suite text, stored with its first run; a different text under the same fleet id is refused."""
    digest = suite_digest(text)
    stored = connection.execute(sa.select(FLEET_SUITES.c.name, FLEET_SUITES.c.digest)
                                .where(FLEET_SUITES.c.fleet_id == fleet_id)).first()
    if stored is None:
        connection.execute(FLEET_SUITES.insert(), [{"fleet_id": fleet_id, "name": name, "digest": digest,
                                                    "toml": text}])
    elif stored[1] != digest:
        raise StoreError(f"fleet {shorten(fleet_id)} was measured with another suite ({shorten(stored[0])}, "
                         f"sha256 {stored[1][:12]}; this one {shorten(name)}, sha256 {digest[:12]}): nothing was "
                         "written; give another fleet id")
