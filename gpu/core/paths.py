"""Where PinPoint's own files are, built in this one place: the folder that holds app.py, serve.py, pages/, gpu/ and
assets/. In a checkout that is the repository; in an installed copy it is ``site-packages/pinpoint/``, which the
installed ``pinpoint.pth`` puts on ``sys.path`` (so ``import gpu`` works there without PYTHONPATH or a checkout). The
two have the same shape, so every bundled file (recordings, suites, talks, icons, kernels) is found the same way,
never from the working directory."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ASSETS = ROOT / "assets"
KERNELS = ROOT / "gpu" / "kernels"
# A checkout holds the project's build file; an installed copy does not (it has no .git to ask for a commit either).
CHECKOUT = (ROOT / "pyproject.toml").is_file()


def asset(*parts: str) -> Path:
    """A file or folder under assets/ (``asset("replay")``, ``asset("talks", "claims-about-gpu-memory.toml")``)."""
    return ASSETS.joinpath(*parts)
