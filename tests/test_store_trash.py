"""The trash, the audit trail and the database roles of the runs store, on SQLite and a real PostgreSQL server:
moving runs to the trash and back, purging, retention, the trail written in the change's own transaction, the
migration from a version 4 store, bad input in one line with nothing lost, and the CLI verbs."""

import csv
import io
import json
from pathlib import Path

import pandas as pd
import pytest
import sqlalchemy as sa

from gpu.core import schema
from gpu.core.access import Actor, Role
from gpu.core.errors import AccessRefused
from gpu.results.exchange import catalog, runfiles
from gpu.results.persistence import audit, changes, migrations, store
from tests import pair_frames
from tests.conftest import new_postgres_database
from tests.old_stores import provenance_on_rows
from tests.test_store_attacks import cli

ROOT = Path(__file__).resolve().parent.parent
MANAGED = next(catalog.BUNDLED_DIRS[1].glob("managed_*.parquet"))
POOLS = next(catalog.BUNDLED_DIRS[1].glob("pools_*.parquet"))
ADMIN = Actor("ada@example.org", Role.ADMIN, "app")
MEMBER = Actor("max@example.org", Role.MEMBER, "app")
VIEWER = Actor("vic@example.org", Role.VIEWER, "app")


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/runs.sqlite"
    return new_postgres_database(request.getfixturevalue("postgres_url"))


def managed(run_id: str) -> pd.DataFrame:
    return schema.read_results(MANAGED).assign(run_id=run_id)


def counts(runs: store.RunStore) -> dict[str, int]:
    with runs.engine.connect() as connection:
        return {t: connection.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar()
                for t in ("runs", "points", "run_boards", "trash", "trash_points", "audit")}


def content(frame: pd.DataFrame) -> str:
    return runfiles.content_hash(schema.frame_rows(frame))


@pytest.mark.slow
def test_a_trashed_run_is_left_out_everywhere_and_restores_whole_with_its_boards(url, monkeypatch):
    pair_frames.register(monkeypatch)
    runs = store.RunStore(url)
    node = pair_frames.peer_run("node-4", 4)
    runs.save(node, "runner", label="peers")
    runs.save(managed("other01"), "import")
    before = content(runs.load("node-4"))
    assert runs.trash(ADMIN, ["node-4"]) == ["node-4"]
    assert runs.runs()["run_id"].tolist() == ["other01"] and not runs.has_run("node-4")
    assert runs.points(["node-4"]).empty and runs.runs(fleet_id="any").empty
    with pytest.raises(store.StoreError, match="no stored run"):
        runs.load("node-4")
    listed = catalog.Catalog(runs).runs()  # Runs, Compare, reports and check read runs through the catalog
    assert "node-4" not in set(listed["run_id"])
    trashed = runs.trashed()
    assert trashed["run_id"].tolist() == ["node-4"] and trashed.loc[0, "trashed_by"] == ADMIN.who
    assert trashed.loc[0, "label"] == "peers" and trashed.loc[0, "reason"] == "trashed"
    assert trashed.loc[0, "expires_at"] > trashed.loc[0, "trashed_at"]
    assert runs.restore(ADMIN, ["node-4"]) == ["node-4"]
    assert content(runs.load("node-4")) == before == content(node)
    assert runs.runs().set_index("run_id").loc["node-4", "boards"] == tuple(pair_frames.uuid(0, g) for g in range(4))
    assert runs.trashed().empty and counts(runs)["trash_points"] == 0


