"""How fast the fair GPU queue serves people (prints, does not assert): four people with three jobs each against one
person with twelve, on one GPU's worker, and one person's twelve beside three people who each ask once after that
sweep has started. Each person submits their jobs one after another (the next as soon as the last answers), as a
sweep from the Roofline page or a script does; the queue serves them in turn by owner (``gpu.service.locks.Turns``).
Printed: each person's time to their first and last result, and each scenario's total.

Run on the GPU machine: ``python3 tests/benchmarks/fair_queue.py [--size 64MiB] [--profile interactive]``: every job
is the same checked Transfers request (pinned H2D copies of ``--size``), measured and verified by the GPU worker.
Without a GPU: ``python3 tests/benchmarks/fair_queue.py --simulate 0.2``: a stand-in worker process
(tests/fake_service.py) serves jobs of 0.2 s each, through the same client and queue, to try the script.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

PEOPLE = ["ana@example.com", "ben@example.com", "chen@example.com", "dia@example.com"]


def scenario(submit, jobs: dict[str, int], late: set[str] = frozenset(), late_after_s: float = 0.0) -> dict:
    """Each person of ``jobs`` submits that many jobs one after another (``submit(person)`` → a handle); those in
    ``late`` start ``late_after_s`` after the others. Returns {person: (first, last) seconds since the start}."""
    started = time.perf_counter()
    answered: dict[str, list[float]] = {person: [] for person in jobs}
    failures: list[str] = []

    def person_runs(person: str, count: int) -> None:
        if person in late:
            time.sleep(late_after_s)
        for _ in range(count):
            handle = submit(person)
            try:
                handle.outcome()
            except Exception as exc:  # a benchmark that lost a job says so, and goes on
                failures.append(f"{person}: {exc}")
            answered[person].append(time.perf_counter() - started)

    threads = [threading.Thread(target=person_runs, args=(p, n), daemon=True) for p, n in jobs.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for failure in failures:
        print(f"  job failed: {failure}")
    return {person: (times[0], times[-1]) for person, times in answered.items() if times}


def report(title: str, times: dict) -> None:
    total = max(last for _, last in times.values())
    print(f"{title}: total {total:.2f} s")
    for person, (first, last) in times.items():
        print(f"  {person:<18} first result {first:6.2f} s   last {last:6.2f} s")


def live_submitter(size: str, profile: str):
    """(submit, close, what): the GPU worker measuring one checked Transfers request per job."""
    from gpu.core.units import parse_size_list
    from gpu.service.backends import start_live

    backend, reason = start_live()
    if backend is None:
        sys.exit(f"needs a GPU (or --simulate SECONDS): {reason}")
    request = backend.request("transfers", {"sizes": parse_size_list(size), "modes": ["pinned"],
                                            "directions": ["h2d"], "methods": ["single"], "profile": profile})

    def submit(person: str):
        return backend.submit(request, session=person, owner=person)

    return submit, backend.client.close, f"{backend.label()} · job: {size} pinned H2D, profile {profile}"


def simulated_submitter(seconds: float):
    """(submit, close, what): a stand-in worker process serving jobs of ``seconds`` each (no GPU)."""
    from gpu.service.client import WorkerClient

    client = WorkerClient(service="tests.fake_service:FakeService", start_timeout=60)

    def submit(person: str):
        return client.submit("steps", {"n": 1, "seconds": seconds}, session=person, owner=person)

    return submit, client.close, f"simulated worker (no GPU) · job: {seconds:.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="64MiB", help="the transfer size of each job (GPU)")
    parser.add_argument("--profile", default="interactive")
    parser.add_argument("--simulate", type=float, metavar="SECONDS",
                        help="no GPU: a stand-in worker serves jobs of this many seconds")
    args = parser.parse_args()
    submit, close, what = simulated_submitter(args.simulate) if args.simulate else \
        live_submitter(args.size, args.profile)
    try:
        alone = []
        for _ in range(3):  # warm the worker, and time one job with nobody else waiting
            began = time.perf_counter()
            submit("warm-up@example.com").outcome()
            alone.append(time.perf_counter() - began)
        job_s = statistics.median(alone)
        print(f"{what} · one job alone: {job_s:.3f} s")
        report("4 people × 3 jobs", scenario(submit, {person: 3 for person in PEOPLE}))
        report("1 person × 12 jobs", scenario(submit, {PEOPLE[0]: 12}))
        report("1 person × 12 jobs, 3 people × 1 job asking after the first 2 jobs",
               scenario(submit, {PEOPLE[0]: 12, **{p: 1 for p in PEOPLE[1:]}}, late=set(PEOPLE[1:]),
                        late_after_s=2 * job_s))
        print(f"(in turn by owner, one who asks during another's sweep waits for the job measuring and one job of "
              f"each person ahead: about {job_s:.2f} s each here)")
    finally:
        close()


if __name__ == "__main__":
    main()
