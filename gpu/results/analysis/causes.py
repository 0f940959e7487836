"""What the witness saw, said where people decide: a point's conditions read from a results frame, and the words
Compare, ``check`` and the Fleet page put beside a verdict or a slow board. No Streamlit, no CUDA.

Every text is read through ``gpu.core.conditions`` (never parsed here). A frame without a ``conditions`` column (a run
recorded before witnesses, a bundled recording) reads as ``not observed`` on every row, and ``not observed`` is never
said as clean: a point is *clean* only when a witness watched it and saw nothing.

In Compare a point is **not clean** when the witness named a cause on its baseline's or its candidate's side; such a
point is never silently slower: its verdict carries the cause ("slower beyond noise, not clean — candidate: shared with
pid 1039 (python3) for 100 % of samples").
"""

from __future__ import annotations

import pandas as pd

from gpu.core import conditions

COLUMN = "conditions"
NOT_CLEAN = "not clean"
NO_CAUSE = "no cause observed"


def _value(value):
    """A stored value as ``gpu.core.conditions`` reads it: pandas' missing values (NA, NaT, NaN) as None, which
    would otherwise read as the text '<NA>'."""
    if isinstance(value, str) or value is None:
        return value
    try:
        return None if bool(pd.isna(value)) else value
    except (TypeError, ValueError):  # a list or an array: not a missing value
        return value


def of_frame(frame: pd.DataFrame) -> pd.Series:
    """Each row's conditions text, ``not observed`` where the frame has no column or the row holds none."""
    if frame.empty:
        return pd.Series([], dtype=object, index=frame.index)
    values = frame.get(COLUMN)
    if values is None:
        return pd.Series([conditions.NOT_OBSERVED] * len(frame), index=frame.index, dtype=object)
    return values.map(lambda v: conditions.NOT_OBSERVED if not conditions.is_observed(_value(v)) else str(v).strip())


def of_row(row) -> str:
    """One row's (a dict or a Series) conditions text: ``not observed`` where it holds none."""
    value = _value(row.get(COLUMN)) if hasattr(row, "get") else None
    return str(value).strip() if conditions.is_observed(value) else conditions.NOT_OBSERVED


def has_causes(value) -> bool:
    """A witness named at least one cause (not clean, and observed)."""
    return bool(conditions.causes(_value(value)))


def words(value) -> str:
    """A point's conditions for a reader: 'clean', 'not observed', or its causes."""
    value = _value(value)
    if conditions.is_clean(value):
        return conditions.CLEAN
    found = conditions.causes(value)
    return conditions.SEPARATOR.join(found) if found else conditions.NOT_OBSERVED


def pair_words(baseline, candidate) -> str:
    """A compared point's conditions on both sides: 'clean' when both were watched and clean; otherwise each side
    that was not clean, named ('candidate: SW power cap in 38 % of samples; baseline: not observed')."""
    sides = [("candidate", _value(candidate)), ("baseline", _value(baseline))]
    if all(conditions.is_clean(v) for _, v in sides):
        return conditions.CLEAN
    if not any(conditions.is_observed(v) for _, v in sides):
        return conditions.NOT_OBSERVED
    return conditions.SEPARATOR.join(f"{side}: {words(v)}" for side, v in sides if not conditions.is_clean(v))


def explained(baseline, candidate) -> bool:
    """Whether a witness named a cause on either side of a compared point: its difference may be the conditions'."""
    return has_causes(baseline) or has_causes(candidate)


def cause_words(baseline, candidate) -> str:
    """Only the sides with causes ('candidate: shared with pid 1039 (python3) for 100 % of samples'), '' for none."""
    return conditions.SEPARATOR.join(f"{side}: {conditions.SEPARATOR.join(conditions.causes(_value(v)))}"
                                     for side, v in (("candidate", candidate), ("baseline", baseline))
                                     if has_causes(v))


def verdict_words(name: str, baseline, candidate) -> str:
    """A verdict said with its conditions: 'slower beyond noise, not clean — candidate: SW power cap in 38 % of
    samples' where a side had causes; the name alone otherwise (a point's ``pair_words`` beside it say whether it was
    clean or not observed)."""
    named = cause_words(baseline, candidate)
    return f"{name}, {NOT_CLEAN} — {named}" if named else name


def summary(values) -> str:
    """Many points' conditions in one line: 'clean', 'not observed', or each distinct cause once."""
    return conditions.summary([_value(v) for v in values])


LINE_CAUSES = 4  # a page's one line names this many distinct causes; a run with dozens would fill the stage


def count_line(frame: pd.DataFrame) -> str | None:
    """How many of a run's points were not clean and why, in one line ('3 of 40 points not clean: SW power cap in
    38 % of samples'); 'conditions not observed' for a run no witness watched; None when every point was clean."""
    if frame.empty:
        return None
    texts = of_frame(frame)
    named = texts[texts.map(has_causes)]
    if not named.empty:
        distinct = list(dict.fromkeys(c for text in named for c in conditions.causes(text)))
        shown = conditions.SEPARATOR.join(distinct[:LINE_CAUSES])
        more = len(distinct) - LINE_CAUSES
        rest = f"; and {more} more cause{'s' if more > 1 else ''} (each point's are in its hover)" if more > 0 else ""
        return f"{len(named)} of {len(texts)} points not clean: {shown}{rest}"
    if texts.map(conditions.is_clean).all():
        return None
    observed = int(texts.map(conditions.is_observed).sum())
    if observed == 0:
        return f"Conditions not observed for these {len(texts)} points (no witness watched them)"
    return f"Conditions not observed for {len(texts) - observed} of {len(texts)} points; the rest clean"


def board_cause(values) -> str:
    """What a slow board's or link's points had in common, for the Fleet page's words: their causes with 'in its
    samples' ('SW power cap in 38 % of its samples'), ``no cause observed`` where a witness saw none, ``conditions not
    observed`` where none watched."""
    values = [_value(v) for v in values]
    found = [c for v in values for c in conditions.causes(v)]
    if found:
        return conditions.SEPARATOR.join(dict.fromkeys(c.replace(" of samples", " of its samples") for c in found))
    if values and any(conditions.is_observed(v) for v in values):
        return NO_CAUSE
    return "conditions not observed"
