"""``python -m gpu.bench fleet SUITE --cluster local|slurm|tcp://HOST:PORT``: the runner's fleet command.

Exit codes: 0 every GPU ran the whole suite; 1 some (GPU, experiment) pair failed (each named, with its reason;
the rest is stored); 2 nothing was measured: a bad suite (file and line), a store that cannot be written, a bad
fleet id, a fleet id that another command is measuring (its lease, ``gpu.results.persistence.leases``), a resume
whose suite measures differently from the stored one (what changed named), or no cluster (each one line)."""

from __future__ import annotations

import re
import sys

from gpu.core.access import Actor
from gpu.core.errors import FleetError, StoreError
from gpu.core.text import printable
from gpu.experiments import suites
from gpu.fleet.cluster import check_spec, open_cluster
from gpu.fleet.resume import stored_pairs, suite_as_stored
from gpu.fleet.run import Progress, new_fleet_id, run_fleet, summary
from gpu.results.exchange.catalog import Catalog
from gpu.results.persistence.leases import FleetLease
from gpu.service.backends import worker_service

FLEET_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")


def fleet_command(args, stream=sys.stderr) -> int:
    try:
        suite = suites.load(args.suite)  # every problem of the suite, before any cluster or GPU work
    except suites.SuiteError as exc:
        print("error: the suite cannot run:\n  " + "\n  ".join(printable(r) for r in exc.reasons), file=stream)
        return 2
    fleet_id = args.fleet_id or new_fleet_id(suite)
    if not FLEET_ID.fullmatch(fleet_id):
        print(f"error: fleet id {printable(fleet_id)[:80]!r} must be 1–64 letters, digits and . _ : - (starting with a "
              "letter or digit)", file=stream)
        return 2
    try:
        check_spec(args.cluster)
    except FleetError as exc:
        print(printable(f"error: {exc}"), file=stream)
        return 2
    for name in ("nodes", "gpus_per_node"):
        if getattr(args, name) < 1:
            print(f"error: --{name.replace('_', '-')} must be at least 1, not {getattr(args, name)}", file=stream)
            return 2
    try:
        catalog = Catalog()
        if catalog.store.in_memory:
            raise StoreError("PINPOINT_DB_URL is a SQLite database in memory, which keeps nothing: give a file or a "
                             "server")
        catalog.store.migrate(Actor.local("fleet"))  # the store must take runs before any GPU is asked for one
        lease = FleetLease(catalog.store, fleet_id)
        lease.take()  # one writer per fleet id: a second command with it is refused here, before any cluster
    except StoreError as exc:
        print(printable(f"error: {exc}"), file=stream)
        return 2
    try:
        return _measure(args, suite, fleet_id, catalog, lease, stream)
    finally:
        lease.release()


def _measure(args, suite, fleet_id: str, catalog, lease: FleetLease, stream) -> int:
    progress = Progress(stream)
    service = worker_service()
    try:
        suite = suite_as_stored(catalog, fleet_id, suite, progress)  # a resume measures what it measured before
        stored_pairs(catalog, fleet_id, suite)
    except (FleetError, StoreError) as exc:
        print(printable(f"error: {exc}"), file=stream)
        return 2
    print(printable(f"fleet {fleet_id} · suite {suite.name} ({', '.join(suite.experiments)}) · cluster "
                    f"{args.cluster} · store {catalog.store.describe()}"), file=stream)
    try:
        with open_cluster(args.cluster, service, nodes=args.nodes, gpus_per_node=args.gpus_per_node,
                          partition=args.partition, gres=not args.no_gres, walltime=args.walltime) as client:
            result = run_fleet(client, suite, catalog, fleet_id, service, label=args.label, progress=progress,
                               lease=lease, wait_s=getattr(args, "wait", None))
    except (FleetError, StoreError) as exc:
        print(printable(f"error: {exc}"), file=stream)
        return 2
    print(summary(result))
    return result.exit_code
