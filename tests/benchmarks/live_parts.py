"""Where a live Measure's time goes, point by point: each page's default request (its controls' defaults, as
``live_defaults.py`` builds them, with the interactive profile) run in this process on one GPU, as the app's worker runs
it (``GpuService``: its warm-ups, the pooled host buffers pinned first, the job's provenance and frame, each progress
message and row put on a worker's event queue that another process drains, as the client does), its parts timed
(``sweep_parts``: the subclassed sweep of ``health_time.py --parts``). Prints, never asserts (target: Transfers and
Streams within 6 s from the client).

Per point: its wall time in the harness (progress message, preparation, the witness's readings, set-up, samples,
verification, row), its samples and stop reason, the GPU time its samples measured (the sum of ``samples_ms``, times
``copies_per_sample`` where batched) and the host's overhead (wall − GPU time). Then the totals: GPU time; the
sampling loop's host time (each sample's event record, synchronization and elapsed time; the telemetry between
samples; the stop rule) and its median overhead per sample; each point's set-up (buffers, patterns, a batch's
calibration, which are GPU time too), the witness before and after, the verification, the rows and the progress
messages; the rest; and the 10 points with the most host overhead.

``--root DIR`` runs another checkout of PinPoint's code (e.g. main, for a before figure in the same call).

Run on the GPU machine: ``python3 tests/benchmarks/live_parts.py [--pages transfers,streams] [--gpu 0]
[--profile interactive] [--repeats 2] [--root /tmp/before]``.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sweep_parts  # noqa: E402
from live_defaults import DEFAULTS  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("transfers", "streams")
TARGET_S = 6.0
WITNESS_BEFORE = "witness before (start_point: NVML counters, first reading)"
WITNESS_AFTER = "witness after (point_summary: NVML counters, last reading)"
TELEMETRY = "telemetry between samples (Telemetry.sample: NVML clock every 50 ms)"
STOP_RULE = "stop rule after each sample (stats.stop_reason)"
MEASURED_ROW = "row (measured_row, with the witness's last reading)"
PROGRESS = "progress messages and rows to the client (JobProgress: the event queue)"
SHOWN = 10
# A point's parts beside its sampling loop (the witness's last reading is inside its row).
OUTSIDE_THE_LOOP = (sweep_parts.SETUP, WITNESS_BEFORE, MEASURED_ROW, sweep_parts.VERIFY, PROGRESS)


def page_request(page: str, profile: str):
    """The page's default request with ``profile``, parsed and checked as the page's ``submit_values`` does (against
    no device here: the sweep checks the GPU's limits)."""
    from gpu.experiments.request import checked_request

    return checked_request(page, {**DEFAULTS[page], "profile": profile}, None)


def measured_ms(row: dict) -> float:
    """The GPU time a point's samples measured: each sample's mean copy time times its copies where batched."""
    copies = row.get("copies_per_sample")
    copies = 1 if copies is None or (isinstance(copies, float) and math.isnan(copies)) else int(copies)
    return float(sum(float(v) for v in row.get("samples_ms") or ())) * copies


@contextlib.contextmanager
def device_parts(timer: sweep_parts.SweepParts):
    """The device layer's per-point and per-sample parts timed into ``timer`` while the block runs (whichever the
    checkout has): the witness's readings, the telemetry between samples, the stop rule, the row."""
    from gpu.core import stats
    from gpu.device import telemetry
    from gpu.sweeps import _kernels

    def timed_unless_forced(original):  # a forced reading is the witness's, inside its own part
        timed = timer.timed(original, TELEMETRY)
        return lambda self, force=False: original(self, force=True) if force else timed(self)

    hooks = [(telemetry.Telemetry, "start_point", lambda f: timer.timed(f, WITNESS_BEFORE)),
             (telemetry.Telemetry, "point_summary", lambda f: timer.timed(f, WITNESS_AFTER)),
             (telemetry.Telemetry, "sample", timed_unless_forced),
             (stats, "stop_reason", lambda f: timer.timed(f, STOP_RULE)),
             (_kernels, "measured_row", lambda f: timer.timed(f, MEASURED_ROW))]
    with contextlib.ExitStack() as stack:
        for owner, name, wrap in hooks:
            if hasattr(owner, name):
                stack.enter_context(sweep_parts.patched(owner, name, wrap))
        yield


class TimedProgress:
    """The job's progress callback (the worker's ``JobProgress``, or any), each message and row timed."""

    def __init__(self, progress, timer: sweep_parts.SweepParts):
        self._call = timer.timed(progress, PROGRESS)
        if hasattr(progress, "row"):
            self.row = timer.timed(progress.row, PROGRESS)

    def __call__(self, done, total, text=""):
        self._call(done, total, text)


def through_service(service, request, timer: sweep_parts.SweepParts):
    """A ``run`` for ``timer``: the job as the worker handles it (provenance, the sweep, the frame in point order),
    its sweep replaced by the timed one; returns the sweep's rows."""
    harness = timer.harness

    def run(timed, params, gpu, progress, should_cancel):
        measured = []

        def with_timed(original):
            def run_timed(declaration, *args):
                rows = original(timed, *args)
                measured.extend(rows)
                return rows
            return run_timed

        with sweep_parts.patched(harness, "run", with_timed):  # the runners look ``run`` up at each call
            service.handle({"kind": "experiment", "request": request}, progress, should_cancel)
        return measured

    return run


def drain(events) -> None:
    """The client's side of the event queue, in its own process: every message read until ``None``."""
    while events.get() is not None:
        pass


def report(page: str, timer: sweep_parts.SweepParts, whole: float, freed: float, where: str) -> None:
    points = [p for p in timer.points if p.row is not None]
    samples = sum(int(p.row["samples"]) for p in points)
    gpu_s = sum(measured_ms(p.row) for p in points) / 1e3
    walls = sum(p.wall for p in timer.points)
    stops = {}
    for p in points:
        stops[p.row["stop_reason"]] = stops.get(p.row["stop_reason"], 0) + 1
    parts = timer.parts
    print(f"LIVE-PARTS {page} {where}: whole job {whole:.2f} s (target <= {TARGET_S:.0f} s from the client), "
          f"{len(points)} points, {samples:,} samples, stops {stops}; buffers freed after the answer {freed:.2f} s",
          flush=True)
    print(f"  points in the harness {walls:.2f} s: GPU time of their samples {gpu_s:.2f} s, host {walls - gpu_s:.2f} s",
          flush=True)
    looped = [p for p in points if p.sampling is not None]
    loop_s = sum(p.sampling for p in looped)
    loop_gpu = sum(measured_ms(p.row) for p in looped) / 1e3
    sample_calls = parts.get(sweep_parts.SAMPLES, 0.0)
    per_sample = [(p.sampling - measured_ms(p.row) / 1e3) / int(p.row["samples"]) * 1e6 for p in looped
                  if int(p.row["samples"])]
    median = f"{statistics.median(per_sample):.1f} µs" if per_sample else "n/a"
    print(f"  sampling loops ({len(looped)} points) {loop_s:.2f} s: GPU {loop_gpu:.2f} s; "
          f"host {loop_s - loop_gpu:.2f} s "
          f"= each sample's event record, synchronization, elapsed time {sample_calls - loop_gpu:.2f} s, "
          f"telemetry between samples {parts.get(TELEMETRY, 0.0):.2f} s, stop rule {parts.get(STOP_RULE, 0.0):.2f} s, "
          f"the loop's own {loop_s - sample_calls - parts.get(TELEMETRY, 0.0) - parts.get(STOP_RULE, 0.0):.2f} s; "
          f"host overhead per sample median {median}", flush=True)
    if len(looped) < len(points):
        print(f"  ({len(points) - len(looped)} points sampled inside their set-up: their GPU time "
              f"{gpu_s - loop_gpu:.2f} s is in the set-up below)", flush=True)
    row_only = max(0.0, parts.get(MEASURED_ROW, 0.0) - parts.get(WITNESS_AFTER, 0.0))
    named = {"set-up (measure: buffers, patterns, a batch's calibration)": parts.get(sweep_parts.SETUP, 0.0),
             "witness before (start_point)": parts.get(WITNESS_BEFORE, 0.0),
             "witness after (point_summary)": parts.get(WITNESS_AFTER, 0.0),
             "verification (verify)": parts.get(sweep_parts.VERIFY, 0.0),
             "rows (measured_row, besides the witness)": row_only,
             "progress messages and rows to the client": parts.get(PROGRESS, 0.0)}
    for name, seconds in named.items():
        print(f"  {name}: {seconds:.2f} s", flush=True)
    in_points = sum((p.sampling or 0.0) + sum(p.parts.get(name, 0.0) for name in OUTSIDE_THE_LOOP)
                    for p in timer.points)
    walking = parts.get(sweep_parts.WALKING, 0.0)
    print(f"  the rest of the points (preparation, key checks, Python between): {walls - in_points:.2f} s; "
          f"the walk between points (a group's set-up) {walking:.2f} s; the rest of the job (limits, allocation scope, "
          f"provenance, frame in point order, freeing in the scope) {whole - walls - walking:.2f} s", flush=True)
    print("  each point (wall: its time in the harness; GPU: its samples' measured time; host: wall − GPU):",
          flush=True)
    for p in points:
        gpu_ms = measured_ms(p.row)
        print(f"    {p.label}: wall {p.wall * 1e3:.1f} ms, GPU {gpu_ms:.1f} ms, host {p.wall * 1e3 - gpu_ms:.1f} ms, "
              f"{int(p.row['samples'])} samples, {p.row['stop_reason']}", flush=True)
    worst = sorted(points, key=lambda p: p.wall - measured_ms(p.row) / 1e3, reverse=True)[:SHOWN]
    print(f"  the {len(worst)} points with the most host overhead (wall − GPU time):", flush=True)
    for p in worst:
        gpu_ms = measured_ms(p.row)
        copies = p.row.get("copies_per_sample")
        batched = f" × {int(copies)} copies" if isinstance(copies, (int, float)) and not math.isnan(copies) else ""
        shown = [f"{name.split(' (')[0]} {seconds * 1e3:.1f}" for name, seconds in p.parts.items()
                 if name != sweep_parts.WALKING and seconds >= 0.00005]
        loop = [f"sampling loop {p.sampling * 1e3:.1f}"] if p.sampling is not None else []
        print(f"    {p.label}: host {p.wall * 1e3 - gpu_ms:.1f} ms (wall {p.wall * 1e3:.1f}, GPU {gpu_ms:.1f}); "
              f"{int(p.row['samples'])} samples{batched}, {p.row['stop_reason']}; ms: {', '.join(loop + shown)}",
              flush=True)


def measure(timer: sweep_parts.SweepParts, params, gpu, progress, run=None) -> float:
    """The job's seconds: ``params`` measured on ``gpu`` (by ``run``, default the harness's), every part timed into
    ``timer``."""
    with device_parts(timer):
        return timer.run(params, gpu, TimedProgress(progress, timer), run=run)[1]


def measure_page(service, request, progress) -> tuple[sweep_parts.SweepParts, float, float]:
    """(the timed parts, the job's seconds, the seconds its buffers took to free) of one Measure of ``request``."""
    timer = sweep_parts.SweepParts(request.experiment)
    whole = measure(timer, request.params, service.devices, progress, run=through_service(service, request, timer))
    started = time.perf_counter()
    getattr(service, "after_reply", lambda: None)()
    return timer, whole, time.perf_counter() - started


def arguments(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", default=",".join(PAGES), help="comma-separated: " + ", ".join(PAGES))
    parser.add_argument("--gpu", type=int, default=0, help="the GPU's index")
    parser.add_argument("--profile", default="interactive", help="the sampling profile (the pages': interactive)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the PinPoint checkout to time (default: this one)")
    parser.add_argument("--repeats", type=int, default=2, help="Measures of each page, one after another")
    args = parser.parse_args(argv)
    args.pages = [p.strip() for p in args.pages.split(",") if p.strip()]
    for page in args.pages:
        if page not in DEFAULTS:
            parser.error(f"unknown page '{page}': choose from {', '.join(PAGES)}")
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, not {args.repeats}")
    args.root = args.root.resolve()
    return args


def requests(args: argparse.Namespace) -> dict:
    """Each page's request (exits with one line when one cannot be made: a bad profile)."""
    from gpu.core.errors import ValidationError

    try:
        return {page: page_request(page, args.profile) for page in args.pages}
    except ValidationError as exc:
        sys.exit(f"live_parts: {exc}")


def main(argv=None) -> None:
    args = arguments(argv)
    sys.path.insert(0, str(args.root))  # before anything of PinPoint is imported
    wanted = requests(args)
    try:
        from gpu.service.worker import GpuService, JobProgress

        service = GpuService(device=args.gpu)
    except Exception as exc:  # no PyCUDA, no GPU, no such index: one line
        sys.exit(f"live_parts: needs GPU {args.gpu}: {exc}")
    events = mp.get_context("spawn").Queue()
    client = mp.get_context("spawn").Process(target=drain, args=(events,), daemon=True)
    client.start()
    try:
        started = time.perf_counter()
        warmed = service.handle({"kind": "warm_host_pool"}, None, lambda: False)  # the app's worker's first job
        warm_s = time.perf_counter() - started
        where = (f"from {args.root} on GPU {args.gpu} ({service.runtime.facts['device_name']}, {os.cpu_count()} host "
                 f"cores), profile {args.profile}")
        print(f"WARM-HOST-POOL {warm_s:.2f} s, the pool holding {warmed['pooled_bytes'] / 2**20:,.0f} MiB {where}")
        for page in args.pages:
            for repeat in range(args.repeats):
                progress = JobProgress(events, repeat + 1, getattr(service, "conditions_now", None))
                timer, whole, freed = measure_page(service, wanted[page], progress)
                report(page, timer, whole, freed, f"Measure {repeat + 1} {where}")
    finally:
        events.put(None)
        client.join(30)
        service.close()


if __name__ == "__main__":
    main()
