"""The audit trail exported (``python -m gpu.bench audit``): CSV or JSON, safe to open and to print. No Streamlit.

Every field of the trail is someone's text (an e-mail from a sign-in, a label, a run id from a file). JSON keeps each
field exactly, every character outside printable ASCII escaped (``\\u001b``), so no escape sequence reaches a
terminal. CSV gives one row per line, for spreadsheets and ``grep``: control characters (newlines and escape codes
included) are written as ``\\xNN`` and text that a spreadsheet would run as a formula gets a leading apostrophe
(the rule of ``gpu.core.schema.escape_cell``). Long fields are kept whole: an export is the record.
"""

from __future__ import annotations

import csv
import io
import json
import re

import pandas as pd

from gpu.core.schema import escape_cell
from gpu.core.text import shorten
from gpu.results.persistence.store import AUDIT_COLUMNS

FORMATS = ("csv", "json")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def one_line(value: object) -> str:
    """``value`` as text on one line: every control character (newline, CR, tab, ESC…) as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value))


def _fields(row: dict) -> dict:
    return {**row, "run_ids": " ".join(row["run_ids"])}


def to_csv(trail: pd.DataFrame) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(AUDIT_COLUMNS)
    for row in trail.to_dict("records"):
        fields = _fields(row)
        writer.writerow([escape_cell(one_line(fields[c])) for c in AUDIT_COLUMNS])
    return out.getvalue()


def to_json(trail: pd.DataFrame) -> str:
    return json.dumps([{c: row[c] for c in AUDIT_COLUMNS} for row in trail.to_dict("records")], indent=1,
                      ensure_ascii=True) + "\n"


def export(trail: pd.DataFrame, fmt: str) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"the audit trail exports as {' or '.join(FORMATS)}, not {fmt!r}")
    return to_csv(trail) if fmt == "csv" else to_json(trail)


def shown(trail: pd.DataFrame, limit: int = 200) -> pd.DataFrame:
    """The trail as a page shows it: one line per field, each cut to ``limit`` characters (the export keeps them
    whole)."""
    table = trail.copy()
    table["run_ids"] = table["run_ids"].map(lambda ids: " ".join(ids))
    for column in AUDIT_COLUMNS:
        table[column] = table[column].map(lambda v: shorten(one_line(v), limit))
    return table
