"""The method version: which files make an experiment's method, that any byte of them changes it and a move does not,
that it needs neither a GPU nor PyCUDA, and that the worker records it with every run it measures."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from gpu.core import paths
from gpu.experiments import method, registry
from gpu.experiments.request import checked_request
from tests.test_one_request import LIMITS, SIZE, stand_in_service

ROOT = paths.ROOT


def _copy_of_the_sources(to) -> None:
    """The folders a method reads from, copied under another root (as another checkout, or an installed copy)."""
    for folder in ("gpu/experiments", "gpu/sweeps", "gpu/kernels", "gpu/device", "gpu/core"):
        shutil.copytree(ROOT / folder, to / folder, ignore=shutil.ignore_patterns("__pycache__"))


def test_every_experiment_has_its_sweep_first_then_the_kernels_it_compiles_then_the_shared_timing_code():
    for entry in registry.REGISTRY:
        sources = method.method_sources(entry)
        assert all(source.path.is_file() for source in sources), entry.name
        assert sources[0].role == "sweep" and sources[0].path == method.sweep_file(entry)
        named = {source.path for source in sources}
        compiled = method.kernel_stems(sources[0].path.read_bytes())
        kernels = method.kernel_files()
        assert {kernels[stem] for stem in compiled} <= named, entry.name
        assert {ROOT / shared for shared in method.SHARED_SOURCES} <= named
        assert paths.KERNELS / "timing.cu" in named  # the stream hold every timer launches
        assert len(method.method_version(entry)) == method.DIGITS


def test_a_sweep_that_compiles_another_experiments_kernel_counts_it():
    peers = [s.path.name for s in method.method_sources(registry.entry_of("peers")) if s.role == "kernel"]
    assert peers == ["device_copy.cu", "peers.cu"]  # its copy kernel is the device copy's
    occupancy = [s.path.name for s in method.method_sources(registry.entry_of("occupancy")) if s.role == "kernel"]
    assert occupancy == ["occupancy.cu"]  # its sweep module is occupancy_sweep: the stem its calls name counts


def test_moving_the_sources_keeps_the_version_and_any_byte_of_them_changes_it(tmp_path):
    entry = registry.entry_of("coalescing")
    _copy_of_the_sources(tmp_path)
    before = method.method_version(entry, tmp_path)
    assert before == method.method_version(entry)  # a file counts by its role and name, not by its folder
    for changed in ("gpu/experiments/coalescing/sweep.py", "gpu/experiments/coalescing/coalescing.cu",
                    "gpu/sweeps/harness.py", "gpu/sweeps/timing_methods.py",
                    "gpu/device/timing.py", "gpu/core/stats.py", "gpu/kernels/timing.cu"):
        path = tmp_path / changed
        original = path.read_bytes()
        path.write_bytes(original + b"\n")
        assert method.method_version(entry, tmp_path) != before, changed
        path.write_bytes(original)
    assert method.method_version(entry, tmp_path) == before
    # another experiment's kernel, and a page's or a declaration's code, are not this method
    (tmp_path / "gpu/experiments/fma/fma.cu").write_bytes(b"// changed\n")
    (tmp_path / "gpu/experiments/coalescing/__init__.py").write_bytes(b"# its declaration, changed\n")
    (tmp_path / "gpu/experiments/coalescing/view.py").write_bytes(b"# its view, changed\n")
    (tmp_path / "gpu/core/units.py").write_bytes(b"# changed\n")
    assert method.method_version(entry, tmp_path) == before


def test_every_kernel_beside_a_packages_sweep_is_part_of_its_method(tmp_path):
    """An experiment package's sweep comes first, then the kernels beside it; a second kernel of its own counts too."""
    entry = registry.entry_of("coalescing")
    _copy_of_the_sources(tmp_path)
    package = tmp_path / "gpu/experiments/coalescing"
    sources = method.method_sources(entry, tmp_path)
    assert [s.path for s in sources[:2]] == [package / "sweep.py", package / "coalescing.cu"]
    before = method.method_version(entry, tmp_path)
    (package / "extra.cu").write_text("// a second kernel of its own\n")
    assert method.method_version(entry, tmp_path) != before


def test_the_version_needs_no_gpu_no_pycuda_and_imports_no_sweep():
    code = ("import sys; from gpu.experiments.registry import REGISTRY; from gpu.experiments.method import "
            "method_version; print(len({method_version(e) for e in REGISTRY})); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pycuda' or m.startswith(('gpu.sweeps', "
            "'gpu.device', 'gpu.service'))))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    count, loaded = done.stdout.split("\n")[:2]
    assert int(count) == len(registry.REGISTRY)  # every experiment's method is its own
    assert loaded == "[]"


def test_kernel_stems_are_the_literal_first_arguments_of_kernel_and_module_calls():
    source = b"""
a = gpu.kernel("alpha", "f")
b = runtime.module("beta", ("-DX=1",))
c = gpu.kernel(name, "g")
d = kernel("not_a_method_call", "h")
e = gpu.functions["copy_vec4"]
"""
    assert method.kernel_stems(source) == {"alpha", "beta"}


@pytest.fixture
def service(monkeypatch):
    """A real ``GpuService`` over a stand-in device (no CUDA), its transfers sweep a stand-in."""
    served, thread = stand_in_service(monkeypatch, lambda: LIMITS)
    yield served, thread
    thread.shutdown()


def test_the_worker_records_the_method_version_on_every_row_of_a_run(service):
    served, thread = service
    request = checked_request("transfers", {"sizes": [4096, SIZE], "modes": ["pinned"], "directions": ["h2d"]},
                              LIMITS)
    frame = thread.submit(served.handle, {"kind": "experiment", "request": request}, lambda *a: None,
                          lambda: False).result()
    expected = method.method_version(registry.entry_of("transfers"))
    assert len(frame) == 2 and set(frame["method_version"]) == {expected}
    assert served.methods == {e.name: method.method_version(e) for e in registry.REGISTRY}
