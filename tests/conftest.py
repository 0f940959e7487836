import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@lru_cache(maxsize=1)
def gpu_unavailable_reason() -> str | None:
    """Why GPU tests cannot run here, or None. Probed in a subprocess: the test process stays CUDA-free."""
    try:
        import pycuda  # noqa: F401
    except ImportError:
        return "PyCUDA is not installed (GPU extra: requirements-gpu.txt)"
    probe = subprocess.run(
        [sys.executable, "-c", "import pycuda.driver as d; d.init(); print(d.Device.count())"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    if probe.returncode != 0 or not probe.stdout.strip().isdigit() or int(probe.stdout.strip()) == 0:
        return "no CUDA device: " + (probe.stderr.strip().splitlines() or ["none found"])[-1]
    return None


def pytest_collection_modifyitems(config, items):
    reason = gpu_unavailable_reason() if any("gpu" in item.keywords for item in items) else None
    if reason:
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def live_backend():
    from gpu.backend import LiveBackend
    from gpu.client import WorkerClient

    client = WorkerClient()
    yield LiveBackend(client)
    client.close()
