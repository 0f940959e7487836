"""Shared code never branches on an experiment's name: each experiment declares what others need to know about it
(its labels, noise kind, displayed columns, FLOPs, roofs), and this test fails when a shared module compares a value
with a registered experiment's name or looks one up in a literal list of names."""

import ast
from pathlib import Path

import pytest

from gpu.experiments import registry

ROOT = Path(__file__).resolve().parent.parent
SHARED = [*sorted((ROOT / "gpu").glob("results/*.py")), *sorted((ROOT / "gpu").glob("service/*.py")),
          *sorted((ROOT / "gpu").glob("present/*.py")), *sorted((ROOT / "gpu").glob("present/charts/*.py")),
          *sorted((ROOT / "gpu").glob("fleet/*.py")), ROOT / "gpu" / "bench.py",
          *sorted((ROOT / "pages" / "_ui").glob("*.py")),
          ROOT / "pages" / "_shared.py", ROOT / "app.py", ROOT / "gpu" / "sweeps" / "harness.py",
          ROOT / "gpu" / "experiments" / "registry.py", ROOT / "gpu" / "experiments" / "axes.py"]
NAMES = {entry.name for entry in registry.REGISTRY} | {entry.command for entry in registry.REGISTRY}


def name_branches(source: str) -> list[tuple[int, str]]:
    """(line, name) of every comparison (==, !=, in, not in) with an experiment's name as a literal operand."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        for operand in [node.left, *node.comparators]:
            literals = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
            for literal in literals:
                if isinstance(literal, ast.Constant) and literal.value in NAMES:
                    found.append((node.lineno, literal.value))
    return found


@pytest.mark.parametrize("path", SHARED, ids=lambda p: str(p.relative_to(ROOT)))
def test_shared_code_never_branches_on_an_experiment_name(path):
    assert name_branches(path.read_text()) == []


def test_the_check_finds_a_branch_on_a_name():
    assert name_branches('if experiment == "transfers":\n    pass\n') == [(1, "transfers")]
    assert name_branches('ok = name in ("managed", "pools")\n') == [(1, "managed"), (1, "pools")]
    assert name_branches('if column in ("chunks", "bytes"):\n    pass\n') == []


def test_every_declaration_a_shared_module_reads_has_its_documented_shape():
    for entry in registry.REGISTRY:
        module = entry.module
        for name in ("point_label", "short_point_label", "noise_kind", "flops", "roofs"):
            assert callable(getattr(module, name, None)) or not hasattr(module, name), (entry.name, name)
        assert set(getattr(module, "SHOW_COLUMNS", [])) <= set(__import__("gpu.core.schema").core.schema.COLUMNS)
        assert isinstance(getattr(module, "LABELS", {}), dict)


# The shared code that reaches an experiment only through the registry: the takeaways' and headlines' helpers, the
# figures' shared style and the talk's judges (each experiment's facts and judges are in its view), the talk,
# Overview, the page table and app.py, the shared charts, the pages' helpers and the results layer (a page's own
# analyses, such as the Peers page's, sit in its experiment's package).
NAMES_NO_PACKAGE = [ROOT / "gpu" / "present" / "takeaways.py", ROOT / "gpu" / "present" / "headlines.py",
                    ROOT / "gpu" / "present" / "facts.py", ROOT / "gpu" / "present" / "claims.py",
                    ROOT / "gpu" / "present" / "talks.py", *sorted((ROOT / "gpu" / "present" / "charts").glob("*.py")),
                    ROOT / "pages" / "overview.py", ROOT / "pages" / "talk.py", ROOT / "pages" / "_shared.py",
                    ROOT / "app.py", *sorted((ROOT / "pages" / "_ui").glob("*.py")),
                    *sorted((ROOT / "gpu" / "results").rglob("*.py"))]
PACKAGES = {f"gpu.experiments.{p.parent.name}" for p in (ROOT / "gpu" / "experiments").glob("*/__init__.py")}


def experiment_imports(source: str) -> list[str]:
    """Every experiment package (or module of one) that ``source`` imports."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        found += [n for n in names if any(n == p or n.startswith(p + ".") for p in PACKAGES)]
    return sorted(set(found))


@pytest.mark.parametrize("path", NAMES_NO_PACKAGE, ids=lambda p: str(p.relative_to(ROOT)))
def test_shared_code_imports_no_experiment_package(path):
    assert experiment_imports(path.read_text()) == []


def test_the_check_finds_an_imported_experiment_package():
    assert "gpu.experiments.coalescing" in PACKAGES and "gpu.experiments.registry" not in PACKAGES
    assert experiment_imports("from gpu.experiments.coalescing import view\n") == [
        "gpu.experiments.coalescing", "gpu.experiments.coalescing.view"]
    assert experiment_imports("from gpu.experiments import registry, streams\n") == ["gpu.experiments.streams"]
    assert experiment_imports("import gpu.experiments.peers.view\n") == ["gpu.experiments.peers.view"]

