"""One measurement per GPU on this machine, whatever process started it: a lock file per GPU, held with ``flock``.

``locks.GpuLocks`` serializes the jobs of one process. The app, a runner, a fleet's Dask worker and the GPU tests are
separate processes, so each job also takes, after its process's own lock and in the same order (by board key), the
operating system's exclusive ``flock`` on one file per GPU in a folder shared by every user of the machine
(``PINPOINT_LOCK_DIR``, default ``/tmp/pinpoint-gpu-locks``). The kernel drops a lock when its holder's file is
closed, so a holder that is killed (kill -9) frees its GPUs at once, and nothing is ever left to clean by hand.

While it holds a GPU, a job writes who it is into the lock file (pid, what it measures for, since when), so a waiter
can say "GPU 0 is measuring for `pinpoint measure transfers` (pid 4242, for 12 s); waiting", and a page can list the
other processes measuring here (``holders``). A waiter polls with a non-blocking ``flock`` (``POLL_S``), so it stays
cancellable, and gives up after its wait limit with ``GpuBusy``. A record is another process's text: shortened and
freed of control characters here, shown as plain text by whoever shows it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import socket
import stat
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpu.core import gpu_workers
from gpu.core.errors import WorkerError
from gpu.core.text import shorten

LOCK_DIR_ENV = gpu_workers.LOCK_DIR_ENV
# /tmp is on every Unix machine, shared by every user (1777) and not per-user like $TMPDIR; /run/lock is root's on
# many systems and missing in many containers.
DEFAULT_LOCK_DIR = gpu_workers.DEFAULT_LOCK_DIR
POLL_S = 0.05  # how often a waiter tries again: a freed GPU is taken within this
RECORD_BYTES = 2048  # the most read of a holder's record: another process's text
PURPOSE_CHARS = 80
APP_WAIT_S = 600.0  # the app's jobs wait at most this for a GPU that another process measures on (the page says so)
EXIT_GPU_BUSY = 4  # the runner's and the fleet command's exit code when a wait limit ran out
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class GpuBusy(WorkerError):
    """A job gave up waiting for a GPU that another process kept measuring on past the job's wait limit."""


class LockFolderUnusable(WorkerError):
    """The GPU lock folder, or a lock file in it, cannot be used by this user (another user's, or unwritable)."""


def lock_dir() -> Path:
    return gpu_workers.lock_dir()


_purpose = ""


def set_process_purpose(text: str) -> None:
    """What this process measures for, as its lock records say it ("pinpoint measure transfers", "the app")."""
    global _purpose
    _purpose = str(text)


def process_purpose() -> str:
    """This process's purpose, or its command line where it set none."""
    if _purpose:
        return _purpose
    program = Path(sys.argv[0]) if sys.argv and sys.argv[0] else Path("python")
    name = f"python -m {program.parent.name}" if program.name == "__main__.py" else program.name  # -m pytest
    return " ".join([name, *sys.argv[1:]])


def clean(value: object, limit: int = PURPOSE_CHARS) -> str:
    """Another process's text as one short line without control characters (it is shown on terminals and pages)."""
    return shorten(_CONTROL.sub("?", str(value)), limit)


def _usage_hint(path: Path) -> str:
    return (f"set {LOCK_DIR_ENV} to a folder that every PinPoint user of this machine can write (mode 1777), or ask "
            f"the owner of {path} to make it so")


def ready_dir() -> Path:
    """The lock folder, created world-writable with the sticky bit (every user's processes share it; none may remove
    another's files); LockFolderUnusable, in one line naming it and what to do, when this user cannot use it."""
    path = lock_dir()
    try:
        if not os.path.lexists(path):
            path.mkdir(mode=0o1777, parents=True)
            os.chmod(path, 0o1777)  # mkdir's mode is cut by the umask
    except FileExistsError:  # another process made it meanwhile
        pass
    except OSError as exc:
        raise LockFolderUnusable(f"cannot create the GPU lock folder {path} ({exc.strerror}): "
                                 f"{_usage_hint(path.parent)}") from None
    try:
        info = path.stat()
    except OSError as exc:
        raise LockFolderUnusable(f"cannot read the GPU lock folder {path} ({exc.strerror}): {_usage_hint(path)}") \
            from None
    if not stat.S_ISDIR(info.st_mode):
        raise LockFolderUnusable(f"the GPU lock folder {path} is not a folder: {_usage_hint(path)}")
    if not os.access(path, os.W_OK | os.X_OK):
        raise LockFolderUnusable(f"the GPU lock folder {path} is not writable by this user (owner uid {info.st_uid}, "
                                 f"mode {stat.S_IMODE(info.st_mode):o}): {_usage_hint(path)}")
    return path


