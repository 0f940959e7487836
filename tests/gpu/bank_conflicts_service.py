"""A worker service for GPU tests: the real GpuService, whose bank-conflicts check expects one trip of reads more than
each thread makes, so the experiment's verification must refuse every strided point it measures."""

from gpu.service.worker import GpuService


class WrongExpectationService(GpuService):
    def __init__(self, device=None):
        super().__init__(device)
        from gpu.experiments import bank_conflicts

        right = bank_conflicts.expected_lane_sums

        def one_trip_too_many(word_bytes, stride, padded, reads_per_thread):
            return right(word_bytes, stride, padded, reads_per_thread + bank_conflicts.READS_PER_TRIP)

        bank_conflicts.expected_lane_sums = one_trip_too_many  # the sweep's check, in this worker process only
