"""The cubin cache (gpu.device.cubins), with a stand-in compiler: no nvcc or GPU needed."""

import os
import threading

import pytest

from gpu.device import cubins


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(cubins.CACHE_ENV, str(tmp_path / "cubins"))
    monkeypatch.setattr(cubins, "_MEMORY", {})
    return tmp_path / "cubins"


class Compiler:
    """Records each compile; a 'cubin' is an ELF header and the source, arch and options it was built from."""

    def __init__(self, wait_for: int = 0):
        self.calls: list[str] = []
        self.lock = threading.Lock()
        self.together = threading.Barrier(wait_for) if wait_for else None

    def __call__(self, source, arch, options):
        with self.lock:
            self.calls.append(source)
            first = len(self.calls) <= (self.together.parties if self.together else 0)
        if first:
            self.together.wait(timeout=10)  # every missing source is being compiled at the same time
        return cubins.ELF_MAGIC + f"{source}|{arch}|{' '.join(options)}".encode()


SOURCES = {"a": "__global__ void a() {}", "b": "__global__ void b() {}", "c": "__global__ void c() {}"}


def test_missing_sources_are_compiled_at_once_then_read_from_disk_by_a_new_process(cache, monkeypatch):
    together = min(3, os.cpu_count() or 1)  # nvcc processes at once: up to one per core
    first = Compiler(wait_for=together if together > 1 else 0)
    built = cubins.build(SOURCES, "sm_90", ("-O3",), compile_one=first)
    assert sorted(first.calls) == sorted(SOURCES.values())
    assert built["b"] == cubins.ELF_MAGIC + b"__global__ void b() {}|sm_90|-O3"
    assert len(list(cache.glob("*.cubin"))) == 3 and not list(cache.glob(".partial-*"))
    monkeypatch.setattr(cubins, "_MEMORY", {})  # a new worker process: only the disk cache is left
    again = Compiler()
    assert cubins.build(SOURCES, "sm_90", ("-O3",), compile_one=again) == built
    assert again.calls == []


def test_a_change_of_source_options_architecture_or_nvcc_is_compiled_anew(cache, monkeypatch):
    compiler = Compiler()
    cubins.build({"a": SOURCES["a"]}, "sm_90", ("-O3",), compile_one=compiler)
    cubins.build({"a": SOURCES["a"] + " "}, "sm_90", ("-O3",), compile_one=compiler)
    cubins.build({"a": SOURCES["a"]}, "sm_90", ("-O3", "-DEXTRA_REGS=64"), compile_one=compiler)
    cubins.build({"a": SOURCES["a"]}, "sm_80", ("-O3",), compile_one=compiler)
    monkeypatch.setattr(cubins, "nvcc_identity", lambda: "/usr/local/cuda-13.1/bin/nvcc 1 2")
    cubins.build({"a": SOURCES["a"]}, "sm_90", ("-O3",), compile_one=compiler)
    assert len(compiler.calls) == 5
    cubins.build({"a": SOURCES["a"]}, "sm_90", ("-O3",), compile_one=compiler)
    assert len(compiler.calls) == 5


def test_a_file_that_is_no_cubin_is_rebuilt_and_an_unwritable_cache_still_compiles(cache, tmp_path, monkeypatch):
    compiler = Compiler()
    cubins.build({"a": SOURCES["a"]}, "sm_90", (), compile_one=compiler)
    (stored,) = cache.glob("*.cubin")
    stored.write_bytes(b"half a fi")
    monkeypatch.setattr(cubins, "_MEMORY", {})
    assert cubins.build({"a": SOURCES["a"]}, "sm_90", (), compile_one=compiler)["a"].startswith(cubins.ELF_MAGIC)
    assert len(compiler.calls) == 2 and stored.read_bytes().startswith(cubins.ELF_MAGIC)
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv(cubins.CACHE_ENV, str(blocked / "cubins"))
    monkeypatch.setattr(cubins, "_MEMORY", {})
    assert cubins.build({"b": SOURCES["b"]}, "sm_90", (), compile_one=compiler)["b"].startswith(cubins.ELF_MAGIC)
    assert len(compiler.calls) == 3
