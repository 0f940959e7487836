"""Everything that is not the worker loads without the GPU's code: in a fresh interpreter, importing every module of
the runner, core, experiments (each package's declaration and view, not its worker-only sweep.py), results, present,
fleet, the service's client side, pages/_shared.py and pages/_ui loads nothing of gpu.device, gpu.sweeps, an
experiment's sweep or PyCUDA. A failure names the chain of imports that brought one in."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = ("gpu.device", "gpu.sweeps", "pycuda")
WORKER_PARTS = {"gpu.service.worker"}  # the one module of gpu.service that runs in the worker process

# Run in a fresh interpreter: imports each named module in turn and prints, as JSON, every forbidden module that
# was loaded with the chain of importers that led to it. A meta-path finder notes, for each module loaded, the
# nearest module on the stack that asked for it (importlib's own frames skipped), before any loader runs.
PROBE = r"""
import importlib, json, sys

forbidden = tuple(sys.argv[1].split(","))
importer = {}


def is_forbidden(name):  # gpu.device, gpu.sweeps, PyCUDA, or an experiment package's sweep
    parts = name.split(".")
    return name.startswith(forbidden) or (parts[:2] == ["gpu", "experiments"] and parts[3:4] == ["sweep"])


class Witness:
    @staticmethod
    def find_spec(name, path=None, target=None):
        frame = sys._getframe(1)
        while frame is not None:
            caller = frame.f_globals.get("__name__", "")
            if not caller.startswith(("importlib", "_frozen_importlib")):
                break
            frame = frame.f_back
        importer.setdefault(name, caller if frame is not None else "")
        return None


sys.meta_path.insert(0, Witness)
found = {}
for requested in sys.argv[2:]:
    importlib.import_module(requested)
    for name in list(sys.modules):
        if is_forbidden(name) and name not in found:
            chain, step = [name], name
            while importer.get(step) and importer[step] not in chain and importer[step] != "__main__":
                step = importer[step]
                chain.append(step)
            chain.reverse()
            found.setdefault(name, chain if chain[0] == requested else [requested, *chain])
print(json.dumps(found))
"""


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def non_worker_modules() -> list[str]:
    paths = [*(ROOT / "gpu").glob("*.py")]
    for layer in ("core", "experiments", "results", "present", "fleet"):
        paths += (ROOT / "gpu" / layer).rglob("*.py")
    paths += (ROOT / "gpu" / "service").glob("*.py")
    paths += [ROOT / "pages" / "_shared.py", *(ROOT / "pages" / "_ui").glob("*.py")]
    names = {module_name(p) for p in paths} - WORKER_PARTS
    return sorted(n for n in names if not (n.startswith("gpu.experiments.") and n.split(".")[3:4] == ["sweep"]))


def loaded_worker_code(modules: list[str]) -> dict[str, list[str]]:
    """{forbidden module: [the module asked for, …the importers…, the forbidden module]} after importing
    ``modules`` in one fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", PROBE, ",".join(FORBIDDEN), *modules], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_nothing_but_the_worker_loads_the_device_layer_the_sweeps_or_pycuda():
    modules = non_worker_modules()
    assert {"gpu.results.compare", "gpu.experiments.transfers", "gpu.experiments.fma.view",
            "gpu.experiments.coalescing", "gpu.experiments.coalescing.view",
            "gpu.service.client", "pages._ui.controls"} <= set(modules)
    assert "gpu.experiments.coalescing.sweep" not in modules
    loaded = loaded_worker_code(modules)
    chains = "\n".join(f"{name}: {' → '.join(chain)}" for name, chain in sorted(loaded.items()))
    assert not loaded, f"worker-only modules loaded by non-worker code:\n{chains}"


def test_the_probe_sees_the_worker_load_the_device_layer_and_names_the_chain():
    loaded = loaded_worker_code(["gpu.service.worker"])
    assert "gpu.device.context" in loaded, loaded
    chain = loaded["gpu.device.context"]
    assert chain[0] == "gpu.service.worker" and chain[-1] == "gpu.device.context", chain


def test_the_probe_sees_an_experiment_package_s_sweep():
    loaded = loaded_worker_code(["gpu.experiments.coalescing.sweep"])
    assert loaded["gpu.experiments.coalescing.sweep"] == ["gpu.experiments.coalescing.sweep"], loaded