def test_replacing_a_run_on_import_keeps_the_replaced_one_in_the_trash(url):
    runs = store.RunStore(url)
    first = managed("again01")
    runs.save(first, "import")
    second = first.assign(median_ms=first["median_ms"] * 2)
    [result] = runs.save(second, "import", replace=True)
    assert result.replaced and "the replaced one is in the trash" in result.message()
    trashed = runs.trashed()
    assert trashed["run_id"].tolist() == ["again01"] and trashed.loc[0, "reason"] == "replaced"
    # the stored run is the new one; restoring the replaced one asks to move the new one out of the way first
    with pytest.raises(store.StoreError, match="stored again since it was trashed"):
        runs.restore(ADMIN, ["again01"])
    assert content(runs.load("again01")) == content(second)
    runs.trash(ADMIN, ["again01"])
    assert runs.restore(ADMIN, ["again01"]) == ["again01"]  # the latest trashed copy: the second
    assert content(runs.load("again01")) == content(second)
    runs.trash(ADMIN, ["again01"])
    runs.restore(ADMIN, ["again01"])  # then the one replaced on import
    assert len(runs.trashed()) == 1
    assert runs.purge(ADMIN, ["again01"]) == ["again01"] and runs.trashed().empty


def test_replace_is_a_trash_an_admins_refused_to_others_in_one_line_and_audited_as_such(url):
    runs = store.RunStore(url)
    first = managed("theirs01")
    runs.save(first, "import", actor=MEMBER)
    before = counts(runs)
    forged = first.assign(median_ms=first["median_ms"] * 2)
    for actor in (MEMBER, VIEWER):
        with pytest.raises(AccessRefused) as refused:
            runs.save(forged, "import", replace=True, actor=actor)
        assert "\n" not in str(refused.value)
    with pytest.raises(AccessRefused, match=r"^run theirs01 was not replaced, and nothing was written: replace needs "
                                            r"the admin role; max@example.org is a member \(it moves the stored run "
                                            r"to the trash\)$"):
        runs.save(forged, "import", replace=True, actor=MEMBER)
    assert counts(runs) == before and runs.trashed().empty
    assert content(runs.load("theirs01")) == content(first)
    [result] = runs.save(forged, "import", replace=True, actor=ADMIN)
    assert result.replaced and runs.trashed().loc[0, "trashed_by"] == ADMIN.who
    trail = runs.audit_trail(ADMIN)
    trash_row = trail[trail["action"] == "trash"].iloc[0]
    assert trash_row["who"] == ADMIN.who and trash_row["run_ids"] == ["theirs01"]
    assert trash_row["what"].startswith("trashed run theirs01") and "replaced by an import" in trash_row["what"]


def test_a_label_set_to_the_value_it_has_writes_no_audit_row(url):
    runs = store.RunStore(url)
    runs.save(managed("label001"), "import", label="same")
    rows = counts(runs)["audit"]
    runs.set_label(MEMBER, "label001", "same")
    assert counts(runs)["audit"] == rows
    runs.set_label(MEMBER, "label001", "other")
    assert counts(runs)["audit"] == rows + 1


def test_bad_input_is_one_line_and_changes_nothing(url):
    runs = store.RunStore(url)
    runs.save(managed("live0001"), "import")
    runs.save(managed("gone0001"), "import")
    runs.trash(ADMIN, ["gone0001"])
    before = counts(runs)
    cases = [
        (runs.trash, ["gone0001"], "run gone0001 is already in the trash \\(moved there .* by ada@example.org\\)"),
        (runs.trash, ["live0001", "nosuch01"], "no stored run with id nosuch01: nothing was changed"),
        (runs.restore, ["live0001"], "run live0001 is not in the trash \\(it is stored\\)"),
        (runs.restore, ["nosuch01"], "no run with id nosuch01 in the trash"),
        (runs.purge, ["live0001"], "run live0001 is not in the trash"),
        (runs.trash, [], "name at least one run id"),
    ]
    for act, ids, message in cases:
        with pytest.raises(store.StoreError, match=message) as caught:
            act(ADMIN, ids)
        assert "\n" not in str(caught.value)
        assert counts(runs) == before  # all or none: live0001 was not trashed with nosuch01
    runs.purge(ADMIN, ["gone0001"])
    purged = counts(runs)
    for act in (runs.restore, runs.purge):
        with pytest.raises(store.StoreError, match="run gone0001 was purged from the trash on .* by ada@example.org: "
                                                   "it cannot be"):
            act(ADMIN, ["gone0001"])
    assert counts(runs) == purged


