"""A run's method version read back, and two runs' method versions compared in words.

Every run measured since PinPoint kept one carries ``method_version`` on its rows (``gpu.core.schema``): a hash of the
sources that measured it (its sweep, its kernels and the shared harness and timing code; ``gpu.experiments.method``
computes it). Runs recorded before (the bundled recordings among them) have none: their method version is *unknown*,
never guessed. This module is the one reader: Compare, ``check`` and the review report ask it, never the column.
No device code here.
"""

from __future__ import annotations

import math

UNKNOWN = "unknown"
BEFORE = "recorded before PinPoint kept method versions, as the bundled recordings were"


def _version(value) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)) or type(value).__name__ == "NAType":
        return None
    text = str(value).strip()
    return text or None


def of_run(frame) -> str | None:
    """The run's method version (its rows' ``method_version``), None when it has none; a run whose rows name several
    (joined from several files) gives them all, sorted and joined by ', '."""
    if "method_version" not in getattr(frame, "columns", ()):
        return None
    versions = sorted({v for v in map(_version, frame["method_version"]) if v})
    return ", ".join(versions) or None


def shown(frame) -> str:
    """The run's method version as shown: the version, or ``unknown``."""
    return of_run(frame) or UNKNOWN


def differ(baseline, candidate) -> bool | None:
    """True when both runs name their method version and the versions differ, False when they are the same, None when
    either is unknown (whether they differ cannot be told)."""
    b, c = of_run(baseline), of_run(candidate)
    return None if b is None or c is None else b != c


def words(baseline, candidate) -> str:
    """Whether the two runs were measured by the same method, in one or two plain sentences."""
    b, c = of_run(baseline), of_run(candidate)
    if b is not None and c is not None:
        if b == c:
            return f"Method: the same in both runs (method version {b})."
        return (f"Methods differ: the baseline was measured with method version {b} and the candidate with {c} (its "
                "sweep, kernels or the shared timing code changed between them), so a difference may come from the "
                "method as well as from the GPU or its software.")
    if b is None and c is None:
        return f"Method version unknown for both runs ({BEFORE}): whether their methods differ cannot be told."
    role, other, known = ("baseline", "candidate", c) if b is None else ("candidate", "baseline", b)
    return (f"Method version unknown for the {role} ({BEFORE}); the {other}'s is {known}: whether their methods "
            "differ cannot be told.")
