"""PinPoint installed with pip into a fresh virtual environment, then used from a folder outside the checkout: the
``pinpoint`` command, the bundled runs, a review report replayed from bundled recordings, and the app's server with
every page's first view. The environment borrows the test environment's packages (a .pth file naming its
site-packages) and PinPoint installs with --no-deps --no-build-isolation --no-index, so nothing is downloaded."""

from __future__ import annotations

import json
import os
import re
import shutil
import site
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the environment's bin folder, an environment for commands run outside the checkout, that folder)."""
    base = tmp_path_factory.mktemp("install")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    [purelib] = (venv / "lib").glob("python3*/site-packages")
    (purelib / "_test_environment.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    # Built from a copy: setuptools builds in the source folder and keeps what an earlier build left in build/.
    source = base / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "out", "build", "*.egg-info", "__pycache__", ".*_cache", "tests"))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                    "--no-deps", "--no-build-isolation", "--no-index", str(source)],
                   check=True, timeout=300, capture_output=True, text=True)
    outside = base / "elsewhere"
    outside.mkdir()
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "PINPOINT_DB_URL", "PINPOINT_BACKEND")}
    env.update(HOME=str(outside), XDG_DATA_HOME=str(outside / "data"), PINPOINT_BACKEND="replay")
    return venv / "bin", env, outside


