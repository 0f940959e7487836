"""A worker service for GPU tests: the real GpuService plus a job that exercises the Transfers pattern check."""

from gpu.service.worker import GpuService


class PatternCheckService(GpuService):
    def handle(self, job, progress, should_cancel):
        if job["kind"] != "pattern_check":
            return super().handle(job, progress, should_cancel)
        from gpu.core.errors import VerificationError
        from gpu.experiments.transfers import sweep as transfers

        words = 1 << 18

        def outcome(check) -> str:
            try:
                check()
                return "passed"
            except VerificationError as exc:
                return str(exc)

        with self.runtime.job_scope() as ledger:
            bench = transfers._TransferBench(self.runtime, ledger, 4 * words, seed=5, keep_hosts=True)
            bench.fill(words, 77)
            right = outcome(lambda: bench.check(words, 77, "right"))
            self.runtime.cuda.memset_d32(int(bench.device) + 4 * 1000, 0, 1)
            one_word = outcome(lambda: bench.check(words, 77, "one word"))
            bench.fill(words, 78)
            other_seed = outcome(lambda: bench.check(words, 77, "other seed"))
        return {"right": right, "one_word_wrong": one_word, "other_seed": other_seed}