def test_a_bundled_run_cannot_be_trashed(url):
    runs = catalog.Catalog(store.RunStore(url))
    bundled = next(iter(runs.bundled))
    with pytest.raises(store.StoreError, match=f"run {bundled} is bundled with PinPoint .*, a file in git\\): it "
                                               "cannot be moved to the trash"):
        runs.trash(ADMIN, [bundled])


def test_each_change_checks_the_actor_before_touching_anything(url):
    runs = store.RunStore(url)
    runs.save(managed("mine0001"), "import")
    before = counts(runs)
    for act, needs in ((runs.trash, "admin"), (runs.restore, "admin"), (runs.purge, "admin")):
        for actor in (VIEWER, MEMBER):
            with pytest.raises(AccessRefused, match=f"needs the {needs} role"):
                act(actor, ["mine0001"])
    with pytest.raises(AccessRefused, match="label needs the member role"):
        runs.set_label(VIEWER, "mine0001", "x")
    with pytest.raises(AccessRefused, match="import needs the member role"):
        runs.save(managed("mine0002"), "import", actor=VIEWER)
    with pytest.raises(AccessRefused, match="measure needs the member role"):
        runs.save(managed("mine0002"), "live", actor=VIEWER)
    with pytest.raises(AccessRefused, match="audit needs the admin role"):
        runs.audit_trail(MEMBER)
    with pytest.raises(AccessRefused):
        runs.purge_expired(MEMBER)
    assert counts(runs) == before


def test_every_change_is_in_the_audit_trail_with_who_role_source_and_runs(url):
    runs = store.RunStore(url)
    runs.save(managed("imp00001"), "import", actor=MEMBER)
    runs.save(managed("imp00001"), "import", actor=MEMBER)  # the same content: nothing written, nothing recorded
    runs.save(managed("live0001"), "live", actor=MEMBER)
    runs.save(managed("node0001"), "runner")
    runs.save(managed("flt00001"), "fleet", fleet=("fleet-1", "health"))
    runs.set_label(MEMBER, "live0001", "after driver 590")
    runs.trash(ADMIN, ["imp00001", "live0001"])
    runs.restore(ADMIN, ["live0001"])
    runs.purge(ADMIN, ["imp00001"])
    trail = runs.audit_trail(ADMIN).iloc[::-1].reset_index(drop=True)
    assert trail["action"].tolist() == ["migrate", "import", "measure", "measure", "measure", "label", "trash",
                                        "restore", "purge"]
    assert trail["run_ids"].tolist() == [[], ["imp00001"], ["live0001"], ["node0001"], ["flt00001"], ["live0001"],
                                         ["imp00001", "live0001"], ["live0001"], ["imp00001"]]
    local = Actor.local("cli")
    assert trail["who"].tolist()[1:] == [MEMBER.who, MEMBER.who, local.who, local.who, MEMBER.who, ADMIN.who,
                                         ADMIN.who, ADMIN.who]
    assert trail["source"].tolist()[1:] == ["app", "app", "cli", "fleet", "app", "app", "app", "app"]
    assert trail["role"].tolist()[1:3] == ["member", "member"]
    assert trail.loc[0, "what"] == f"created the runs store at schema version {store.SCHEMA_VERSION}"
    assert trail.loc[5, "what"] == 'label null → "after driver 590"'
    assert trail["at"].is_monotonic_increasing


