"""How PinPoint installs (``pip install .``, ``pip install ".[gpu]"``); the project's metadata is in pyproject.toml.

The installed copy keeps the checkout's shape in one folder, ``site-packages/pinpoint/``: app.py, serve.py,
.streamlit/config.toml, pages/, gpu/ (with its CUDA kernels), assets/ (recordings, suites, talks, icons) and docs/
(the guides the app's messages name), so Streamlit finds app.py and the pages beside serve.py, and gpu.core.paths
finds everything, as in a checkout. ``pinpoint.pth`` beside it puts that folder on ``sys.path``, so ``import gpu``
works in every Python of the environment: the ``pinpoint`` command, Streamlit, the GPU worker and a fleet's Dask
workers, with no checkout and no PYTHONPATH.

Every module has one name, the one it has in a checkout (``gpu.core.units``, ``pages._shared``): the folder is not a
package. ``pinpoint.py``, also beside it, makes ``pinpoint`` a module of its own, so Python never takes the folder
for a namespace package and ``pinpoint.gpu.core.units`` is no second name (docs/operations/installing.md says why).
Dependencies are requirements.txt's pins; the ``gpu`` extra is requirements-gpu.txt's.
"""

from pathlib import Path

from setuptools import find_namespace_packages, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
FOLDER = "pinpoint"  # the installed copy's folder in site-packages


def pins(name: str) -> list[str]:
    """A requirements file's requirements, without comments and without its ``-r`` includes."""
    lines = (line.split("#", 1)[0].strip() for line in (HERE / name).read_text().splitlines())
    return [line for line in lines if line and not line.startswith("-")]


class BuildWithPath(build_py):
    """The usual build, plus the .pth file that puts the installed folder on sys.path and the module that keeps the
    folder from being a package (``GUARD``)."""

    def find_package_modules(self, package, package_dir):
        """Every module of the package, less this file (the root folder is the ``pinpoint`` package)."""
        return [m for m in super().find_package_modules(package, package_dir) if Path(m[2]).name != "setup.py"]

    def run(self):
        super().run()
        pth = Path(self.build_lib) / f"{FOLDER}.pth"
        pth.write_text(f"{FOLDER}\n")  # a relative line: site-packages/pinpoint
        # A module named as the folder: found before the folder could be taken for a namespace package
        (Path(self.build_lib) / f"{FOLDER}.py").write_text(GUARD)


GUARD = '''"""PinPoint, installed: its files are in the folder ``pinpoint/`` beside this module, which
``pinpoint.pth`` puts on ``sys.path``. Its modules are imported by their own names (``import gpu``, ``from pages
import _shared``), never through ``pinpoint``: this module only keeps Python from taking that folder for a package
``pinpoint``, which would give every module a second name (``pinpoint.gpu.core.units`` beside ``gpu.core.units``) and
every class a second copy. The command is ``pinpoint`` (``gpu.cli``); docs/operations/installing.md describes the
installed copy."""
'''


# Every folder of Python modules under gpu/ and pages/, with or without an __init__.py (pages/ has none).
names = find_namespace_packages(include=["gpu", "gpu.*", "pages", "pages.*"], exclude=["*.__pycache__", "gpu.kernels"])
packages = [f"{FOLDER}.{name}" for name in names]
KERNEL_FILES = ["*.cu", "*.cuh"]  # an experiment's kernels may sit beside its modules, shared ones in gpu/kernels/
setup(
    packages=[FOLDER, *packages],
    package_dir={FOLDER: "."},
    package_data={FOLDER: [".streamlit/config.toml", "assets/**/*", "docs/**/*"],
                  f"{FOLDER}.gpu": ["kernels/*", *KERNEL_FILES],
                  **{f"{FOLDER}.{name}": KERNEL_FILES for name in names if name.startswith("gpu.")}},
    include_package_data=False,
    install_requires=pins("requirements.txt"),
    extras_require={"gpu": [line for line in pins("requirements-gpu.txt") if line not in pins("requirements.txt")]},
    cmdclass={"build_py": BuildWithPath},
)
