"""Where PinPoint's own files are, built in this one place: the folder that holds app.py, serve.py, pages/, gpu/ and
assets/. In a checkout that is the repository; in an installed copy it is ``site-packages/pinpoint/``, which the
installed ``pinpoint.pth`` puts on ``sys.path`` (so ``import gpu`` works there without PYTHONPATH or a checkout; see
docs/operations/installing.md). The two have the same shape, so every bundled file (recordings, suites, talks, icons,
kernels) is found the same way: through the ``gpu`` package's resources (``importlib.resources``), from wherever
Python imported it, never from the working directory."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

# The folder gpu/ sits in. A package imported from files is a folder (a pathlib.Path), in a checkout and installed.
ROOT = Path(str(resources.files("gpu"))).parent
ASSETS = ROOT / "assets"
KERNELS = ROOT / "gpu" / "kernels"
# A checkout holds the project's build file; an installed copy does not (it has no .git to ask for a commit either).
CHECKOUT = (ROOT / "pyproject.toml").is_file()


def asset(*parts: str) -> Path:
    """A file or folder under assets/ (``asset("replay")``, ``asset("talks", "claims-about-gpu-memory.toml")``)."""
    return ASSETS.joinpath(*parts)
