"""Rows recorded before schema version 11, mapped onto the columns named by axis. No Streamlit, no CUDA.

Those rows kept a point's swept coordinate, or a detail of how its samples were made, in one overloaded pair of
columns (``gpu.core.schema.LEGACY_COLUMNS``): ``param`` named it ("stride", "copies per sample", "none") and
``param_value`` held its value. Each experiment's declaration says what its names were (``LEGACY_PARAMS``: old name →
the schema column that holds it now, or None for a name that stood for no axis, whose value is dropped). One
function maps them, used by every reader of old rows: imports of old exports (after their content hash is checked on
the file as written), the store's migration to schema version 11, and reading any recording. A name the row's
experiment never wrote is refused in one line that names it; so is a value that is not a whole number of at least 0
(every axis column is a count or a size), or one that disagrees with the column the row also holds.
"""

from __future__ import annotations

import math

import pandas as pd

from gpu.core import schema, text
from gpu.core.errors import SchemaError
from gpu.experiments import registry

NAME, VALUE = schema.LEGACY_COLUMNS


def legacy_params(experiment) -> dict[str, str | None]:
    """The experiment's old ``param`` names → the column each maps to (None: no axis)."""
    module = registry.EXPERIMENTS.get(str(experiment))
    if module is None:
        raise SchemaError(f"experiment {text.shorten(str(experiment))!r} is not a PinPoint experiment (known: "
                          f"{', '.join(registry.EXPERIMENTS)})")
    return dict(getattr(module, "LEGACY_PARAMS", {}))


def _missing(value) -> bool:
    return schema.key_value(value) is None or (isinstance(value, str) and value == "")


def mapped_value(experiment, name, value, what: str) -> tuple[str | None, int | None]:
    """(column, value) that a legacy ``param``/``param_value`` pair of a row of ``experiment`` becomes; (None, None)
    when the pair is empty or names no axis. ``what`` names the row (a file and row, a run)."""
    if _missing(name):
        if not _missing(value):
            raise SchemaError(f"{what}: param_value {text.shorten(str(value))} has no param naming its axis")
        return None, None
    name = str(name)
    known = legacy_params(experiment)
    if name not in known:
        raise SchemaError(f"{what}: param {text.shorten(name)!r} is not one of {experiment}'s "
                          f"({', '.join(repr(k) for k in known) or 'it has none'})")
    column = known[name]
    if column is None:
        return None, None
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number < 0 or not number.is_integer():
        raise SchemaError(f"{what}: param {name!r} has the value {text.shorten(str(value))}, not a whole number "
                          "of at least 0")
    return column, int(number)


def map_row(row: dict, what: str) -> dict:
    """One row as a dict (the store's ``row_json``), its legacy pair mapped; a row without one is returned as is."""
    if not any(c in row for c in schema.LEGACY_COLUMNS):
        return row
    column, value = mapped_value(row.get("experiment"), row.get(NAME), row.get(VALUE), what)
    out = {k: v for k, v in row.items() if k not in schema.LEGACY_COLUMNS}
    if column is not None:
        held = schema.key_value(out.get(column))
        if held is not None and held != value:
            raise SchemaError(f"{what}: param {row.get(NAME)!r} ({value}) disagrees with its column {column} ({held})")
        out[column] = value
    return out


def map_frame(frame: pd.DataFrame, what: str) -> pd.DataFrame:
    """A results frame (validated or as read from a file), its legacy columns mapped and dropped; ``what`` names
    where it was read. A frame without them is returned as is."""
    if not any(c in frame.columns for c in schema.LEGACY_COLUMNS):
        return frame
    frame = frame.reset_index(drop=True)
    names = frame[NAME] if NAME in frame.columns else pd.Series(None, index=frame.index, dtype=object)
    values = frame[VALUE] if VALUE in frame.columns else pd.Series(None, index=frame.index, dtype=object)
    experiments = frame["experiment"] if "experiment" in frame.columns else pd.Series(None, index=frame.index)
    targets: dict[str, dict[int, int]] = {}
    for i, (experiment, name, value) in enumerate(zip(experiments, names, values, strict=True)):
        column, number = mapped_value(experiment, name, value, f"{what}: row {i + 1}")
        if column is not None:
            targets.setdefault(column, {})[i] = number
    frame = frame.drop(columns=[c for c in schema.LEGACY_COLUMNS if c in frame.columns])
    for column, by_row in targets.items():
        mapped = pd.Series(by_row, dtype="float64").reindex(frame.index)
        if column in frame.columns:
            held = pd.to_numeric(frame[column], errors="coerce")
            clash = held.notna() & mapped.notna() & (held != mapped)
            if clash.any():
                i = int(clash.to_numpy().nonzero()[0][0])
                raise SchemaError(f"{what}: row {i + 1}: param_value {int(mapped.iloc[i])} disagrees with its column "
                                  f"{column} ({schema.key_value(held.iloc[i])})")
            mapped = mapped.fillna(held)
        frame[column] = mapped
    return frame


def read_results(path) -> pd.DataFrame:
    """A recording read (``gpu.core.schema.read_frame``), its legacy rows mapped, validated."""
    return schema.validate(map_frame(schema.read_frame(path), str(path)))
