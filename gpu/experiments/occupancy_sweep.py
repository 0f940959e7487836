"""Occupancy, measured: a block-size sweep of a memory-bound and a latency-bound kernel.

``stream`` copies one float per thread (memory-bound); ``chase`` follows a chain of dependent loads
through a random cycle far larger than L2 (latency-bound: only more resident warps hide the latency).
A dynamic shared-memory "spoiler" (as gpu-benches does) caps the blocks per SM of both, and register
pressure (``chase`` rebuilt with EXTRA_REGS values held live across its load chain) caps the latency-bound
one's, so occupancy is the variable. The memory-bound copy gets no register pressure: filling registers
costs instructions that, in a one-element-per-thread copy, would outweigh the copy itself. Each row carries the
kernel's real register count and shared memory and the theoretical occupancy from ``gpu.occupancy``.
Bytes: stream reads and writes 4 bytes per element; chase counts 4 bytes per dependent load.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import asdict, dataclass, field

import numpy as np

from gpu import stats, text
from gpu.errors import JobCancelled, ValidationError
from gpu.experiments import _kernels as k
from gpu.experiments.harness import SweepRows, coarse_first
from gpu.experiments.transfers import verify_equal

NAME = "occupancy"
KERNELS = ("stream", "chase")
LABELS = {"stream": "memory-bound: copy", "chase": "latency-bound: dependent loads"}
EXTRA_REGS = (0, 32, 64, 128)
KEY_COLUMNS = ["variant", "block_size", "param_value", "shared_bytes_per_block"]
AXES = {"block_size": "32 … 1024 in steps of 32", "extra_registers": EXTRA_REGS,
        "dynamic_shared_bytes": "0 … the device's per-block opt-in maximum"}
STREAM_ELEMENTS = 1 << 26
CHASE_NODES = 1 << 26
CHASE_THREADS = 1 << 20
CHASE_STEPS = 32


@dataclass(frozen=True)
class Params:
    block_sizes: list[int] = field(default_factory=lambda: list(range(32, 1025, 32)))
    kernels: list[str] = field(default_factory=lambda: list(KERNELS))
    extra_registers: int = 0
    dynamic_shared_bytes: int = 0
    profile: str = "interactive"

    def as_dict(self) -> dict:
        return asdict(self)

    def points(self):
        for kernel in self.kernels:
            extra = self.extra_registers if kernel == "chase" else 0  # see the module docstring
            for block in self.block_sizes:
                yield kernel, block, extra, self.dynamic_shared_bytes


def parse_params(raw: dict) -> Params:
    unknown = set(raw) - set(Params.__dataclass_fields__)
    if unknown:
        raise ValidationError([f"unknown {text.plural('parameter', len(unknown))}: {', '.join(sorted(unknown))}"])
    try:
        return Params(block_sizes=sorted({int(b) for b in raw.get("block_sizes", range(32, 1025, 32))}),
                      kernels=list(raw.get("kernels", KERNELS)),
                      extra_registers=int(raw.get("extra_registers", 0)),
                      dynamic_shared_bytes=int(raw.get("dynamic_shared_bytes", 0)),
                      profile=str(raw.get("profile", "interactive")))
    except (TypeError, ValueError):
        raise ValidationError(["block sizes, registers and shared memory must be whole numbers"]) from None


def invalid_reasons(params: Params, limits, max_dynamic_shared: int = 227 * 1024) -> list[str]:
    reasons = []
    max_threads = getattr(limits, "max_threads_per_block", 1024) if limits else 1024
    reasons += k.block_size_reasons(params.block_sizes, max_threads)
    if not params.kernels:
        reasons.append("choose at least one kernel")
    reasons += [f"unknown kernel '{x}' (known: {', '.join(KERNELS)})" for x in params.kernels if x not in KERNELS]
    if params.extra_registers not in EXTRA_REGS:
        reasons.append(f"register pressure must be one of {', '.join(map(str, EXTRA_REGS))} extra registers")
    if not 0 <= params.dynamic_shared_bytes <= max_dynamic_shared:
        reasons.append(f"dynamic shared memory {params.dynamic_shared_bytes} B must be 0 … {max_dynamic_shared} B "
                       "(the device's per-block opt-in maximum, less the kernel's static shared memory)")
    try:
        stats.get_profile(params.profile)
    except ValueError as exc:
        reasons.append(str(exc))
    if not reasons:
        reasons += k.memory_reasons(3 * STREAM_ELEMENTS * 4 + 256 * 1024**2, limits, "this sweep")
    return reasons


_CHASE_LOCK = threading.Lock()


@functools.lru_cache(maxsize=1)
def _chase_data(nodes: int, threads: int, steps: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    nxt = chase_cycle(nodes, seed)
    expected = np.arange(threads, dtype=np.uint32)
    for _ in range(steps):
        expected = nxt[expected]
    nxt.flags.writeable = expected.flags.writeable = False  # shared by every job of this process
    return nxt, expected


def chase_data() -> tuple[np.ndarray, np.ndarray]:
    """The chase's cycle and the node each thread must end on. A random cycle over 2^26 nodes takes seconds to
    shuffle, and it depends on nothing but its fixed seed: built once per process (the worker starts building
    it in the background when it starts), not on every Measure."""
    with _CHASE_LOCK:
        return _chase_data(CHASE_NODES, CHASE_THREADS, CHASE_STEPS, 11)


def chase_cycle(nodes: int, seed: int) -> np.ndarray:
    """next[] forming one random cycle through all nodes, so chains never settle into the cache."""
    order = np.random.default_rng(seed).permutation(nodes).astype(np.uint32)
    nxt = np.empty(nodes, dtype=np.uint32)
    nxt[order] = np.roll(order, -1)
    return nxt


def run(params: Params, gpu, progress, should_cancel) -> list[dict]:
    from gpu.occupancy import occupancy
    from gpu.timing import KernelTimer

    device = gpu.occupancy_limits()
    reasons = invalid_reasons(params, gpu.limits(), device.shared_per_block_optin)
    if reasons:
        raise ValidationError(reasons)
    cuda = gpu.cuda
    fa = cuda.function_attribute
    profile = stats.get_profile(params.profile)
    # EXTRA_REGS defaults to 0 in the source: the module compiled when the worker started serves that case.
    options = (f"-DEXTRA_REGS={params.extra_registers}",) if params.extra_registers else ()
    fn = {"stream": gpu.kernel("occupancy", "occ_stream"), "chase": gpu.kernel("occupancy", "occ_chase", options)}
    dyn = params.dynamic_shared_bytes
    for function in fn.values():
        function.set_attribute(fa.MAX_DYNAMIC_SHARED_SIZE_BYTES,
                               device.shared_per_block_optin - function.get_attribute(fa.SHARED_SIZE_BYTES))
    points = list(params.points())
    rows = SweepRows(progress)  # each row reaches the page as soon as it is measured
    with gpu.job_scope() as ledger:
        timer = KernelTimer(gpu, ledger)
        src_host = k.small_int_floats(STREAM_ELEMENTS, seed=7)
        src, dst = ledger.device_buffer(STREAM_ELEMENTS * 4), ledger.device_buffer(STREAM_ELEMENTS * 4)
        cuda.memcpy_htod(src, src_host)
        if not _chase_data.cache_info().currsize:  # the worker started moments ago: its background build runs
            progress(0, len(points), "preparing the random chase cycle (once per worker, a few seconds)")
        nxt, expected_chase = chase_data()
        next_dev, out_dev = ledger.device_buffer(CHASE_NODES * 4), ledger.device_buffer(CHASE_THREADS * 4)
        cuda.memcpy_htod(next_dev, nxt)
        readback = ledger.host_buffer(STREAM_ELEMENTS * 4, "pinned")  # pinned: read back at full link speed
        # Block sizes coarse first, both kernels at each: the two curves take shape together.
        kernels = list(dict.fromkeys(p[0] for p in points))
        rank = {b: r for r, b in enumerate(coarse_first(params.block_sizes))}
        story = sorted(points, key=lambda p: (rank[p[1]], kernels.index(p[0])))
        for index, (kernel, block, extra, _) in enumerate(story):
            if should_cancel():
                raise JobCancelled()
            progress(index, len(points), f"{LABELS[kernel]} · block {block}")
            function = fn[kernel]
            resources = gpu.kernel_resources(function)
            theory = occupancy(device, resources, block, dyn)
            if theory.blocks_per_sm == 0:
                continue  # cannot launch (e.g. too many registers for the block): nothing to measure
            if kernel == "stream":
                grid = k.grid_for(STREAM_ELEMENTS, block)

                def launch(s, grid=grid):
                    fn["stream"](src, dst, np.uint64(STREAM_ELEMENTS), block=(block, 1, 1), grid=grid, shared=dyn,
                                 stream=s)
                nbytes, out, expected = 2 * STREAM_ELEMENTS * 4, dst, src_host.view(np.uint32)
            else:
                grid = k.grid_for(CHASE_THREADS, block)

                def launch(s, grid=grid):
                    fn["chase"](next_dev, out_dev, np.uint64(CHASE_THREADS), np.uint32(CHASE_STEPS),
                                block=(block, 1, 1), grid=grid, shared=dyn, stream=s)
                nbytes, out, expected = CHASE_THREADS * CHASE_STEPS * 4, out_dev, expected_chase
            cuda.memset_d32(out, 0xFFFFFFFF, expected.size)
            summary = timer.measure(launch, profile)
            got = readback[:expected.size]
            cuda.memcpy_dtoh(got, out)
            verify_equal(expected, got, f"{LABELS[kernel]} (block {block})")
            rows.append(k.row(kernel, "occupancy", nbytes, summary, profile, gpu.telemetry, timer.timer_name(),
                              block_size=block,
                              elements=int(expected.size), param="extra_registers", param_value=extra,
                              registers_per_thread=resources.registers_per_thread,
                              shared_bytes_per_block=resources.static_shared_bytes + dyn,
                              theoretical_occupancy=theory.occupancy))
    progress(len(points), len(points), "done")
    return rows
