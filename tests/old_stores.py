"""A runs store as an older PinPoint wrote it: its schema version's steps, then a run stored as that version stored
it (the columns later steps add left out), for the migration tests."""

from __future__ import annotations

import json

import pandas as pd
import sqlalchemy as sa

from gpu.results.persistence import store


def store_at_version(url: str, version: int, frame: pd.DataFrame | list[pd.DataFrame]) -> None:
    """A store at schema ``version`` (7 or later) holding the run ``frame`` (or each run of a list of frames), written
    as that version wrote it (before version 10, every row with its provenance)."""
    later_runs = {**(store.ADDED_IN_V9 if version < 9 else {}), **(store.ADDED_IN_V10 if version < 10 else {})}
    later_points = {**(store.ADDED_IN_V8 if version < 8 else {})}
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        store.META.create(connection)
        for _, step in store.MIGRATIONS[:version]:
            step(connection)
        connection.execute(store.META.insert().values(key="schema_version", value=str(version)))
        for one in frame if isinstance(frame, list) else [frame]:
            run, boards, points, _ = store.RunStore._prepare(str(one["run_id"].iloc[0]), one.reset_index(drop=True),
                                                             "runner", None, None)
            if version < 10:
                points = provenance_on_rows(run, points)
            connection.execute(store.RUNS.insert().values({k: v for k, v in run.items() if k not in later_runs}))
            if boards:
                connection.execute(store.BOARDS.insert(), boards)
            connection.execute(store.POINTS.insert(), [{k: v for k, v in p.items() if k not in later_points}
                                                       for p in points])
    engine.dispose()


def provenance_on_rows(run: dict, points: list[dict]) -> list[dict]:
    """``points`` (``RunStore._prepare``'s) as a store before version 10 kept them: every row with the provenance
    that ``run`` keeps once now (taken out of ``run``)."""
    kept = json.loads(run.pop("provenance") or "{}")
    return [{**p, "row_json": json.dumps({**kept, **json.loads(p["row_json"])}, separators=(",", ":"))}
            for p in points]
