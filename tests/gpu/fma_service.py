"""A worker service for GPU tests: the real GpuService, whose FMA check expects one FMA more than each thread runs,
so the experiment's verification must refuse every point it measures."""

from gpu.service.worker import GpuService


class WrongExpectationService(GpuService):
    def __init__(self, device=None):
        super().__init__(device)
        from gpu.experiments import fma
        from gpu.experiments.fma import sweep as fma_sweep

        right = fma.expected_sums

        def one_fma_too_many(threads, chains, fmas_per_thread, precision, b=fma.B):
            return right(threads, chains, fmas_per_thread + 1, precision, b)

        fma_sweep.expected_sums = one_fma_too_many  # the sweep's check, in this worker process only
