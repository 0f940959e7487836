"""An experiment's method version: a hash of the source files that decide how its points are measured, recorded with
every run it measures (the ``method_version`` column of ``gpu.core.schema``), so Compare and ``check`` can say when two
runs were measured by different code (asv calls it a benchmark's version: a hash of its source).

The files (``method_sources``, the one place that lists them): the experiment's sweep; the kernels it compiles (the
``.cu`` files its ``kernel("<stem>", …)`` calls name, the one of its own name, and those beside a sweep that lives in
its experiment's package, ``gpu/experiments/<name>/sweep.py``); and the code every sweep is timed and verified through
(``SHARED_SOURCES``: the harness and its timing methods, the verifier, the row builder, the timers and the sampling
loop of ``gpu.core.stats``), with the kernels that code compiles (the stream hold, the check pattern). The experiment's
declaration is not among them: its labels, pages and point grid are not its method.

Each file counts by its role and name, not its folder (the sweep by its role alone), read as bytes, so moving a file
keeps the version and any change of a byte changes it. Nothing is imported or compiled: this runs without a GPU or
PyCUDA.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path

from gpu.core import paths

# The code every sweep runs through, relative to the folder that holds gpu/ (``paths.ROOT``).
SHARED_SOURCES = ("gpu/sweeps/harness.py", "gpu/sweeps/timing_methods.py", "gpu/sweeps/verify.py",
                  "gpu/sweeps/_kernels.py", "gpu/device/timing.py", "gpu/core/stats.py")
PACKAGE_SWEEP = "sweep.py"  # an experiment package's sweep, beside its declaration
KERNEL_FOLDERS = ("gpu/kernels/*.cu", "gpu/experiments/*/*.cu")  # the shared kernels, then each package's own
KERNEL_CALLS = {"kernel", "module"}  # GpuRuntime.kernel(stem, name, …) and .module(stem, …) name a .cu by its stem
DIGITS = 16  # hex digits of SHA-256 kept: enough to tell two methods apart, short enough to read


@dataclass(frozen=True)
class Source:
    """One file of a method: its role (sweep, kernel, shared, shared kernel) and name, which the hash counts, and where
    it is."""

    role: str
    path: Path

    @property
    def label(self) -> str:
        return self.role if self.role == "sweep" else f"{self.role} {self.path.name}"


def _under(path: Path, root: Path) -> Path:
    """``path`` (a file of this copy of PinPoint) as it lies under ``root`` (another copy of the same tree)."""
    try:
        return root / path.resolve().relative_to(paths.ROOT)
    except ValueError:  # a package outside the tree (another folder of experiments): where it is
        return path


def sweep_file(entry, root: Path = paths.ROOT) -> Path:
    """The experiment's sweep: ``sweep.py`` beside its declaration, in its package (``gpu/experiments/<name>/``)."""
    return _under(Path(entry.module.__file__).parent / PACKAGE_SWEEP, root)


def kernel_files(root: Path = paths.ROOT, *folders: Path) -> dict[str, Path]:
    """Every kernel source by its stem, the name a sweep compiles it by: those of ``KERNEL_FOLDERS`` under ``root``,
    then those of ``folders``."""
    found = [path for pattern in KERNEL_FOLDERS for path in sorted(root.glob(pattern))]
    found += [path for folder in folders for path in sorted(folder.glob("*.cu"))]
    return {path.stem: path for path in reversed(found)}  # the first of a stem wins, as the worker compiles it


def kernel_stems(source: bytes) -> set[str]:
    """The kernel stems a Python source compiles: the literal first argument of its ``….kernel("<stem>", …)`` and
    ``….module("<stem>", …)`` calls."""
    stems = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in KERNEL_CALLS \
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            stems.add(node.args[0].value)
    return stems


def method_sources(entry, root: Path = paths.ROOT) -> list[Source]:
    """The files that make the experiment ``entry``'s (a registry ``Entry``) method, in a fixed order: its sweep, its
    kernels by name, then the shared code in ``SHARED_SOURCES`` order and the kernels only that code compiles."""
    sweep = sweep_file(entry, root)
    shared = [root / name for name in SHARED_SOURCES]
    kernels = kernel_files(root, sweep.parent)
    beside = {path.stem for path in sweep.parent.glob("*.cu")}
    own = (kernel_stems(sweep.read_bytes()) | beside) & set(kernels)
    common = set().union(*(kernel_stems(path.read_bytes()) for path in shared if path.suffix == ".py")) - own
    return [Source("sweep", sweep), *(Source("kernel", kernels[s]) for s in sorted(own)),
            *(Source("shared", path) for path in shared),
            *(Source("shared kernel", kernels[s]) for s in sorted(common) if s in kernels)]


def digest(sources: list[Source]) -> str:
    """The method version of ``sources``: SHA-256 over each file's label, length and bytes, in order (``DIGITS`` hex
    digits)."""
    sha = hashlib.sha256()
    for source in sources:
        data = source.path.read_bytes()
        sha.update(f"{source.label}\0{len(data)}\0".encode())
        sha.update(data)
    return sha.hexdigest()[:DIGITS]


def method_version(entry, root: Path = paths.ROOT) -> str:
    """The experiment ``entry``'s method version now: ``digest`` of its ``method_sources``."""
    return digest(method_sources(entry, root))
