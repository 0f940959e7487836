"""The runner's commands for the store's trash, audit trail and database roles: ``trash RUN…``, ``restore RUN…``,
``purge RUN…|--expired``, ``audit [--format csv|json] [--out FILE] [--limit N]`` and ``db-roles``. Each acts as the
person at this shell (``Actor.local("cli")``, passed in), whom the store checks; ``gpu.bench`` turns every refusal
into one line. No Streamlit, no CUDA.
"""

from __future__ import annotations

import sys

from gpu.core import text
from gpu.core.access import Actor
from gpu.core.errors import StoreError
from gpu.core.text import printable
from gpu.results.exchange import runfiles
from gpu.results.persistence import audit, db_roles

STORE_COMMANDS = ("trash", "restore", "purge", "audit")
DONE = {"trash": "moved to the trash", "restore": "restored", "purge": "purged from the trash"}


def add_parsers(sub) -> None:
    """The commands' parsers, on the runner's subparsers."""
    t = sub.add_parser("trash", help="move stored runs to the trash (restorable until purged or expired)")
    t.add_argument("run_ids", nargs="+", metavar="RUN")
    r = sub.add_parser("restore", help="bring runs back from the trash")
    r.add_argument("run_ids", nargs="+", metavar="RUN")
    pu = sub.add_parser("purge", help="delete runs from the trash for good, or every expired one (--expired)")
    pu.add_argument("run_ids", nargs="*", metavar="RUN")
    pu.add_argument("--expired", action="store_true",
                    help="every run kept in the trash longer than PINPOINT_TRASH_DAYS (default 30)")
    a = sub.add_parser("audit", help="export the audit trail (who changed what, when, from where)")
    a.add_argument("--format", choices=audit.FORMATS, default="csv")
    a.add_argument("--out", help="write it here (default: print it)")
    a.add_argument("--limit", type=int, help="only the newest N entries")
    g = sub.add_parser("db-roles", help="print the SQL that makes a PostgreSQL store's owner, writer and reader roles")
    g.add_argument("--owner", default=db_roles.OWNER)
    g.add_argument("--writer", default=db_roles.WRITER)
    g.add_argument("--reader", default=db_roles.READER)


def say_purged(run_ids: list[str]) -> None:
    if run_ids:
        print(printable(f"purged {text.count(len(run_ids), 'expired run')} from the trash: {', '.join(run_ids)}"),
              file=sys.stderr)


def run(runs, me: Actor, args) -> int:
    """trash, restore and purge: all the named runs or, on the first problem, none (StoreError naming it); audit."""
    if args.experiment == "audit":
        if args.out and (problem := runfiles.writable_problem(args.out)):
            raise StoreError(problem)
        exported = audit.export(runs.store.audit_trail(me, args.limit), args.format)
        if args.out:
            try:
                with open(args.out, "w", encoding="utf-8", newline="") as f:
                    f.write(exported)
            except OSError as exc:
                raise StoreError(f"--out {args.out} cannot be written: {exc.strerror or exc}") from None
            print(f"wrote the audit trail to {args.out}", file=sys.stderr)
        else:
            sys.stdout.write(exported)
        return 0
    if args.experiment == "purge" and args.expired == bool(args.run_ids):
        raise StoreError("purge takes run ids or --expired (every run kept in the trash longer than "
                         "PINPOINT_TRASH_DAYS), one of the two")
    if args.experiment == "purge" and args.expired:
        purged = runs.store.purge_expired(me)
        say_purged(purged)
        if not purged:
            print("no run in the trash has expired", file=sys.stderr)
        return 0
    act = {"trash": runs.trash, "restore": runs.store.restore, "purge": runs.store.purge}[args.experiment]
    done = act(me, args.run_ids)
    print(printable(f"{DONE[args.experiment]}: {', '.join(done)}"), file=sys.stderr)
    return 0


def db_roles_command(args) -> int:
    try:
        sys.stdout.write(db_roles.sql(args.owner, args.writer, args.reader))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
