"""An experiment is one package: a toy one, written to a temporary folder that ``PINPOINT_EXPERIMENTS_PATH`` names, with
no other file of PinPoint changed, is registered with its runner subcommand, routed with its page, its kernel found
by the worker's runtime, its view found by shared code, its points generated from its declared grid, and it is
measured by the harness on a simulated board (a runtime with a recording driver, as tests/test_harness.py's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

DECLARATION = '''
"""A toy experiment: host-clock "copies" of a few sizes, for the package test only."""

from pathlib import Path

from gpu.core.units import KiB
from gpu.experiments import axes
from gpu.experiments.grid import Coordinate, Grid
from gpu.experiments.page import PageEntry

NAME = "toy"
COMMAND, ORDER, PAGE = "toy", 99, str(Path(__file__).with_name("page.py"))
PAGE_ENTRY = PageEntry(PAGE, "Toy", "toy", ":material/toys:", "Toy: a package of its own", place=9.5)
HELP = "a toy experiment"
TITLE = "A toy experiment"
LABELS = {"small": "small toy copy", "large": "large toy copy"}
KEY_COLUMNS = ["variant", "bytes"]
SHOW_COLUMNS = ["variant", "bytes"]
AXES = (
    axes.Axis("sizes", "toy sizes", [4 * KiB, 64 * KiB], kind="sizes", one="size", low=4, high=1024 * KiB,
              multiple_of=4, unit="bytes"),
)

GRID = Grid([Coordinate("bytes", axis="sizes"),
             Coordinate("variant", derive=lambda point: "small" if point["bytes"] < 16 * KiB else "large")])


class Params(axes.parameters(AXES, grid=GRID, key_columns=KEY_COLUMNS)):
    pass


parse_params = axes.parser(Params)


def invalid_reasons(params, limits):
    return axes.reasons(params, limits)


def memory_reasons(params, limits):
    return []
'''

SWEEP = '''
"""The toy's measurement (worker only): each point a host-clock sample in proportion to its size."""

from gpu.sweeps import harness


class ToySweep(harness.Sweep):
    def group_of(self, grid_point):
        return grid_point["bytes"]

    def enter_group(self, size):
        self.buffer = self.ledger.device_buffer(size)

    def leave_group(self, size):
        self.ledger.free_device(self.buffer)

    def point(self, grid_point):
        variant, size = grid_point["variant"], grid_point["bytes"]
        return harness.Point({"variant": variant, "group": "toy", "direction": "device"},
                             f"{variant} · {size} B", size, "host_clock", (variant, size))

    def measure(self, point):
        return lambda: point.state[1] / 4096

    def verify(self, point):
        pass


run = harness.runner(ToySweep)
'''

VIEW = '''
"""The toy's view: its one takeaway."""


def takeaway(frame):
    if frame.empty:
        return None
    return f"The toy measured {len(frame)} points."
'''

PAGE = '''
import streamlit as st

from gpu.experiments import registry

st.title(registry.BY_NAME["toy"].module.TITLE)
st.markdown(registry.view_of("toy").takeaway(__import__("pandas").DataFrame({"variant": ["small"]})))
'''

KERNEL = "extern \"C\" __global__ void toy_fill(float* out) { out[threadIdx.x] = 1.0f; }\n"

# Run with the toy's folder on PINPOINT_EXPERIMENTS_PATH, in a fresh interpreter (the registry is built at import).
PROBE = '''
import json, sys
from streamlit.testing.v1 import AppTest

from gpu.core import paths, schema
from gpu.experiments import registry
from pages import _shared as shared
from tests.test_harness import Progress, _device

entry = registry.BY_NAME["toy"]
module = entry.module
found = {"module": module.__name__, "command": registry.BY_COMMAND["toy"].name, "page": registry.PAGE_OF["toy"],
         "pages": [p.title for p in shared.PAGES], "kernel": str(paths.kernel_sources()["toy"]),
         "sweep": entry.sweep_module().__name__, "view": registry.view_of("toy").__name__}
log = []
params = module.parse_params({"sizes": [4096, 65536], "profile": "interactive/timeout_s=0.2"})
rows = registry.sweep_of("toy")(params, _device(log), Progress(log), lambda: False)
frame = schema.make_frame([{**r, "run_id": "toy-run", "experiment": "toy"} for r in rows], {})
found["rows"] = [[r["variant"], r["bytes"], r["median_ms"], r["verified"]] for r in rows]
found["points"] = [list(p) for p in params.points()]
found["freed"] = [line for line in log if line.startswith("free")]
found["takeaway"] = registry.view_of("toy").takeaway(frame)

app = AppTest.from_file(str(paths.ROOT / "app.py"), default_timeout=120)
app.run()
app.switch_page(module.PAGE).run()
found["app_errors"] = [str(e.value) for e in app.exception]
found["title"] = [t.value for t in app.title]
print(json.dumps(found))
'''


def write_toy(folder: Path) -> Path:
    package = folder / "toy"
    package.mkdir(parents=True)
    for name, text in {"__init__.py": DECLARATION, "sweep.py": SWEEP, "view.py": VIEW, "page.py": PAGE,
                       "toy.cu": KERNEL}.items():
        (package / name).write_text(textwrap.dedent(text).lstrip())
    return package


@pytest.mark.slow
def test_a_toy_package_in_a_folder_of_its_own_is_registered_routed_and_measured(tmp_path):
    package = write_toy(tmp_path / "more-experiments")
    before = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout
    env = {**os.environ, "PINPOINT_EXPERIMENTS_PATH": str(tmp_path / "more-experiments"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["module"] == "gpu.experiments.toy" and found["command"] == "toy"
    assert found["sweep"] == "gpu.experiments.toy.sweep" and found["view"] == "gpu.experiments.toy.view"
    assert found["page"] == str(package / "page.py") and found["kernel"] == str(package / "toy.cu")
    assert found["pages"].index("Toy") == found["pages"].index("Runs") - 1  # placed by its PAGE_ENTRY (9.5)
    assert found["rows"] == [["small", 4096, 1.0, True], ["large", 65536, 16.0, True]]
    assert found["points"] == [["small", 4096], ["large", 65536]]  # generated from its declared grid
    assert found["freed"] == ["free buffer1", "free buffer2"]  # each size's buffer (a group), through the job's ledger
    assert found["takeaway"] == "The toy measured 2 points."
    assert found["app_errors"] == [] and found["title"] == ["A toy experiment"]
    # Nothing of PinPoint's own changed: the toy lives in its folder only.
    assert subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout == before


def test_without_the_path_no_toy_is_registered():
    from gpu.core import paths
    from gpu.experiments import registry

    assert "toy" not in registry.BY_NAME and "toy" not in paths.kernel_sources()
    assert os.environ.get(paths.EXPERIMENTS_PATH_VARIABLE) is None
