"""A CPU-only stand-in for the GPU service, so the worker/client machinery is tested without a GPU.

It runs in a real spawned worker process through ``gpu.worker.serve``, exactly like ``GpuService``.
"""

from __future__ import annotations

import os
import time

from gpu.errors import ValidationError


class FakeService:
    def __init__(self, fail_start: bool = False):
        if fail_start:
            raise RuntimeError("no CUDA device (fake)")
        self.healthy = True

    def hello(self) -> dict:
        return {"facts": {"device_name": "Fake"}, "limits": {}, "pid": os.getpid()}

    def handle(self, job, progress, should_cancel):
        kind = job["kind"]
        if kind == "echo":
            return {"pid": os.getpid(), "value": job.get("value")}
        if kind == "steps":  # a sweep of n points, each taking `seconds`
            n = job.get("n", 10)
            for i in range(n):
                if should_cancel():
                    from gpu.errors import JobCancelled

                    raise JobCancelled()
                progress(i, n, f"point {i}")
                time.sleep(job.get("seconds", 0.05))
            progress(n, n, "done")
            return {"pid": os.getpid(), "points": n}
        if kind == "invalid":
            raise ValidationError(["size 0 B is too small"])
        if kind == "sticky":  # what PyCUDA raises after an illegal address
            raise RuntimeError("cuCtxSynchronize failed: an illegal memory access was encountered")
        if kind == "recoverable":
            raise RuntimeError("out of memory (fake)")
        if kind == "crash":
            os._exit(9)
        raise ValidationError([f"unknown job kind '{kind}'"])

    def after_error(self, exc) -> bool:
        return "illegal memory access" not in str(exc)

    def close(self) -> None:
        pass
