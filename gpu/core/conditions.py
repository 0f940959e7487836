"""A point's conditions: what the GPU was doing besides PinPoint's work while the point was measured, in words.

Every measured row carries ``conditions`` (text): ``clean`` when the witness watched the whole point and saw nothing
that can explain a slow figure; ``not observed`` when no witness could watch (no NVML, NVML failing, a recording made
before witnesses); otherwise its causes, joined by ``; `` — for example
``shared with pid 1039 (python3) for 100 % of samples; SW power cap in 38 % of samples; PCIe Gen4 ×8 of Gen5 ×16``.
Beside it ``witness`` (JSON text) keeps the raw readings compactly, for a reviewer to open.

This module is the one place that reads those words back: pages, Compare, ``check`` and the Fleet page ask it whether
a point is clean and what its causes are, never parse the text themselves. No device code here.
"""

from __future__ import annotations

import math

CLEAN = "clean"
NOT_OBSERVED = "not observed"
SEPARATOR = "; "


def _text(value) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)) or type(value).__name__ == "NAType":
        return None  # None, NaN, and pandas' NA (an empty cell of a text column): never read as a cause
    text = str(value).strip()
    return text or None


def is_clean(value) -> bool:
    """True only for a point the witness watched and found clean: empty and ``not observed`` are not clean."""
    return _text(value) == CLEAN


def is_observed(value) -> bool:
    """A witness watched the point (clean or not)."""
    text = _text(value)
    return text is not None and text != NOT_OBSERVED


def causes(value) -> list[str]:
    """The causes a witness named for a point, in its order; [] for clean, not observed or empty."""
    text = _text(value)
    if text is None or text in (CLEAN, NOT_OBSERVED):
        return []
    return [part.strip() for part in text.split(SEPARATOR) if part.strip()]


def join(found: list[str]) -> str:
    """The ``conditions`` text for a watched point with these causes (``clean`` when there are none)."""
    kept = [cause.strip() for cause in found if cause and cause.strip()]
    return SEPARATOR.join(dict.fromkeys(kept)) if kept else CLEAN


def summary(values) -> str:
    """One line over many points' conditions: ``clean``, ``not observed``, or each distinct cause once, in order."""
    texts = [_text(value) for value in values]
    found = [cause for text in texts for cause in causes(text)]
    if found:
        return SEPARATOR.join(dict.fromkeys(found))
    if texts and all(text == CLEAN for text in texts):
        return CLEAN
    return NOT_OBSERVED
