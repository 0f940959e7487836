"""The runs store on SQLite and on a real PostgreSQL server: round trips, migrations, atomic and idempotent
imports, hostile labels, concurrent importers and a process killed mid-import."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import sqlalchemy as sa

from gpu.core import boards, schema
from gpu.core.access import Actor
from gpu.results.exchange import catalog, runfiles
from gpu.results.exchange.catalog import BUNDLED_DIRS
from gpu.results.persistence import store
from tests import pair_frames
from tests.conftest import new_postgres_database
from tests.old_stores import provenance_on_rows

ROOT = Path(__file__).resolve().parent.parent
POOLS = next(BUNDLED_DIRS[1].glob("pools_*.parquet"))
MANAGED = next(BUNDLED_DIRS[1].glob("managed_*.parquet"))
TRANSFERS = next(BUNDLED_DIRS[0].glob("transfers_*.parquet"))
ME = Actor.local("cli")


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/runs.sqlite"
    return new_postgres_database(request.getfixturevalue("postgres_url"))  # a fresh database per test


def test_a_run_round_trips_with_every_sample(url):
    runs = store.RunStore(url)
    frame = schema.read_results(POOLS)
    [result] = runs.save(frame, "runner", label="first")
    assert result.stored and result.points == len(frame)
    loaded = runs.load(result.run_id)
    assert loaded["median_ms"].tolist() == frame["median_ms"].tolist()
    assert [list(s) for s in loaded["samples_ms"]] == [list(s) for s in frame["samples_ms"]]
    assert loaded["device_name"].iloc[0] == frame["device_name"].iloc[0]
    listed = runs.runs()
    assert listed.loc[0, "label"] == "first" and listed.loc[0, "points"] == len(frame)
    assert listed.loc[0, "experiment"] == "pools" and listed.loc[0, "source"] == "runner"


def test_a_new_store_is_migrated_from_empty_and_reopens_at_the_same_version(url):
    first = store.RunStore(url)
    assert first.version == 0  # opening never writes
    assert first.migrate() == store.SCHEMA_VERSION
    first.close()
    again = store.RunStore(url)
    assert again.version == store.SCHEMA_VERSION and again.runs().empty
    with again.engine.connect() as connection:
        assert connection.execute(sa.text("SELECT value FROM pinpoint_meta WHERE key = 'schema_version'")).scalar() \
            == str(store.SCHEMA_VERSION)


def test_a_store_from_a_newer_pinpoint_is_refused_and_left_alone(url):
    runs = store.RunStore(url)
    runs.migrate()
    with runs.engine.begin() as connection:
        connection.execute(sa.text("UPDATE pinpoint_meta SET value = '99' WHERE key = 'schema_version'"))
    with pytest.raises(store.StoreError, match="schema version 99, made by a newer PinPoint"):
        store.RunStore(url)
    with runs.engine.connect() as connection:
        assert connection.execute(sa.text("SELECT value FROM pinpoint_meta")).scalar() == "99"


def test_the_same_run_twice_is_reported_not_duplicated(url):
    runs = store.RunStore(url)
    frame = schema.read_results(MANAGED)
    assert runs.save(frame, "import")[0].stored
    again = runs.save(frame, "import")
    assert not again[0].stored and "already in the store with the same content" in again[0].message()
    assert len(runs.runs()) == 1
    with runs.engine.connect() as connection:
        assert connection.execute(sa.text("SELECT count(*) FROM points")).scalar() == len(frame)


def test_a_failing_import_writes_nothing(url):
    runs = store.RunStore(url)
    two_runs = pd.concat([schema.read_results(MANAGED), schema.read_results(POOLS)], ignore_index=True)
    inserts = {"points": 0}

    @sa.event.listens_for(runs.engine, "before_cursor_execute")
    def fail_on_second_points_insert(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("INSERT INTO POINTS"):
            inserts["points"] += 1
            if inserts["points"] == 2:
                raise RuntimeError("disk full (simulated)")

    with pytest.raises(RuntimeError, match="disk full"):
        runs.save(two_runs, "import")
    sa.event.remove(runs.engine, "before_cursor_execute", fail_on_second_points_insert)
    assert runs.runs().empty  # the first run's rows went with the transaction
    with runs.engine.connect() as connection:
        assert connection.execute(sa.text("SELECT count(*) FROM points")).scalar() == 0


def test_hostile_labels_are_stored_verbatim_and_harm_nothing(url):
    runs = store.RunStore(url)
    label = "it's \"quoted\"'; DROP TABLE runs; --"
    notes = "Robert'); DELETE FROM points; --\nsecond line"
    [result] = runs.save(schema.read_results(MANAGED), "import", label=label, notes=notes)
    listed = runs.runs()
    assert listed.loc[0, "label"] == label and listed.loc[0, "notes"] == notes
    assert len(runs.load(result.run_id)) == 15


def test_a_trashed_run_leaves_runs_and_points_and_purging_removes_it(url):
    runs = store.RunStore(url)
    [result] = runs.save(schema.read_results(MANAGED), "import")
    assert runs.trash(ME, [result.run_id]) == [result.run_id]
    with runs.engine.connect() as connection:
        assert connection.execute(sa.text("SELECT count(*) FROM points")).scalar() == 0
        assert connection.execute(sa.text("SELECT count(*) FROM trash_points")).scalar() == 15
    with pytest.raises(store.StoreError, match="no stored run"):
        runs.load(result.run_id)
    runs.purge(ME, [result.run_id])
    with runs.engine.connect() as connection:
        assert connection.execute(sa.text("SELECT count(*) FROM trash_points")).scalar() == 0


def helper(url, path, *extra):
    return subprocess.Popen([sys.executable, str(ROOT / "tests" / "store_helper.py"), url, str(path), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)


@pytest.mark.slow
def test_two_processes_importing_at_once_lose_nothing(url):
    store.RunStore(url).migrate()  # created (and migrated) before the race, as a running app would have
    files = [POOLS, MANAGED, TRANSFERS]
    processes = [helper(url, path) for path in files]
    outputs = [p.communicate(timeout=120) for p in processes]
    assert all(p.returncode == 0 for p in processes), outputs
    runs = store.RunStore(url).runs()
    assert set(runs["experiment"]) == {"pools", "managed", "transfers"}
    # And the same file from two processes at once: stored once, the other told so.
    both = [helper(url, POOLS), helper(url, POOLS)]
    said = [p.communicate(timeout=120)[0] for p in both]
    assert all(p.returncode == 0 for p in both)
    assert all("already in the store" in s for s in said)
    assert len(store.RunStore(url).runs()) == 3


@pytest.mark.slow
def test_a_process_killed_mid_import_leaves_no_partial_run(url, tmp_path):
    store.RunStore(url).migrate()
    marker = tmp_path / "inside"
    process = helper(url, POOLS, "--stall", str(marker))
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the importer never reached its transaction"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait(30)
    runs = store.RunStore(url)
    assert runs.runs().empty
    assert runs.save(schema.read_results(POOLS), "import")[0].stored  # the store is usable afterwards


def test_default_store_is_sqlite_in_the_user_data_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("PINPOINT_DB_URL", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert store.default_url() == f"sqlite:///{tmp_path}/pinpoint/runs.sqlite"
    runs = store.RunStore()
    assert runs.dialect == "sqlite" and not (tmp_path / "pinpoint").exists()  # opening only reads
    runs.save(schema.read_results(MANAGED).assign(run_id="default01"), "import")  # the first write makes it
    assert (tmp_path / "pinpoint" / "runs.sqlite").exists()


def test_an_unreachable_server_gives_a_message_without_the_password():
    with pytest.raises(store.StoreError) as caught:
        store.RunStore("postgresql+psycopg://team:secret@127.0.0.1:1/pinpoint")
    assert "cannot open the runs store at postgresql+psycopg://team:***@127.0.0.1:1/pinpoint" in str(caught.value)
    assert "secret" not in str(caught.value)


def test_rows_keep_the_schema_json_readable():
    frame = schema.read_results(MANAGED)
    row = store.frame_rows(frame)[0]
    assert json.loads(json.dumps(row))["samples_ms"] == list(frame["samples_ms"].iloc[0])


def _version_one_store(url: str, frame: pd.DataFrame) -> None:
    """A store as PinPoint wrote it at schema version 1 (before runs named their board and fleet), holding
    ``frame``'s run."""
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        store.META.create(connection)
        store._create_v1(connection)
        connection.execute(store.META.insert().values(key="schema_version", value="1"))
        run, points = _old_run(frame)
        connection.execute(sa.text(f"INSERT INTO runs ({', '.join(run)}) VALUES ({', '.join(':' + k for k in run)})"),
                           run)
        connection.execute(store.POINTS.insert(), points)
    engine.dispose()


