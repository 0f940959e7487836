"""Claims that GPU tutorials make, judged by a measurement: a judge reads a results frame (``gpu.core.schema``) and
returns the numbers and the verdict that a talk scene shows. Nothing is written in advance: change the measurement and
the verdict changes with it. No Streamlit, no CUDA.

Each experiment's judges are its own, in its package's view (``gpu/experiments/<name>/view.py``): ``CLAIMS`` (judge
name → judge) and ``SHARED_FIGURES`` (judge name → the figures of its verdict that the experiment's page also shows,
as text). This module finds them through the registry (``judges``, ``shared_figures``), so it names no experiment, and
gives the judges their common shape (``beyond``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from gpu.core import paths
from gpu.core.errors import ClaimError
from gpu.experiments import registry

__all__ = ["ClaimError", "beyond", "judge_source", "judges", "shared_figures"]


def _views():
    return [view for entry in registry.REGISTRY if (view := entry.view()) is not None]


def judges() -> dict[str, Callable[[pd.DataFrame], dict]]:
    """Every experiment's judges (its view's ``CLAIMS``) by name, in registry order: what a talk's ``judge`` names."""
    return {name: judge for view in _views() for name, judge in getattr(view, "CLAIMS", {}).items()}


def shared_figures() -> dict[str, tuple[str, ...]]:
    """The figures of each verdict that a page also shows (its stage takeaway), as text, from every experiment's view
    (``SHARED_FIGURES``): tests/test_one_fact.py holds every talk verdict against the page of the same recording with
    these."""
    return {name: tuple(fields) for view in _views() for name, fields in getattr(view, "SHARED_FIGURES", {}).items()}


def judge_source(name: str) -> str:
    """Where the judge ``name`` is written, for a talk's method note: its view's file, relative to the folder that
    holds gpu/ (or where it is, for an experiment of another folder)."""
    for view in _views():
        if name in getattr(view, "CLAIMS", {}):
            path = Path(view.__file__).resolve()
            return str(path.relative_to(paths.ROOT)) if path.is_relative_to(paths.ROOT) else str(path)
    raise ClaimError(f"no experiment's view has a judge '{name}'")


def beyond(name: str, fact, figure: str, limit: float, above: str, within: str, doc: str):
    """A claim judged on one figure of a fact that a page also states (an experiment's view's fact): the verdict is
    ``above`` when the figure exceeds ``limit``, else ``within``; the fact's numbers come with it."""
    def judge(frame: pd.DataFrame) -> dict:
        found = fact(frame)
        return {"verdict": above if found[figure] > limit else within, **found}

    judge.__name__ = judge.__qualname__ = name
    judge.__doc__ = doc
    return judge
