"""The rooms of gpu/results lean one way (docs/contributing/architecture.md): analysis reads runs through exchange
and persistence, exchange stores through persistence, and persistence reaches into exchange only for run files (a
run's content hash, an export's writable file). Nothing in a room names the page analyses kept in gpu/present."""

from __future__ import annotations

import ast

import pytest

from tests.test_import_circles import ROOT, imported, modules

SITS_ON = {"persistence": set(), "exchange": {"persistence"}, "analysis": {"exchange", "persistence"}}
RUN_FILES = "gpu.results.exchange.runfiles"  # persistence's one reach into exchange


def room_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["gpu", "results"] or len(parts) < 3:
        return None
    return parts[2] if parts[2] in SITS_ON else None


RESULTS = sorted(m for m in modules(ROOT) if m.startswith("gpu.results."))


def test_every_results_module_is_in_a_room():
    assert RESULTS and not [m for m in RESULTS if room_of(m) is None and not m.endswith(tuple(SITS_ON))]


@pytest.mark.parametrize("module", RESULTS)
def test_a_room_imports_only_the_rooms_it_sits_on(module):
    known = modules(ROOT)
    own = room_of(module)
    if own is None:
        return
    targets = imported(ast.parse(known[module].read_text()), known)
    wrong = sorted(t for t in targets if room_of(t) not in (None, own) and room_of(t) not in SITS_ON[own]
                   and not (own == "persistence" and t == RUN_FILES))
    assert not wrong, f"{module} ({own}) imports a room it does not sit on: {wrong}"
