"""The host facts behind a job's limits (``gpu.core.limits.Limits``): available host memory, the measured commit."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from gpu.core import paths


def git_commit() -> str:
    """The commit measured; PINPOINT_GIT_COMMIT names it where the tree travels without .git. An installed copy is
    not a checkout (git would answer for whatever repository holds the environment), so it is "unknown" there."""
    if os.environ.get("PINPOINT_GIT_COMMIT"):
        return os.environ["PINPOINT_GIT_COMMIT"]
    if not paths.CHECKOUT:
        return "unknown"
    try:
        sha = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=paths.ROOT, capture_output=True,
                             text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=paths.ROOT,
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (sha + ("+dirty" if dirty else "")) if sha else "unknown"


def host_memory_available() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
