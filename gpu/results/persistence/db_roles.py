"""The PostgreSQL roles of a team's runs store, as SQL (``python -m gpu.bench db-roles`` prints it):

* the **owner** (default ``pinpoint``, the database's owner): owns the tables, so only it migrates
  (``pinpoint migrate``), alters or drops them;
* the **writer** (``pinpoint_writer``), for measuring nodes, fleets and the app: reads; inserts runs, points,
  boards, fleet suites and audit rows (whose ids and times a trigger takes from the server: ``AUDIT_STAMP``; and
  whose database login another records where the writer cannot write: ``audit_origin``);
  takes, renews and releases fleet leases; moves runs to the trash, restores
  and purges them, replaces and relabels runs (deletes and updates on the runs tables); never alters or drops a
  table; no role, the owner included, updates, deletes or truncates an audit row (a trigger refuses it);
* the **reader** (``pinpoint_reader``): reads every table (Runs, Compare, reports, the Fleet page); a write is
  refused by the server, which PinPoint says in one line naming the role.

Run it as a superuser, connected to the store's database, after the owner made the tables (``pinpoint migrate``),
and again after an upgrade that adds tables: every statement can run again. Default privileges give tables the owner
makes later reads (both roles) and inserts (the writer) until then.
"""

from __future__ import annotations

import re

from gpu.results.persistence.migrations import (
    AUDIT,
    BOARDS,
    FLEET_LEASES,
    FLEET_SUITES,
    META,
    POINTS,
    RUNS,
    TRASH,
    TRASH_POINTS,
)

OWNER, WRITER, READER = "pinpoint", "pinpoint_writer", "pinpoint_reader"
# What the writer may do to each table beyond reading it.
WRITER_GRANTS = {
    RUNS.name: "INSERT, UPDATE, DELETE",  # update: labels; delete: to the trash, replace
    POINTS.name: "INSERT, DELETE",
    BOARDS.name: "INSERT, DELETE",
    FLEET_SUITES.name: "INSERT",
    FLEET_LEASES.name: "INSERT, UPDATE, DELETE",  # a fleet command takes, renews and releases its lease
    TRASH.name: "INSERT, DELETE",  # delete: restore, purge
    TRASH_POINTS.name: "INSERT, DELETE",
    AUDIT.name: "INSERT",  # the trail is appended to, never rewritten
    META.name: "",
}
# A trigger owned by the table's owner, which the writer can neither drop nor alter: each audit row's id is the
# sequence's next one and its time the server's clock, whatever the INSERT gave, so a writer can neither date a row
# nor squat the ids later changes take. The sequence continues past any id already taken.
AUDIT_STAMP = [
    "CREATE OR REPLACE FUNCTION pinpoint_audit_stamp() RETURNS trigger LANGUAGE plpgsql AS $f$",
    f"DECLARE ids regclass := pg_get_serial_sequence('{AUDIT.name}', 'audit_id');",
    "BEGIN",
    "  BEGIN  -- the id the column's default just took from the sequence is kept; any other is replaced",
    "    IF NEW.audit_id IS DISTINCT FROM currval(ids) THEN NEW.audit_id := nextval(ids); END IF;",
    "  EXCEPTION WHEN object_not_in_prerequisite_state THEN NEW.audit_id := nextval(ids);",
    "  END;",
    "  NEW.at := to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS') || '+00:00';",
    "  RETURN NEW;",
    "END $f$;",
    f"DROP TRIGGER IF EXISTS pinpoint_audit_stamp ON {AUDIT.name};",
    f"CREATE TRIGGER pinpoint_audit_stamp BEFORE INSERT ON {AUDIT.name} FOR EACH ROW "
    "EXECUTE FUNCTION pinpoint_audit_stamp();",
    f"SELECT setval(pg_get_serial_sequence('{AUDIT.name}', 'audit_id'), "
    f"GREATEST((SELECT max(audit_id) FROM {AUDIT.name}), 1));",
]
# Who wrote each audit row as the database knows it, in a table the writer may read but not write: the login role
# (session_user: a SET ROLE does not change it), its address and backend, written by a trigger that runs as the
# table's owner. The app's ``who`` is the app's word; ``db_user`` is the server's.
AUDIT_ORIGIN_TABLE = "audit_origin"