@pytest.mark.parametrize("action", ["trash", "restore", "purge", "label", "import"])
@pytest.mark.slow
def test_a_failure_after_the_audit_row_leaves_neither_the_change_nor_the_row(url, monkeypatch, action):
    runs = store.RunStore(url)
    runs.save(managed("atom0001"), "import")
    if action in ("restore", "purge"):
        runs.trash(ADMIN, ["atom0001"])
    before, listed, trashed = counts(runs), runs.runs(), runs.trashed()
    real = store.record

    def record_then_fail(connection, *args):
        real(connection, *args)
        raise sa.exc.OperationalError("after the audit row", {}, Exception("the server went away"))

    monkeypatch.setattr(store, "record", record_then_fail)  # a save's audit row
    monkeypatch.setattr(changes, "record", record_then_fail)  # a trash, restore, purge or label change's
    with pytest.raises(store.StoreError, match="went away"):
        if action == "label":
            runs.set_label(ADMIN, "atom0001", "changed")
        elif action == "import":
            runs.save(managed("atom0002"), "import", actor=ADMIN)
        else:
            getattr(runs, action)(ADMIN, ["atom0001"])
    assert counts(runs) == before
    pd.testing.assert_frame_equal(runs.runs(), listed)
    pd.testing.assert_frame_equal(runs.trashed(), trashed)


def test_trash_expires_after_the_retention_and_the_purge_is_recorded(url, monkeypatch):
    runs = store.RunStore(url)
    for run_id in ("old00001", "new00001"):
        runs.save(managed(run_id), "import")
    runs.trash(ADMIN, ["old00001", "new00001"])
    with runs.engine.begin() as connection:  # trashed 31 days ago
        connection.execute(sa.text("UPDATE trash SET trashed_at = '2000-01-01T00:00:00+00:00' "
                                   "WHERE run_id = 'old00001'"))
    with pytest.raises(store.StoreError, match="expired in the trash on 2000-01-31T00:00:00\\+00:00 \\(kept 30 days"):
        runs.restore(ADMIN, ["old00001"])
    assert runs.purge_expired(ADMIN) == ["old00001"]
    assert runs.trashed()["run_id"].tolist() == ["new00001"]
    last = runs.audit_trail(ADMIN).iloc[0]
    assert last["action"] == "purge" and last["run_ids"] == ["old00001"] and "expired" in last["what"]
    assert runs.purge_expired(ADMIN) == [] and runs.audit_trail(ADMIN).iloc[0]["what"] == last["what"]
    runs.save(managed("old00002"), "import")
    runs.trash(ADMIN, ["old00002"])
    with runs.engine.begin() as connection:
        connection.execute(sa.text("UPDATE trash SET trashed_at = '2000-01-01T00:00:00+00:00' "
                                   "WHERE run_id = 'old00002'"))
    runs.restore(ADMIN, ["new00001"])  # changing the trash purges what expired in it, recorded apart
    assert runs.trashed().empty
    trail = runs.audit_trail(ADMIN)
    assert trail["action"].tolist()[:2] == ["purge", "restore"] and trail.loc[0, "run_ids"] == ["old00002"]
    monkeypatch.setenv("PINPOINT_TRASH_DAYS", "0")
    runs.trash(ADMIN, ["new00001"])
    assert runs.purge_expired(ADMIN) == [] and runs.trashed().empty  # kept 0 days: purged with the trashing
    monkeypatch.setenv("PINPOINT_TRASH_DAYS", "a month")
    with pytest.raises(store.StoreError, match="PINPOINT_TRASH_DAYS is a month: give the days"):
        runs.purge_expired(ADMIN)


def _version_four_store(url: str, frames: list[pd.DataFrame]) -> None:
    """A store as PinPoint wrote it at schema version 4 (its steps, then its runs as version 4 stored them)."""
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        store.META.create(connection)
        for _, step in store.MIGRATIONS[:4]:
            step(connection)
        connection.execute(store.META.insert().values(key="schema_version", value="4"))
        for frame in frames:
            run, boards, points, _ = store.RunStore._prepare(str(frame["run_id"].iloc[0]), frame, "runner", "old",
                                                             None)
            points = provenance_on_rows(run, points)
            for name in [*store.ADDED_IN_V7, *store.ADDED_IN_V9]:  # columns of later versions
                run.pop(name)
            connection.execute(store.RUNS.insert().values(run))
            if boards:
                connection.execute(store.BOARDS.insert(), boards)
            connection.execute(store.POINTS.insert(), [{k: v for k, v in p.items() if k not in store.ADDED_IN_V8}
                                                       for p in points])
    engine.dispose()