def _old_run(frame: pd.DataFrame) -> tuple[dict, list[dict]]:
    """A run's ``runs`` row (version 1's columns) and ``points`` rows as versions 1 and 2 wrote them: every row's
    whole JSON, its board UUID included."""
    run, _, _, _ = store.RunStore._prepare(str(frame["run_id"].iloc[0]), frame, "runner", None, None)
    for name in [*store.ADDED_IN_V2, *store.ADDED_IN_V7, *store.ADDED_IN_V9, *store.ADDED_IN_V10]:
        run.pop(name, None)
    rows = schema.frame_rows(frame)
    points = [{"run_id": run["run_id"], "idx": i, "variant": row["variant"], "direction": row["direction"],
               "bytes": row["bytes"], "median_ms": row["median_ms"], "gbps": row["gbps"],
               "row_json": json.dumps(row, separators=(",", ":"), allow_nan=False)} for i, row in enumerate(rows)]
    return run, points


@pytest.mark.slow
def test_a_version_one_store_is_read_as_it_is_then_migrated_with_each_runs_board(url):
    frame = schema.read_results(next(BUNDLED_DIRS[0].glob("coalescing_*.parquet")))
    board = "GPU-0818954e-aaaa-bbbb-cccc-000000000001"
    frame = frame.assign(gpu_uuid=board)
    _version_one_store(url, frame)
    old = store.RunStore(url)
    assert old.version == 1
    listed = old.runs()  # opening never writes: the old columns are read, the new ones are empty
    assert listed.loc[0, "run_id"] == frame["run_id"].iloc[0] and pd.isna(listed.loc[0, "gpu_uuid"])
    assert old.runs(fleet_id="any").empty
    assert old.migrate() == store.SCHEMA_VERSION == 11
    migrated = old.runs()
    assert migrated.loc[0, "gpu_uuid"] == board and pd.isna(migrated.loc[0, "fleet_id"])
    assert old.load(frame["run_id"].iloc[0])["median_ms"].tolist() == frame["median_ms"].tolist()


