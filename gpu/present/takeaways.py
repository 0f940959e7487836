"""What every takeaway shares: the one-sentence takeaways under a chart on stage (presentation mode) are each
experiment's own, ``takeaway(frame)`` in its package's view (``gpu/experiments/<name>/view.py``, reached by shared
code through ``registry.view_of``); this module joins their clauses into a sentence (``sentence``), reads a figure
of a view's facts that a frame may lack (``fact_or_none``), and says a result's context (is it normal, were
its points clean) and two runs' context in Compare.

Each function reads a results frame in the schema of ``gpu.core.schema`` and returns a sentence with the numbers it
found, or None when the frame lacks what the sentence needs. Nothing is written in advance: change the data and
the sentence changes. No Streamlit, no CUDA."""

from __future__ import annotations

import pandas as pd

from gpu.core.errors import ClaimError
from gpu.results.analysis import causes, compare, normal


def sentence(parts: list[str]) -> str | None:
    """Clauses joined into one sentence, capitalised; None when there are none."""
    if not parts:
        return None
    joined = "; ".join(parts)
    return joined[0].upper() + joined[1:] + "."


def fact_or_none(fact, frame: pd.DataFrame) -> dict | None:
    """A figure of an experiment's view's facts (``stride_costs``, ``best_reduction`` …), or None when the frame lacks
    what it needs."""
    try:
        return fact(frame)
    except ClaimError:
        return None


def context(frame: pd.DataFrame, stage: bool = False) -> str | None:
    """The line under a page's headline or takeaway: is its headline figure normal (``gpu.results.analysis.normal``:
    against its physical limit and the bundled recording of its GPU model), and how many of its points were not clean
    and why; a run no witness watched says so. On stage (``stage``), where the chart and takeaway fill the screen, only
    the points that were not clean are said, and None when there are none."""
    if frame.empty:
        return None
    seen = causes.count_line(frame)
    if stage:
        return seen + "." if seen and causes.of_frame(frame).map(causes.has_causes).any() else None
    figure = normal.is_this_normal(frame)
    parts = [f"Is this normal? {figure}"] if figure else []
    parts += [seen] if seen else []
    return ". ".join(parts) + "." if parts else None


def comparison_context(baseline: pd.DataFrame, candidate: pd.DataFrame) -> str:
    """Under a comparison's headline: each run's headline figure against its limit and the bundled recording of its
    model (``normal.is_this_normal``), and both runs' conditions (``compare.conditions_words``)."""
    figures = [f"{role} {said}" for role, frame in (("candidate", candidate), ("baseline", baseline))
               for said in [normal.is_this_normal(frame)] if said]
    return ("Is this normal? " + "; ".join(figures) + ". " if figures else "") + \
        f"Conditions: {compare.conditions_words(baseline, candidate)}."