def lock_path(folder: Path, key: str) -> Path:
    return folder / f"gpu-{re.sub(r'[^A-Za-z0-9._-]', '-', key)[:120]}.lock"


def _open_lock(path: Path) -> int:
    """The lock file, opened for reading and writing (created 0666, so every user's processes can take it); never
    through a symbolic link another user planted."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        why = "a symbolic link" if exc.errno == errno.ELOOP else exc.strerror
        raise LockFolderUnusable(f"cannot open the GPU lock file {path} ({why}): remove it if no PinPoint runs here, "
                                 f"or {_usage_hint(path.parent)}") from None
    try:
        if os.fstat(fd).st_uid == os.geteuid():
            os.fchmod(fd, 0o666)  # the umask cut it at creation
    except OSError:
        pass
    return fd


@dataclass(frozen=True)
class Holder:
    """A process measuring on a GPU of this machine, as its lock record says: ``gpu`` its index, ``purpose`` what it
    measures for (another process's text, already cleaned), ``since_s`` how long it has held it."""

    gpu: int | None
    pid: int | None
    purpose: str
    since_s: float | None
    host: str = ""

    def text(self) -> str:
        gpu = f"GPU {self.gpu}" if self.gpu is not None else "the GPU"
        if self.pid is None:
            return f"{gpu} is measuring for another process"
        since = f", for {self.since_s:.0f} s" if self.since_s is not None else ""
        return f"{gpu} is measuring for `{self.purpose}` (pid {self.pid}{since})"

    def waiting_text(self) -> str:
        """The same record read as a waiter's (``waiters``)."""
        gpu = f"GPU {self.gpu}" if self.gpu is not None else "a GPU"
        since = f", for {self.since_s:.0f} s" if self.since_s is not None else ""
        return f"`{self.purpose}` (pid {self.pid}) is waiting for {gpu}{since}"


def _read_record(fd: int, gpu: int | None) -> Holder:
    try:
        record = json.loads(os.pread(fd, RECORD_BYTES, 0).decode("utf-8", "replace"))
        pid = int(record["pid"])
        started = float(record["started"])
        since = max(0.0, time.time() - started) if started == started else None
        index = record.get("gpu")
        return Holder(int(index) if isinstance(index, int) else gpu, pid, clean(record.get("purpose", "")),
                      since, clean(record.get("host", ""), 60))
    except (OSError, ValueError, TypeError, KeyError, AttributeError):  # being written, or not PinPoint's
        return Holder(gpu, None, "", None)


class HostClaim:
    """One job's hold on its GPUs across the machine's processes: ``keys`` the boards in the one lock order,
    ``indices`` their ordinals for messages, ``purpose`` what the job measures for."""

    def __init__(self, keys: tuple[str, ...], indices: tuple[int, ...], purpose: str):
        self.keys, self.indices, self.purpose = tuple(keys), tuple(indices), clean(purpose)
        self._held: list[int] = []
        self._waiting: tuple[int, int, Path] | None = None  # (fd, GPU index, path) of this job's waiting record

    def acquire(self, cancelled: Callable[[], bool] = lambda: False,
                waiting: Callable[[str], None] = lambda text: None, wait_s: float | None = None,
                poll_s: float = POLL_S) -> bool:
        """Take every GPU, in order; True once all are held (``waiting("")`` then). While another process holds one,
        ``waiting(text)`` hears who. False, holding nothing, when ``cancelled()`` turns true first; GpuBusy, holding
        nothing, once ``wait_s`` seconds passed; LockFolderUnusable where the folder or a file cannot be used."""
        if not self.keys:
            return True
        folder = ready_dir()
        deadline = None if wait_s is None else time.monotonic() + wait_s
        try:
            for key, index in zip(self.keys, self.indices, strict=True):
                fd = _open_lock(lock_path(folder, key))
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        pass
                    self._announce_wait(folder, index)
                    holder = _read_record(fd, index)
                    if cancelled():
                        os.close(fd)
                        self.release()
                        return False
                    if deadline is not None and time.monotonic() >= deadline:
                        os.close(fd)
                        raise GpuBusy(f"refused: {holder.text()} and stayed busy past the wait limit of "
                                      f"{wait_s:g} s")
                    waiting(f"{holder.text()}; waiting" + (f" (at most {wait_s:g} s)" if wait_s is not None else ""))
                    time.sleep(poll_s)
                self._held.append(fd)
                self._write_record(fd, index)
                self._end_wait()
        except BaseException:
            self.release()
            raise
        waiting("")
        return True

    def _announce_wait(self, folder: Path, index: int) -> None:
        """While this job waits for GPU ``index``, a record of its own says so to other processes' queue panels: a
        ``wait-…`` file it holds locked, so a waiter that is killed leaves an unlocked file, read as gone."""
        if self._waiting is not None and self._waiting[1] == index:
            return
        self._end_wait()
        path = folder / f"wait-{os.getpid()}-{index}-{id(self):x}.lock"
        try:
            fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        except OSError:  # only the other panels' words are lost
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._write_record(fd, index)
        except OSError:
            os.close(fd)
            return
        self._waiting = (fd, index, path)

    def _end_wait(self) -> None:
        if self._waiting is not None:
            fd, _, path = self._waiting
            self._waiting = None
            with contextlib.suppress(OSError):
                path.unlink()
            os.close(fd)

    def _write_record(self, fd: int, index: int) -> None:
        record = json.dumps({"pid": os.getpid(), "purpose": self.purpose, "started": time.time(), "gpu": index,
                             "host": socket.gethostname()})
        data = record.encode()
        try:  # written over the last holder's, then cut to length: a waiter never reads an empty record
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))
        except OSError:  # a full disk costs the waiters' words, never the lock
            pass

    def release(self) -> None:
        """Give back every GPU held (none is fine). The record stays: only a held lock's record is ever read."""
        self._end_wait()
        while self._held:
            os.close(self._held.pop())  # closing drops the flock