def test_fleet_runs_are_stored_with_their_fleet_suite_and_board_and_listed_by_fleet(url):
    runs = store.RunStore(url)
    frame = schema.read_results(POOLS)
    other = schema.read_results(MANAGED)
    runs.save(frame, "fleet", fleet=("fleet-2026-11-25", "health"))
    runs.save(other, "runner")
    fleet = runs.runs(fleet_id="fleet-2026-11-25")
    assert fleet["run_id"].tolist() == [frame["run_id"].iloc[0]]
    assert fleet.loc[0, "suite"] == "health" and fleet.loc[0, "source"] == "fleet"
    expected_board = frame["gpu_uuid"].iloc[0]
    assert fleet.loc[0, "gpu_uuid"] == (expected_board if isinstance(expected_board, str) and expected_board else None)
    assert len(runs.runs()) == 2
    with pytest.raises(store.StoreError, match="fleet id"):
        runs.save(other, "fleet", fleet=("x" * 65, "health"))


def _version_two_store(url: str, frames: list[pd.DataFrame]) -> None:
    """A store as PinPoint wrote it at schema version 2: ``runs.gpu_uuid`` from each run's first row, every row's
    whole JSON with its UUIDs."""
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        store.META.create(connection)
        store._create_v1(connection)
        store.MIGRATIONS[1][1](connection)  # version 2's columns
        connection.execute(store.META.insert().values(key="schema_version", value="2"))
        for frame in frames:
            run, points = _old_run(frame)
            first = frame["gpu_uuid"].iloc[0]
            run["gpu_uuid"] = first if isinstance(first, str) and first else None
            connection.execute(sa.text(f"INSERT INTO runs ({', '.join(run)}) VALUES "
                                       f"({', '.join(':' + k for k in run)})"), run)
            connection.execute(store.POINTS.insert(), [{k: v for k, v in p.items() if k not in store.ADDED_IN_V8}
                                                       for p in points])
    engine.dispose()


