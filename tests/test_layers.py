"""The layers of gpu/ (see gpu/__init__.py): each module imports only from its own layer or the ones it sits on,
PyCUDA only in gpu/device/ and the worker, experiments, results and present never touch device, sweeps or service,
and imports sit at the top of a module except the lazy ones named here (each with its reason).

An experiment is a package, gpu/experiments/<name>/, whose modules take their layer from their role: ``sweep.py`` is
of the sweeps layer (worker only), ``view.py`` of the present layer, and the rest (the declaration, ``__init__.py``)
of the experiments layer. So a declaration never imports its sweep, its view or the device layer, and a view never
imports a sweep."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The layers each layer sits on directly: core ← device; core ← experiments; device + experiments ← sweeps ← service
# ← fleet; experiments ← results ← present, service, fleet. A layer may import what these sit on, too.
SITS_ON = {
    "core": set(),
    "device": {"core"},
    "experiments": {"core"},
    "sweeps": {"device", "experiments"},
    "results": {"experiments"},
    "service": {"sweeps", "results"},
    "fleet": {"service"},
    "present": {"results"},
}
LAYERS = list(SITS_ON)
TOP = "runner"  # gpu/bench.py (the runner) and gpu/__init__.py sit on all of them; pages/, app.py, serve.py above that
TOP_MODULES = {"gpu.bench", "gpu.cli", "gpu"}
# Layers whose modules pages, charts and the store load: they never reach the GPU's code.
DECLARATION_SIDE = ("experiments", "results", "present")
WORKER_ONLY = ("gpu.device", "gpu.sweeps", "gpu.service")


def below(layer: str) -> set[str]:
    """Every layer ``layer`` may import besides its own."""
    found, todo = set(), list(SITS_ON[layer])
    while todo:
        lower = todo.pop()
        if lower not in found:
            found.add(lower)
            todo += SITS_ON[lower]
    return found


# Imports that stay inside functions, and why:
LAZY_ALLOWED = {
    "pycuda": "PyCUDA creates a CUDA context on import paths; only the worker's process may load it",
    "scipy": "scipy.stats costs ~1.2 s of CPU to import; only a verdict needs it, not every page that imports one",
    "pyarrow": "Parquet I/O only, ~0.3 s to import",
    "pynvml": "NVML only exists beside a driver",
    "gpu.fleet": "Dask costs ~1 s of CPU to import; only the runner's fleet command needs it",
    # `pinpoint --help` loads the declarations (its list of experiments), never pandas or tree-sitter (~0.6 s and
    # ~0.1 s to import; tests/test_cli.py checks): the core modules they import load these where a frame is made or
    # a TOML text parsed, and the command loads the runner only for a command that runs.
    "pandas": "a frame is made or read only in functions of the core modules the declarations import",
    "tree_sitter": "only parsing a suite's or talk's TOML text needs it",
    "tree_sitter_toml": "tree-sitter's TOML grammar, with tree_sitter",
    "gpu.bench": "the runner loads pandas and the results store; pinpoint --help and pinpoint app never need it",
}


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / "gpu").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


# An experiment package's modules by role: the rest of a package is the experiments layer (its declaration).
ROLES = {"sweep": "sweeps", "view": "present"}


def layer_of(module: str) -> str | None:
    if module in TOP_MODULES:
        return TOP
    parts = module.split(".")
    if parts[:2] == ["gpu", "experiments"] and len(parts) >= 4:
        return ROLES.get(parts[3], "experiments")
    if len(parts) >= 2 and parts[0] == "gpu" and parts[1] in LAYERS:
        return parts[1]
    return None


def experiment_packages() -> list[str]:
    """gpu.experiments.<name> of every experiment package (a folder of gpu/experiments/ with an __init__.py)."""
    return sorted(f"gpu.experiments.{p.parent.name}" for p in (ROOT / "gpu" / "experiments").glob("*/__init__.py"))


def may_import(own: str, target: str) -> bool:
    return own == TOP or target == own or target in below(own)


def imports_of(path: Path):
    """(imported module, line, at top level) for every import in ``path``; ``from gpu.x import y`` counts as
    importing gpu.x.y when that is a module, else gpu.x."""
    tree = ast.parse(path.read_text(), filename=str(path))
    known = modules()
    top_level = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, id(node) in top_level or _under_type_checking(tree, node)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                yield (full if full in known else node.module), node.lineno, (
                    id(node) in top_level or _under_type_checking(tree, node))


def _under_type_checking(tree, node) -> bool:
    for block in tree.body:
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test) and node in list(ast.walk(block)):
            return True
    return False


def test_every_gpu_module_belongs_to_a_layer():
    unplaced = [m for m in modules() if m != "gpu" and layer_of(m) is None]
    assert not unplaced, f"modules outside the layers: {unplaced}"


def test_an_experiment_package_s_modules_take_their_layer_from_their_role():
    packages = experiment_packages()
    assert "gpu.experiments.coalescing" in packages
    for package in packages:
        assert layer_of(package) == "experiments" and layer_of(f"{package}.sweep") == "sweeps"
        assert layer_of(f"{package}.view") == "present" and layer_of(f"{package}.helpers") == "experiments"
        assert f"{package}.sweep" in modules(), f"{package} has no sweep.py"
    assert layer_of("gpu.experiments.registry") == "experiments" and layer_of("gpu.sweeps.harness") == "sweeps"


@pytest.mark.parametrize("module", sorted(modules()), ids=lambda m: str(modules()[m].relative_to(ROOT)))
def test_imports_point_down_or_sideways(module):
    own = layer_of(module)
    upward = [f"line {line}: {target}" for target, line, _ in imports_of(modules()[module])
              if target.startswith("gpu.") and layer_of(target) is not None and not may_import(own, layer_of(target))]
    assert not upward, f"{module} ({own}) imports a layer it does not sit on: {upward}"


def test_the_layers_sit_as_drawn():
    assert below("sweeps") == {"core", "device", "experiments"}
    assert not below("experiments") & {"device", "sweeps"} and "sweeps" in below("service") & below("fleet")
    assert all(not below(layer) & {"device", "sweeps", "service"} for layer in DECLARATION_SIDE)
    assert may_import("sweeps", "device") and not may_import("experiments", "sweeps")
    assert not may_import("results", "device") and may_import(TOP, "fleet")


def worker_only_imports(path: Path) -> list[str]:
    """The imports in ``path`` of a worker-only module: the device layer, the sweeps (gpu/sweeps/ and every
    experiment package's sweep.py) and the service."""
    return [f"line {line}: {target}" for target, line, _ in imports_of(path)
            if target.startswith(WORKER_ONLY) or layer_of(target) in ("device", "sweeps", "service")]


@pytest.mark.parametrize("module", sorted(modules()), ids=lambda m: str(modules()[m].relative_to(ROOT)))
def test_experiments_results_and_present_never_touch_device_sweeps_or_service(module):
    if layer_of(module) not in DECLARATION_SIDE:
        return
    touched = worker_only_imports(modules()[module])
    assert not touched, touched


def test_a_declaration_or_a_view_that_imports_a_sweep_or_the_device_is_caught(tmp_path):
    """The check above can fail: the imports a declaration or a view must not make are found, whatever their form."""
    bad = tmp_path / "bad.py"
    bad.write_text("from gpu.experiments.coalescing import sweep\nimport gpu.experiments.coalescing.sweep\n"
                   "from gpu.device import context\nfrom gpu.experiments.coalescing import view, Params\n")
    assert worker_only_imports(bad) == ["line 1: gpu.experiments.coalescing.sweep",
                                        "line 2: gpu.experiments.coalescing.sweep", "line 3: gpu.device.context"]
    for own in ("experiments", "present"):
        assert not may_import(own, layer_of("gpu.experiments.coalescing.sweep"))
    assert not may_import("experiments", layer_of("gpu.experiments.coalescing.view"))  # a declaration: no view
    assert may_import("present", layer_of("gpu.experiments.coalescing"))  # a view reads its declaration


def test_only_the_device_layer_and_the_worker_import_pycuda():
    importers = {m for m, path in modules().items() for target, _, _ in imports_of(path)
                 if target.split(".")[0] == "pycuda"}
    assert importers, "nothing imports PyCUDA: the check would prove nothing"
    allowed = {m for m in importers if m.startswith("gpu.device.") or m == "gpu.service.worker"}
    # Experiments reach PyCUDA's helpers (gpuarray, the memory pools) through the runtime they are given.
    assert importers == allowed, importers - allowed
    for m in importers - {m for m in importers if m.startswith("gpu.device.")}:
        eager = [line for target, line, top in imports_of(modules()[m]) if target.split(".")[0] == "pycuda" and top]
        assert not eager, f"{m} imports PyCUDA at module level (line {eager})"


def test_imports_sit_at_the_top_except_the_lazy_heavy_ones():
    files = {**modules(), "app.py": ROOT / "app.py", "serve.py": ROOT / "serve.py",
             **{str(p.relative_to(ROOT)): p for p in sorted((ROOT / "pages").rglob("*.py"))}}
    inside = [f"{m} line {line}: {target}" for m, path in files.items()
              for target, line, top in imports_of(path)
              if not top and not any(target == lazy or target.startswith(lazy + ".") for lazy in LAZY_ALLOWED)]
    assert not inside, "imports inside functions:\n" + "\n".join(inside)


def test_one_error_hierarchy_with_one_root():
    from gpu.core import errors

    roots = {cls for cls in vars(errors).values() if isinstance(cls, type) and issubclass(cls, Exception)
             and cls.__module__ == errors.__name__}
    assert all(issubclass(cls, errors.PinPointError) for cls in roots), roots
    exceptions = []
    for m, path in modules().items():
        tree = ast.parse(path.read_text())
        exceptions += [f"{m}.{node.name}" for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
                       and any(ast.unparse(b).endswith(("Error", "Exception", "Problem")) for b in node.bases)
                       and node.name not in _subclasses(errors)
                       and not any(ast.unparse(b).split(".")[-1] in _subclasses(errors) for b in node.bases)]
    assert not exceptions, f"exceptions outside PinPointError's tree: {exceptions}"


def _subclasses(errors) -> set[str]:
    return {name for name, cls in vars(errors).items()
            if isinstance(cls, type) and issubclass(cls, errors.PinPointError)}


ROOM_LINES = 400


def test_no_module_is_over_400_lines_unless_its_docstring_names_its_one_concern():
    sources = [*(ROOT / "gpu").rglob("*.py"), *(ROOT / "pages").rglob("*.py"), ROOT / "app.py", ROOT / "serve.py"]
    over = [f"{path.relative_to(ROOT)} ({len(path.read_text().splitlines())} lines)" for path in sorted(sources)
            if len(path.read_text().splitlines()) > ROOM_LINES
            and "one concern" not in (ast.get_docstring(ast.parse(path.read_text())) or "")]
    assert not over, f"modules over {ROOM_LINES} lines holding more than one concern (split them along their seams, " \
                     f"or say their one concern in the docstring): {over}"
