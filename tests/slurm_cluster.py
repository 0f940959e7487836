"""A one-node Slurm for the fleet tests, from Debian's ``slurm-wlm`` and ``munge``, started the way the PostgreSQL
tests start their server: its configuration, state and logs in a temporary folder, its daemons stopped at the end.

It needs root (munged runs as the ``munge`` user, slurmd as root) and Debian's packages; ``unavailable_reason``
says why it cannot start here, and the tests skip with that reason.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")


def unavailable_reason() -> str | None:
    missing = [name for name in (*DAEMONS, "sbatch", "squeue") if shutil.which(name) is None
               and not Path(f"/usr/sbin/{name}").exists()]
    if missing:
        return f"Slurm or munge is not installed ({', '.join(missing)} missing; Debian: slurm-wlm munge)"
    if os.geteuid() != 0:
        return "a one-node Slurm needs root here (munged runs as user munge, slurmd as root)"
    return None


def _binary(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


class OneNodeSlurm:
    """slurmctld + slurmd on this machine, one node with its CPUs, and munged for their authentication."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.node = socket.gethostname().split(".")[0]
        self.conf = folder / "slurm.conf"
        self.pids: dict[str, Path] = {}
        # munged runs as user munge, which cannot enter pytest's temporary folders (root's, mode 700): its own
        # folder sits in /tmp.
        self.munge = Path(tempfile.mkdtemp(prefix="pinpoint-munge-"))
        self.munge_socket = self.munge / "munge.socket.2"

    def start(self) -> OneNodeSlurm:
        try:
            return self._start()
        except BaseException:  # a daemon that started stays no longer than the start that failed
            self.stop()
            raise

    def _start(self) -> OneNodeSlurm:
        self._start_munge()
        for sub in ("state", "spool", "log"):
            (self.folder / sub).mkdir(exist_ok=True)
        cpus = os.cpu_count() or 1
        memory_mb = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20 * 0.8)
        self.conf.write_text("\n".join([
            "ClusterName=pinpoint-test", f"SlurmctldHost={self.node}(127.0.0.1)", "SlurmUser=root",
            "AuthType=auth/munge", f"AuthInfo=socket={self.munge_socket}", "CryptoType=crypto/munge",
            f"StateSaveLocation={self.folder / 'state'}", f"SlurmdSpoolDir={self.folder / 'spool'}",
            f"SlurmctldPidFile={self.folder / 'slurmctld.pid'}", f"SlurmdPidFile={self.folder / 'slurmd.pid'}",
            f"SlurmctldLogFile={self.folder / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={self.folder / 'log' / 'slurmd.log'}",
            f"SlurmctldPort={_free_port()}", f"SlurmdPort={_free_port()}",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core", "ReturnToService=2", "MpiDefault=none",
            "JobAcctGatherType=jobacct_gather/none", "SchedulerType=sched/builtin",
            f"NodeName={self.node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN",
            f"PartitionName=debug Nodes={self.node} Default=YES MaxTime=INFINITE State=UP", ""]))
        os.environ["SLURM_CONF"] = str(self.conf)
        subprocess.run([_binary("slurmctld"), "-i", "-f", str(self.conf)], check=True, capture_output=True,
                       timeout=30)
        self.pids["slurmctld"] = self.folder / "slurmctld.pid"
        subprocess.run([_binary("slurmd"), "-f", str(self.conf), "-N", self.node], check=True, capture_output=True,
                       timeout=30)
        self.pids["slurmd"] = self.folder / "slurmd.pid"
        self._wait_until_idle()
        return self

    def _start_munge(self) -> None:
        munge = self.munge
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        shutil.chown(munge, "munge", "munge")
        shutil.chown(key, "munge", "munge")
        munge.chmod(0o700)
        key.chmod(0o400)
        subprocess.run(["runuser", "-u", "munge", "--", _binary("munged"), "--key-file", str(key), "--socket",
                        str(self.munge_socket), "--pid-file", str(munge / "munged.pid"), "--log-file",
                        str(munge / "munged.log"), "--seed-file", str(munge / "munged.seed"), "--force"],
                       check=True, capture_output=True, timeout=30)  # munged forks and its parent returns
        self.pids["munged"] = munge / "munged.pid"
        # The parent returns before the daemon has written its pid file: wait for it, so stop() can always read it.
        deadline = time.monotonic() + 10
        while not (self.pids["munged"].exists() and self.munge_socket.exists()) and time.monotonic() < deadline:
            time.sleep(0.05)

    def _wait_until_idle(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            result = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=10)
            state = (result.stdout or result.stderr).strip()
            if state in ("idle", "mix", "alloc"):
                return
            time.sleep(0.5)
        raise RuntimeError(f"the one-node Slurm did not come up within {timeout:.0f} s (sinfo: {state}); logs in "
                           f"{self.folder / 'log'}")

    def stop(self, timeout: float = 10) -> None:
        """Cancel the jobs and end the daemons: SIGTERM, then SIGKILL for one still there after ``timeout``; returns
        once none of them runs (each found by its pid file, or else by the folders that only this Slurm uses)."""
        subprocess.run(["scancel", "--user", "root"], capture_output=True, timeout=30)
        pids = set(self.daemon_pids())
        for name in ("slurmd", "slurmctld", "munged"):
            try:
                pids.add(int(self.pids[name].read_text().split()[0]))
            except (KeyError, OSError, ValueError, IndexError):
                pass
        pids = {pid for pid in pids if _alive(pid) and self._ours(pid)}
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in pids:
            if _alive(pid):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        os.environ.pop("SLURM_CONF", None)
        shutil.rmtree(self.munge, ignore_errors=True)

    def daemon_pids(self) -> list[int]:
        """The processes running from this Slurm's folders (its daemons: their command lines name them)."""
        return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()
                and self._ours(int(entry.name))]

    def _ours(self, pid: int) -> bool:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            return False
        return str(self.folder) in command or str(self.munge) in command


def _alive(pid: int) -> bool:
    """Running (a zombie, which has exited and waits for its parent, is not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