@pytest.fixture
def peer_experiment(monkeypatch):
    return pair_frames.register(monkeypatch)


@pytest.mark.slow
def test_a_version_two_store_migrates_keeping_every_run_and_every_board_of_a_peer_run(url, peer_experiment):
    one_board = schema.read_results(POOLS)
    no_board = schema.read_results(MANAGED).assign(gpu_uuid=None)
    node = pair_frames.peer_run("node-8", 8)
    _version_two_store(url, [one_board, no_board, node])
    old = store.RunStore(url)
    assert old.version == 2
    listed = old.runs().set_index("run_id")  # read as it is: version 2 knew one board per run, its first row's
    assert listed.loc["node-8", "gpu_uuid"] == pair_frames.uuid(0, 0)
    assert old.migrate() == store.SCHEMA_VERSION == 11
    migrated = old.runs().set_index("run_id")
    assert len(migrated) == 3
    eight = tuple(pair_frames.uuid(0, g) for g in range(8))
    assert migrated.loc["node-8", "boards"] == eight and pd.isna(migrated.loc["node-8", "gpu_uuid"])
    board = one_board["gpu_uuid"].iloc[0]
    assert migrated.loc[one_board["run_id"].iloc[0], "boards"] == ((board,) if isinstance(board, str) else ())
    assert migrated.loc[no_board["run_id"].iloc[0], "boards"] == ()
    for frame in (one_board, no_board, node):  # every run reads back as it was, UUIDs included
        loaded = old.load(frame["run_id"].iloc[0])
        assert runfiles.content_hash(schema.frame_rows(loaded)) == runfiles.content_hash(schema.frame_rows(frame))
    with old.engine.connect() as connection:  # each board once per run: no row's JSON holds a UUID any more
        texts = connection.execute(sa.text("SELECT row_json FROM points WHERE run_id = 'node-8'")).scalars().all()
        assert texts and not any("GPU-" in t for t in texts)
        assert connection.execute(sa.text("SELECT count(*) FROM run_boards WHERE run_id = 'node-8'")).scalar() == 8
        assert "gpu_uuid" not in {c["name"] for c in sa.inspect(connection).get_columns("runs")}
    # saving the same run again is recognised as the same content
    assert not old.save(node, "import")[0].stored


@pytest.mark.parametrize("gpus", [2, 8])
def test_a_peer_run_stores_each_board_once_and_reads_back_whole(url, peer_experiment, gpus):
    runs = store.RunStore(url)
    node = pair_frames.peer_run("node", gpus)
    [result] = runs.save(node, "runner")
    assert result.stored and result.points == 2 * gpus * (gpus - 1)
    listed = runs.runs()
    assert listed.loc[0, "boards"] == tuple(pair_frames.uuid(0, g) for g in range(gpus))
    assert pd.isna(listed.loc[0, "gpu_uuid"])  # several boards: no one board
    loaded = runs.load("node")
    for column in ("gpu_index", "gpu_uuid", "peer_index", "peer_uuid", "link"):
        assert loaded[column].tolist() == node[column].tolist(), column
    # a row unlike the others of its ordinal keeps its own UUID
    odd = node.copy()
    odd.loc[0, "peer_uuid"] = "GPU-another-board"
    runs.save(odd.assign(run_id="odd"), "runner")
    assert runs.load("odd")["peer_uuid"].tolist() == odd["peer_uuid"].tolist()
    assert runs.trash(ME, ["node"]) and runs.runs()["run_id"].tolist() == ["odd"]


