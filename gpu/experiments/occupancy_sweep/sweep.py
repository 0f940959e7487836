"""How the worker measures the occupancy experiment, declared in this package's ``__init__.py``
(its docstring says what is measured, how it is timed and how it is checked)."""

from __future__ import annotations

import functools
import threading

import numpy as np

from gpu.core.occupancy import occupancy
from gpu.device.timing import KernelTimer
from gpu.experiments.occupancy_sweep import (
    CHASE_NODES,
    CHASE_STEPS,
    CHASE_THREADS,
    LABELS,
    STREAM_ELEMENTS,
    memory_reasons,
    shared_memory_reasons,
)
from gpu.sweeps import _kernels as k
from gpu.sweeps import harness
from gpu.sweeps.harness import coarse_first
from gpu.sweeps.verify import verify_equal, verify_pool


class OccupancySweep(harness.Sweep):
    """Both kernels compiled (with the register pressure asked for) and allowed the device's dynamic shared
    memory before the job; the copy's and the chase's buffers for the whole job. Block sizes coarse first, both
    kernels at each: the two curves take shape together. A block size that cannot launch (e.g. too many
    registers for the block) is skipped: nothing to measure."""

    RESTART_TELEMETRY = False

    @classmethod
    def reasons(cls, params, gpu, limits) -> list[str]:
        device = gpu.occupancy_limits()
        return shared_memory_reasons(params, device.shared_per_block_optin) + memory_reasons(params, limits)

    def __init__(self, params, gpu, profile):
        super().__init__(params, gpu, profile)
        self.device = device = gpu.occupancy_limits()
        fa = self.cuda.function_attribute
        # EXTRA_REGS defaults to 0 in the source: the module compiled when the worker started serves that case.
        options = (f"-DEXTRA_REGS={params.extra_registers}",) if params.extra_registers else ()
        self.fn = {"stream": gpu.kernel("occupancy", "occ_stream"),
                   "chase": gpu.kernel("occupancy", "occ_chase", options)}
        for function in self.fn.values():
            function.set_attribute(fa.MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                   device.shared_per_block_optin - function.get_attribute(fa.SHARED_SIZE_BYTES))

    def setup(self) -> None:
        cuda, ledger = self.cuda, self.ledger
        # A kernel's own clock (gpu.device.timing.KernelTimer: events around one launch, the stream held while it is
        # queued), not one of the harness's copy methods: a sample is one cold launch, never a batch.
        self.timer = KernelTimer(self.gpu, ledger)
        self.src_host = k.small_int_floats(STREAM_ELEMENTS, seed=7)
        self.src, self.dst = ledger.device_buffer(STREAM_ELEMENTS * 4), ledger.device_buffer(STREAM_ELEMENTS * 4)
        cuda.memcpy_htod(self.src, self.src_host)
        if not _chase_data.cache_info().currsize:  # the worker started moments ago: its warm-up's build runs
            self.progress(0, len(list(self.params.points())),
                          "preparing the random chase cycle (once per worker, a few seconds)")
        nxt, self.expected_chase = chase_data()
        self.next_dev, self.out_dev = ledger.device_buffer(CHASE_NODES * 4), ledger.device_buffer(CHASE_THREADS * 4)
        cuda.memcpy_htod(self.next_dev, nxt)
        self.readback = ledger.host_buffer(STREAM_ELEMENTS * 4, "pinned")  # pinned: read back at full link speed

    def order(self, grid_points):
        """Block sizes coarse first, both kernels at each."""
        kernels = list(dict.fromkeys(p["variant"] for p in grid_points))
        rank = {b: r for r, b in enumerate(coarse_first(self.params.block_sizes))}
        return sorted(grid_points, key=lambda p: (rank[p["block_size"]], kernels.index(p["variant"])))

    def point(self, grid_point) -> harness.Point:
        kernel, block, extra = grid_point["variant"], grid_point["block_size"], grid_point["param_value"]
        stream = kernel == "stream"
        return harness.Point(
            {"variant": kernel, "group": "occupancy", "direction": "device", "block_size": block,
             "elements": STREAM_ELEMENTS if stream else CHASE_THREADS, "param": "extra_registers",
             "param_value": extra, "registers_per_thread": None, "shared_bytes_per_block": None,
             "theoretical_occupancy": None},
            f"{LABELS[kernel]} · block {block}",
            2 * STREAM_ELEMENTS * 4 if stream else CHASE_THREADS * CHASE_STEPS * 4, self.timer.timer_name(),
            (kernel, block))

    def measure(self, point):
        kernel, block = point.state
        cuda, fn, dyn = self.cuda, self.fn, self.params.dynamic_shared_bytes
        resources = self.gpu.kernel_resources(fn[kernel])
        theory = occupancy(self.device, resources, block, dyn)
        if theory.blocks_per_sm == 0:
            return None  # cannot launch (e.g. too many registers for the block): nothing to measure
        point.columns.update(registers_per_thread=resources.registers_per_thread,
                             shared_bytes_per_block=resources.static_shared_bytes + dyn,
                             theoretical_occupancy=theory.occupancy)
        if kernel == "stream":
            grid = k.grid_for(STREAM_ELEMENTS, block)
            src, dst = self.src, self.dst

            def launch(s):
                fn["stream"](src, dst, np.uint64(STREAM_ELEMENTS), block=(block, 1, 1), grid=grid, shared=dyn,
                             stream=s)
            out = dst
        else:
            grid = k.grid_for(CHASE_THREADS, block)
            next_dev, out_dev = self.next_dev, self.out_dev

            def launch(s):
                fn["chase"](next_dev, out_dev, np.uint64(CHASE_THREADS), np.uint32(CHASE_STEPS),
                            block=(block, 1, 1), grid=grid, shared=dyn, stream=s)
            out = out_dev
        cuda.memset_d32(out, 0xFFFFFFFF, self.expected(kernel).size)
        timer = self.timer
        return lambda: timer.once(launch)

    def expected(self, kernel: str) -> np.ndarray:
        return self.src_host.view(np.uint32) if kernel == "stream" else self.expected_chase

    def verify(self, point) -> None:
        kernel, block = point.state
        expected = self.expected(kernel)
        got = self.readback[:expected.size]
        self.cuda.memcpy_dtoh(got, self.dst if kernel == "stream" else self.out_dev)
        verify_equal(expected, got, f"{LABELS[kernel]} (block {block})")


