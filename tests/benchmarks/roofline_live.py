"""How long the Roofline page's live suite takes (prints, does not assert; target: whole suite <= 6 s, first points
<= 1 s). Submits assets/suites/roofline.toml's runs as the page does, the next experiment submitted as soon as the
one before has answered, and reports per rerun: seconds to the first streamed row, to each experiment's answer and
to the whole suite, from the client (the worker already started, as on a page that has measured before).

``--fresh``: first, in three fresh workers each, the suite as a first Measure: with no pinned pool (as a runner's
worker), right after the app's first job (``LiveBackend.warm``) has answered (a presenter who opens the app, then the
page), and submitted at once behind that job (timed from when the worker answered its start, so the job counts).
Each prints the worker's warm-ups (``warmed`` in its hello: what sweeps build as the worker starts).

Run on the GPU machine: ``python3 tests/benchmarks/roofline_live.py [--reruns 3] [--fresh]``.
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    from gpu.experiments import suites
    from gpu.service.backends import start_live, submit_values

    parser = argparse.ArgumentParser()
    parser.add_argument("--reruns", type=int, default=3)
    parser.add_argument("--fresh", action="store_true", help="first time the suite as a fresh worker's first job")
    args = parser.parse_args()
    suite = suites.load("roofline")

    def measure(backend, started: float) -> float:
        first, answers = None, []
        handle = submit_values(backend, suite.runs[0].experiment, suite.runs[0].params)
        for number, run in enumerate(suite.runs, start=1):
            while not handle.wait(0.005):
                if first is None and handle.rows:
                    first = time.perf_counter() - started
            frame = handle.outcome()
            answers.append(f"{run.experiment} {time.perf_counter() - started:.2f} s ({len(frame)} rows)")
            if number < len(suite.runs):
                handle = submit_values(backend, suite.runs[number].experiment, suite.runs[number].params)
        total = time.perf_counter() - started
        print(f"  first points {first:.2f} s; " + ", ".join(answers) + f"; whole suite {total:.2f} s")
        return total

    if args.fresh:
        for mode in ("no pinned pool", "after the first job", "at once behind the first job"):
            begun = time.perf_counter()
            backend, reason = start_live()
            if backend is None:
                sys.exit(f"needs a GPU: {reason}")
            try:
                started = time.perf_counter()
                print(f"FRESH worker started in {started - begun:.2f} s, warm-ups {backend.client.info.get('warmed')}")
                if mode != "no pinned pool":
                    warm = backend.warm()
                    if mode == "after the first job":
                        answer = warm.outcome()
                        print(f"FRESH first job {time.perf_counter() - started:.2f} s: {answer}")
                        started = time.perf_counter()
                print(f"FRESH worker, {mode}:")
                print(f"FRESH {mode}: whole suite {measure(backend, started):.2f} s")
            finally:
                backend.client.close()
    backend, reason = start_live()
    if backend is None:
        sys.exit(f"needs a GPU: {reason}")
    totals = []
    try:
        measure(backend, time.perf_counter())  # this worker's first: the reruns below time a worker that has measured
        for rerun in range(1, args.reruns + 1):
            print(f"rerun {rerun}:")
            totals.append(measure(backend, time.perf_counter()))
    finally:
        backend.client.close()
    print(f"BAR Roofline live suite: {min(totals):.2f}–{max(totals):.2f} s over {len(totals)} reruns (target <= 6 s)")


if __name__ == "__main__":
    main()