def test_the_bulk_points_read_gives_many_runs_without_samples(url, peer_experiment):
    runs = store.RunStore(url)
    assert runs.points(["none"]).empty  # a new store: nothing, and nothing written
    frames = [pair_frames.peer_run(f"node-{n}", 2, node=n) for n in range(3)]
    for frame in frames:
        runs.save(frame, "fleet", fleet=("f1", "health"))
    runs.save(schema.read_results(MANAGED), "runner")
    fields = ["run_id", "gpu_uuid", "peer_uuid", "gbps", "samples_ms"]
    bulk = runs.points(["node-0", "node-2", "missing"], fields, samples=False)
    assert list(bulk.columns) == fields and len(bulk) == 2 * len(frames[0])
    assert bulk["samples_ms"].isna().all()
    expected = pd.concat([frames[0], frames[2]], ignore_index=True)
    assert bulk["gpu_uuid"].tolist() == expected["gpu_uuid"].tolist()
    assert bulk["peer_uuid"].tolist() == expected["peer_uuid"].tolist()
    assert bulk["gbps"].tolist() == pytest.approx(expected["gbps"].tolist())
    whole = runs.points(["node-1"])
    assert list(whole.columns) == schema.COLUMNS and [list(s) for s in whole["samples_ms"]] == \
        [list(s) for s in frames[1]["samples_ms"]]


def test_the_catalog_names_the_bundled_runs_boards_once_and_lists_them_as_asked(tmp_path, monkeypatch):
    listing = catalog.Catalog(store.RunStore(f"sqlite:///{tmp_path}/runs.sqlite"))
    named = []
    real = boards.run_boards
    monkeypatch.setattr(boards, "run_boards", lambda frame: named.append(1) or real(frame))
    every = listing.runs(with_reference=True)
    assert len(every) == len(listing.bundled) and len(named) >= len(every)
    first_listing = len(named)
    plain = listing.runs()
    transfers = listing.runs("transfers", with_reference=True)
    one_reference = next(r for r in listing.bundled if listing.is_reference(r))
    with_one = listing.runs(with_reference={one_reference})
    assert len(named) == first_listing  # the later listings name no board again
    assert set(plain["run_id"]) == {r for r in listing.bundled if not listing.is_reference(r)}
    assert set(transfers["run_id"]) == {r for r, f in listing.bundled.items() if f["experiment"].iloc[0] == "transfers"}
    assert set(with_one["run_id"]) == set(plain["run_id"]) | {one_reference}
    assert every.loc[every["run_id"] == one_reference, "boards"].iloc[0] == tuple(
        real(listing.bundled[one_reference]))


HEALTH_TRANSFERS = {"sizes": [1048576, 268435456], "modes": ["pageable", "pinned"], "directions": ["h2d", "d2h"],
                    "include_alloc": [False], "methods": ["single", "batched"],
                    "profile": "precise/timeout_s=1,hot_max_noise=1"}


def _version_six_store(url: str, runs: list[tuple[pd.DataFrame, tuple | None]], suites: dict[str, tuple]) -> None:
    """A store as PinPoint wrote it at schema version 6 (before runs kept their parameters): each (frame, fleet) of
    ``runs`` stored as version 6 stored it, and ``suites``: fleet id → (suite name, text) in ``fleet_suites``."""
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        store.META.create(connection)
        for _, step in store.MIGRATIONS[:6]:
            step(connection)
        connection.execute(store.META.insert().values(key="schema_version", value="6"))
        for fleet_id, (name, text) in suites.items():
            connection.execute(store.FLEET_SUITES.insert().values(fleet_id=fleet_id, name=name, toml=text,
                                                                  digest=store.suite_digest(text)))
        for frame, fleet in runs:
            run, boards, points, _ = store.RunStore._prepare(str(frame["run_id"].iloc[0]), frame,
                                                             "fleet" if fleet else "runner", None, None, fleet)
            points = provenance_on_rows(run, points)
            for name in [*store.ADDED_IN_V7, *store.ADDED_IN_V9]:
                run.pop(name)
            connection.execute(sa.text(f"INSERT INTO runs ({', '.join(run)}) VALUES "
                                       f"({', '.join(':' + k for k in run)})"), run)
            if boards:
                connection.execute(store.BOARDS.insert(), boards)
            connection.execute(store.POINTS.insert(), [{k: v for k, v in p.items() if k not in store.ADDED_IN_V8}
                                                       for p in points])
    engine.dispose()


