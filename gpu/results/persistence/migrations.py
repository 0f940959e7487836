"""The runs store's tables, their schema version and the steps that migrate a store from one version to the next;
and how a point's row is kept in them. No Streamlit and no CUDA here. It holds one concern, over 400 lines: the
store's tables through their versions (each step is short; their history is the length).

Tables (schema version ``SCHEMA_VERSION``, in ``pinpoint_meta``):

* ``runs`` – one row per run: ``run_id`` (primary key), ``experiment``, device, driver, CUDA and PyCUDA
  versions, host, ``timestamp`` (when it was measured), git commit, profile, ``label`` and ``notes`` (stored
  verbatim, always passed as bound parameters), ``source`` (live | runner | import), ``stored_at``, ``points``,
  for fleet runs ``fleet_id`` and ``suite``, and (since version 7) ``params``: the parameters the run was measured
  with, the checked request's plain values (``Request.plain``) as canonical JSON (keys sorted, no spaces; a JSON
  list of them for a runner invocation that sent several requests, e.g. occupancy's register settings), NULL for a
  run stored before version 7 whose parameters could not be recovered; and ``gpus``, for fleet runs, how the suite
  ran it (``one``: each GPU on its own; ``node``: a node's GPUs together); (since version 9) ``method_version``,
  the run's method version (its rows' ``method_version``; NULL when unknown); and (since version 10) ``provenance``:
  the provenance values every row of the run shares (``gpu.core.schema``), canonical JSON of one object, NULL
  when they share none;
* ``run_boards`` – every GPU board a run's rows name (since version 3), once per run: ``run_id``, ``position``,
  ``gpu_index`` (the board's ordinal in the run, empty for rows recorded before rows named one) and ``gpu_uuid``.
  A one-GPU run has one; a peer run of a node every GPU of its pairs;
* ``points`` – one row per measured point: ``run_id``, ``idx``, the point's ``variant``, ``direction``,
  ``bytes``, ``median_ms``, ``gbps`` and (since version 8) ``conditions`` for queries, and ``row_json``: the
  whole row of the results schema (``gpu.core.schema``), every sample included, less the board UUIDs that
  ``run_boards`` holds and the provenance that ``runs.provenance`` holds (``stored_rows`` and ``stored_provenance``
  take them out, ``restored_row`` puts them back, so a stored run reads back as it was saved);
* ``fleet_suites`` – one row per fleet (since version 4): ``fleet_id`` (primary key), the suite's ``name``, its
  ``digest`` (SHA-256 of its text) and ``toml``: the suite's text as measured, which the Fleet page reads (a
  stored fleet never names a file to read);
* ``trash`` and ``trash_points`` – runs moved to the trash (since version 5), out of ``runs``, ``run_boards`` and
  ``points``, so no reader of runs has to leave them out: ``trash_id`` (primary key), ``run_id``, ``trashed_at``,
  ``trashed_by``, ``reason`` (trashed | replaced), ``run_json`` (the run's ``runs`` row, its provenance included),
  ``boards_json`` (its
  ``run_boards`` rows as [ordinal, UUID] pairs); its points keep ``points``' columns, keyed by ``trash_id``. A run
  replaced on import goes there too, so one run id may be in the trash several times beside a stored run;
* ``audit`` – the audit trail (since version 5): one row per change (import, measure, label, trash, restore, purge,
  migrate), written in the change's own transaction: ``audit_id``, ``at``, ``who``, ``role``, ``source`` (app | cli
  | fleet), ``action``, ``run_ids`` (a JSON list) and ``what`` (one sentence);
* ``fleet_leases`` – who measures a fleet now (since version 6): ``fleet_id`` (primary key), ``holder`` (a random
  token of the fleet command that holds it), ``who`` (its host and pid, for the message that refuses a second
  command), ``taken_at``, ``renewed_at`` and ``expires_at`` (seconds since the epoch on the database's clock). One
  fleet id has one writer; a holder that dies stops renewing and its lease expires (``gpu.results.persistence.leases``).

Versions: 1, the first tables; 2, runs name their board (``runs.gpu_uuid``, from the first point), fleet and suite;
3, a run's boards are ``run_boards``, filled from every point of every stored run (a run that spans several boards
records all of them), taken out of each point's JSON, and ``runs.gpu_uuid`` is dropped: a board is stored once;
4, a fleet keeps its suite's text (``fleet_suites``); fleets stored before hold only their suite's name; 5, the trash
(``trash``, ``trash_points``) and the audit trail (``audit``), which records the migration to 5 as its first row;
6, a fleet being measured holds a lease (``fleet_leases``), so a second command with its fleet id is refused;
7, every run keeps the parameters it was measured with (``runs.params``) and a fleet run how its suite ran it
(``runs.gpus``), so the Fleet page reads what each run was asked for from the run, never by parsing a suite on a view.
They are columns of ``runs``, not a table of their own: one value per run, read with the run, carried by the trash's
copy of a run's row (``trash.run_json``) and restored with it, and imported and exported with the run's other
run-level fields. The step fills them for fleet runs from the fleet's stored suite (``fleet_suites``; for a fleet
stored before version 4, the built-in suite of its name), parsed once per fleet here, the one place a stored suite is
parsed for its runs' parameters; a fleet whose suite cannot be parsed, and every other run, keeps NULL (no
declaration says which of a run's row columns are its parameters' axes), shown as "parameters not recorded (stored
before version 7)". 8, every point keeps its ``conditions`` (``gpu.core.conditions``: clean, not observed, or its
causes) in a column of ``points`` and ``trash_points`` beside its row, so a store can be asked which points are not
clean without parsing rows; points stored before have none to give and are filled ``not observed`` (their
``row_json`` stays as it was, so their content hash does not change), as is a point saved without one.
9, every run keeps its method version (``runs.method_version``: a hash of the sweep, kernels and shared timing code
that measured it, ``gpu.experiments.method``), also on each of its rows (``row_json``), so exports carry it; runs
stored before recorded none and keep NULL, read as unknown (``gpu.core.method_versions``), never guessed.
10, a run's provenance is kept once: ``runs.provenance`` holds what every row of the run shares (device, driver,
clocks, host, commit, …) and each point's ``row_json`` only what differs from it (a peer run's rows keep the GPU each
names, ``gpu_index`` and ``gpu_uuid``; a run whose jobs started at different times keeps each row's ``timestamp``).
A column of ``runs`` rather than a table: one value per run, read with its points, carried by the trash's copy of the
run's row (``trash.run_json``) and restored with it, and a text the reader checks (``schema.checked_provenance``: an
object of provenance columns of their types, bounded, agreeing with any value a row keeps itself) as it checks a
file's block, so another store's hostile value is refused in one line. The step moves every stored run's provenance
out of its rows, and every trashed run's into its ``trash.run_json``, one run at a time, rewriting only the rows that
change; each run reads back as it did (same rows, same content hash).
11, a point's coordinates are kept in the columns named by its experiment's axes (``stride``, ``chains``,
``working_set_bytes`` …, ``gpu.core.schema.COORDINATE_COLUMNS``) and how its samples were made in its own columns
(``copies_per_sample`` …), never in the overloaded ``param``/``param_value`` pair: the step maps every stored point's
pair and every trashed one's (``gpu.results.persistence.legacy``, by each experiment's ``LEGACY_PARAMS``), rewriting
only the rows that hold one. A row whose ``param`` its experiment never wrote stops the migration in one line that
names it, and the store is left as it was. A mapped run's content hash is that of its mapped rows, as an old export's
is once imported.

Migrations are a short list of versioned steps (``MIGRATIONS``), applied in one transaction, one migrator at a time
(PostgreSQL: an advisory lock; SQLite: ``BEGIN IMMEDIATE``): three tables need no migration framework, and an
embedded store must upgrade itself on a user's machine without tooling. A step appends, never edits an old one.
A store written by a newer PinPoint (a version this code does not know) is refused, never altered; a database that
holds tables of our names without ``pinpoint_meta`` is another application's, refused untouched.
"""

