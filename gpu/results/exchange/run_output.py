"""Where the runner's measurement goes, and that it is never lost: its output arguments checked before the GPU
measures anything (``problems``), and after measuring the run written to ``--out`` and stored, each failure said in
one line with the file that keeps the run instead (``keep_measured``). No Streamlit, no CUDA."""

from __future__ import annotations

import sys

import pandas as pd

from gpu.core.access import Actor
from gpu.core.errors import AccessRefused, StoreError
from gpu.core.text import printable, shorten
from gpu.results.exchange import runfiles
from gpu.results.persistence.changes import check_text
from gpu.results.persistence.store import MAX_LABEL_CHARS, MAX_NOTES_CHARS, RunStore


def problems(out: str | None, label: str | None, notes: str | None) -> list[str]:
    """What is wrong with where a measurement would go (--out, --label, --notes), one line each."""
    found = []
    if out and (problem := runfiles.out_problem(out)):
        found.append(problem)
    for flag, value, limit in (("--label", label, MAX_LABEL_CHARS), ("--notes", notes, MAX_NOTES_CHARS)):
        try:
            check_text(flag[2:], value, limit)
        except StoreError as exc:
            found.append(f"{flag}: {exc}")
    return found


def keep_measured(frame: pd.DataFrame, out: str | None, store: bool, label: str | None, notes: str | None,
                  file_params: dict, store_params: dict) -> bool:
    """Write the measured run to ``out`` and store it (``store``), saying each step on stderr; a step that fails
    names the file that keeps the run instead (the temporary folder's, when ``out`` is not there). True when ``out``
    was asked for and could not be written."""
    written, out_failed = None, False
    if out:
        try:
            written, reason = runfiles.write_or_keep(frame, out, file_params)
        except OSError as exc:  # not even the temporary folder: the store below still keeps it
            written, reason = None, exc.strerror or str(exc)
        out_failed = reason is not None
        if not out_failed:
            print(f"wrote {out}", file=sys.stderr)
        else:
            kept = f"the run is kept in {written}" if written else "no file could be written"
            print(printable(f"error: --out {out} could not be written after measuring ({reason}); {kept}"),
                  file=sys.stderr)
    if store:
        try:
            runs = RunStore()
            if runs.in_memory:
                raise StoreError("PINPOINT_DB_URL is a SQLite database in memory, which keeps nothing")
            for result in runs.save(frame, "runner", label, notes, actor=Actor.local("cli"), params=store_params):
                print(result.message(), file=sys.stderr)
        except (StoreError, AccessRefused) as exc:  # the measurement is kept in a file; say why the store refused it
            print(printable(f"warning: the run was not stored: {exc}{_kept(frame, written, file_params)}"),
                  file=sys.stderr)
        except Exception as exc:  # unforeseen: still one line, and the measurement above is not lost
            said = f"unexpected {type(exc).__name__}: {shorten(' '.join(str(exc).split()), 300)}"
            print(printable(f"warning: the run was not stored: {said}{_kept(frame, written, file_params)}"),
                  file=sys.stderr)
    return out_failed


def _kept(frame: pd.DataFrame, written: str | None, params: dict) -> str:
    """Where a run the store refused is kept: the file already written, else one in the temporary folder."""
    if written is None:
        try:
            written = runfiles.keep(frame, params)
        except OSError as exc:
            return f"; no file could keep it either ({exc.strerror or exc})"
    return f"; it is kept in {written}"