def _held_records(pattern: str, remove_unheld: bool) -> list[Holder]:
    """The records of the lock folder's files matching ``pattern`` that a process holds locked now; a file nobody
    holds (its process finished or was killed) is skipped, and removed where ``remove_unheld`` and this user may."""
    found = []
    try:
        paths = sorted(lock_dir().glob(pattern))
    except OSError:
        return []
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # nobody holds it
                if remove_unheld:
                    with contextlib.suppress(OSError):
                        path.unlink()
                continue
            except BlockingIOError:
                found.append(_read_record(fd, None))
            except OSError:
                continue
        finally:
            os.close(fd)
    return found


def holders(exclude_pid: int | None = None) -> list[Holder]:
    """Every GPU of this machine that a process measures on now (other than ``exclude_pid``), by GPU index: what a
    page lists beside its own queue. A lock file nobody holds (its holder finished or was killed) is skipped."""
    found = [h for h in _held_records("gpu-*.lock", remove_unheld=False) if h.pid is None or h.pid != exclude_pid]
    return sorted(found, key=lambda h: (h.gpu is None, h.gpu or 0, h.pid or 0))


def waiters(exclude_pid: int | None = None) -> list[Holder]:
    """Every job of another process (other than ``exclude_pid``) waiting for a GPU of this machine now, by GPU index:
    what a page lists beside its own queue. A record nobody holds locked (its waiter got the GPU, or was killed) is
    skipped, and removed where this user may."""
    found = [w for w in _held_records("wait-*.lock", remove_unheld=True) if w.pid is not None and w.pid != exclude_pid]
    return sorted(found, key=lambda w: (w.gpu is None, w.gpu or 0, w.since_s or 0))
