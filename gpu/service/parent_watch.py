"""A PinPoint child process ends once its parent is gone: a GPU worker whose app, runner or Dask worker was killed
(kill -9) must not live on holding its GPU, nor its parent's stdout and stderr (a caller reading them would wait
forever). Imported by the spawned children themselves, so it loads nothing else.

A watch on the parent's pid (``os.getppid`` changes once the parent is gone and the child is re-parented), not
Linux's ``PR_SET_PDEATHSIG``: that signal fires when the parent *thread* that started the child ends, and Streamlit
starts the worker on a script-run thread that ends at once."""

from __future__ import annotations

import os
import threading
import time

EXIT_PARENT_GONE = 71
WATCH_EVERY_S = 1.0  # the child exits within this of its parent's death


def exit_with_parent(every_s: float = WATCH_EVERY_S) -> None:
    """Start a daemon thread that ends this process (exit code ``EXIT_PARENT_GONE``) once its parent is gone."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(every_s)
            if os.getppid() != parent:
                os._exit(EXIT_PARENT_GONE)

    threading.Thread(target=watch, name="pinpoint-parent-watch", daemon=True).start()
