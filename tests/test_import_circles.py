"""No circle among gpu/'s modules: following imports from any module never leads back to it, counting the imports
under TYPE_CHECKING and those inside functions too (a circle closed by type hints is still two modules that each
need the other to be read)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def modules(root: Path) -> dict[str, Path]:
    found = {}
    for path in sorted((root / "gpu").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported(tree: ast.Module, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that ``tree`` imports (``from gpu.x import y`` is gpu.x.y where that is a module)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


def circles(root: Path) -> list[list[str]]:
    """Each circle as the path from a module back to it, one per module that lies on one."""
    known = modules(root)
    graph = {name: imported(ast.parse(path.read_text()), known) - {name} for name, path in known.items()}
    found = []
    for start in sorted(graph):
        paths, seen = [[start]], {start}
        while paths:
            path = paths.pop(0)
            for target in sorted(graph[path[-1]]):
                if target == start:
                    found.append([*path, start])
                    paths = []
                    break
                if target not in seen:
                    seen.add(target)
                    paths.append([*path, target])
    return found


def test_no_module_of_gpu_imports_itself_through_others():
    found = circles(ROOT)
    assert not found, "import circles (split the shared names into a module of their own):\n" + \
        "\n".join(" → ".join(path) for path in found)


def test_a_circle_closed_by_type_hints_is_found(tmp_path):
    fleet = tmp_path / "gpu" / "fleet"
    fleet.mkdir(parents=True)
    (tmp_path / "gpu" / "__init__.py").write_text("")
    (fleet / "__init__.py").write_text("")
    (fleet / "run.py").write_text("from gpu.fleet.progress import Progress\n")
    (fleet / "progress.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                       "    from gpu.fleet.run import FleetGpu\n")
    assert circles(tmp_path) == [["gpu.fleet.progress", "gpu.fleet.run", "gpu.fleet.progress"],
                                 ["gpu.fleet.run", "gpu.fleet.progress", "gpu.fleet.run"]]