def audit_origin(owner: str) -> list[str]:
    """The SQL of ``AUDIT_ORIGIN_TABLE``, its trigger, and the trail's immutability (every statement may run
    again)."""
    return [
        f"CREATE TABLE IF NOT EXISTS {AUDIT_ORIGIN_TABLE} (audit_id bigint PRIMARY KEY, db_user text NOT NULL, "
        "client_addr inet, backend_pid integer NOT NULL, at text NOT NULL);",
        f"ALTER TABLE {AUDIT_ORIGIN_TABLE} OWNER TO {owner};",
        "CREATE OR REPLACE FUNCTION pinpoint_audit_origin() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER",
        "SET search_path = pg_catalog, public AS $f$",
        "BEGIN",
        f"  INSERT INTO {AUDIT_ORIGIN_TABLE} (audit_id, db_user, client_addr, backend_pid, at)",
        "    VALUES (NEW.audit_id, session_user, inet_client_addr(), pg_backend_pid(), NEW.at);",
        "  RETURN NULL;",
        "END $f$;",
        f"ALTER FUNCTION pinpoint_audit_origin() OWNER TO {owner};",
        "REVOKE ALL ON FUNCTION pinpoint_audit_origin() FROM PUBLIC;",
        f"DROP TRIGGER IF EXISTS pinpoint_audit_origin ON {AUDIT.name};",
        f"CREATE TRIGGER pinpoint_audit_origin AFTER INSERT ON {AUDIT.name} FOR EACH ROW "
        "EXECUTE FUNCTION pinpoint_audit_origin();",
        "-- the trail and its origins are appended to, never rewritten: by no role, the owner's included",
        "CREATE OR REPLACE FUNCTION pinpoint_audit_kept() RETURNS trigger LANGUAGE plpgsql AS $f$",
        "BEGIN",
        "  RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',",
        "    MESSAGE = 'the audit trail is appended to, never rewritten (' || TG_OP || ' on ' || TG_TABLE_NAME || ')';",
        "END $f$;",
        *(statement for table in (AUDIT.name, AUDIT_ORIGIN_TABLE) for statement in (
            f"DROP TRIGGER IF EXISTS pinpoint_audit_kept ON {table};",
            f"CREATE TRIGGER pinpoint_audit_kept BEFORE UPDATE OR DELETE ON {table} FOR EACH ROW "
            "EXECUTE FUNCTION pinpoint_audit_kept();",
            f"DROP TRIGGER IF EXISTS pinpoint_audit_kept_whole ON {table};",
            f"CREATE TRIGGER pinpoint_audit_kept_whole BEFORE TRUNCATE ON {table} FOR EACH STATEMENT "
            "EXECUTE FUNCTION pinpoint_audit_kept();")),
    ]


_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def sql(owner: str = OWNER, writer: str = WRITER, reader: str = READER) -> str:
    """The script, for role names that need no quoting (lower-case letters, digits, underscores)."""
    for name in (owner, writer, reader):
        if not _NAME.fullmatch(name):
            raise ValueError(f"role name {name[:40]!r} is not a plain PostgreSQL name (a-z, 0-9, _; at most 63)")
    tables = ", ".join(WRITER_GRANTS)
    lines = [
        "-- PinPoint's database roles. Run as a superuser connected to the runs store's database, after",
        f"-- `pinpoint migrate` as {owner} (the owner) made the tables; every statement may run again.",
        "DO $$ BEGIN",
        *(f"  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{name}') THEN CREATE ROLE {name} LOGIN; END IF;"
          for name in (owner, writer, reader)),
        "END $$;",
        "REVOKE CREATE ON SCHEMA public FROM PUBLIC;",
        f"GRANT USAGE, CREATE ON SCHEMA public TO {owner};",
        f"GRANT USAGE ON SCHEMA public TO {writer}, {reader};",
        f"-- {reader}: reads every table, writes none",
        f"GRANT SELECT ON {tables} TO {reader};",
        f"-- {writer}: measures, imports, labels, trashes, restores and purges; appends to the audit trail",
        f"REVOKE ALL ON {tables} FROM {writer};",
        f"GRANT SELECT ON {tables} TO {writer};",
        *(f"GRANT {grant} ON {table} TO {writer};" for table, grant in WRITER_GRANTS.items() if grant),
        f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {writer};",
        f"-- tables {owner} makes later (a migration) can be read, and appended to by {writer}",
        f"ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA public GRANT SELECT ON TABLES TO {reader};",
        f"ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA public GRANT SELECT, INSERT ON TABLES TO {writer};",
        f"ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO {writer};",
        f"-- the audit trail's ids and times come from the server, whatever an INSERT by {writer} says",
        *AUDIT_STAMP,
        f"-- each audit row's database login, address and backend, in {AUDIT_ORIGIN_TABLE}: read by both, written by "
        "neither",
        *audit_origin(owner),
        f"REVOKE ALL ON {AUDIT_ORIGIN_TABLE} FROM PUBLIC, {writer}, {reader};",
        f"GRANT SELECT ON {AUDIT_ORIGIN_TABLE} TO {writer}, {reader};",
    ]
    return "\n".join(lines) + "\n"
