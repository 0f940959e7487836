"""Headless runner: ``python -m gpu.bench EXPERIMENT [options] [--out FILE]``.

EXPERIMENT is a subcommand of ``gpu.experiments.registry`` (transfers, coalescing, reduction, occupancy, streams,
managed, pools, batching); each run
is also saved in the runs store (``--no-store`` skips it, ``--label`` names it). Reviews: ``import FILE…
[--replace]``, ``export RUN_ID --out FILE``, ``report --baseline A --candidate B [--candidate C] --out review.html``,
``runs``, and ``migrate`` (bring the store to this version's schema; nothing else writes it before a run is stored).
The trash: ``trash RUN…``, ``restore RUN…``, ``purge RUN…|--expired``; the audit trail: ``audit [--format csv|json]
[--out FILE]``; ``db-roles`` prints the SQL of a PostgreSQL store's owner, writer and reader roles. Each acts as the
person at this shell (``Actor.local("cli")``). Review commands print one line per problem, never a traceback.

Runs the experiment through the same worker process the app uses and writes exactly the DataFrame the
page draws (Parquet, or CSV when FILE ends in .csv). ``--device 1`` measures on one GPU; ``--devices 0,1`` (or
``--gpus``, or ``--devices all``) has the run's worker hold a device set, on which no other job measures meanwhile
(an experiment that needs several GPUs takes all of them unless told). Recordings for replay are made with it:
``python -m gpu.bench transfers --profile precise --include-alloc both --out assets/replay/…parquet``.
``python -m gpu.bench occupancy-driver --out assets/occupancy/<device>.json`` records the driver's
occupancy answers that the occupancy calculator is checked against.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd

from gpu.core import text
from gpu.core.access import Actor
from gpu.core.errors import AccessRefused, DeviceNotFound, ValidationError, WorkerError, WorkerUnavailable
from gpu.core.text import printable, shorten
from gpu.core.units import SizeError, format_bytes
from gpu.experiments import get_experiment, registry
from gpu.experiments.grid import skipped_notes
from gpu.experiments.request import check_params
from gpu.results.analysis import check, compare, report
from gpu.results.exchange import catalog, imports, run_output, runfiles
from gpu.results.persistence import admin_commands
from gpu.results.persistence.store import StoreError, canonical_params, params_by_run
from gpu.service.backends import gpus_needed, open_live, start_live
from gpu.service.host_locks import EXIT_GPU_BUSY, GpuBusy, set_process_purpose


def _progress_bar(handle, stream=sys.stderr, width=30) -> None:
    said = ""
    while not handle.wait(0.2):
        if handle.state == "queued" and handle.waiting and not said:  # whose GPU it waits for, once on its own line
            said = handle.waiting
            stream.write(f"\r{printable(said)}\n")
        elif handle.state == "queued":
            stream.write(f"\r{printable(handle.queue_text())[:160]:<160}")
        elif handle.total:
            filled = int(width * handle.done / handle.total)
            stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {handle.done}/{handle.total} "
                         f"{handle.text[:60]:<60}")
        stream.flush()
    stream.write("\n")


def wait_seconds(value: str) -> float:
    """``--wait``'s value: seconds, 0 (refuse at once when the GPU is busy) up to a week."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not 0 <= seconds <= 7 * 86400:
        raise argparse.ArgumentTypeError(f"{shorten(value, 20)!r} is not a number of seconds from 0 to 604800")
    return seconds


