"""The Fleet page's server CPU per view with a large simulated fleet (prints, does not assert; target ≤ 1 s a view).

Fills a throwaway SQLite runs store with a simulated fleet (``tests/fleet_page_helper.py``: the committed H200
recordings of the health suite re-served per board with fake UUIDs; default 64 boards × 30 runs of each of the
suite's five experiments, one board slowed in the newest run), serves the app on it in replay mode as
``tests/benchmarks/page_cpu.py`` does, and opens /fleet (the newest stored fleet) in headless Chromium at 1920×1080,
each view in a new tab. serve.py makes every page's first view at start-up, so the default fleet is read before the
first browser view; the work of a fleet nobody has opened yet is timed in process first ("cold").

Run: ``python3 tests/benchmarks/fleet_page_cpu.py [--boards 64] [--runs 30] [--repeats 3] [--present]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pandas as pd  # noqa: E402
from page_cpu import CHROMIUM, free_port, start_server, view  # noqa: E402

from gpu.results.persistence.store import RunStore  # noqa: E402
from tests import fleet_page_helper  # noqa: E402


def fill(url: str, boards: int, runs: int) -> float:
    """The simulated fleet into the store, one save per fleet run; seconds taken."""
    start = time.monotonic()
    store = RunStore(url)
    by_number: dict[int, list] = {}
    for number, _, frame in fleet_page_helper.board_runs(boards, runs):
        by_number.setdefault(number, []).append(frame)
    for number, frames in by_number.items():
        fleet_id = "sim-fleet" if number == runs - 1 else f"sim-fleet-{number:03d}"
        store.save(pd.concat(frames, ignore_index=True), "fleet", fleet=(fleet_id, "health"))
    stored = len(store.runs())
    store.close()
    print(f"stored {stored} runs ({boards} boards × {runs} runs × the health suite's experiments) in "
          f"{time.monotonic() - start:.0f} s", flush=True)
    return time.monotonic() - start


def cold_work(url: str) -> None:
    """What a fleet's first view computes before the server's caches hold it, timed in this process: serve.py
    makes every page's first view at start-up, so the browser's first view below already finds the default fleet
    read. Printed so that the cost of a fleet nobody has opened yet is known too."""
    from gpu.experiments import suites
    from gpu.present.charts import fleet as fleet_charts
    from gpu.present.fleet import boards as fleet_results

    store = RunStore(url)
    suite = suites.load("health")
    start = time.process_time()
    runs = store.runs()
    listed = time.process_time()
    mine = runs[runs["fleet_id"] == "sim-fleet"]
    fleet = fleet_results.build(fleet_results.stored_points(store, list(mine["run_id"]), suite), suite)
    fleet_results.outlier_sentences(fleet)
    fleet_results.group_sentences(fleet)
    fleet_results.provenance_differences(fleet)
    fleet_charts.heatmap_figure(fleet, "fleet")
    built = time.process_time()
    board = fleet_results.outliers(fleet)["board"].iloc[0]
    others = runs[(runs["gpu_uuid"] == board) & (runs["fleet_id"] != "sim-fleet")]
    fleet_results.drift(fleet, board, fleet_results.stored_points(store, list(others["run_id"]), suite))
    drifted = time.process_time()
    store.close()
    print(f"cold, in process (CPU s): list {len(runs)} runs {listed - start:.2f}; the fleet's {len(mine)} runs read, "
          f"judged, sentences and heatmap {built - listed:.2f}; one board's {len(others)} earlier runs and its drift "
          f"{drifted - built:.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--boards", type=int, default=64)
    parser.add_argument("--runs", type=int, default=30, help="runs of history per board (one fleet each)")
    parser.add_argument("--repeats", type=int, default=3, help="views (the first is the first view)")
    parser.add_argument("--present", action="store_true", help="also the stage view (?present=1)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as folder:
        store = f"{folder}/runs.sqlite"
        fill(f"sqlite:///{store}", args.boards, args.runs)
        cold_work(f"sqlite:///{store}")
        port = free_port()
        server = start_server(port, store)
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=[
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-component-update", "--no-first-run"])
                print(f"Fleet page: server CPU per view (s), {os.cpu_count()} CPUs; wall s until drawn in brackets")
                for query in ["", "?present=1"] if args.present else [""]:
                    figures = [view(browser, f"http://127.0.0.1:{port}/fleet{query}", server.pid)
                               for _ in range(args.repeats)]
                    print(f"{'fleet' + query:<18}" + "".join(f"{cpu:>10.2f} ({wall:4.1f})" for cpu, wall in figures),
                          flush=True)
                browser.close()
        finally:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    main()
