"""Memory pools vs allocating per call: allocate → copy → free, again and again, both ways.

Variants (one sample = one iteration, host clock, allocation + copy + free; filling the host buffer with the
iteration's data is left out of the time, since both ways must do it):

* ``device_per_call`` – ``mem_alloc`` and ``free`` of the device buffer every iteration; the pinned source
  is allocated once;
* ``device_pooled`` – the same through PyCUDA's ``DeviceMemoryPool`` (a freed block goes back to the pool);
* ``pinned_per_call`` – ``pagelocked_empty`` and ``mem_alloc`` every iteration, as code that allocates
  its staging buffer per transfer does;
* ``pinned_pooled`` – both from ``PageLockedMemoryPool`` and ``DeviceMemoryPool``.

The copy is a synchronous ``memcpy_htod``. Every iteration copies one of two alternating patterns and reads
the device buffer back (untimed): a pool that handed out a block still in use, or a stale block, fails
verification. Bytes: the buffer's size, copied once.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import numpy as np

from gpu import stats, text
from gpu.errors import JobCancelled, ValidationError
from gpu.experiments import _kernels as k
from gpu.experiments._sweep import SweepRows
from gpu.experiments.transfers import pattern_for, verify_equal
from gpu.units import KiB, MiB, format_bytes

NAME = "pools"
VARIANTS = ("device_per_call", "device_pooled", "pinned_per_call", "pinned_pooled")
LABELS = {"device_per_call": "device: mem_alloc per call", "device_pooled": "device: DeviceMemoryPool",
          "pinned_per_call": "pinned + device: allocate per call",
          "pinned_pooled": "pinned + device: PageLockedMemoryPool + DeviceMemoryPool"}
KEY_COLUMNS = ["variant", "bytes"]
SHOW_COLUMNS = ["variant", "bytes"]
AXES = {"bytes": "multiples of 4 B from 4 B to 1 GiB", "variant": VARIANTS}
DEFAULT_SIZES = [4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB, 256 * MiB]
MAX_SIZE = 1024 * MiB


@dataclass(frozen=True)
class Params:
    sizes: list[int] = field(default_factory=lambda: list(DEFAULT_SIZES))
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
        sizes = sorted({int(s) for s in raw.get("sizes", DEFAULT_SIZES)})
    except (TypeError, ValueError):
        raise ValidationError(["sizes must be whole numbers of bytes"]) from None
    return Params(sizes=sizes, variants=list(raw.get("variants", VARIANTS)),
                  profile=str(raw.get("profile", "interactive")))


def invalid_reasons(params: Params, limits) -> list[str]:
    reasons = []
    if not params.sizes:
        reasons.append("choose at least one size")
    if not params.variants:
        reasons.append("choose at least one way to allocate")
    reasons += [f"unknown variant '{v}' (known: {', '.join(VARIANTS)})" for v in params.variants if v not in VARIANTS]
    for size in params.sizes:
        if not 4 <= size <= MAX_SIZE:
            reasons.append(f"size {format_bytes(size)} must be from 4 B to {format_bytes(MAX_SIZE)}")
        elif size % 4:
            reasons.append(f"size {size} B is not a multiple of 4 B")
    try:
        stats.get_profile(params.profile)
    except ValueError as exc:
        reasons.append(str(exc))
    if reasons:
        return reasons
    largest = max(params.sizes)
    # Per-call and pooled blocks can coexist with the pool's held block for a moment.
    reasons += k.memory_reasons(3 * largest, limits, f"{format_bytes(largest)} buffers (per call and pooled)")
    if limits is not None and 4 * largest > limits.pinned_budget_bytes:
        reasons.append(f"size {format_bytes(largest)} needs {format_bytes(4 * largest)} of pinned memory (two sources, "
                       f"a per-call and a pooled buffer) over the budget of {format_bytes(limits.pinned_budget_bytes)} "
                       "(PINPOINT_PINNED_BUDGET_BYTES sets it)")
    return reasons


def bytes_moved(size: int) -> int:
    return int(size)


def run(params: Params, gpu, progress, should_cancel) -> list[dict]:
    from pycuda.tools import DeviceMemoryPool, PageLockedMemoryPool

    reasons = invalid_reasons(params, gpu.limits())
    if reasons:
        raise ValidationError(reasons)
    cuda, telemetry = gpu.cuda, gpu.telemetry
    profile = stats.get_profile(params.profile)
    points = list(params.points())
    rows = SweepRows(progress)  # each row reaches the page as soon as it is measured
    device_pool, pinned_pool = DeviceMemoryPool(), PageLockedMemoryPool()
    try:
        with gpu.job_scope() as ledger:
            for size in params.sizes:
                count = size // 4
                patterns = [pattern_for(count, seed=size + i) for i in range(2)]
                sources = [ledger.host_buffer(size, "pinned") for _ in range(2)]
                for source, pattern in zip(sources, patterns, strict=True):
                    np.copyto(source, pattern)
                readback = np.empty(count, np.uint32)
                for variant in params.variants:
                    if should_cancel():
                        raise JobCancelled()
                    progress(len(rows), len(points), f"{LABELS[variant]} · {format_bytes(size)}")
                    telemetry.start_point()
                    state = {"i": 0}

                    def iteration(variant=variant, state=state, count=count, patterns=patterns, sources=sources,
                                  readback=readback, size=size) -> float:
                        i = state["i"] = state["i"] + 1
                        pattern = patterns[i % 2]
                        telemetry.sample()
                        started = time.perf_counter()
                        if variant.startswith("pinned"):
                            host = (pinned_pool.allocate((count,), np.uint32) if variant == "pinned_pooled"
                                    else cuda.pagelocked_empty(count, np.uint32))
                        else:
                            host = sources[i % 2]
                        device = device_pool.allocate(size) if variant.endswith("pooled") else cuda.mem_alloc(size)
                        allocated = time.perf_counter()
                        if variant.startswith("pinned"):
                            np.copyto(host, pattern)  # the data every iteration must produce: not timed
                        filled = time.perf_counter()
                        cuda.memcpy_htod(device, host)
                        copied = time.perf_counter()
                        cuda.memcpy_dtoh(readback, device)  # verification: not timed
                        checked = time.perf_counter()
                        device.free()
                        if variant.startswith("pinned"):
                            host.base.free()
                        freed = time.perf_counter()
                        verify_equal(pattern, readback, f"{LABELS[variant]}, {format_bytes(size)}, iteration {i}")
                        return ((allocated - started) + (copied - filled) + (freed - checked)) * 1e3

                    summary = stats.sample_until_stable(iteration, profile)
                    rows.append(k.measured_row(summary, profile, telemetry, bytes_moved(size),
                                               "host_clock_alloc+copy+free", variant=variant, group="pools",
                                               direction="h2d"))
                for source in sources:
                    ledger.free_host(source)
    finally:
        device_pool.stop_holding()
        pinned_pool.stop_holding()
    progress(len(points), len(points), "done")
    return rows
