"""Compiled kernels kept between worker processes: each gpu/kernels/*.cu built once per source, nvcc options,
architecture and nvcc.

PyCUDA's own compiler cache runs nvcc's preprocessor on every hit for a source with an ``#include`` (most kernels
include <stdint.h>): a process of its own per kernel, every time a worker starts, and again for each GPU of a node's
worker (``DeviceSet`` builds a runtime per GPU). Here a cubin is found by a digest of what decides it: the source
text, the options, the architecture and the nvcc on PATH (its resolved path, size and modification time). It is kept
in memory for the process (a node's GPUs of one architecture share it) and on disk (``PINPOINT_CUBIN_CACHE``, else
``$XDG_CACHE_HOME/pinpoint/cubins`` or ``~/.cache/pinpoint/cubins``), written to a temporary file and renamed, so a
worker starting beside another never reads half a file. Sources not cached yet are compiled at once, each nvcc a
process of its own. A cache that cannot be read or written is passed over: the kernels are compiled as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CACHE_ENV = "PINPOINT_CUBIN_CACHE"
ELF_MAGIC = b"\x7fELF"  # a cubin is an ELF file: anything else on disk is not one of ours, and is rebuilt
_MEMORY: dict[str, bytes] = {}
_LOCK = threading.Lock()


def cache_dir() -> Path:
    chosen = os.environ.get(CACHE_ENV, "").strip()
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    if not base:
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:  # no home directory (a bare batch job): the cache lives beside other temporary files
            base = tempfile.gettempdir()
    return Path(base) / "pinpoint" / "cubins"


def nvcc_identity() -> str:
    """The nvcc a compile would run: its resolved path, size and modification time (a new toolkit is a new key)."""
    found = shutil.which("nvcc")
    if found is None:
        return "no nvcc"
    real = os.path.realpath(found)
    try:
        info = os.stat(real)
    except OSError:
        return real
    return f"{real} {info.st_size} {info.st_mtime_ns}"


def key(source: str, arch: str, options: tuple[str, ...], nvcc: str) -> str:
    digest = hashlib.sha256()
    for part in (source, arch, "\0".join(options), nvcc):
        digest.update(part.encode("utf-8"))
        digest.update(b"\1")
    return digest.hexdigest()


def nvcc_compile(source: str, arch: str, options: tuple[str, ...]) -> bytes:
    """One source compiled to a cubin by PyCUDA (with its own cache behind ours)."""
    from pycuda.compiler import compile as pycuda_compile

    return pycuda_compile(source, arch=arch, no_extern_c=True, options=list(options))


def build(sources: dict[str, str], arch: str, options: tuple[str, ...] = (),
          compile_one: Callable[[str, str, tuple[str, ...]], bytes] | None = None) -> dict[str, bytes]:
    """Each of ``sources`` (name → CUDA source) as a cubin for ``arch`` with nvcc ``options``: from memory, from the
    disk cache, or compiled (those missing all at once, on threads)."""
    compile_one = compile_one or nvcc_compile
    nvcc = nvcc_identity()
    keys = {name: key(text, arch, options, nvcc) for name, text in sources.items()}
    found: dict[str, bytes] = {}
    with _LOCK:
        for name, digest in keys.items():
            if digest in _MEMORY:
                found[name] = _MEMORY[digest]
    folder = cache_dir()
    for name, digest in keys.items():
        if name not in found and (cubin := _read(folder / f"{digest}.cubin")) is not None:
            found[name] = cubin
    missing = [name for name in sources if name not in found]
    if len(missing) > 1:
        with ThreadPoolExecutor(max_workers=min(len(missing), os.cpu_count() or 1),
                                thread_name_prefix="nvcc") as pool:
            built = dict(zip(missing, pool.map(lambda n: compile_one(sources[n], arch, options), missing),
                             strict=True))
    else:
        built = {name: compile_one(sources[name], arch, options) for name in missing}
    for name, cubin in built.items():
        _write(folder, f"{keys[name]}.cubin", cubin)
    found.update(built)
    with _LOCK:
        for name, cubin in found.items():
            _MEMORY[keys[name]] = cubin
    return {name: found[name] for name in sources}


def _read(path: Path) -> bytes | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return data if data.startswith(ELF_MAGIC) else None


def _write(folder: Path, name: str, data: bytes) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=".partial-")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.replace(temporary, folder / name)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
    except OSError:
        pass  # a cache that cannot be written costs the next worker a compile, nothing more