@pytest.mark.slow
def test_a_version_four_store_migrates_to_the_newest_keeping_every_run_and_recording_it(url):
    frames = [managed("four0001"), schema.read_results(POOLS)]
    _version_four_store(url, frames)
    old = store.RunStore(url)
    assert old.version == 4 and old.trashed().empty and old.audit_trail(ADMIN).empty  # read as it is
    listed = old.runs()
    with pytest.raises(AccessRefused, match="migrate needs the admin role"):
        old.save(managed("four0002"), "live", actor=MEMBER)  # upgrading a store is an admin's
    assert old.version == 4
    assert old.migrate(ADMIN) == store.SCHEMA_VERSION == 11
    pd.testing.assert_frame_equal(old.runs(), listed)
    for frame in frames:
        assert content(old.load(frame["run_id"].iloc[0])) == content(frame)
    [row] = old.audit_trail(ADMIN).to_dict("records")
    assert row["action"] == "migrate"
    assert row["what"] == f"migrated the runs store from schema version 4 to {store.SCHEMA_VERSION}"
    assert row["who"] == ADMIN.who
    with old.engine.connect() as connection:
        assert {"trash", "trash_points", "audit"} <= set(sa.inspect(connection).get_table_names())
    assert old.trash(ADMIN, ["four0001"]) and old.restore(ADMIN, ["four0001"])


def test_a_failing_migration_step_leaves_the_version_four_store_as_it_was(url, monkeypatch):
    _version_four_store(url, [managed("four0001")])

    def broken(connection):
        migrations.TRASH.create(connection)
        raise sa.exc.OperationalError("step 5", {}, Exception("disk full"))

    monkeypatch.setattr(migrations, "MIGRATIONS", [*migrations.MIGRATIONS[:4], (5, broken)])
    with pytest.raises(store.StoreError, match="disk full"):
        store.RunStore(url).migrate(ADMIN)
    again = store.RunStore(url)
    assert again.version == 4 and again.runs()["run_id"].tolist() == ["four0001"]
    with again.engine.connect() as connection:
        assert "trash" not in set(sa.inspect(connection).get_table_names())


# --- the CLI verbs -------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_the_cli_trashes_restores_purges_and_exports_the_trail(tmp_path):
    env = {"PINPOINT_DB_URL": f"sqlite:///{tmp_path}/runs.sqlite"}
    runs = store.RunStore(env["PINPOINT_DB_URL"])
    runs.save(managed("cli00001"), "import")
    runs.save(managed("cli00002"), "import")
    done = cli("trash", "cli00001", "cli00002", env=env)
    assert done.returncode == 0 and "moved to the trash: cli00001, cli00002" in done.stderr
    again = cli("trash", "cli00001", env=env)
    assert again.returncode == 2 and again.stderr.count("\n") == 1
    assert again.stderr.startswith("error: run cli00001 is already in the trash")
    assert cli("restore", "cli00002", env=env).returncode == 0 and runs.has_run("cli00002")
    assert cli("purge", "cli00001", env=env).returncode == 0
    gone = cli("restore", "cli00001", env=env)
    assert gone.returncode == 2 and "was purged from the trash on" in gone.stderr and "Traceback" not in gone.stderr
    unknown = cli("restore", "nosuch01", env=env)
    assert unknown.returncode == 2 and "no run with id nosuch01 in the trash" in unknown.stderr
    bundled = next(iter(catalog.Catalog(runs).bundled))
    refused = cli("trash", bundled, env=env)
    assert refused.returncode == 2 and "a file in git): it cannot be moved to the trash" in refused.stderr
    both = cli("purge", "x", "--expired", env=env)
    assert both.returncode == 2 and "run ids or --expired" in both.stderr
    assert cli("purge", "--expired", env=env).stderr.strip() == "no run in the trash has expired"
    exported = cli("audit", "--format", "json", env=env)
    entries = json.loads(exported.stdout)
    assert [e["action"] for e in entries][:4] == ["purge", "restore", "trash", "import"]
    assert entries[0]["source"] == "cli" and entries[0]["who"] == Actor.local("cli").who
    out = tmp_path / "audit.csv"
    assert cli("audit", "--format", "csv", "--out", str(out), env=env).returncode == 0
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert rows[0]["action"] == "purge" and rows[0]["run_ids"] == "cli00001" and len(rows) == len(entries)