from __future__ import annotations

import datetime as dt
import json

import sqlalchemy as sa

from gpu.core import conditions, schema
from gpu.core.boards import Board
from gpu.core.errors import StoreError
from gpu.core.schema import key_value
from gpu.core.text import shorten
from gpu.experiments import suites
from gpu.results.persistence import legacy

SCHEMA_VERSION = 11
METADATA = sa.MetaData()

META = sa.Table("pinpoint_meta", METADATA, sa.Column("key", sa.String(64), primary_key=True),
                sa.Column("value", sa.Text, nullable=False))
RUNS = sa.Table(
    "runs", METADATA,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("experiment", sa.String(64), nullable=False, index=True),
    sa.Column("device_name", sa.Text), sa.Column("driver_version", sa.Text), sa.Column("cuda_version", sa.Text),
    sa.Column("pycuda_version", sa.Text), sa.Column("host", sa.Text), sa.Column("timestamp", sa.Text, index=True),
    sa.Column("git_commit", sa.Text), sa.Column("profile", sa.Text), sa.Column("label", sa.Text),
    sa.Column("notes", sa.Text), sa.Column("source", sa.String(16), nullable=False),
    sa.Column("stored_at", sa.Text, nullable=False), sa.Column("points", sa.Integer, nullable=False),
    # Added by step 2: for fleet runs the fleet and its suite.
    sa.Column("fleet_id", sa.String(64)), sa.Column("suite", sa.Text),
    # Added by step 7: the run's parameters (canonical JSON) and, for fleet runs, how the suite ran it.
    sa.Column("params", sa.Text), sa.Column("gpus", sa.String(8)),
    # Added by step 9: the run's method version (its rows' ``method_version``), NULL when unknown.
    sa.Column("method_version", sa.Text),
    # Added by step 10: the provenance every row of the run shares (canonical JSON), taken out of its rows.
    sa.Column("provenance", sa.Text),
)
POINTS = sa.Table(
    "points", METADATA,
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True),
    sa.Column("idx", sa.Integer, primary_key=True),
    sa.Column("variant", sa.Text), sa.Column("direction", sa.Text), sa.Column("bytes", sa.BigInteger),
    sa.Column("median_ms", sa.Float), sa.Column("gbps", sa.Float), sa.Column("row_json", sa.Text, nullable=False),
    # Added by step 8: the point's conditions, for queries (its row keeps them too).
    sa.Column("conditions", sa.Text),
)
BOARDS = sa.Table(
    "run_boards", METADATA,
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True),
    sa.Column("position", sa.Integer, primary_key=True),
    sa.Column("gpu_index", sa.Integer), sa.Column("gpu_uuid", sa.Text, nullable=False, index=True),
)
FLEET_SUITES = sa.Table(
    "fleet_suites", METADATA,
    sa.Column("fleet_id", sa.String(64), primary_key=True), sa.Column("name", sa.Text, nullable=False),
    sa.Column("digest", sa.String(64), nullable=False), sa.Column("toml", sa.Text, nullable=False),
)
TRASH = sa.Table(
    "trash", METADATA,
    sa.Column("trash_id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(64), nullable=False, index=True),
    sa.Column("trashed_at", sa.Text, nullable=False), sa.Column("trashed_by", sa.Text, nullable=False),
    sa.Column("reason", sa.String(16), nullable=False),
    sa.Column("run_json", sa.Text, nullable=False), sa.Column("boards_json", sa.Text, nullable=False),
)
TRASH_POINTS = sa.Table(
    "trash_points", METADATA,
    sa.Column("trash_id", sa.Integer, sa.ForeignKey("trash.trash_id", ondelete="CASCADE"), primary_key=True),
    sa.Column("idx", sa.Integer, primary_key=True),
    sa.Column("variant", sa.Text), sa.Column("direction", sa.Text), sa.Column("bytes", sa.BigInteger),
    sa.Column("median_ms", sa.Float), sa.Column("gbps", sa.Float), sa.Column("row_json", sa.Text, nullable=False),
    sa.Column("conditions", sa.Text),
)
AUDIT = sa.Table(
    "audit", METADATA,
    sa.Column("audit_id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("at", sa.Text, nullable=False, index=True), sa.Column("who", sa.Text, nullable=False),
    sa.Column("role", sa.String(16), nullable=False), sa.Column("source", sa.String(16), nullable=False),
    sa.Column("action", sa.String(16), nullable=False), sa.Column("run_ids", sa.Text, nullable=False),
    sa.Column("what", sa.Text, nullable=False),
)
FLEET_LEASES = sa.Table(
    "fleet_leases", METADATA,
    sa.Column("fleet_id", sa.String(64), primary_key=True), sa.Column("holder", sa.String(64), nullable=False),
    sa.Column("who", sa.Text, nullable=False), sa.Column("taken_at", sa.Float, nullable=False),
    sa.Column("renewed_at", sa.Float, nullable=False), sa.Column("expires_at", sa.Float, nullable=False),
)
FLEET_INDEX = sa.Index("ix_runs_fleet_id", RUNS.c.fleet_id)
# Columns of ``runs`` as steps added them (step 3 drops gpu_uuid again: ``run_boards`` holds a run's boards).
ADDED_IN_V2 = {"gpu_uuid": sa.Text(), "fleet_id": sa.String(64), "suite": sa.Text()}
ADDED_IN_V7 = {"params": sa.Text(), "gpus": sa.String(8)}
ADDED_IN_V8 = {"conditions": sa.Text()}  # to points and trash_points
ADDED_IN_V9 = {"method_version": sa.Text()}
ADDED_IN_V10 = {"provenance": sa.Text()}


def point_conditions(row: dict) -> str:
    """What ``points.conditions`` keeps for a row: its conditions, ``not observed`` where it has none."""
    value = row.get("conditions")
    return value if isinstance(value, str) and value.strip() else conditions.NOT_OBSERVED


# --- a point's row as stored: its board UUIDs live once per run, in run_boards ---------------------------------
def _board_map(rows: list[dict]) -> dict:
    """gpu ordinal (or None) → the UUID that every row naming that ordinal, as device or as peer, gives it; ordinals
    given two UUIDs, or a UUID and none, are left out (their rows keep their UUIDs)."""
    seen: dict = {}
    for row in rows:
        uses = [(row.get("gpu_index"), row.get("gpu_uuid"))]
        if key_value(row.get("peer_index")) is not None or Board.of(row.get("peer_uuid")).named:
            uses.append((row.get("peer_index"), row.get("peer_uuid")))
        for index, uuid in uses:
            seen.setdefault(key_value(index), set()).add(Board.of(uuid).uuid)
    return {index: next(iter(uuids)) for index, uuids in seen.items()
            if len(uuids) == 1 and None not in uuids and (index is None or _ordinal(index))}


def _ordinal(index) -> bool:
    """An ordinal ``run_boards.gpu_index`` can hold (a row's own number stays in its row otherwise)."""
    return isinstance(index, int) and not isinstance(index, bool) and 0 <= index < 2**31


def _restore(row: dict, boards: dict) -> dict:
    """``row`` with the UUIDs taken out of it put back from its run's boards (ordinal → UUID)."""
    if "gpu_uuid" not in row:
        row["gpu_uuid"] = boards.get(key_value(row.get("gpu_index")))
    if "peer_uuid" not in row:
        peer = key_value(row.get("peer_index"))
        row["peer_uuid"] = boards.get(peer) if peer is not None else None
    return row


def stored_rows(rows: list[dict]) -> tuple[list[tuple[int | None, str]], list[dict]]:
    """A run's boards as ``run_boards`` keeps them ((ordinal, UUID) in first-seen order) and its rows without the
    UUIDs those give back; a UUID that does not come back alike (a row unlike the others of its ordinal) stays."""
    boards = _board_map(rows)
    kept = []
    for row in rows:
        row = dict(row)
        for column in ("gpu_uuid", "peer_uuid"):
            value = row.pop(column, None)
            if _restore(dict(row), boards)[column] != Board.of(value).uuid:
                row[column] = value
        kept.append(row)
    return list(boards.items()), kept


def restored_row(row_json: str, boards: dict, kept_once: dict | None = None, what: str = "a stored run") -> dict:
    """A stored row as the results schema has it: its JSON, with its run's provenance (``kept_once``, from
    ``runs.provenance``) and its board UUIDs from the run's ``boards``."""
    return _restore(schema.with_provenance(json.loads(row_json), kept_once or {}, what), boards)


def stored_provenance(rows: list[dict]) -> tuple[str | None, list[dict]]:
    """A run's provenance as ``runs.provenance`` keeps it (None: its rows share none) and its rows without it."""
    common, kept = schema.split_provenance(rows)
    return (schema.provenance_json(common) if common else None), kept


# --- the steps ---------------------------------------------------------------------------------------------------
def _create_v1(connection) -> None:
    """The tables as version 1 had them (``runs`` without the columns later steps add)."""
    v1 = sa.MetaData()
    sa.Table(RUNS.name, v1, *(c._copy() for c in RUNS.columns
                              if c.name not in ADDED_IN_V2 | ADDED_IN_V7 | ADDED_IN_V9 | ADDED_IN_V10))
    sa.Table(POINTS.name, v1, *(c._copy() for c in POINTS.columns if c.name not in ADDED_IN_V8))
    v1.create_all(connection)


def _add_boards_and_fleets_v2(connection) -> None:
    """Runs name their board and, when a fleet measured them, the fleet and suite; stored runs get their board
    from their first point (the runs-level column lets a board's history be found without reading points)."""
    dialect = connection.dialect
    for name, kind in ADDED_IN_V2.items():
        connection.execute(sa.text(f"ALTER TABLE {RUNS.name} ADD COLUMN {name} {kind.compile(dialect)}"))
    FLEET_INDEX.create(connection)
    first_points = connection.execute(sa.select(POINTS.c.run_id, POINTS.c.row_json).where(POINTS.c.idx == 0)).all()
    for run_id, row_json in first_points:
        board = json.loads(row_json).get("gpu_uuid")
        if isinstance(board, str) and board:
            connection.execute(sa.text(f"UPDATE {RUNS.name} SET gpu_uuid = :board WHERE run_id = :run_id"),
                               {"board": board, "run_id": run_id})


def _boards_once_v3(connection) -> None:
    """Every board of every stored run, from all of its points (not the first), into ``run_boards``; the points'
    JSON loses the UUIDs it now gives back; ``runs.gpu_uuid`` goes. Runs are read one at a time."""
    BOARDS.create(connection)
    run_ids = connection.execute(sa.select(RUNS.c.run_id)).scalars().all()
    for run_id in run_ids:
        stored = connection.execute(sa.select(POINTS.c.idx, POINTS.c.row_json).where(POINTS.c.run_id == run_id)
                                    .order_by(POINTS.c.idx)).all()
        rows = [json.loads(text) for _, text in stored]
        boards, kept = stored_rows(rows)
        if boards:
            connection.execute(BOARDS.insert(), [{"run_id": run_id, "position": i, "gpu_index": index,
                                                  "gpu_uuid": uuid} for i, (index, uuid) in enumerate(boards)])
        for (idx, text), row in zip(stored, kept, strict=True):
            new = json.dumps(row, separators=(",", ":"), allow_nan=False)
            if new != text:
                connection.execute(POINTS.update().where((POINTS.c.run_id == run_id) & (POINTS.c.idx == idx))
                                   .values(row_json=new))
    connection.execute(sa.text(f"ALTER TABLE {RUNS.name} DROP COLUMN gpu_uuid"))


def _fleet_suites_v4(connection) -> None:
    """Fleets keep their suite's text; those stored before keep only its name (in ``runs.suite``)."""
    FLEET_SUITES.create(connection)


def _trash_and_audit_v5(connection) -> None:
    """Deleting becomes moving to the trash (``trash``, ``trash_points``); every change is recorded (``audit``)."""
    v5 = sa.MetaData()
    for table in (TRASH, TRASH_POINTS, AUDIT):
        sa.Table(table.name, v5, *(c._copy() for c in table.columns
                                   if table is not TRASH_POINTS or c.name not in ADDED_IN_V8))
    for table in (TRASH, TRASH_POINTS, AUDIT):
        v5.tables[table.name].create(connection)


def _fleet_leases_v6(connection) -> None:
    """A fleet being measured holds a lease: one writer per fleet id."""
    FLEET_LEASES.create(connection)


def canonical_params(value) -> str:
    """A run's parameters as ``runs.params`` keeps them: JSON, keys sorted, no spaces, no NaN."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _run_params_v7(connection) -> None:
    """Runs keep their parameters (``runs.params``) and fleet runs how their suite ran them (``runs.gpus``); fleet
    runs stored before get both from their fleet's stored suite, parsed once per fleet (a suite that no longer parses
    leaves its runs NULL); other runs stay NULL."""
    dialect = connection.dialect
    for name, kind in ADDED_IN_V7.items():
        connection.execute(sa.text(f"ALTER TABLE {RUNS.name} ADD COLUMN {name} {kind.compile(dialect)}"))
    fleets = connection.execute(sa.select(RUNS.c.fleet_id, sa.func.min(RUNS.c.suite))
                                .where(RUNS.c.fleet_id.is_not(None)).group_by(RUNS.c.fleet_id)).all()
    for fleet_id, name in fleets:
        kept = connection.execute(sa.select(FLEET_SUITES.c.name, FLEET_SUITES.c.toml)
                                  .where(FLEET_SUITES.c.fleet_id == fleet_id)).first()
        try:
            suite = suites.stored(fleet_id, kept[0] if kept else name, kept[1] if kept else None)
        except suites.SuiteError:
            continue
        for run in suite.runs:
            connection.execute(sa.update(RUNS).where((RUNS.c.fleet_id == fleet_id)
                                                     & (RUNS.c.experiment == run.experiment))
                               .values(params=canonical_params(run.checked().plain()), gpus=run.gpus))


def _point_conditions_v8(connection) -> None:
    """Points keep their conditions in a column; those stored before were not observed (rows left as they are)."""
    dialect = connection.dialect
    for table in (POINTS, TRASH_POINTS):
        for name, kind in ADDED_IN_V8.items():
            connection.execute(sa.text(f"ALTER TABLE {table.name} ADD COLUMN {name} {kind.compile(dialect)}"))
        connection.execute(sa.update(table).values(conditions=conditions.NOT_OBSERVED))


def _run_method_version_v9(connection) -> None:
    """Runs keep their method version (``runs.method_version``); no run stored before recorded one, so theirs stay
    NULL: unknown (their rows are left as they are, and so is their content hash)."""
    dialect = connection.dialect
    for name, kind in ADDED_IN_V9.items():
        connection.execute(sa.text(f"ALTER TABLE {RUNS.name} ADD COLUMN {name} {kind.compile(dialect)}"))


def _provenance_once_v10(connection) -> None:
    """Each run's provenance (what all of its rows share) moves out of its points' JSON into ``runs.provenance``;
    so does each trashed run's, into ``trash.run_json``. Runs are read one at a time; a row is rewritten only where
    it changes, and every run reads back as it did (same rows, same content hash)."""
    dialect = connection.dialect
    for name, kind in ADDED_IN_V10.items():
        connection.execute(sa.text(f"ALTER TABLE {RUNS.name} ADD COLUMN {name} {kind.compile(dialect)}"))
    for run_id in connection.execute(sa.select(RUNS.c.run_id)).scalars().all():
        kept = _move_provenance(connection, POINTS, POINTS.c.run_id == run_id,
                                lambda idx, r=run_id: (POINTS.c.run_id == r) & (POINTS.c.idx == idx))
        if kept is not None:
            connection.execute(RUNS.update().where(RUNS.c.run_id == run_id).values(provenance=kept))
    for trash_id, run_json in connection.execute(sa.select(TRASH.c.trash_id, TRASH.c.run_json)).all():
        kept = _move_provenance(connection, TRASH_POINTS, TRASH_POINTS.c.trash_id == trash_id,
                                lambda idx, t=trash_id: (TRASH_POINTS.c.trash_id == t) & (TRASH_POINTS.c.idx == idx))
        if kept is not None:
            connection.execute(TRASH.update().where(TRASH.c.trash_id == trash_id)
                               .values(run_json=json.dumps({**json.loads(run_json), "provenance": kept})))


def _move_provenance(connection, table, of_run, point):
    """The provenance the points of ``table`` selected by ``of_run`` share, taken out of their JSON; its text."""
    stored = connection.execute(sa.select(table.c.idx, table.c.row_json).where(of_run).order_by(table.c.idx)).all()
    kept, rows = stored_provenance([json.loads(text) for _, text in stored])
    for (idx, text), row in zip(stored, rows, strict=True):
        new = json.dumps(row, separators=(",", ":"), allow_nan=False)
        if new != text:
            connection.execute(table.update().where(point(idx)).values(row_json=new))
    return kept


def _axis_columns_v11(connection) -> None:
    """Every stored and trashed point's legacy ``param``/``param_value`` mapped onto the columns named by axis
    (``gpu.results.persistence.legacy``); only the rows that hold the pair are read and rewritten."""
    for table, owner, what in ((POINTS, POINTS.c.run_id, "stored run"), (TRASH_POINTS, TRASH_POINTS.c.trash_id,
                                                                           "trashed run")):
        held = connection.execute(sa.select(owner, table.c.idx, table.c.row_json)
                                  .where(table.c.row_json.like('%"param%'))).all()
        for key, idx, text in held:
            row = json.loads(text)
            try:
                mapped = legacy.map_row(row, f"{what} {shorten(str(key))}, point {idx + 1}")
            except schema.SchemaError as exc:
                raise StoreError(f"the runs store cannot be migrated to schema version 11: {exc}") from None
            if mapped is not row:
                connection.execute(table.update().where((owner == key) & (table.c.idx == idx))
                                   .values(row_json=json.dumps(mapped, separators=(",", ":"), allow_nan=False)))


MIGRATIONS = [(1, _create_v1), (2, _add_boards_and_fleets_v2), (3, _boards_once_v3), (4, _fleet_suites_v4),
              (5, _trash_and_audit_v5), (6, _fleet_leases_v6), (7, _run_params_v7),
              (8, _point_conditions_v8), (9, _run_method_version_v9), (10, _provenance_once_v10),
              (11, _axis_columns_v11)]
AUDITED_SINCE = 5


def now_text() -> str:
    """The store's one way of writing a moment: UTC, to the second (text sorts as time)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def record(connection, actor, action: str, run_ids: list[str], what: str) -> None:
    """One audit row, in ``connection``'s transaction: it commits with the change it describes, or neither does."""
    connection.execute(AUDIT.insert().values(at=now_text(), who=actor.who, role=actor.role.word, source=actor.source,
                                             action=action, run_ids=json.dumps(list(run_ids)), what=what))


# --- reading the version, applying the steps -----------------------------------------------------------------
def refuse_foreign(database, connection) -> None:
    """A database without ``pinpoint_meta`` that already holds tables of our names (or, for SQLite, any table:
    a file of another application) is not a PinPoint store: refused before anything is written to it."""
    tables = set(sa.inspect(connection).get_table_names())
    if META.name in tables:
        return
    ours = sorted(tables & {t.name for t in METADATA.sorted_tables})
    foreign = ours or (sorted(tables) if database.dialect == "sqlite" else [])
    if foreign:
        raise StoreError(f"{database.describe()} is not a PinPoint runs store: it holds "
                         f"{', '.join(shorten(t) for t in foreign[:5])}{' …' if len(foreign) > 5 else ''} "
                         f"and no {META.name} table; left untouched (point PINPOINT_DB_URL at a new database "
                         "or file)")


def _newer(database, version: int) -> StoreError:
    return StoreError(f"the runs store at {database.describe()} has schema version {version}, made by a newer "
                      f"PinPoint; this one knows versions up to {SCHEMA_VERSION} and leaves it untouched")


def read_version(database) -> int:
    """The store's schema version without writing anything (0: a new, empty store)."""
    with database.engine.connect() as connection:
        if not sa.inspect(connection).has_table(META.name):
            refuse_foreign(database, connection)
            return 0
        found = connection.execute(sa.select(META.c.value).where(META.c.key == "schema_version")).scalar()
    version = int(found) if found is not None else 0
    if version > SCHEMA_VERSION:
        raise _newer(database, version)
    return version


def migrate(database, actor) -> int:
    """Bring the store to SCHEMA_VERSION in one transaction, one migrator at a time across processes; the version
    reached. The migration is recorded in the audit trail (by ``actor``) in the same transaction."""
    try:
        if database._sqlite_file() is not None:
            database._sqlite_file().parent.mkdir(parents=True, exist_ok=True)
        with database.engine.connect() as connection:
            if database.dialect == "sqlite":
                # pysqlite opens no transaction before DDL: take the write lock now, so a second
                # process waits here and then sees the first one's tables.
                connection.exec_driver_sql("BEGIN IMMEDIATE")
            elif database.dialect == "postgresql":
                connection.execute(sa.text("SELECT pg_advisory_xact_lock(7318)"))
            refuse_foreign(database, connection)  # under the lock, before the first write
            METADATA.create_all(connection, tables=[META])
            found = connection.execute(sa.select(META.c.value).where(META.c.key == "schema_version")).scalar()
            version = int(found) if found is not None else 0
            if version > SCHEMA_VERSION:
                raise _newer(database, version)
            before = version
            for target, step in MIGRATIONS:
                if target > version:
                    step(connection)
                    version = target
            if version > before and version >= AUDITED_SINCE:
                record(connection, actor, "migrate", [], f"created the runs store at schema version {version}"
                       if before == 0 else f"migrated the runs store from schema version {before} to {version}")
            if found is None:
                connection.execute(META.insert().values(key="schema_version", value=str(version)))
            else:
                connection.execute(META.update().where(META.c.key == "schema_version").values(value=str(version)))
            connection.commit()
        if database.dialect == "sqlite" and not database.in_memory:
            database.use_wal()
    except StoreError:
        raise
    except sa.exc.SQLAlchemyError as exc:
        raise database.failure(exc, "migrating it") from None
    return version