def run(installed, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    bin_dir, env, outside = installed
    return subprocess.run([str(bin_dir / args[0]), *args[1:]], cwd=outside, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_the_installed_copy_is_imported_without_a_checkout(installed):
    """Every Python of the environment (a fleet's Dask worker too) imports the installed gpu and pages, and a fleet
    started there puts no checkout on its workers' PYTHONPATH."""
    probe = run(installed, "python", "-c",
                "import gpu, pages._shared; from gpu.core import paths; "
                "from gpu.fleet.cluster import worker_environment; "
                "print(gpu.__file__); print(paths.ASSETS); print(paths.CHECKOUT); print(worker_environment('x'))")
    assert probe.returncode == 0, probe.stderr
    gpu_file, assets, checkout, environment = probe.stdout.splitlines()
    site_packages = Path(installed[0]).parent / "lib"
    assert Path(gpu_file).is_relative_to(site_packages) and not Path(gpu_file).is_relative_to(ROOT)
    assert (Path(assets) / "replay").is_dir() and Path(assets).is_relative_to(site_packages)
    assert checkout == "False" and "PYTHONPATH" not in environment
    installed_root = Path(gpu_file).parent.parent
    modules = sorted(str(path.relative_to(ROOT)) for folder in ("gpu", "pages")
                     for path in (ROOT / folder).rglob("*.py"))
    assert [m for m in modules if not (installed_root / m).is_file()] == []  # every module of the checkout
    # every kernel of the checkout, the shared ones and each experiment package's own, in its place
    assert {"gpu/kernels/timing.cu", "gpu/experiments/coalescing/coalescing.cu"} <= {
        str(p.relative_to(ROOT)) for p in (ROOT / "gpu").rglob("*.cu")}
    kernels = sorted(str(p.relative_to(installed_root)) for p in Path(gpu_file).parent.rglob("*.cu"))
    assert kernels and kernels == sorted(str(p.relative_to(ROOT)) for p in (ROOT / "gpu").rglob("*.cu"))


# Run by the environment's Python: every module file of the installed copy, each under every dotted name that a
# folder on sys.path gives it, and the names Python imports it under (find_spec: the file it would load).
ONE_NAME_PROBE = """
import importlib, importlib.util, json, sys
from pathlib import Path
import gpu
folder = Path(gpu.__file__).parent.parent
names = {}
for path in sorted(folder.rglob("*.py")):
    for entry in map(Path, sys.path):
        if not entry.is_dir() or not path.is_relative_to(entry):
            continue
        parts = path.relative_to(entry).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        if not parts or not all(part.isidentifier() for part in parts):
            continue
        name = ".".join(parts)
        try:
            spec = importlib.util.find_spec(name)
        except ImportError:
            continue
        if spec is not None and spec.origin and Path(spec.origin) == path:
            names.setdefault(str(path.relative_to(folder)), []).append(name)
from gpu.core import units
try:
    second = importlib.import_module("pinpoint.gpu.core.units") is units
except ImportError as exc:
    second = str(exc)
print(json.dumps({"names": names, "second": second, "pinpoint": str(importlib.import_module("pinpoint").__file__)}))
"""


def test_every_installed_module_has_one_name(installed):
    """No module of the installed copy can be imported under two names: its folder is on sys.path (so gpu.core.units
    is gpu.core.units) but is no package, so pinpoint.gpu.core.units does not exist beside it."""
    probe = run(installed, "python", "-c", ONE_NAME_PROBE)
    assert probe.returncode == 0, probe.stderr
    found = json.loads(probe.stdout)
    names = found["names"]
    assert names["gpu/core/units.py"] == ["gpu.core.units"] and names["pages/_shared.py"] == ["pages._shared"]
    assert names["app.py"] == ["app"] and names["serve.py"] == ["serve"]
    assert {path: found for path, found in names.items() if len(found) != 1} == {}
    modules = {str(path.relative_to(ROOT)) for folder in ("gpu", "pages") for path in (ROOT / folder).rglob("*.py")}
    assert modules <= set(names)  # each one found, once
    assert "is not a package" in found["second"], found["second"]
    assert Path(found["pinpoint"]).name == "pinpoint.py"  # the module that keeps the folder from being a package


def test_pinpoint_help_names_every_command(installed):
    result = run(installed, "pinpoint", "--help")
    assert result.returncode == 0, result.stderr
    for command in ("app", "measure", "fleet", "check", "import", "export", "report", "runs"):
        assert re.search(rf"^\s+{command}\s", result.stdout, re.M), f"{command} missing from:\n{result.stdout}"
    measure = run(installed, "pinpoint", "measure", "transfers", "--help")
    assert measure.returncode == 0 and measure.stdout.startswith("usage: pinpoint measure transfers")
    wrong = run(installed, "pinpoint", "measure", "sideways")
    assert wrong.returncode == 2 and wrong.stderr.startswith("error: no experiment 'sideways'")
    app = run(installed, "pinpoint", "app", "--help")  # PinPoint's own help, naming a guide the copy holds
    assert app.returncode == 0 and app.stdout.startswith("usage: pinpoint app"), app.stdout + app.stderr
    assert installed_guide(installed, app.stdout).is_file()


def installed_guide(installed, text: str) -> Path:
    """The team-server guide a message names: a file of the installed copy, not of a checkout."""
    [guide] = re.findall(r"(/\S+/docs/operations/team-server\.md)", text)
    assert Path(guide).is_relative_to(Path(installed[0]).parent / "lib") and not Path(guide).is_relative_to(ROOT)
    return Path(guide)


def test_pinpoint_runs_lists_the_bundled_runs_and_reports_on_two(installed):
    """The runs bundled in the installed copy's assets/, listed with no store (none is created), then two H200
    transfers recordings a day apart reviewed into an HTML report, as `python -m gpu.bench report` does."""
    listing = run(installed, "pinpoint", "runs")
    assert listing.returncode == 0, listing.stderr
    files = ("replay/transfers_nvidia-h200_2026-11-21.parquet", "runs/transfers_nvidia-h200_2026-11-22.parquet")
    ids = {name: re.search(rf"^\s*(\w+)\s.*{re.escape(name)}", listing.stdout, re.M) for name in files}
    assert all(ids.values()), listing.stdout
    assert not (installed[2] / "data").exists()  # listing never creates a store
    baseline, candidate = (match.group(1) for match in ids.values())
    report = run(installed, "pinpoint", "report", "--baseline", baseline, "--candidate", candidate,
                 "--out", "review.html")
    assert report.returncode == 0, report.stderr
    assert re.search(r"\d+ of 304 points slower beyond noise", report.stdout)
    html = (installed[2] / "review.html").read_text(encoding="utf-8")
    assert "NVIDIA H200" in html and baseline in html and candidate in html


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=5) as answer:
            return answer.read() == b"ok"
    except OSError:
        return False


def test_pinpoint_app_serves_every_page_from_the_installed_copy(installed):
    """`pinpoint app` runs the installed serve.py with its own .streamlit/config.toml (one URL printed, the
    configured address), answers a page's own address, and makes every page's first view without an error."""
    bin_dir, env, outside = installed
    port = free_port()
    log = outside / "app.log"
    with log.open("w") as out:
        server = subprocess.Popen([str(bin_dir / "pinpoint"), "app", "--server.port", str(port),
                                   "--server.headless", "true"], cwd=outside, env=env, stdout=out,
                                  stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while not healthy(port):
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/transfers", timeout=10) as answer:
            assert answer.status == 200 and b"BACKEND_BASE_URL" in answer.read()
        while not re.search(r"first visit: \d+ pages in", log.read_text()):
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
    finally:
        server.terminate()
        server.wait(timeout=30)
    text = log.read_text()
    # the address once the server answers, and not Streamlit's banner, printed seconds before it could answer
    assert f"PinPoint is ready: http://localhost:{port}" in text and "URL:" not in text, text
    assert installed_guide(installed, text.split("PinPoint serves", 1)[1].split("\n", 1)[0]).is_file()  # start-up line
    assert not re.search(r"first visit: /\S* (showed|failed|was not done)|warm-up: .* failed", text), text