@pytest.mark.slow
def test_hostile_text_in_the_trail_exports_safely(tmp_path):
    env = {"PINPOINT_DB_URL": f"sqlite:///{tmp_path}/runs.sqlite"}
    runs = store.RunStore(env["PINPOINT_DB_URL"])
    runs.save(managed("hostile1"), "import")
    who = "=HYPERLINK(\"http://evil\")\n\x1b[2J\x1b]0;pwned\x07\x9b" + "w" * 10_000
    runs.set_label(Actor(who, Role.ADMIN, "app"), "hostile1", "line one\nline two\r\n\x1b[31m")
    shown = cli("audit", env=env)  # CSV on the terminal: one line per entry, no control character
    assert shown.returncode == 0
    lines = shown.stdout.split("\r\n")
    assert len([line for line in lines if line]) == 1 + len(runs.audit_trail(ADMIN))
    assert not any(c in shown.stdout for c in "\x1b\x07\x9b\n".replace("\n", "")) and "\\x1b" in shown.stdout
    [first] = [r for r in csv.DictReader(io.StringIO(shown.stdout)) if r["action"] == "label"]
    assert first["who"].startswith("'=HYPERLINK") and len(first["who"]) > 10_000  # whole, and no formula
    as_json = cli("audit", "--format", "json", env=env).stdout
    assert as_json.isascii() and not any(ord(c) < 32 and c != "\n" for c in as_json)
    assert json.loads(as_json)[0]["who"] == who  # JSON keeps the field exactly
    table = audit.shown(runs.audit_trail(ADMIN))
    assert len(table.loc[0, "who"]) < 300 and "\n" not in table.loc[0, "what"]


def test_db_roles_prints_the_sql_the_docs_show():
    shown = cli("db-roles")
    docs = (ROOT / "docs" / "operations" / "database-roles.md").read_text()
    block = docs.split("```sql\n", 1)[1].split("```", 1)[0]
    assert shown.returncode == 0 and shown.stdout == block
    assert cli("db-roles", "--reader", "Robert'; DROP").returncode == 2


