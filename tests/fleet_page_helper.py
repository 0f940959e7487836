"""A simulated fleet in a runs store, for the Fleet page's tests and benchmark only: the committed H200 recordings
of the health suite's experiments re-served per board by ``tests/simulated_fleet.as_board`` (fake UUIDs, hosts
node-N, backend "simulated"), one board slowed and, optionally, recording a downtrained PCIe link. Never bundled."""

from __future__ import annotations

import datetime as dt

import pandas as pd

from gpu.core import schema
from gpu.experiments import registry, suites
from gpu.results.persistence.store import RunStore, params_by_run
from tests import simulated_fleet

SLOW_BOARD = 3
SLOWDOWN = 1.3


def suite_recordings(suite_name: str = "health") -> dict[str, pd.DataFrame]:
    """experiment → the committed H200 recording's rows of the suite's points (one recording per experiment)."""
    suite = suites.load(suite_name)
    out = {}
    for run in suite.gpu_runs:
        frame = simulated_fleet.recorded(run.experiment)
        frame = frame[frame["experiment"] == run.experiment]
        keys = {tuple(schema.key_value(v) for v in key) for key in run.points()}
        columns = list(registry.get_experiment(run.experiment).KEY_COLUMNS)
        rows = [tuple(schema.key_value(v) for v in values) in keys for values in zip(*(frame[c] for c in columns),
                                                                                      strict=True)]
        if any(rows):
            out[run.experiment] = frame[rows].reset_index(drop=True)
    return out


def board_runs(boards: int, runs_per_board: int = 1, slow_board: int = SLOW_BOARD, slowdown: float = SLOWDOWN,
               downtrained: bool = True, start: dt.datetime | None = None) -> list[tuple[int, int, pd.DataFrame]]:
    """(run number, board, frame) for each board's run of each experiment, the newest run (number
    ``runs_per_board - 1``) with ``slow_board`` slowed by ``slowdown`` and, when ``downtrained``, recording PCIe
    Gen4 ×8; earlier runs are the unslowed recording a day apart. A board's experiments start a minute apart, in
    suite order, as a fleet measures them."""
    start = start or dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    recordings = suite_recordings()
    out = []
    for number in range(runs_per_board):
        newest = number == runs_per_board - 1
        for board in range(boards):
            slowed = newest and board == slow_board
            for minute, (experiment, frame) in enumerate(recordings.items()):
                when = (start + dt.timedelta(days=number, minutes=minute)).isoformat(timespec="seconds")
                run = simulated_fleet.as_board(frame, board, slowdown if slowed else 1.0, when=when,
                                               run_id=f"b{board:03d}r{number:03d}{experiment[:6]}")
                if slowed and downtrained:
                    run = run.assign(pcie_gen=4, pcie_width=8)
                out.append((number, board, run))
    return out


def fill_store(url: str, boards: int = 8, runs_per_board: int = 1, **options) -> RunStore:
    """A store holding the simulated fleet: run number N is fleet ``sim-fleet-N`` (the newest: ``sim-fleet``), each
    run saved as a fleet saves it, with its suite run's parameters."""
    store = RunStore(url)
    suite = suites.load("health")
    for number, _, frame in board_runs(boards, runs_per_board, **options):
        fleet_id = "sim-fleet" if number == runs_per_board - 1 else f"sim-fleet-{number:03d}"
        run = suite.run_for(frame["experiment"].iloc[0])
        store.save(frame, "fleet", fleet=(fleet_id, "health"), params=params_by_run(frame, run.checked()),
                   gpus=run.gpus)
    return store
