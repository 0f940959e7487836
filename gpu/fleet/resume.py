"""Resuming a fleet id: what the store already holds of it, and the suite to resume it with. A fleet holds one suite:
a resume with another suite's name, or a suite that measures differently (its runs, parameters, profile, time limit
or ``gpus``), is refused naming what changed, before any cluster starts; a text that differs only where nothing is
measured differently (comments, layout, order, title) resumes with the stored text."""

from __future__ import annotations

from gpu.core.errors import FleetError
from gpu.experiments import suites
from gpu.experiments.suites import Suite
from gpu.fleet.progress import Progress


def stored_pairs(catalog, fleet_id: str, suite: Suite) -> set[tuple]:
    """The (GPU UUID, experiment) pairs fleet ``fleet_id`` holds; FleetError when it was measured with another
    suite's name."""
    stored = catalog.store.runs(fleet_id=fleet_id)
    other_suites = {s for s in stored["suite"].dropna() if s != suite.name}
    if other_suites:
        raise FleetError(f"fleet {fleet_id} was measured with suite {', '.join(sorted(other_suites))}, not "
                         f"{suite.name}: give another --fleet-id")
    return set(zip(stored["gpu_uuid"], stored["experiment"], strict=True))


def suite_as_stored(catalog, fleet_id: str, suite: Suite, progress: Progress | None = None) -> Suite:
    """The suite to resume fleet ``fleet_id`` with: ``suite`` when the store keeps no other text for the fleet; the
    stored suite when ``suite``'s text differs from it only where nothing is measured differently (comments, layout,
    order, title); FleetError naming what changed otherwise (a resume never mixes two suites' runs in one fleet)."""
    kept = catalog.store.fleet_suite(fleet_id)
    if kept is None or not suite.text or kept[1] == suite.text:
        return suite
    try:
        stored = suites.stored(fleet_id, kept[0], kept[1])
    except suites.SuiteError as exc:
        raise FleetError(f"fleet {fleet_id} was measured with a suite {suite.name} that no longer parses here "
                         f"({exc.reasons[0]}): give another --fleet-id") from None
    changed = suites.differences(stored, suite)
    if changed:
        more = f" and {len(changed) - 3} more changes" if len(changed) > 3 else ""
        raise FleetError(f"fleet {fleet_id} was measured with another suite {suite.name}: {'; '.join(changed[:3])}"
                         f"{more}; resume with the suite as it was, or give another --fleet-id")
    if progress is not None:
        progress.event(f"{suite.path or suite.name} differs from fleet {fleet_id}'s stored suite only where nothing "
                       "is measured differently (comments, layout, order or title): resuming with the stored suite")
    return stored
