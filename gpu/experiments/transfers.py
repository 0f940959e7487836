"""Host↔device transfers: pageable vs pinned vs write-combined vs mapped zero-copy, H2D and D2H.

Every point is timed with CUDA events around the copy (or the zero-copy kernel) on one stream. With
``include_alloc`` a sample also covers allocating the host buffer (host clock around the allocation
call, plus the copy's event time), which is how naive code pays for pinned memory. Bytes moved: the
point's size, once across the link, in either direction. Data is checked bit-exact after sampling.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import numpy as np

from gpu import stats
from gpu.errors import ValidationError, VerificationError
from gpu.units import GiB, KiB, MiB, format_bytes

NAME = "transfers"
MODES = ("pageable", "pinned", "pinned_wc", "mapped")
MODE_LABELS = {"pageable": "pageable (NumPy)", "pinned": "pinned", "pinned_wc": "pinned write-combined",
               "mapped": "mapped zero-copy"}
DIRECTIONS = ("h2d", "d2h")
PINNED_MODES = ("pinned", "pinned_wc", "mapped")
AXES = {
    "variant": MODES,
    "direction": DIRECTIONS,
    "bytes": "powers of two from 4 KiB up to the device's limit (any multiple of 16 B is accepted)",
    "include_alloc": (False, True),
}
MIN_BYTES = 16
ALIGN_BYTES = 16  # the zero-copy kernel moves 16-byte vectors
DEVICE_RESERVE_BYTES = 256 * MiB
MAX_POINTS = 2000
DEFAULT_SIZES = [4 * KiB * 2**i for i in range(19)]  # 4 KiB … 1 GiB
KEY_COLUMNS = ["bytes", "variant", "direction", "include_alloc"]  # the order of Params.points()

POISON = np.uint32(0xDEADBEEF)


@dataclass(frozen=True)
class Params:
    sizes: list[int] = field(default_factory=lambda: list(DEFAULT_SIZES))
    modes: list[str] = field(default_factory=lambda: list(MODES))
    directions: list[str] = field(default_factory=lambda: list(DIRECTIONS))
    include_alloc: list[bool] = field(default_factory=lambda: [False])
    profile: str = "interactive"

    def as_dict(self) -> dict:
        return asdict(self)

    def points(self):
        for size in self.sizes:
            for mode in self.modes:
                for alloc in self.include_alloc:
                    for direction in self.directions:
                        yield size, mode, direction, alloc


def parse_params(raw: dict) -> Params:
    """Params from plain values (page widgets, CLI, job messages); types are checked, limits are not."""
    reasons = []
    unknown = set(raw) - set(Params.__dataclass_fields__)
    if unknown:
        reasons.append(f"unknown parameter(s): {', '.join(sorted(unknown))}")
    try:
        sizes = [int(s) for s in raw.get("sizes", DEFAULT_SIZES)]
    except (TypeError, ValueError):
        reasons.append("sizes must be whole numbers of bytes")
        sizes = []
    params = Params(
        sizes=sorted(set(sizes)),
        modes=list(raw.get("modes", MODES)),
        directions=list(raw.get("directions", DIRECTIONS)),
        include_alloc=sorted({bool(v) for v in raw.get("include_alloc", [False])}),
        profile=str(raw.get("profile", "interactive")),
    )
    if reasons:
        raise ValidationError(reasons)
    return params


def invalid_reasons(params: Params, limits) -> list[str]:
    """Why these parameters cannot run on a device with ``limits`` (empty when they can)."""
    reasons = []
    if not params.sizes:
        reasons.append("choose at least one size")
    if not params.modes:
        reasons.append("choose at least one memory mode")
    if not params.directions:
        reasons.append("choose at least one direction")
    if not params.include_alloc:
        reasons.append("choose copy-only, including allocation, or both")
    reasons += [f"unknown memory mode '{m}' (known: {', '.join(MODES)})" for m in params.modes if m not in MODES]
    reasons += [f"unknown direction '{d}' (known: h2d, d2h)" for d in params.directions if d not in DIRECTIONS]
    try:
        stats.get_profile(params.profile)
    except ValueError as exc:
        reasons.append(str(exc))
    for size in params.sizes:
        if size < MIN_BYTES:
            reasons.append(f"size {size} B is too small: the smallest transfer is {MIN_BYTES} B")
        elif size % ALIGN_BYTES:
            reasons.append(f"size {size} B is not a multiple of {ALIGN_BYTES} B "
                           "(the zero-copy kernel moves 16-byte vectors)")
    largest = max(params.sizes, default=0)
    if limits is not None and largest >= MIN_BYTES:
        device_room = limits.free_device_bytes - DEVICE_RESERVE_BYTES
        if largest > device_room:
            reasons.append(f"size {format_bytes(largest)} does not fit in device memory: "
                           f"{format_bytes(limits.free_device_bytes)} free, {format_bytes(DEVICE_RESERVE_BYTES)} "
                           f"kept in reserve, so at most {format_bytes(max(device_room, 0))}")
        if any(m in PINNED_MODES for m in params.modes) and largest > limits.pinned_budget_bytes:
            reasons.append(f"size {format_bytes(largest)} exceeds the pinned-memory budget of "
                           f"{format_bytes(limits.pinned_budget_bytes)} (PINPOINT_PINNED_BUDGET_BYTES sets it)")
        # A point holds the reference pattern, the mode's buffer and a read-back copy on the host.
        if limits.host_available_bytes and 3 * largest > limits.host_available_bytes:
            reasons.append(f"size {format_bytes(largest)} needs {format_bytes(3 * largest)} of host memory "
                           f"(pattern, buffer, read-back) but {format_bytes(limits.host_available_bytes)} is available")
    n_points = len(params.sizes) * len(params.modes) * len(params.directions) * len(params.include_alloc)
    if n_points > MAX_POINTS:
        reasons.append(f"{n_points} points requested; at most {MAX_POINTS} per run")
    return reasons


def bytes_moved(size: int, mode: str, direction: str) -> int:
    """Bytes that cross the host↔device link for one point (each byte once)."""
    return int(size)


def max_size(limits) -> int:
    """The largest power-of-two size every mode can run on this device (the slider's upper end)."""
    room = min(limits.free_device_bytes - DEVICE_RESERVE_BYTES, limits.pinned_budget_bytes,
               (limits.host_available_bytes or 3 * 64 * GiB) // 3)
    size = 4 * KiB
    while size * 2 <= room:
        size *= 2
    return size


def pattern_for(count: int, seed: int) -> np.ndarray:
    """A cheap, position-dependent pattern: a dropped, repeated or swapped chunk never verifies."""
    return (np.arange(count, dtype=np.uint32) * np.uint32(2654435761)) ^ np.uint32(seed & 0xFFFFFFFF)


def verify_equal(expected: np.ndarray, actual: np.ndarray, what: str) -> None:
    """Bit-exact comparison; raises VerificationError naming the first wrong element."""
    if expected.shape != actual.shape:
        raise VerificationError(f"{what}: got {actual.size} elements, expected {expected.size}")
    wrong = np.flatnonzero(expected != actual)
    if wrong.size:
        first = int(wrong[0])
        raise VerificationError(f"{what}: {wrong.size} of {expected.size} words wrong, first at word {first} "
                                f"(expected 0x{int(expected[first]):08x}, got 0x{int(actual[first]):08x})")


class _TransferBench:
    """Measures one sweep's points on a GpuRuntime; all buffers come from the job's ledger."""

    def __init__(self, gpu, ledger, profile: stats.Profile):
        self.gpu = gpu
        self.cuda = gpu.cuda
        self.ledger = ledger
        self.profile = profile
        self.stream = self.cuda.Stream()
        self.start = self.cuda.Event()
        self.end = self.cuda.Event()
        self.copy_kernel = gpu.functions["copy_vec4"]
        self.copy_kernel.prepare("PPQ")

    def copy_ms(self, mode: str, direction: str, host: np.ndarray, device, nbytes: int) -> float:
        cuda, stream = self.cuda, self.stream
        self.start.record(stream)
        if mode == "mapped":
            host_ptr = host.base.get_device_pointer()
            src, dst = (host_ptr, int(device)) if direction == "h2d" else (int(device), host_ptr)
            n_vec4 = nbytes // 16
            block = 256
            grid = max(1, min((n_vec4 + block - 1) // block, self.gpu.sm_count * 16))
            self.copy_kernel.prepared_async_call((grid, 1), (block, 1, 1), stream, src, dst, n_vec4)
        elif direction == "h2d":
            cuda.memcpy_htod_async(device, host, stream)
        else:
            cuda.memcpy_dtoh_async(host, device, stream)
        self.end.record(stream)
        self.end.synchronize()
        return self.start.time_till(self.end)

    def prepare(self, mode, direction, host, device, pattern) -> None:
        """Source holds the pattern, destination is poisoned, so an unwritten word cannot verify."""
        if direction == "h2d":
            np.copyto(host, pattern)
            self.cuda.memset_d32(device, int(POISON), pattern.size)
        else:
            self.cuda.memcpy_htod(device, pattern)
            host.fill(POISON)
        self.cuda.Context.synchronize()

    def verify(self, mode, direction, host, device, pattern, readback, label) -> None:
        if direction == "h2d":
            self.cuda.memcpy_dtoh(readback, device)
            verify_equal(pattern, readback, label)
        elif mode == "pinned_wc":
            # CPU reads of write-combined memory are uncached and very slow: check it through the GPU.
            self.cuda.memcpy_htod(device, host)
            self.cuda.memcpy_dtoh(readback, device)
            verify_equal(pattern, readback, label)
        else:
            verify_equal(pattern, host, label)

    def measure(self, size, mode, direction, include_alloc, device, pattern, readback, host):
        label = f"{MODE_LABELS[mode]} {direction.upper()} {format_bytes(size)}"
        telemetry = self.gpu.telemetry
        telemetry.start_point()
        if not include_alloc:
            self.prepare(mode, direction, host, device, pattern)

            def sample() -> float:
                telemetry.sample()
                return self.copy_ms(mode, direction, host, device, size)

            summary = stats.sample_until_stable(sample, self.profile)
            self.verify(mode, direction, host, device, pattern, readback, label)
            timer = "cuda_event"
        else:
            last = {}

            def sample() -> float:
                telemetry.sample()
                if "host" in last:
                    self._release(mode, last.pop("host"))
                started = time.perf_counter()
                fresh = self.ledger.host_buffer(size, mode)
                alloc_ms = (time.perf_counter() - started) * 1e3
                self.prepare(mode, direction, fresh, device, pattern)
                last["host"] = fresh
                return alloc_ms + self.copy_ms(mode, direction, fresh, device, size)

            summary = stats.sample_until_stable(sample, self.profile)
            self.verify(mode, direction, last["host"], device, pattern, readback, label)
            self._release(mode, last.pop("host"))
            timer = "host_clock_alloc+cuda_event_copy"
        return {
            "variant": mode, "direction": direction, "bytes": int(size), "include_alloc": bool(include_alloc),
            "median_ms": summary.median_ms, "min_ms": summary.min_ms, "max_ms": summary.max_ms,
            "cv": summary.cv, "samples": summary.samples,
            "gbps": stats.gbps(bytes_moved(size, mode, direction), summary.median_ms),
            "stop_reason": summary.stop_reason, "profile": self.profile.name, "timer": timer, "verified": True,
            "samples_ms": summary.samples_ms, **telemetry.point_summary(),
        }

    def _release(self, mode, host) -> None:
        if mode != "pageable":
            self.ledger.free_host(host)


def run(params: Params, gpu, progress, should_cancel) -> list[dict]:
    """Measure every point of ``params``; returns schema rows (the caller adds provenance)."""
    from gpu.errors import JobCancelled

    reasons = invalid_reasons(params, gpu.limits())
    if reasons:
        raise ValidationError(reasons)
    profile = stats.get_profile(params.profile)
    total = sum(1 for _ in params.points())
    rows: list[dict] = []
    seed = int(time.time_ns()) & 0xFFFFFFFF
    with gpu.job_scope() as ledger:
        bench = _TransferBench(gpu, ledger, profile)
        for size in params.sizes:
            count = size // 4
            pattern = pattern_for(count, seed + size)
            readback = np.empty(count, dtype=np.uint32)
            device = ledger.device_buffer(size)
            for mode in params.modes:
                host = None
                if False in params.include_alloc:
                    host = ledger.host_buffer(size, mode)
                for alloc in params.include_alloc:
                    for direction in params.directions:
                        if should_cancel():
                            raise JobCancelled()
                        progress(len(rows), total,
                                 f"{MODE_LABELS[mode]} {direction.upper()} {format_bytes(size)}"
                                 + (" incl. allocation" if alloc else ""))
                        rows.append(bench.measure(size, mode, direction, alloc, device, pattern, readback, host))
                if host is not None:
                    bench._release(mode, host)
            ledger.free_device(device)
            del pattern, readback
    progress(total, total, "done")
    return rows