def test_a_version_six_store_migrates_and_its_fleet_runs_get_their_parameters_from_their_suite(url):
    from gpu.experiments import suites

    kept_text = suites.resolve("health").read_text()
    transfers = schema.read_results(next(BUNDLED_DIRS[0].glob("transfers_*.parquet")))
    by_name = transfers.assign(run_id="by-name")  # a fleet stored before fleets kept their suite's text
    runner = schema.read_results(MANAGED)
    _version_six_store(url, [(transfers, ("kept", "health")), (by_name, ("named", "health")), (runner, None)],
                       {"kept": ("health", kept_text)})
    old = store.RunStore(url)
    assert old.version == 6 and old.run_params([runner["run_id"].iloc[0]])["params"].isna().all()
    assert old.migrate() == store.SCHEMA_VERSION == 11
    found = old.run_params([transfers["run_id"].iloc[0], "by-name", runner["run_id"].iloc[0]]).set_index("run_id")
    for run_id in (transfers["run_id"].iloc[0], "by-name"):
        assert json.loads(found.loc[run_id, "params"]) == HEALTH_TRANSFERS and found.loc[run_id, "gpus"] == "one"
        assert found.loc[run_id, "params"] == store.canonical_params(HEALTH_TRANSFERS)
    assert pd.isna(found.loc[runner["run_id"].iloc[0], "params"])  # no suite says what a runner run was asked
    with old.engine.connect() as connection:
        assert connection.execute(sa.text("SELECT what FROM audit")).scalars().one() == \
            f"migrated the runs store from schema version 6 to {store.SCHEMA_VERSION}"


def test_each_run_keeps_its_parameters_through_the_trash_and_hostile_ones_are_refused(url):
    runs = store.RunStore(url)
    frame = schema.read_results(POOLS)
    run_id = frame["run_id"].iloc[0]
    runs.save(frame, "fleet", fleet=("f", "health"), params={run_id: HEALTH_TRANSFERS}, gpus="node")
    expected = store.canonical_params(HEALTH_TRANSFERS)
    assert runs.run_params([run_id]).loc[0, ["params", "gpus"]].tolist() == [expected, "node"]
    actor = Actor.local("cli")
    runs.trash(actor, [run_id])
    assert runs.run_params([run_id]).empty
    runs.restore(actor, [run_id])
    assert runs.run_params([run_id]).loc[0, "params"] == expected
    other = schema.read_results(MANAGED)
    other_id = other["run_id"].iloc[0]
    for bad, why in (("{", "not JSON"), ("[" * 30_000 + "]" * 30_000, "not JSON"), ("[1, 2]", "not an object"),
                     ("x" * 70_000, "over the limit"),
                     ({"sizes": float("nan")}, "cannot be kept as JSON")):
        with pytest.raises(store.StoreError, match=f"run {other_id}: its parameters .*{why}"):
            runs.save(other, "import", params={other_id: bad})
    with pytest.raises(store.StoreError, match="gpus must be one of"):
        runs.save(other, "import", gpus="all")
    assert not runs.has_run(other_id)
    with runs.engine.begin() as connection:  # a huge value written by hand is never read, only measured
        connection.execute(sa.text("UPDATE runs SET params = :p"), {"p": "[" * 100_000})
    huge = runs.run_params([run_id])
    assert pd.isna(huge.loc[0, "params"]) and huge.loc[0, "params_chars"] == 100_000
