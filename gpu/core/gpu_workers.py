"""Which processes of this machine are PinPoint's GPU workers: each one marks itself with an empty file
``worker-<pid>`` in the GPU lock folder (``PINPOINT_LOCK_DIR``, the folder of ``gpu.service.host_locks``) while it
lives.

Why: NVML lists every process that holds a CUDA context on a GPU, busy or not. PinPoint's workers measure only while
they hold the GPU's lock, one at a time, so another PinPoint worker that NVML lists beside a measuring one is idle,
waiting its turn: the witness (``gpu.device.witness``) does not count it as sharing the GPU, and says so in the point's
readings. A mark left by a killed worker names a pid that no longer runs, and is ignored (and removed by the next
worker that marks itself). Best effort throughout: a folder that cannot be written only means no marks."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

LOCK_DIR_ENV = "PINPOINT_LOCK_DIR"
# /tmp is on every Unix machine, shared by every user (1777) and not per-user like $TMPDIR; /run/lock is root's on
# many systems and missing in many containers.
DEFAULT_LOCK_DIR = "/tmp/pinpoint-gpu-locks"
PREFIX = "worker-"


def lock_dir() -> Path:
    return Path(os.environ.get(LOCK_DIR_ENV) or DEFAULT_LOCK_DIR)


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def mark(pid: int | None = None) -> Path | None:
    """Mark ``pid`` (this process) as a PinPoint GPU worker; the mark's path, or None where it could not be written.
    Marks of pids no longer running are removed on the way."""
    pid = os.getpid() if pid is None else pid
    folder = lock_dir()
    try:
        folder.mkdir(mode=0o1777, parents=True, exist_ok=True)
        for stale in folder.glob(f"{PREFIX}*"):
            number = stale.name[len(PREFIX):]
            if number.isdigit() and not _alive(int(number)):
                with contextlib.suppress(OSError):
                    stale.unlink()
        path = folder / f"{PREFIX}{pid}"
        path.touch()
        return path
    except OSError:
        return None


def unmark(path: Path | None) -> None:
    if path is not None:
        with contextlib.suppress(OSError):
            path.unlink()


def marked() -> set[int]:
    """The pids of PinPoint's GPU workers running on this machine now (as far as their marks say)."""
    try:
        names = [p.name for p in lock_dir().glob(f"{PREFIX}*")]
    except OSError:
        return set()
    pids = {int(name[len(PREFIX):]) for name in names if name[len(PREFIX):].isdigit()}
    return {pid for pid in pids if _alive(pid)}