# --- PostgreSQL roles: the SQL the docs show, run against the real server --------------------------------------------
@pytest.mark.slow
def test_postgresql_roles_read_write_and_own_as_documented(postgres_url, tmp_path):
    from gpu.results.persistence import db_roles

    base = new_postgres_database(postgres_url)
    name = base.rsplit("/", 1)[1]
    admin = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        exists = connection.execute(sa.text("SELECT 1 FROM pg_roles WHERE rolname = 'pinpoint'")).first()
        if not exists:
            connection.execute(sa.text("CREATE ROLE pinpoint LOGIN"))
        connection.execute(sa.text(f'ALTER DATABASE "{name}" OWNER TO pinpoint'))
    admin.dispose()
    as_role = {role: base.replace("//postgres@", f"//{role}@") for role in
               (db_roles.OWNER, db_roles.WRITER, db_roles.READER)}
    owner = as_role[db_roles.OWNER]
    assert cli("migrate", env={"PINPOINT_DB_URL": owner}).returncode == 0  # the owner makes the tables
    store.RunStore(owner).save(managed("pg000001"), "import")
    superuser = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    with superuser.connect() as connection:
        written_before = connection.exec_driver_sql("SELECT max(audit_id) FROM audit").scalar()
        connection.exec_driver_sql(db_roles.sql())  # the docs' SQL (test above), as a superuser
        connection.exec_driver_sql(db_roles.sql())  # and again: every statement may run again
    superuser.dispose()

    writer = store.RunStore(as_role[db_roles.WRITER])
    writer.save(managed("pg000002"), "live", actor=MEMBER)
    writer.save(managed("pg000002").assign(median_ms=1.0), "import", replace=True, actor=ADMIN)
    writer.set_label(MEMBER, "pg000002", "from a node")
    writer.trash(ADMIN, ["pg000001"])
    writer.restore(ADMIN, ["pg000001"])
    writer.purge(ADMIN, ["pg000002"])  # the copy replaced on import
    writer.trash(ADMIN, ["pg000002"])
    assert writer.runs()["run_id"].tolist() == ["pg000001"]
    for statement in ("DROP TABLE runs", "ALTER TABLE runs ADD COLUMN x text", "DELETE FROM audit",
                      "UPDATE audit SET who = 'nobody'", "UPDATE pinpoint_meta SET value = '9'"):
        with writer.engine.begin() as connection, pytest.raises(sa.exc.ProgrammingError,
                                                                match="permission denied|must be owner"):
            connection.exec_driver_sql(statement)

    env = {"PINPOINT_DB_URL": as_role[db_roles.READER]}
    reader = store.RunStore(env["PINPOINT_DB_URL"])
    assert reader.runs()["run_id"].tolist() == ["pg000001"]
    assert reader.trashed()["run_id"].tolist() == ["pg000002"]
    assert cli("runs", env=env).returncode == 0
    assert cli("export", "pg000001", "--out", str(tmp_path / "r.parquet"), env=env).returncode == 0
    assert cli("audit", "--format", "json", env=env).returncode == 0
    bundled = schema.read_results(next(catalog.BUNDLED_DIRS[0].glob("managed_*.parquet")))["run_id"].iloc[0]
    assert cli("report", "--baseline", bundled, "--candidate", "pg000001", "--out", str(tmp_path / "r.html"),
               env=env).returncode == 0
    for args in (("trash", "pg000001"), ("import", str(MANAGED))):
        refused = cli(*args, env=env)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
        [line] = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
        assert f"role {db_roles.READER} may not do it" in line and "permission denied" in line
    assert cli("migrate", env={"PINPOINT_DB_URL": as_role[db_roles.WRITER]}).returncode == 0  # at version: nothing
    assert counts(store.RunStore(owner))["runs"] == 1

    # The writer forges audit rows: its own ids (the next ones, to squat them) and times. The server's trigger
    # gives each row the sequence's next id and the server's time; every later change still writes its row.
    with writer.engine.begin() as connection:
        last = connection.exec_driver_sql("SELECT max(audit_id) FROM audit").scalar()
        for forged_id in (last + 1, last + 2, last + 3, last + 4, 10**6):
            connection.exec_driver_sql(
                "INSERT INTO audit (audit_id, at, who, role, source, action, run_ids, what) VALUES "
                f"({forged_id}, '2020-01-01T00:00:00+00:00', 'ada@example.org', 'admin', 'cli', 'purge', "
                "'[\"pg000001\"]', 'purged')")
    writer.set_label(MEMBER, "pg000001", "after the forgery")  # takes the next id: not refused
    with store.RunStore(owner).engine.connect() as connection:
        rows = connection.exec_driver_sql("SELECT audit_id, at, action, what FROM audit ORDER BY audit_id").all()
    forged = [row for row in rows if row.what == "purged"]
    trashed_at = max(row.at for row in rows if row.action == "trash")
    assert len(forged) == 5 and all(row.at >= trashed_at for row in forged)  # the server's time, not 2020
    assert [row.audit_id for row in forged] == list(range(last + 1, last + 6))  # the sequence's: 10**6 was not
    assert rows[-1].action == "label" and rows[-1].audit_id == last + 6

    # What the server knows of each row and the writer cannot set: the login that wrote it. Forged rows name the
    # writer's login as the app's own rows do; a node given a login of its own (a member of the writer role) is
    # named by it. Rows from before the SQL ran have no origin.
    with sa.create_engine(base, isolation_level="AUTOCOMMIT").connect() as connection:
        connection.exec_driver_sql("DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'pinpoint_node_a') "
                                   "THEN CREATE ROLE pinpoint_node_a LOGIN; END IF; END $$")
        connection.exec_driver_sql(f"GRANT {db_roles.WRITER} TO pinpoint_node_a")
    store.RunStore(base.replace("//postgres@", "//pinpoint_node_a@")).set_label(MEMBER, "pg000001", "from node a")
    owner_store = store.RunStore(owner)
    with owner_store.engine.connect() as connection:
        origins = dict(connection.exec_driver_sql("SELECT audit_id, db_user FROM audit_origin").all())
        ids = [row[0] for row in connection.exec_driver_sql("SELECT audit_id FROM audit ORDER BY audit_id")]
    assert set(origins) == {i for i in ids if i > written_before} and ids[-1] == last + 7
    assert {origins[row.audit_id] for row in forged} == {db_roles.WRITER} == {origins[last + 6]}
    assert origins[last + 7] == "pinpoint_node_a"
    for statement in ("INSERT INTO audit_origin VALUES (1, 'ada', NULL, 1, 'x')", "UPDATE audit_origin SET db_user = "
                      "'ada'", "DELETE FROM audit_origin", "TRUNCATE audit"):
        with writer.engine.begin() as connection, pytest.raises(sa.exc.ProgrammingError, match="permission denied"):
            connection.exec_driver_sql(statement)
    # no role rewrites the trail, its owner included (short of dropping the triggers it owns: see the docs)
    for statement in ("UPDATE audit SET who = 'nobody'", "DELETE FROM audit", "TRUNCATE audit",
                      "UPDATE audit_origin SET db_user = 'ada'", "DELETE FROM audit_origin", "TRUNCATE audit_origin"):
        with owner_store.engine.begin() as connection, pytest.raises(sa.exc.ProgrammingError,
                                                                     match="appended to, never rewritten"):
            connection.exec_driver_sql(statement)
    assert counts(owner_store)["audit"] == len(ids)


