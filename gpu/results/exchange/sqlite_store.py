"""Reading another PinPoint runs store (a SQLite file, e.g. a fleet's from a GPU machine) for this one: every run,
with its label, notes, fleet id, suite and parameters, through the import contract (``gpu.results.exchange.contract``)
and its limits, as a Parquet or CSV file is read. The file is opened read-only and never written. No Streamlit, no
CUDA."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gpu.core.errors import ImportProblem, StoreError
from gpu.core.text import shorten
from gpu.results.exchange import contract
from gpu.results.exchange.contract import CONTROL_CHARACTER, _shown, check
from gpu.results.exchange.imports import check_regular_file
from gpu.results.persistence.store import (
    GPUS,
    MAX_LABEL_CHARS,
    MAX_NOTES_CHARS,
    MAX_PARAMS_CHARS,
    RUNS,
    RunStore,
    checked_params,
)


def read_store(name: str, path: str | Path, limit: int | None = None) -> list[tuple]:
    """Every run of another PinPoint runs store (a SQLite file, e.g. a fleet's from a GPU machine) through the
    same contract and limits as a Parquet or CSV file: ``check`` over all of its rows at once (row N counts the
    file's points in run order), and each run's label, notes, fleet id, suite and suite text checked as the store
    keeps them. (frame, label, notes, fleet, suite text) per run, for ``RunStore.save_batches``; ImportProblem
    naming the file, run and column of the first problem. The file is opened read-only and never written."""
    limit = limit or contract.max_import_bytes()
    shown = shorten(name)
    check_regular_file(shown, Path(path), limit)
    source = RunStore(f"sqlite:///{Path(path).resolve()}")  # opening never writes
    try:
        if source.version < 1:
            raise ImportProblem(f"{shown}: not a PinPoint runs store (schema version {source.version})" if
                                source.version else f"{shown}: not a PinPoint runs store (it has no runs and no "
                                "schema version)")
        counted = source.count_points()
        if counted[0] > contract.MAX_ROWS:
            raise ImportProblem(f"{shown}: over {contract.MAX_ROWS:,} points, the limit")
        if counted[1] > contract.MAX_DECODED_BYTES:
            raise ImportProblem(f"{shown}: its points hold {counted[1] / 1e6:,.0f} MB of text, over the limit of "
                                f"{contract.MAX_DECODED_BYTES / 1e6:,.0f} MB")
        runs = source.runs()
        if runs.empty:
            raise ImportProblem(f"{shown}: the store holds no runs")
        try:
            rows = source.points(list(runs["run_id"]))
        except (ValueError, TypeError, AttributeError, StoreError) as exc:  # JSON by hand or by a damaged copy
            raise ImportProblem(f"{shown}: a stored point cannot be read: {shorten(str(exc), 200)}") from None
        total = sum(len(v) for v in rows.get("samples_ms", pd.Series(dtype=object)) if isinstance(v, list))
        if total > contract.MAX_VALUES:
            raise ImportProblem(f"{shown}: {total:,} sample values, over the limit of {contract.MAX_VALUES:,}")
        kept = {r.fleet_id: source.fleet_suite(r.fleet_id) for r in runs.itertuples() if _is_id(r.fleet_id)}
        asked = source.run_params(list(runs["run_id"])).set_index("run_id")
    finally:
        source.close()
    frame = check(rows, shown)
    unlisted = sorted(set(frame["run_id"]) - set(runs["run_id"]))
    if unlisted:
        raise ImportProblem(f"{shown}: run {shorten(unlisted[0])}, column run_id: its points name a run the store "
                            "does not list")
    batches = []
    for row in runs.itertuples():
        run = shorten(str(row.run_id))
        texts = {}
        for column, limit_chars in (("label", MAX_LABEL_CHARS), ("notes", MAX_NOTES_CHARS),
                                    ("fleet_id", RUNS.c.fleet_id.type.length), ("suite", MAX_LABEL_CHARS)):
            value = getattr(row, column)
            texts[column] = value if isinstance(value, str) else None
            if texts[column] is not None and ("\x00" in value or len(value) > limit_chars or (
                    column in ("fleet_id", "suite") and CONTROL_CHARACTER.search(value))):
                raise ImportProblem(f"{shown}: run {run}, column {column}: value {_shown(value)} is longer than "
                                    f"{limit_chars:,} characters or holds a control character")
        part = frame[frame["run_id"] == row.run_id]
        if part.empty:
            raise ImportProblem(f"{shown}: run {run}, column run_id: the run has no points")
        fleet = (texts["fleet_id"], texts["suite"] or "") if texts["fleet_id"] else None
        suite = kept.get(texts["fleet_id"]) if fleet else None
        params, gpus = (asked.loc[row.run_id, "params"], asked.loc[row.run_id, "gpus"]) if row.run_id in asked.index \
            else (None, None)
        chars = asked.loc[row.run_id, "params_chars"] if row.run_id in asked.index else None
        if not pd.isna(chars) and chars > MAX_PARAMS_CHARS:
            raise ImportProblem(f"{shown}: run {run}, column params: {int(chars):,} characters, over the limit of "
                                f"{MAX_PARAMS_CHARS:,}")
        if not pd.isna(gpus) and gpus not in GPUS:
            raise ImportProblem(f"{shown}: run {run}, column gpus: value {_shown(gpus)} is not one of "
                                f"{', '.join(GPUS)}")
        try:
            params = checked_params(str(row.run_id), None if pd.isna(params) else params)
        except StoreError as exc:
            raise ImportProblem(f"{shown}: {exc}") from None
        batches.append((part, texts["label"], texts["notes"], fleet, suite[1] if suite else None,
                        {str(row.run_id): params} if params else None, None if pd.isna(gpus) else gpus))
    return batches


def _is_id(value) -> bool:
    return isinstance(value, str) and bool(value)
