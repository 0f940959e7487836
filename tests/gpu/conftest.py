import pytest

from gpu.service import host_locks


@pytest.fixture(autouse=True)
def machine_gpu_locks(monkeypatch):
    """GPU tests measure on real GPUs: they take the machine's GPU locks, as every PinPoint process there does, so they
    never time beside the app, a runner or a fleet (and a benchmark never beside them)."""
    from tests import conftest

    monkeypatch.setenv(host_locks.LOCK_DIR_ENV, conftest.MACHINE_LOCK_DIR or host_locks.DEFAULT_LOCK_DIR)