def test_importing_another_store_leaves_its_trash_behind(tmp_path):
    fleet_file = store.RunStore(f"sqlite:///{tmp_path}/fleet.sqlite")
    fleet_file.save(managed("keep0001"), "fleet", fleet=("fleet-1", "health"))
    fleet_file.save(managed("drop0001"), "fleet", fleet=("fleet-1", "health"))
    fleet_file.trash(ADMIN, ["drop0001"])
    fleet_file.close()
    team = catalog.Catalog(store.RunStore(f"sqlite:///{tmp_path}/team.sqlite"))
    assert [r.run_id for r in team.import_store("fleet.sqlite", tmp_path / "fleet.sqlite", actor=MEMBER)] == \
        ["keep0001"]
    assert team.store.trashed().empty
    [row] = team.store.audit_trail(ADMIN).head(1).to_dict("records")
    assert row["action"] == "import" and row["run_ids"] == ["keep0001"] and row["who"] == MEMBER.who


def test_audits_arguments_are_checked_in_one_line(url, monkeypatch, capsys, tmp_path):
    from gpu import bench

    runs = store.RunStore(url)
    runs.save(managed("audit001"), "import")
    monkeypatch.setenv("PINPOINT_DB_URL", url)
    (tmp_path / "folder").mkdir()
    for args, says in ((["--limit", "-5"], "--limit must be a whole number of entries, 1 or more; got -5"),
                       (["--limit", "0"], "--limit must be a whole number of entries, 1 or more; got 0"),
                       (["--out", "/proc/x"], "--out /proc/x cannot be written"),
                       (["--out", f"{tmp_path}/missing/trail.csv"], "cannot be written: no such folder"),
                       (["--out", f"{tmp_path}/folder"], "is not a regular file")):
        code = bench.main(["audit", *args])
        out, err = capsys.readouterr()
        assert code == 2 and out == "" and err.startswith("error: ") and says in err, err
        assert len(err.strip().splitlines()) == 1 and "unexpected" not in err
    assert bench.main(["audit", "--limit", "1", "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 1
