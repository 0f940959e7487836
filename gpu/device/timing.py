"""Timing: one home for every clock PinPoint reads on the GPU.

* ``EventTimer`` – CUDA events around work that a callable enqueues on a stream (copies, batches of copies);
* ``StreamHold`` – nvbench's blocking kernel, which parks a stream while the host queues the timed work;
* ``KernelTimer`` – a cold kernel sample: L2 flushed, the stream held, events around one launch.

Everything that times a sample builds on these; nothing here allocates outside the job's ledger.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING

from gpu.core.stats import sample_until_stable

if TYPE_CHECKING:
    from gpu.device.context import GpuRuntime
    from gpu.device.memory import AllocationLedger


class EventTimer:
    """CUDA events around the work that ``enqueue()`` queues on ``stream``: record start, enqueue, record end,
    wait for end; the elapsed milliseconds are the sample. With a ``holder`` (``StreamHold``) the stream is held
    while the events and the work are queued, and a hold that timed out refuses the sample."""

    def __init__(self, cuda, stream):
        self.cuda = cuda
        self.stream = stream
        self.start, self.end = cuda.Event(), cuda.Event()

    def time(self, enqueue, holder: StreamHold | None = None) -> float:
        with holder.holding(self.stream) if holder is not None else nullcontext():
            self.start.record(self.stream)
            enqueue()
            self.end.record(self.stream)
        self.end.synchronize()
        if holder is not None:
            holder.check()
        return self.start.time_till(self.end)


HOLD_TIMEOUT_NS = 5_000_000_000  # a hold that long means the host never released it: the sample is refused


class StreamHold:
    """nvbench's blocking kernel (``hold_stream`` in kernels/timing.cu): ``holding(stream)`` parks the stream in a
    one-thread spin until released, so the start event and the timed work reach the GPU together once the
    host has queued them all; a sample then times the GPU, never a pause of the Python thread between two
    launches (a collection, a page fault, another thread), which would otherwise count as GPU time.

    Only for work that queues without waiting on the stream: a pageable copy, a prefetch to the host or a
    free that synchronizes would wait for the held stream, which waits for the host (the hold then times out)."""

    def __init__(self, gpu: GpuRuntime, ledger: AllocationLedger, timeout_ns: int = HOLD_TIMEOUT_NS):
        self.flags = ledger.host_buffer(64, "mapped")  # [release, timed out] as hold_stream sees them
        self.pointer = self.flags.base.get_device_pointer()
        self.kernel = gpu.kernel("timing", "hold_stream")
        self.kernel.prepare("PQ")
        self.timeout_ns = timeout_ns

    @contextmanager
    def holding(self, stream):
        """``stream`` is held while the body queues the timed work, and released when the body ends, even by an
        exception: the GPU is never left spinning."""
        self.flags[0] = self.flags[1] = 0
        self.kernel.prepared_async_call((1, 1), (1, 1, 1), stream, self.pointer, self.timeout_ns)
        try:
            yield
        finally:
            self.flags[0] = 1

    def check(self) -> None:
        """After the held work has finished: refuse a sample whose hold ended by its timeout, not by release."""
        if self.flags[1]:
            raise RuntimeError("the launch hold timed out before the host had queued the sample's operations "
                               "(the timed work waited on its own stream)")


class KernelTimer:
    """Times kernel launches like nvbench's cold measurements: CUDA events around one launch on a stream,
    with the L2 cache flushed before every sample (a memset over twice the L2 size, outside the events),
    so no sample reads data that the previous one left in cache, and the stream held by a blocking kernel
    while the launch is queued (``StreamHold``; ``hold=False`` for work that cannot be held)."""

    def __init__(self, gpu: GpuRuntime, ledger: AllocationLedger, flush_l2: bool = True, hold: bool = True):
        self.gpu = gpu
        self.cuda = gpu.cuda
        self.stream = self.cuda.Stream()
        self.start, self.end = self.cuda.Event(), self.cuda.Event()
        self.flush_words = (2 * gpu.l2_bytes) // 4 if flush_l2 else 0
        self.flush_buffer = ledger.device_buffer(self.flush_words * 4) if flush_l2 else None
        self.holder = StreamHold(gpu, ledger) if hold else None

    def timer_name(self, hold: bool | None = None) -> str:
        """What the clock of a sample covers, for the schema's ``timer`` column."""
        held = self.holder is not None if hold is None else hold
        return "cuda_event" + ("_l2_flushed" if self.flush_buffer is not None else "") + ("_held" if held else "")

    def once(self, launch, hold: bool | None = None) -> float:
        """One sample in ms: ``launch(stream)`` enqueues the work being timed; ``hold`` overrides the timer's."""
        holder = None if hold is False else self.holder
        if hold and holder is None:
            raise ValueError("this KernelTimer was built without a stream hold")
        if self.flush_buffer is not None:
            self.cuda.memset_d32_async(self.flush_buffer, 0, self.flush_words, self.stream)
        with holder.holding(self.stream) if holder is not None else nullcontext():
            self.start.record(self.stream)
            launch(self.stream)
            self.end.record(self.stream)
        self.end.synchronize()
        if holder is not None:
            holder.check()
        return self.start.time_till(self.end)

    def once_split(self, first, second, mid) -> tuple[float, float]:
        """One unheld sample of two parts, with the event ``mid`` recorded between them: ``first(stream)`` and
        ``second(stream)`` enqueue the parts; returns each part's ms (L2 flushed first, as ``once`` does)."""
        if self.flush_buffer is not None:
            self.cuda.memset_d32_async(self.flush_buffer, 0, self.flush_words, self.stream)
        self.start.record(self.stream)
        first(self.stream)
        mid.record(self.stream)
        second(self.stream)
        self.end.record(self.stream)
        self.end.synchronize()
        return self.start.time_till(mid), mid.time_till(self.end)

    def measure(self, launch, profile, hold: bool | None = None):
        telemetry = self.gpu.telemetry

        def sample() -> float:
            telemetry.sample()
            return self.once(launch, hold)

        return sample_until_stable(sample, profile)
