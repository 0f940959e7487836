"""A worker service for GPU tests: the real GpuService plus a job that probes KernelTimer's stream hold."""

import statistics
import time

import numpy as np

from gpu.service.worker import GpuService


class TimerCheckService(GpuService):
    def handle(self, job, progress, should_cancel):
        if job["kind"] != "timer_check":
            return super().handle(job, progress, should_cancel)
        from gpu.device.timing import KernelTimer, StreamHold

        gpu, n = self.runtime, 1 << 24  # a 64 MiB copy: tens of microseconds
        copy = gpu.kernel("coalescing", "copy_f32")
        with gpu.job_scope() as ledger:
            src, dst = ledger.device_buffer(4 * n), ledger.device_buffer(4 * n)
            timer = KernelTimer(gpu, ledger)
            timer.holder = StreamHold(gpu, ledger, timeout_ns=200_000_000)  # a short timeout for the test

            def launch(stream):
                copy(src, dst, np.uint64(n), block=(256, 1, 1), grid=(n // 256, 1), stream=stream)

            def launch_after_a_pause(stream):
                time.sleep(0.05)  # the Python thread stalls between the start event and the launch
                launch(stream)

            def launch_waiting_on_its_stream(stream):
                stream.synchronize()  # work that waits for the held stream: the hold can only time out
                launch(stream)

            plain = statistics.median(timer.once(launch) for _ in range(9))
            paused_held = timer.once(launch_after_a_pause)
            paused_unheld = timer.once(launch_after_a_pause, hold=False)
            try:
                timer.once(launch_waiting_on_its_stream)
                waiting = "measured"
            except RuntimeError as exc:
                waiting = str(exc)
            after = timer.once(launch)  # the timer still works after a refused sample
        return {"plain_ms": plain, "paused_held_ms": paused_held, "paused_unheld_ms": paused_unheld,
                "waiting": waiting, "after_ms": after, "timers": [timer.timer_name(), timer.timer_name(False)]}