def parse_args(argv=None, prog: str = "python -m gpu.bench"):
    """The runner's arguments; ``prog`` is how the help names the command (``pinpoint`` for the installed one)."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="experiment", required=True)
    experiments = []
    for entry in registry.REGISTRY:
        p = sub.add_parser(entry.command, help=entry.help)
        registry.add_arguments(p, entry)
        experiments.append(p)
    d = sub.add_parser("occupancy-driver", help="record the driver's occupancy answers (JSON) for the tests")
    d.add_argument("--out", required=True)
    for p in [*experiments, d]:
        p.add_argument("--device", help="the GPU to measure on: its index or board UUID (GPU-…, or a unique start of "
                                        "it); default PINPOINT_DEVICE, else the first GPU")
    for p in experiments:
        # --gpus is the same, except where an experiment has its own --gpus (the GPUs of the set that it measures)
        flags = ["--devices"] + ([] if "--gpus" in p._option_string_actions else ["--gpus"])
        p.add_argument(*flags, dest="devices", metavar="SET",
                       help="the GPUs the run holds, e.g. 0,1, all, or board UUIDs (or unique starts of them) joined "
                            "by commas; no other job measures on them meanwhile. Default for an experiment that "
                            "needs several GPUs: all of them")
    for p in experiments:
        p.add_argument("--profile", default="precise",
                       help="precise (nvbench's defaults) or interactive, optionally with overrides, "
                            "e.g. precise/timeout_s=3")
        p.add_argument("--out", help="write the results here (.parquet or .csv)")
        p.add_argument("--store", action=argparse.BooleanOptionalAction, default=True,
                       help="save the run in the runs store (PINPOINT_DB_URL, else SQLite in the user data dir)")
        p.add_argument("--label", help="a label for the stored run, e.g. 'after driver 580'")
        p.add_argument("--notes", help="notes for the stored run")
        p.add_argument("--wait", type=wait_seconds, metavar="SECONDS",
                       help="how long to wait for a GPU that another process (the app, another runner, a fleet) is "
                            f"measuring on; past it the run is refused, exit code {EXIT_GPU_BUSY}. Default: no limit")
    i = sub.add_parser("import", help="import runner Parquet/CSV files, or another runs store's SQLite file (a "
                                      "fleet's, with its fleet ids), from other machines into the runs store")
    i.add_argument("files", nargs="+")
    i.add_argument("--label")
    i.add_argument("--notes")
    i.add_argument("--replace", action="store_true",
                   help="replace a stored run of the same id whose content differs (atomically)")
    i.add_argument("--unverified", action="store_true",
                   help="store a CSV that carries no manifest (not a PinPoint export): nothing can show that rows "
                        "are missing from it")
    e = sub.add_parser("export", help="write a stored (or bundled) run to a Parquet/CSV file")
    e.add_argument("run_id")
    e.add_argument("--out", required=True)
    rp = sub.add_parser("report", help="a self-contained HTML review: a baseline against one or more candidates")
    rp.add_argument("--baseline", required=True, help="run id (stored or bundled)")
    rp.add_argument("--candidate", required=True, action="append", help="run id; repeat for several")
    rp.add_argument("--out", required=True, help="the HTML file to write")
    f = sub.add_parser("fleet", help="run a suite on every GPU of a Dask cluster, each run into the runs store")
    f.add_argument("suite", help="a built-in suite (health) or a suite file (.toml)")
    f.add_argument("--cluster", default="local",
                   help="local (one worker per GPU here), slurm (one job per node) or tcp://HOST:PORT (a running "
                        "dask scheduler)")
    f.add_argument("--fleet-id", help="name the fleet; an id already in the store measures only its missing "
                                      "(GPU, experiment) pairs (default: the suite and the start time)")
    f.add_argument("--label", help="a label for every stored run")
    f.add_argument("--wait", type=wait_seconds, metavar="SECONDS",
                   help="how long each run waits for a GPU that another process of its node (the app, a runner) is "
                        "measuring on; past it that run fails, named in the summary (exit code 1). Default: up to the "
                        "run's own time limit")
    f.add_argument("--nodes", type=int, default=1, help="slurm: nodes, one job each")
    f.add_argument("--gpus-per-node", type=int, default=1, help="slurm: GPUs (and workers) per node")
    f.add_argument("--partition", help="slurm: the partition (queue)")
    f.add_argument("--walltime", default="01:00:00", help="slurm: each job's time limit")
    f.add_argument("--no-gres", action="store_true",
                   help="slurm: do not ask for GPUs as a generic resource (--gres=gpu:N), for clusters without it")
    c = sub.add_parser("check", help="CI gate: exit 1 when a point of a run got slower beyond noise, 0 when none "
                                     "did, 2 when it cannot check")
    c.add_argument("--candidate", required=True, help="the run to judge (stored or bundled run id)")
    c.add_argument("--against", required=True,
                   help="a baseline run id, or 'history': the candidate's earlier runs on its board, else its model")
    c.add_argument("--summary", help="write a Markdown summary here (also appended to $GITHUB_STEP_SUMMARY if set)")
    c.add_argument("--junit", help="write JUnit XML here: one testcase per point, a failure per slower point")
    sub.add_parser("runs", help="list the stored and bundled runs")
    sub.add_parser("migrate", help="bring the runs store to this PinPoint's schema version (and purge the trash's "
                                   "expired runs)")
    admin_commands.add_parsers(sub)
    return parser.parse_args(argv)


def open_runner_backend(experiment: str, args):
    """The live backend that ``--device``/``--devices`` ask for: one GPU as before, or a device set that the run's
    worker holds whole (an experiment that needs several GPUs takes ``--device`` as a set of one, to refuse it)."""
    if args.devices is not None and args.device is not None:
        raise DeviceNotFound("give --device (one GPU) or --devices (a set), not both")
    need, most = gpus_needed(experiment)
    return open_live(args.device, args.devices, need=need, most=most, job=experiment)


def transfer_params(args) -> dict:
    [params] = registry.runner_jobs(registry.BY_COMMAND["transfers"], args)
    return params


int_list, words = registry.int_list, registry.words


def experiment_jobs(args) -> list[dict]:
    """The parameter sets to run (occupancy runs once per register and shared-memory setting)."""
    return registry.runner_jobs(registry.BY_COMMAND[args.experiment], args)


def summary_table(experiment: str, frame):
    """The runner's printed table: each experiment's own parameter columns, then the measurement."""
    columns = getattr(get_experiment(experiment), "SHOW_COLUMNS", None) or \
        ["variant", "block_size", "elements", "param_value", "theoretical_occupancy", "rel_error"]
    show = frame[columns + ["median_ms", "cv", "samples", "gbps"]].copy()
    if "bytes" in columns:
        show["bytes"] = show["bytes"].map(format_bytes)
    if "elements" in columns:
        show["elements"] = show["elements"].map(lambda v: f"{int(v):,}")
    return show


def record_driver_occupancy(out: str, device: str | None = None) -> int:
    backend, reason = start_live(device)
    if backend is None:
        print(f"error: recording driver answers needs a GPU: {reason}", file=sys.stderr)
        return 3
    try:
        table = backend.client.run("occupancy_driver")
    finally:
        backend.client.close()
    with open(out, "w") as f:
        json.dump(table, f, separators=(",", ":"))
    print(f"wrote {len(table['answers'])} driver answers for {table['device']['name']} to {out}", file=sys.stderr)
    return 0


def write_frame(frame, out: str, params: dict[str, str] | None = None) -> None:
    runfiles.write(frame, out, params)


def unexpected(exc: Exception) -> str:
    """An error nobody foresaw, in one line: its type and its message, shortened."""
    return f"unexpected {type(exc).__name__}: {shorten(' '.join(str(exc).split()), 300)}"


def _is_sqlite(path: str) -> bool:
    """A SQLite database file (its header), which import reads as another runs store."""
    try:
        with open(path, "rb") as f:
            return Path(path).is_file() and f.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


REVIEW_COMMANDS = ("import", "export", "report", "runs", "migrate", *admin_commands.STORE_COMMANDS)


def review_command(args) -> int:
    """import, export, report, runs and migrate: the store's side of the runner (no GPU needed). Every failure is
    one line on stderr."""
    try:
        return _review(args)
    except (StoreError, AccessRefused) as exc:
        print(printable(f"error: {exc}"), file=sys.stderr)
        return 2
    except Exception as exc:  # a failure nobody foresaw still gets one line, not a traceback
        print(printable(f"error: {unexpected(exc)}"), file=sys.stderr)
        return 1


def _refuse_memory_store(store) -> None:
    if store.in_memory:
        raise StoreError(f"{store.describe()} is a SQLite database in memory: it would keep nothing once this command "
                         "ends; give a file (sqlite:///path/runs.sqlite) or a server in PINPOINT_DB_URL")


def _review(args) -> int:
    # Listing reads only what it lists of each bundled recording (catalog.read_bundled_listing).
    runs = catalog.Catalog(bundled=catalog.read_bundled_listing() if args.experiment == "runs" else None)
    _refuse_memory_store(runs.store)
    me = Actor.local("cli")
    if args.experiment == "migrate":
        before = runs.store.version
        after = runs.store.migrate(me)
        print(f"runs store at {runs.store.describe()}: schema version {before} → {after}", file=sys.stderr)
        admin_commands.say_purged(runs.store.purge_expired(me))
        return 0
    if args.experiment in admin_commands.STORE_COMMANDS:
        return admin_commands.run(runs, me, args)
    if args.experiment == "import":
        failed = 0
        for path in args.files:
            try:
                if _is_sqlite(path):  # another PinPoint store, e.g. a fleet's file from a GPU machine
                    for result in runs.import_store(path, path, actor=me):
                        print(printable(f"{path}: {result.message()}"), file=sys.stderr)
                    continue
                frame = imports.read_upload(path, path=path, unverified=args.unverified)
                for result in runs.save(frame, "import", args.label, args.notes, replace=args.replace, actor=me,
                                        params=imports.params_of(frame)):
                    print(printable(f"{path}: {result.message()}"), file=sys.stderr)
            except (imports.ImportProblem, StoreError, AccessRefused, OSError) as exc:
                failed += 1
                print(printable(f"error: {exc}; nothing from {path} was stored"), file=sys.stderr)
            except Exception as exc:  # one line per file, and the other files still get their turn
                failed += 1
                print(printable(f"error: {unexpected(exc)}; nothing from {path} was stored"), file=sys.stderr)
        return 2 if failed else 0
    if args.experiment == "runs":
        table = runs.runs()[["run_id", "experiment", "device_name", "timestamp", "points", "label", "origin"]]
        # Labels and ids come from files and other people: no escape sequence of theirs reaches the terminal.
        # A newline or tab (from a store written by another tool) would split or shift the row: shown escaped.
        print(table.map(lambda v: printable(v).replace("\n", "\\n").replace("\t", "\\t") if isinstance(v, str)
                        else v).to_string(index=False)
              if not table.empty else "no runs yet")
        return 0
    if args.experiment == "export":
        if problem := runfiles.out_problem(args.out):
            print(printable(f"error: {problem}"), file=sys.stderr)
            return 2
        # a stored run's parameters travel in its manifest
        write_frame(runs.load(args.run_id), args.out, runs.store.kept_params([args.run_id]))
        print(f"wrote run {args.run_id} to {args.out}", file=sys.stderr)
        return 0
    baseline = runs.load(args.baseline)
    candidates = [runs.load(c) for c in args.candidate]
    experiments = {f["experiment"].iloc[0] for f in [baseline, *candidates]}
    if len(experiments) > 1:
        print(f"error: runs of different experiments cannot be compared: {', '.join(sorted(experiments))}",
              file=sys.stderr)
        return 2
    earlier = {id(c): compare.earlier_runs(runs, baseline, c) for c in candidates}  # each candidate's history
    for candidate in candidates:  # the verdicts on the terminal too
        reason = compare.disjoint_reason(baseline, candidate)
        if reason:
            print(f"note: {candidate['run_id'].iloc[0]} vs {baseline['run_id'].iloc[0]}: {reason}", file=sys.stderr)
            continue
        table = compare.compare(baseline, candidate, earlier[id(candidate)])
        print(printable(f"{report.run_label(candidate)}: " + compare.headline(table) + "\n  "
                        + compare.band_summary(table) + "\n  "
                        + " · ".join(f"{name}: {count}" for name, count in compare.verdict_counts(table).items())))
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(report.render(baseline, candidates, lambda c: earlier[id(c)]))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _invalid(reasons: list[str]) -> int:
    print("error: invalid parameters:\n  - " + "\n  - ".join(reasons), file=sys.stderr)
    return 2


def main(argv=None, prog: str = "python -m gpu.bench") -> int:
    args = parse_args(argv, prog)
    if args.experiment == "db-roles":
        return admin_commands.db_roles_command(args)
    if args.experiment == "occupancy-driver":
        return record_driver_occupancy(args.out, args.device)
    if args.experiment in REVIEW_COMMANDS:
        return review_command(args)
    if args.experiment == "check":
        return check.check_command(args)
    if args.experiment == "fleet":
        from gpu.fleet.command import fleet_command  # Dask's import costs ~1 s: only the fleet command pays it

        return fleet_command(args)
    experiment = registry.BY_COMMAND[args.experiment].name  # a subcommand may spell it differently (host-latency)
    # Before anything is measured: a run is never lost to its own arguments.
    if problems := run_output.problems(args.out, args.label, args.notes):
        print("error: " + "\n  ".join(problems), file=sys.stderr)
        return 2
    set_process_purpose(f"{prog} {args.experiment}")  # what a process waiting for this GPU is told
    try:
        jobs = experiment_jobs(args)
    except (SizeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        backend = open_runner_backend(experiment, args)
    except (DeviceNotFound, WorkerUnavailable) as exc:
        # No worker, so no device limits: parameters wrong on any device are still named first.
        reasons = next((r for r in (check_params(experiment, params, None) for params in jobs) if r), [])
        if reasons:
            return _invalid(reasons)
        if isinstance(exc, DeviceNotFound):
            print(printable(f"error: {exc}"), file=sys.stderr)
            return 2
        print(f"error: the runner measures live and needs a GPU: {exc}", file=sys.stderr)
        return 3
    try:
        # Each run's parameters parsed and checked once, against the limits the worker reported: the worker trusts
        # the request it is sent.
        requests = [backend.request(experiment, params) for params in jobs]
    except ValidationError as exc:
        backend.client.close()
        return _invalid(exc.reasons)
    backend.client.wait_s = args.wait
    print(f"{backend.label()} · profile {args.profile} · {text.count(len(jobs), 'run')}", file=sys.stderr)
    started = time.perf_counter()
    frames = []
    try:
        for request in requests:
            for line in skipped_notes(request.params):  # the combinations its grid excludes: never measured
                print(printable(line), file=sys.stderr)
            handle = backend.submit(request)
            _progress_bar(handle)
            frames.append(handle.outcome())
    except ValidationError as exc:
        return _invalid(exc.reasons)
    except GpuBusy as exc:
        print(printable(f"error: {exc} (--wait)"), file=sys.stderr)
        return EXIT_GPU_BUSY
    except WorkerError as exc:
        print(printable(f"error: {exc}"), file=sys.stderr)
        return 1
    finally:
        backend.client.close()
    # One runner invocation is one recording: its runs share the first run's id.
    frame = pd.concat(frames, ignore_index=True).assign(run_id=frames[0]["run_id"].iloc[0])
    print(f"{len(frame)} points in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    print(summary_table(experiment, frame).to_string(index=False))
    out_failed = run_output.keep_measured(
        frame, args.out, args.store, args.label, args.notes,
        {r: canonical_params(v) for r, v in params_by_run(frame, *requests).items()}, params_by_run(frame, *requests))
    return 1 if out_failed else 0


if __name__ == "__main__":
    sys.exit(main())
