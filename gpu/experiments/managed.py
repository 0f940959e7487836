"""Managed (unified) memory: what a kernel pays when its data must first migrate from the host.

One kernel (``checksum_u32`` in ``gpu/kernels/memory_modes.cu``: reads every word once, 16-byte loads,
adds them into one 64-bit sum) reads the same bytes in five situations (variants):

* ``device`` – an ordinary ``cudaMalloc`` buffer: the reference;
* ``first_touch`` – a managed buffer the host has just written, so its pages live on the host and migrate
  on the kernel's page faults (the sample covers the kernel, faults and migration included);
* ``prefetch`` – ``cuMemPrefetchAsync`` of the host-written buffer to the device, alone: the migration cost
  done explicitly (GB/s of pages moved);
* ``after_prefetch`` – the kernel straight after that prefetch (the two are timed in one sample with an
  event between them, so each sample of ``prefetch`` has its ``after_prefetch`` partner);
* ``resident`` – the kernel again on a managed buffer already on the device.

Before every first-touch and prefetch sample the host rewrites the whole buffer (untimed), which pulls its
pages back to the host. Kernel samples flush L2 first (as the kernel pages do). Every kernel's checksum must
equal the host's exact sum of the words; a wrong sum fails the job. Bytes: the buffer's size, read once.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from gpu import stats, text
from gpu.errors import JobCancelled, ValidationError, VerificationError
from gpu.experiments import _kernels as k
from gpu.experiments.harness import SweepRows
from gpu.experiments.transfers import pattern_for
from gpu.units import GiB, MiB, format_bytes

NAME = "managed"
VARIANTS = ("device", "first_touch", "prefetch", "after_prefetch", "resident")
LABELS = {"device": "device memory (cudaMalloc)", "first_touch": "managed, first touch (migrates on fault)",
          "prefetch": "managed, prefetch to device (migration alone)",
          "after_prefetch": "managed, kernel after prefetch", "resident": "managed, already resident"}
KEY_COLUMNS = ["variant", "bytes"]
SHOW_COLUMNS = ["variant", "bytes"]
AXES = {"bytes": "multiples of 64 KiB from 1 MiB to 8 GiB", "variant": VARIANTS}
MIN_SIZE, MAX_SIZE, ALIGN = 1 * MiB, 8 * GiB, 64 * 1024
BLOCK = 256


@dataclass(frozen=True)
class Params:
    sizes: list[int] = field(default_factory=lambda: [256 * MiB])
    variants: list[str] = field(default_factory=lambda: list(VARIANTS))
    profile: str = "interactive"

    def as_dict(self) -> dict:
        return asdict(self)

    def points(self):
        for size in self.sizes:
            for variant in self.variants:
                yield variant, size


def parse_params(raw: dict) -> Params:
    unknown = set(raw) - set(Params.__dataclass_fields__)
    if unknown:
        raise ValidationError([f"unknown {text.plural('parameter', len(unknown))}: {', '.join(sorted(unknown))}"])
    try:
        sizes = sorted({int(s) for s in raw.get("sizes", [256 * MiB])})
    except (TypeError, ValueError):
        raise ValidationError(["sizes must be whole numbers of bytes"]) from None
    wanted = list(raw.get("variants", VARIANTS))
    # Measured in this order: after_prefetch needs prefetch's samples; resident needs a migrated buffer.
    return Params(sizes=sizes, variants=[v for v in VARIANTS if v in wanted] + [v for v in wanted if v not in VARIANTS],
                  profile=str(raw.get("profile", "interactive")))


def invalid_reasons(params: Params, limits) -> list[str]:
    reasons = []
    if not params.sizes:
        reasons.append("choose at least one size")
    if not params.variants:
        reasons.append("choose at least one case")
    reasons += [f"unknown case '{v}' (known: {', '.join(VARIANTS)})" for v in params.variants if v not in VARIANTS]
    for size in params.sizes:
        if not MIN_SIZE <= size <= MAX_SIZE:
            reasons.append(f"size {format_bytes(size)} must be from {format_bytes(MIN_SIZE)} to "
                           f"{format_bytes(MAX_SIZE)}")
        elif size % ALIGN:
            reasons.append(f"size {size} B is not a multiple of 64 KiB (managed memory migrates in such pages)")
    try:
        stats.get_profile(params.profile)
    except ValueError as exc:
        reasons.append(str(exc))
    if reasons:
        return reasons
    largest = max(params.sizes)
    # Never ask for more managed memory than the device has free: oversubscription can hang a GPU.
    reasons += k.memory_reasons(2 * largest, limits, f"{format_bytes(largest)} of managed memory plus a device copy")
    if limits is not None and limits.host_available_bytes and 3 * largest > limits.host_available_bytes:
        reasons.append(f"size {format_bytes(largest)} needs {format_bytes(3 * largest)} of host memory (pattern, "
                       f"migrated pages) but {format_bytes(limits.host_available_bytes)} is available")
    return reasons


def bytes_moved(size: int) -> int:
    return int(size)


def run(params: Params, gpu, progress, should_cancel) -> list[dict]:
    from gpu.timing import KernelTimer

    reasons = invalid_reasons(params, gpu.limits())
    if reasons:
        raise ValidationError(reasons)
    cuda, telemetry = gpu.cuda, gpu.telemetry
    profile = stats.get_profile(params.profile)
    checksum = gpu.kernel("memory_modes", "checksum_u32")
    points = list(params.points())
    rows = SweepRows(progress)  # each row reaches the page as soon as it is measured
    with gpu.job_scope() as ledger:
        # Not held: a prefetch inside a timed sample may wait on the stream (StreamHold's docstring).
        timer = KernelTimer(gpu, ledger, hold=False)
        total = ledger.device_buffer(8)
        mid = cuda.Event()
        for size in params.sizes:
            pattern = pattern_for(size // 4, seed=size)
            exact = int(pattern.sum(dtype=np.uint64))
            n_vec4 = size // 16
            grid = (gpu.sm_count * 8, 1)
            device = ledger.device_buffer(size)
            cuda.memcpy_htod(device, pattern)
            managed = ledger.managed_buffer(size)
            pointer = managed.base.get_device_pointer()
            cuda.Context.synchronize()

            def launch(stream, source):
                cuda.memset_d32_async(total, 0, 2, stream)
                checksum(np.uintp(int(source)), np.uint64(n_vec4), total, block=(BLOCK, 1, 1), grid=grid,
                         stream=stream)

            def host_writes():
                """The host produces the data (untimed): every page of the buffer is now on the host."""
                cuda.Context.synchronize()
                np.copyto(managed, pattern)

            def check(what: str) -> None:
                got = np.zeros(1, np.uint64)
                cuda.memcpy_dtoh(got, total)
                if int(got[0]) != exact:
                    raise VerificationError(f"{what}, {format_bytes(size)}: checksum {int(got[0])}, the host's sum "
                                            f"is {exact}: the kernel read wrong data")

            split: dict[str, list[float]] = {}
            for variant in params.variants:
                if should_cancel():
                    raise JobCancelled()
                progress(len(rows), len(points), f"{LABELS[variant]} · {format_bytes(size)}")
                telemetry.start_point()
                what = LABELS[variant]
                if variant == "device":
                    summary = _kernel_summary(timer, lambda s: launch(s, device), profile, telemetry)
                elif variant == "first_touch":
                    def sample() -> float:
                        host_writes()
                        telemetry.sample()
                        return timer.once(lambda s: launch(s, pointer))

                    summary = stats.sample_until_stable(sample, profile)
                elif variant in ("prefetch", "after_prefetch"):
                    if "prefetch" not in split:
                        split = _prefetch_samples(gpu, timer, managed, pointer, size, mid, launch, host_writes,
                                                  profile, telemetry)
                    summary = split[variant]
                else:  # resident: migrate once, then time the kernel on pages already on the device
                    gpu.prefetch(pointer, size, None)
                    cuda.Context.synchronize()
                    summary = _kernel_summary(timer, lambda s: launch(s, pointer), profile, telemetry)
                cuda.Context.synchronize()
                check(what)
                rows.append(k.measured_row(
                    summary, profile, telemetry, bytes_moved(size),
                    "cuda_event" if variant == "prefetch" else "cuda_event_l2_flushed",
                    variant=variant, group="managed", direction="device"))
            ledger.free_managed(managed)
            ledger.free_device(device)
    progress(len(points), len(points), "done")
    return rows


def _kernel_summary(timer, launch, profile, telemetry) -> stats.Summary:
    def sample() -> float:
        telemetry.sample()
        return timer.once(launch)

    return stats.sample_until_stable(sample, profile)


def _prefetch_samples(gpu, timer, managed, pointer, size, mid, launch, host_writes, profile, telemetry) -> dict:
    """Prefetch, then the kernel, in one sample with an event between them; split into two summaries."""
    cuda = gpu.cuda
    prefetch_ms: list[float] = []
    kernel_ms: list[float] = []
    stream = timer.stream

    def sample() -> float:
        host_writes()
        telemetry.sample()
        if timer.flush_buffer is not None:
            cuda.memset_d32_async(timer.flush_buffer, 0, timer.flush_words, stream)
        timer.start.record(stream)
        gpu.prefetch(pointer, size, stream)
        mid.record(stream)
        launch(stream, pointer)
        timer.end.record(stream)
        timer.end.synchronize()
        prefetch_ms.append(timer.start.time_till(mid))
        kernel_ms.append(mid.time_till(timer.end))
        return prefetch_ms[-1] + kernel_ms[-1]

    both = stats.sample_until_stable(sample, profile)
    # Warm-up samples are not kept: keep the last ``samples`` of each.
    count = both.samples
    return {"prefetch": stats.summarize(prefetch_ms[-count:], both.stop_reason),
            "after_prefetch": stats.summarize(kernel_ms[-count:], both.stop_reason)}
