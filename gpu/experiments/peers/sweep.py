"""The peers experiment's sweep: copies between the GPUs of a ``DeviceSet`` and every GPU's host link at once (what
each variant measures, and how, is in its declaration, ``gpu/experiments/peers/__init__.py``).

Each GPU of the job gets a source and a destination of the largest size (plus a guard), its own stream, events,
stream hold and pattern checker, all made and freed with its own context current (``DeviceSet.activate``). Sources
hold one seed's pattern each (a seed per GPU); before every point the destinations it writes are poisoned with a seed
no source uses, and after its samples they are checked whole on the GPU that holds them.
"""

from __future__ import annotations

import time

import numpy as np

from gpu.core import stats
from gpu.core.errors import VerificationError
from gpu.core.units import format_bytes
from gpu.experiments import peers as declared
from gpu.experiments.order import coarse_first_along
from gpu.sweeps import harness, timing_methods
from gpu.sweeps.verify import PatternChecker

BLOCK = 256
WORD = 4
GOLDEN = 0x9E3779B9


class _Device:
    """One GPU's part of the sweep (made with its context current)."""

    def __init__(self, ordinal: int, runtime, ledger, largest: int, seed: int, host_seed: int):
        cuda = runtime.cuda
        self.ordinal, self.runtime, self.ledger, self.cuda = ordinal, runtime, ledger, cuda
        self.clock = timing_methods.StreamClock(runtime, ledger)  # its stream and events (the harness's clock)
        self.stream = self.clock.stream
        self.clock.hold()  # made now, with the device's other buffers: every sample but a single copy's is held
        self.checker = PatternChecker(runtime, ledger)
        self.copy_kernel = runtime.kernel("device_copy", "copy_bytes")
        self.copy_kernel.prepare("PPQ")
        self.chase_kernel = runtime.kernel("peers", "peer_chase")
        self.chase_kernel.prepare("PIIP")
        self.chain_kernel = runtime.kernel("peers", "chain_fill")
        self.chain_kernel.prepare("PQI")
        self.src = ledger.device_buffer(largest)
        self.dst = ledger.device_buffer(largest + declared.GUARD_BYTES)
        self.end = ledger.device_buffer(8 * runtime.sm_count)  # each walking block's end of the chain
        self.largest, self.seed, self.host_seed = largest, seed, host_seed
        self.host = None  # pinned host memory of the largest size, made at the first host point
        self.checker.fill(int(self.src), largest // WORD, seed)

    def host_buffer(self) -> tuple[np.ndarray, int]:
        """This GPU's pinned host buffer (mapped: its kernels check it in place) and its device address."""
        if self.host is None:
            self.host = self.ledger.host_buffer(self.largest + declared.GUARD_BYTES, "mapped")
        return self.host, self.host.base.get_device_pointer()

    def copy_grid(self, size: int) -> tuple[int, int]:
        vectors = size // 16
        return (max(1, min(-(-vectors // BLOCK), self.runtime.sm_count * (2048 // BLOCK) * 2)), 1)

    def release(self) -> None:
        """Drop the stream and events (their context current): the ledger frees the buffers."""
        self.clock = self.stream = self.checker = None


class PeersSweep(harness.Sweep):
    """Sizes coarse first, every variant and pair at each, so the matrix fills early."""

    # The latency chase walks from every SM in turn (nvbandwidth's figure: the mean over the chip); False walks from
    # one block on one SM, median of its samples, as PinPoint measured before (kept for the accuracy benchmark's
    # before/after, tests/benchmarks/peer_bar.py).
    CHASE_FROM_EVERY_SM = True
    CHASE_STEPS = declared.CHASE_STEPS  # loads a launch (the benchmark's before: 8192, as PinPoint walked then)

    NAME, TITLE, AXES, KEY_COLUMNS = declared.NAME, declared.TITLE, declared.AXES, declared.KEY_COLUMNS
    invalid_reasons = staticmethod(declared.invalid_reasons)

    @classmethod
    def for_devices(cls, params, ordinals):
        return declared.with_devices(params, ordinals)

    @classmethod
    def set_reasons(cls, params, gpus, limits) -> list[str]:
        return declared.set_reasons(params, gpus, limits)

    def setup(self) -> None:
        largest = max(self.params.sizes)
        base = int(time.time_ns()) & 0xFFFFFFFF
        self.poison_seed = base  # no source's seed: differs from every expected pattern in every word
        self.devices: dict[int, _Device] = {}
        used = self.params.gpu_list()
        for k, ordinal in enumerate(used, start=1):
            with self.gpus.activate(ordinal):
                self.devices[ordinal] = _Device(ordinal, self.gpus[ordinal], self.ledgers[ordinal], largest,
                                                (base + GOLDEN * k) & 0xFFFFFFFF,
                                                (base + GOLDEN * (k + len(used))) & 0xFFFFFFFF)
        for ordinal in used:
            with self.gpus.activate(ordinal):
                self.cuda.Context.synchronize()

    def close(self) -> None:
        for ordinal, device in getattr(self, "devices", {}).items():
            with self.gpus.activate(ordinal):
                device.release()
        self.devices = {}

    # --- the points -------------------------------------------------------------------------------------------------
    def order(self, grid_points):
        return coarse_first_along(grid_points, "elements")

    def point(self, grid_point):
        variant, size, method = grid_point["variant"], int(grid_point["elements"]), grid_point["method"]
        source, destination, gpus = grid_point["gpu_index"], grid_point["peer_index"], self.gpus
        columns = {"variant": variant, "elements": size, "gpu_index": source,
                   "gpu_uuid": gpus[source].facts.get("gpu_uuid"),
                   "direction": declared.DIRECTIONS.get(variant, "peer")}
        where = f"GPU {source}"
        if destination is not None:
            columns.update({"peer_index": destination, "peer_uuid": gpus[destination].facts.get("gpu_uuid"),
                            "link": gpus.link(source, destination)})
            where += f" → GPU {destination}"
        if variant.startswith("sm_"):
            columns["block_size"] = BLOCK
        return harness.Point(
            columns, f"{where} {declared.LABELS[variant]} {format_bytes(size)} {declared.METHOD_LABELS[method]}",
            declared.bytes_moved(variant, size), grid_point["timer"],
            {"variant": variant, "size": size, "method": method, "source": source, "destination": destination})

    def _writes(self, state) -> list[tuple[int, object]]:
        """(GPU that checks it, the buffer) of each destination the point writes: a GPU's ``dst``, or ``host``."""
        variant, source, destination = state["variant"], state["source"], state["destination"]
        if variant in declared.HOST_VARIANTS:
            gpus = self.params.gpu_list() if variant.endswith("_all") else [source]
            kind = "dst" if declared.DIRECTIONS[variant] == "h2d" else "host"
            return [(g, kind) for g in gpus]
        if variant == "latency":
            return []
        if variant == "ce_bidir":
            return [(destination, "dst"), (source, "dst")]
        return [(destination, "dst")]

    def _pointer(self, gpu: int, kind: str) -> int:
        device = self.devices[gpu]
        return device.host_buffer()[1] if kind == "host" else int(device.dst)

    def prepare(self, point) -> None:
        """Poison every destination the point writes (and the guard after it), load host sources, lay the chase's
        chain; the source GPU's telemetry follows the point."""
        state = point.state
        size, words = state["size"], state["size"] // WORD
        guard = declared.GUARD_BYTES // WORD
        self.telemetry = self.gpus[state["source"]].telemetry
        if state["variant"] == "latency":
            peer = self.devices[state["destination"]]
            nodes = size // declared.CHASE_STRIDE_BYTES
            with self.gpus.activate(peer.ordinal):
                peer.chain_kernel.prepared_call(((min(-(-nodes // BLOCK), 65535)), 1), (BLOCK, 1, 1), int(peer.dst),
                                                np.uint64(nodes), np.uint32(declared.CHASE_STRIDE_BYTES // 8))
                self.cuda.Context.synchronize()
            walker = self.devices[state["source"]]
            with self.gpus.activate(walker.ordinal):  # no walk's end is left from an earlier point
                self.cuda.memset_d8(walker.end, 0, 8 * walker.runtime.sm_count)
            return
        for gpu, kind in self._writes(state):
            device = self.devices[gpu]
            with self.gpus.activate(gpu):
                device.checker.poison(self._pointer(gpu, kind), words, guard, self.poison_seed)
                if state["variant"] in declared.HOST_VARIANTS and declared.DIRECTIONS[state["variant"]] == "h2d":
                    device.checker.fill(device.host_buffer()[1], words, device.host_seed)
                self.cuda.Context.synchronize()

    # --- issuing and timing -----------------------------------------------------------------------------------------
    def _issue(self, variant: str, source: int, destination: int | None, size: int) -> tuple[int, callable]:
        """(the GPU whose stream runs it, a function queueing one copy on that stream) for a variant's copy source →
        destination (for host variants: the GPU's own host copy)."""
        cuda = self.cuda
        if variant in declared.HOST_VARIANTS:
            device = self.devices[source]
            host = device.host_buffer()[0][:size // WORD]
            if declared.DIRECTIONS[variant] == "h2d":
                return source, lambda stream: cuda.memcpy_htod_async(device.dst, host, stream)
            return source, lambda stream: cuda.memcpy_dtoh_async(host, device.src, stream)
        a, b = self.devices[source], self.devices[destination]
        if variant in ("ce_read", "ce_bidir"):  # the destination's engine pulls
            return destination, lambda stream: cuda.memcpy_peer_async(b.dst, a.src, size, b.runtime.context,
                                                                      a.runtime.context, stream)
        if variant == "ce_write":  # the source's engine pushes
            return source, lambda stream: cuda.memcpy_peer_async(b.dst, a.src, size, b.runtime.context,
                                                                 a.runtime.context, stream)
        runner = b if variant == "sm_read" else a
        grid = runner.copy_grid(size)
        return runner.ordinal, lambda stream: runner.copy_kernel.prepared_async_call(
            grid, (BLOCK, 1, 1), stream, int(a.src), int(b.dst), np.uint64(size))

    def _lanes(self, state) -> list[timing_methods.Lane]:
        """The copies a point runs at once, its own first: each on its GPU's stream, that GPU current."""
        variant, source, destination, size = state["variant"], state["source"], state["destination"], state["size"]
        copies = [self._issue(variant, source, destination, size)]
        if variant == "ce_bidir":
            copies.append(self._issue(variant, destination, source, size))
        if variant.endswith("_all"):
            copies += [self._issue(variant, g, None, size) for g in self.params.gpu_list() if g != source]
        return [timing_methods.Lane(self.devices[gpu].clock, issue, lambda gpu=gpu: self.gpus.activate(gpu))
                for gpu, issue in copies]

    def measure(self, point):
        """A single copy: events around it (``single``); else the harness's ``per_stream`` method: every stream's
        copies queued behind its own hold and released together, the point's own stream's time the sample (one
        stream: a held batch), as many copies a sample as ``copies_per_sample`` calibrates; a sample is their mean,
        the profile's min_time_s counting the means, as the recordings were measured."""
        state = point.state
        if state["variant"] == "latency":
            return self._latency(point)
        lanes = self._lanes(state)
        if state["method"] == "single" and len(lanes) == 1:
            lane = lanes[0]

            def once() -> float:
                with lane.activate():
                    return lane.clock.once(lane.issue)

            return once
        if state["method"] == "single":
            return lambda: timing_methods.per_stream(lanes)[0]
        sample = timing_methods.PerCopy(lambda n: timing_methods.per_stream(lanes, n)[0],
                                        harness.copies_per_sample(lambda n: timing_methods.per_stream(lanes, n)[0]),
                                        counts_copies=False)
        point.columns.update({"copies_per_sample": sample.copies})
        return sample

    def _latency(self, point):
        """The chase: one launch a sample, ``CHASE_STEPS`` loads by one block of a grid of one block per SM (the others
        leave at once), the walking block rotating over the grid, in whole rotations: the figure is the mean per load
        over every SM's walk, nvbandwidth's ``device_to_device_latency_sm``. Each block stores its walk's end in a
        slot of its own, so every walk is checked.

        The chase keeps its own clock rather than a harness timing method: its time is taken on the device (events
        around one held launch, divided by the loads it walks) and its samples are whole rotations of the walking
        block over the SMs (``chase_summary``), not the profile's sampling loop over one repeated operation."""
        state = point.state
        walker, peer = self.devices[state["source"]], self.devices[state["destination"]]
        steps = self.CHASE_STEPS
        point.columns.update({"loads_per_sample": steps})
        blocks = walker.runtime.sm_count if self.CHASE_FROM_EVERY_SM else 1

        def launch(block: int) -> float:
            self.telemetry.sample()  # the harness's reading before a sample (at most one every 50 ms)
            with self.gpus.activate(walker.ordinal):
                ms = walker.clock.timer.time(lambda: walker.chase_kernel.prepared_async_call(
                    (blocks, 1), (1, 1, 1), walker.stream, int(peer.dst), np.uint32(steps), np.uint32(block),
                    int(walker.end) + 8 * block), walker.clock.hold())  # the walking block's own slot
            return ms / steps

        if not self.CHASE_FROM_EVERY_SM:
            return lambda: launch(0)
        return chase_summary(launch, blocks, steps, self.profile)

    # --- checks -------------------------------------------------------------------------------------------------------
    def verify(self, point) -> None:
        state = point.state
        words = state["size"] // WORD
        if state["variant"] == "latency":
            self._verify_chase(point)
            return
        for gpu, kind in self._writes(state):
            device = self.devices[gpu]
            if kind == "host":  # a GPU → host copy: the host holds that GPU's source pattern
                expected = device.seed
            elif state["variant"] in declared.HOST_VARIANTS:
                expected = device.host_seed
            else:  # a peer copy into this GPU: the other GPU of the pair is its source
                other = state["source"] if gpu == state["destination"] else state["destination"]
                expected = self.devices[other].seed
            with self.gpus.activate(gpu):
                device.checker.check(self._pointer(gpu, kind), words, expected,
                                     f"{point.label} (destination on GPU {gpu})",
                                     declared.GUARD_BYTES // WORD, self.poison_seed)

    def _verify_chase(self, point) -> None:
        state = point.state
        walker, peer = self.devices[state["source"]], self.devices[state["destination"]]
        nodes = state["size"] // declared.CHASE_STRIDE_BYTES
        expected = int(peer.dst) + (self.CHASE_STEPS % nodes) * declared.CHASE_STRIDE_BYTES
        blocks = walker.runtime.sm_count if self.CHASE_FROM_EVERY_SM else 1
        got = np.empty(walker.runtime.sm_count, np.uint64)
        with self.gpus.activate(walker.ordinal):
            self.cuda.memcpy_dtoh(got, walker.end)
        wrong = [b for b in range(blocks) if int(got[b]) != expected]
        if wrong:
            raise VerificationError(f"{point.label}: {len(wrong)} of {blocks} walks ended elsewhere (block {wrong[0]} "
                                    f"at 0x{int(got[wrong[0]]):x}, expected 0x{expected:x})")


def chase_summary(launch, blocks: int, steps: int, profile: stats.Profile) -> stats.Summary:
    """The chase's figure from whole rotations of ``launch(block)`` (ms per load of one launch of ``steps`` loads
    walked by ``block``) over ``blocks``: after one warm-up launch, as many rotations as the profile's ``min_time_s``
    of samples asks (at least one, and none begun past its ``timeout_s``). ``median_ms`` is the mean over every
    launch, as nvbandwidth sums its launches' times and divides by the loads (each launch walks as many), so every SM
    weighs the same; the samples are the launches (their spread is the SMs'), and ``cv`` the mean's relative standard
    error over them."""
    launch(0)  # the first launch pays one-time costs (the peer's TLB entries, its L2 filled with the chain)
    began = time.perf_counter()
    samples: list[float] = []
    while True:
        samples.extend(launch(block) for block in range(blocks))
        spent = time.perf_counter() - began
        enough = sum(samples) / 1e3 * steps >= profile.min_time_s
        if enough or spent * (1 + blocks / len(samples)) > profile.timeout_s:  # done, or the next rotation overruns
            break
    values = np.asarray(samples)
    error = float(values.std(ddof=1) / values.mean() / np.sqrt(values.size)) if values.size > 1 else float("nan")
    return stats.Summary(median_ms=float(values.mean()), min_ms=float(values.min()), max_ms=float(values.max()),
                         cv=error, samples=int(values.size), stop_reason="converged" if enough else "timeout",
                         samples_ms=[float(v) for v in values])


run = harness.runner(PeersSweep)