run = harness.runner(OccupancySweep)

_CHASE_LOCK = threading.Lock()
SLICE = 1 << 22  # nodes linked per slice of the cycle, the slices on several cores


@functools.lru_cache(maxsize=1)
def _chase_data(nodes: int, threads: int, steps: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    nxt = chase_cycle(nodes, seed)
    expected = np.arange(threads, dtype=np.uint32)
    for _ in range(steps):
        expected = nxt[expected]
    nxt.flags.writeable = expected.flags.writeable = False  # shared by every job of this process
    return nxt, expected


def chase_data() -> tuple[np.ndarray, np.ndarray]:
    """The chase's cycle and the node each thread must end on. A random cycle over 2^26 nodes takes about 3 s to
    build, and it depends on nothing but its fixed seed: built once per process (by the worker's warm-up
    as it starts), not on every Measure."""
    with _CHASE_LOCK:
        return _chase_data(CHASE_NODES, CHASE_THREADS, CHASE_STEPS, 11)


def chase_cycle(nodes: int, seed: int) -> np.ndarray:
    """next[] forming one random cycle through all nodes, so chains never settle into the cache."""
    # Linked in slices, which NumPy's indexing runs without the GIL, on several cores: 2^26 nodes linked in one
    # call took 1.3 s on 2 cores, in slices 0.5 s. (Shuffling 32-bit words gives the same cycle but is slower on
    # the GPU machine's host, 2.51 s against 1.94 s: NumPy swaps words of a pointer's size faster.)
    order = np.random.default_rng(seed).permutation(nodes).astype(np.uint32)
    nxt = np.empty(nodes, dtype=np.uint32)

    def link(lo: int) -> None:
        hi = min(lo + SLICE, nodes)
        nxt[order[lo:hi]] = order[lo + 1:hi + 1] if hi < nodes else np.append(order[lo + 1:hi], order[0])

    list(verify_pool().map(link, range(0, nodes, SLICE)))
    return nxt


def warm_up(gpu) -> None:
    """Start building the chase's cycle as the worker starts, on a thread of its own: about 3 s of host work (most
    of it without the GIL) that a first Measure of occupancy, or of the Roofline suite, in a fresh worker would
    otherwise wait for; other jobs measure meanwhile, and ``setup`` waits for the cycle only if it is not built
    yet."""
    threading.Thread(target=chase_data, name="pinpoint-chase-cycle", daemon=True).start()
