"""Where PinPoint's own files are, built in this one place: the folder that holds app.py, serve.py, pages/, gpu/ and
assets/. In a checkout that is the repository; in an installed copy it is ``site-packages/pinpoint/``, which the
installed ``pinpoint.pth`` puts on ``sys.path`` (so ``import gpu`` works there without PYTHONPATH or a checkout; see
docs/operations/installing.md). The two have the same shape, so every bundled file (recordings, suites, talks, icons,
kernels) is found the same way: through the ``gpu`` package's resources (``importlib.resources``), from wherever
Python imported it, never from the working directory.

Experiments are packages, ``gpu/experiments/<name>/``, each holding its own kernels (``*.cu``) beside its declaration;
``PINPOINT_EXPERIMENTS_PATH`` (folders separated by ``os.pathsep``) names more folders of such packages, found as
``gpu.experiments.<name>`` too (an experiment kept outside the checkout, or a test's)."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

# The folder gpu/ sits in. A package imported from files is a folder (a pathlib.Path), in a checkout and installed.
ROOT = Path(str(resources.files("gpu"))).parent
ASSETS = ROOT / "assets"
KERNELS = ROOT / "gpu" / "kernels"  # the kernels every experiment shares (timing.cu, health.cu …)
EXPERIMENTS = ROOT / "gpu" / "experiments"
EXPERIMENTS_PATH_VARIABLE = "PINPOINT_EXPERIMENTS_PATH"
# A checkout holds the project's build file; an installed copy does not (it has no .git to ask for a commit either).
CHECKOUT = (ROOT / "pyproject.toml").is_file()


def asset(*parts: str) -> Path:
    """A file or folder under assets/ (``asset("replay")``, ``asset("talks", "claims-about-gpu-memory.toml")``)."""
    return ASSETS.joinpath(*parts)


def extra_experiment_folders() -> list[Path]:
    """The folders ``PINPOINT_EXPERIMENTS_PATH`` names (``os.pathsep``-separated), each holding experiment packages
    beside those of gpu/experiments/."""
    text = os.environ.get(EXPERIMENTS_PATH_VARIABLE, "")
    return [Path(part).resolve() for part in text.split(os.pathsep) if part.strip()]


def kernel_sources() -> dict[str, Path]:
    """Every kernel source by its stem, the name a sweep compiles it by (``gpu.kernel("coalescing", …)``): the shared
    ones of gpu/kernels/, then each experiment package's own (``gpu/experiments/<name>/*.cu``, and those of the
    folders ``PINPOINT_EXPERIMENTS_PATH`` names). Two sources of one stem are refused: a sweep could not say which."""
    found: dict[str, Path] = {}
    sources = [*sorted(KERNELS.glob("*.cu"))]
    for folder in (EXPERIMENTS, *extra_experiment_folders()):
        sources += sorted(folder.glob("*/*.cu"))
    for source in sources:
        if found.setdefault(source.stem, source) != source:
            raise ValueError(f"two kernel sources named {source.stem}.cu: {found[source.stem]} and {source}")
    return found
