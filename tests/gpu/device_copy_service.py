"""A worker service for GPU tests: the real GpuService plus a job that runs the device_copy sweep with its
destination damaged after the copies, before the check, as a wrong copy would leave it."""

from gpu.service.worker import GpuService


class DamagedCopyService(GpuService):
    def handle(self, job, progress, should_cancel):
        if job["kind"] != "device_copy_damaged":
            return super().handle(job, progress, should_cancel)
        from gpu.core.errors import VerificationError
        from gpu.experiments import device_copy
        from gpu.experiments.device_copy import sweep as device_copy_sweep
        from gpu.sweeps import harness

        answers = {}
        for damage in ("none", "one_word", "last_word_unwritten", "past_the_end"):

            class Damaged(device_copy_sweep.DeviceCopySweep):
                def verify(self, point, damage=damage):
                    size, dst = point.state["size"], int(self.dst)
                    if damage == "one_word":
                        self.cuda.memset_d32(dst + 4 * 1000, 0, 1)
                    elif damage == "last_word_unwritten":  # the poison back in the last word: a copy one word short
                        self.checker.fill(dst + size - 4, 1, self.poison_seed)
                    elif damage == "past_the_end":  # a word after the destination changed: a copy that ran over
                        self.cuda.memset_d32(dst + size, 0, 1)
                    super().verify(point)

            params = device_copy.parse_params({"sizes": [1024 * 1024 + 12], "methods": ["single"],
                                               "profile": "interactive/max_samples=10"})
            try:
                # progress without its row channel: these rows are not a run's, so they are not streamed
                rows = harness.run(Damaged, params, self.runtime, lambda done, total, text: progress(done, total, text),
                                   should_cancel)
                answers[damage] = f"passed: {len(rows)} rows"
            except VerificationError as exc:
                answers[damage] = str(exc)
        return answers
