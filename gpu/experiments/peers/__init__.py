"""Copies between the GPUs of one node: the peer-to-peer matrix (copy engines, SM copies, both directions at once,
GPU-to-GPU latency) and every GPU's host link used at once, as nvbandwidth measures them.

For every ordered pair (source → destination) of the job's GPUs:

* ``ce_read`` – ``cuMemcpyPeerAsync`` issued on the destination's stream: the destination's copy engine pulls
  (nvbandwidth ``device_to_device_memcpy_read_ce``);
* ``ce_write`` – the same copy issued on the source's stream: the source's engine pushes (``…_write_ce``);
* ``sm_read`` / ``sm_write`` – a grid-stride copy of 16-byte vectors (``copy_bytes`` of device_copy/device_copy.cu, four
  loads in flight per thread) over peer access, run on the destination (reading the peer) or on the source (writing
  the peer) (``…_read_sm`` / ``…_write_sm``);
* ``ce_bidir`` – both directions of the pair at once, each an engine copy on its destination's stream, released
  together; one row per direction, each timed by its own events, so each has its own rate
  (``device_to_device_bidirectional_memcpy_read_ce``);
* ``latency`` – one thread on the source walks a chain of pointers in the peer's memory (gpu/experiments/peers/peers.cu
  ``peer_chase``), as nvbandwidth's ``device_to_device_latency_sm``: the chain's nodes are 8-byte pointers 128 bytes
  apart (``next = (i + 16) mod n``), a walk starts at the buffer's first node and takes ``CHASE_STEPS`` dependent
  loads a launch. As nvbandwidth, a launch has a block per SM and only one block walks; the walking block rotates
  over the SMs from launch to launch, in whole rotations, so the figure is the mean over every SM's place on the chip
  (walking from one SM only read 2.5–3 % slower than nvbandwidth). A sample is one launch, the stream held while it is
  queued (no L2 flush: the memory walked is the peer's); its time ÷ the steps is the sample, and the row's
  ``median_ms`` is **per access**, the mean over the rotations' launches (``cv``: that mean's relative standard
  error; ``bytes`` = 8, one pointer; ``loads_per_sample`` = the loads of one launch). Every walk's end is checked.

And for every GPU of the job, each with its own pinned host buffer:

* ``h2d_all`` / ``d2h_all`` – every GPU copying to (from) the host at once, one row per GPU, each its own rate
  (nvbandwidth ``host_to_all_memcpy_ce`` / ``all_to_host_memcpy_ce``), beside ``h2d_alone`` / ``d2h_alone`` – each
  GPU alone, in the same sitting, so a host link that two GPUs share shows as the gap between the two.

Timing methods, as the Transfers and device-copy experiments have them (the ``timer`` column names the one a row
used): ``single`` – CUDA events around one copy (timer ``cuda_event``); ``batched`` – N back-to-back copies between
two events, the stream held while Python queues them (``cuda_event_batched_held``), N chosen per point so a sample
lasts at least 1 ms (at most 512), kept in ``copies_per_sample``. Where several streams run at once (bidirectional, all
GPUs) each has its own hold and events, released together.

On a node of more GPUs than ``whole_matrix_gpus`` (4 by default) the other pair copies are sampled
(``Params.pairs_for``): ``ce_read`` keeps every ordered pair, the rest take each GPU to the next and to the one half
the node away.

Defaults: the matrix at one size (``MATRIX_SIZE``, batched; ``MATRIX_VARIANTS``), what the Peers page measures first
and the health suite measures; ``FULL_SWEEP`` adds every size, the SM copies and single copies.

Bytes are counted once: ``bytes`` = the copy's size (``elements``), as nvbandwidth counts peer and host copies.
A row names the GPU it measured: ``gpu_index`` / ``gpu_uuid`` the source (for ``latency``: the GPU that walks,
for host rows: the GPU), ``peer_index`` / ``peer_uuid`` the destination (the memory walked), and ``link`` what joins
them (from NVML: "NVLink 4 ×18", a PCIe path; "through host (no peer access)" where the driver refuses peer access:
engine copies then go through host memory, and SM copies and the latency chase are refused with a reason).

Every destination is verified whole on the GPU that holds it (``PatternChecker``): sources hold a position-dependent
pattern, destinations and a guard after them are poisoned with another seed's before each point and checked after.

This module is the declaration only (no GPU code); the sweep is ``sweep.py`` beside it, which the worker loads.
"""

from __future__ import annotations

import dataclasses
import re

from gpu.core.units import GiB, KiB, MiB, format_bytes
from gpu.experiments import axes, grid
from gpu.experiments.page import PageEntry

NAME = "peers"
# Registration (gpu/experiments/registry.py): the runner's subcommand, the page, the place in lists (after
# device_copy, 4.5).
COMMAND, ORDER, PAGE = "peers", 4.6, "pages/peers.py"
PAGE_ENTRY = PageEntry(PAGE, "Peers: GPU to GPU", "peers", ":material/hub:",
                        "Peers: every GPU of a node against the others, over NVLink or PCIe, and each GPU's host link",
                        place=8)
HELP = "copies between the GPUs of a node: copy-engine and SM peer copies, both ways at once, GPU-to-GPU latency, " \
       "and every GPU's host link at once"
TITLE = "Peer-to-peer: copies between GPUs"
USES_NVLINK = True  # its copies cross the node's links: NVLink errors during a point are among its causes
MIN_GPUS = 2  # a pair at least: the runner, the app and fleets give it a device set (gpu.core.devices.choose_set)
PAIR_VARIANTS = ("ce_read", "ce_write", "sm_read", "sm_write", "ce_bidir", "latency")
HOST_VARIANTS = ("h2d_all", "d2h_all", "h2d_alone", "d2h_alone")
VARIANTS = PAIR_VARIANTS + HOST_VARIANTS
LABELS = {"ce_read": "copy engine, destination pulls (cuMemcpyPeerAsync)",
          "ce_write": "copy engine, source pushes (cuMemcpyPeerAsync)",
          "sm_read": "SM copy on the destination (reads the peer)",
          "sm_write": "SM copy on the source (writes the peer)",
          "ce_bidir": "copy engines, both directions at once", "latency": "pointer chase in the peer's memory",
          "h2d_all": "host → GPU, every GPU at once", "d2h_all": "GPU → host, every GPU at once",
          "h2d_alone": "host → GPU, this GPU alone", "d2h_alone": "GPU → host, this GPU alone"}
# The same variants in the words of a matrix, a chart's legend or a menu, where the API behind each is not room-worthy.
SHORT_LABELS = {"ce_read": "copy engine, destination pulls", "ce_write": "copy engine, source pushes",
                "sm_read": "SM kernel, destination reads", "sm_write": "SM kernel, source writes",
                "ce_bidir": "copy engine, both directions at once", "latency": "latency (pointer chase)",
                "h2d_alone": "host → GPU, alone", "h2d_all": "host → GPU, every GPU at once",
                "d2h_alone": "GPU → host, alone", "d2h_all": "GPU → host, every GPU at once"}
# What each pair variant needs of peer access: (the GPU whose access is needed, the GPU whose memory it touches).
NEEDS_PEER_ACCESS = {"sm_read": ("destination", "source"), "sm_write": ("source", "destination"),
                     "latency": ("source", "destination")}
DIRECTIONS = {"h2d_all": "h2d", "h2d_alone": "h2d", "d2h_all": "d2h", "d2h_alone": "d2h"}
METHODS = ("single", "batched")
METHOD_LABELS = {"single": "single copy", "batched": "batched"}
TIMERS = {"single": "cuda_event", "batched": "cuda_event_batched_held"}
METHOD_OF_TIMER = {timer: method for method, timer in TIMERS.items()}
LATENCY_TIMER = "cuda_event_held"  # one held launch per sample, no L2 flush (the chain is in the peer's memory)
KEY_COLUMNS = ["variant", "gpu_index", "peer_index", "elements", "timer"]  # the order of a key in Params.points()
# What rows recorded before schema version 11 named in ``param`` (a detail of how samples were made, or no
# axis), and its column now.
LEGACY_PARAMS = {"copies per sample": "copies_per_sample", "loads per sample": "loads_per_sample"}
SHOW_COLUMNS = ["variant", "gpu_index", "peer_index", "elements", "timer", "link"]
SIZE_COLUMN = "elements"  # a copy's size in bytes (the latency chase: its buffer)
CHASE_STRIDE_BYTES = 128  # nvbandwidth's strideLen: 16 pointers, one 128-byte line per node
# Dependent loads a launch: ~1.7 ms at ~0.83 µs, so a launch's few µs of start-up weigh ~0.2 % and a rotation over 132
# SMs takes ~0.25 s (nvbandwidth: 1,000,000 loads over its 132 launches, ~7,600 each).
CHASE_STEPS = 2048
# A node of more GPUs than ``whole_matrix_gpus`` (default WHOLE_MATRIX_GPUS) is measured on a sampled plan: this copy
# on every ordered pair, at every size asked (a slow link, in either direction, shows in it), and the other pair
# copies on a sample of the pairs whose count grows with the GPUs, not their square: each GPU to the next
# (i → i + 1) and to the one half the node away (i → i + n/2). An 8-GPU node then measures 104 pair points, not 224.
EVERY_PAIR_VARIANT = "ce_read"
WHOLE_MATRIX_GPUS = 4
GUARD_BYTES = 256  # poisoned bytes after each destination: a copy that writes past its end fails
DEVICE_RESERVE_BYTES = 512 * 1024**2
MIN_BYTES, MAX_BYTES = 4 * KiB, 256 * GiB
# The first answer (the page's live Measure, the health suite): the matrix nvbandwidth prints, at one size, each copy
# batched as nvbandwidth times it; every pair's copy engine both ways, both directions at once, the latency chase and
# every GPU's host link. The full sweep (every size, variant and method) is FULL_SWEEP, one control away on the page.
MATRIX_SIZE = 256 * MiB
MATRIX_VARIANTS = ("ce_read", "ce_write", "ce_bidir", "latency", *HOST_VARIANTS)
SWEEP_SIZES = [4 * KiB * 4**i for i in range(10)]  # 4 KiB … 1 GiB in ×4 steps
FULL_SWEEP = {"sizes": SWEEP_SIZES, "variants": list(VARIANTS), "methods": list(METHODS)}
MAX_POINTS = 4000
SHORT_COPY_MS = 0.02  # below ~20 µs a copy's time is its issue cost, not the link's
PAIR = re.compile(r"^\s*(\d{1,3})\s*(?:-|>|→|to)\s*(\d{1,3})\s*$")
AXES = (
    axes.Axis("sizes", "copy sizes", [MATRIX_SIZE], kind="sizes", one="size", low=MIN_BYTES, high=MAX_BYTES,
              multiple_of=CHASE_STRIDE_BYTES, unit="bytes",
              why="the latency chain's nodes are 128 bytes apart, as nvbandwidth's; the check pattern is 4-byte words",
              help="sizes: a list (4KiB,256MiB) and/or ranges of powers of two (4KiB:1GiB), multiples of 128 B"),
    axes.Axis("variants", "copies", list(MATRIX_VARIANTS), values=VARIANTS, one="copy", order="declared",
              help="comma-separated: " + ", ".join(VARIANTS)),
    axes.Axis("methods", "timing methods", ["batched"], values=METHODS,
              help="comma-separated timing methods: single (one copy per sample), batched (back-to-back copies, "
                   ">= 1 ms a sample); the latency chase is one launch a sample either way"),
    axes.Axis("gpus", "GPUs", [], kind="ints", one="GPU", low=0, high=1023, order="given", may_be_empty=True,
              help="comma-separated GPU indices of the worker's set to measure between (default: all of them)"),
    axes.Axis("pairs", "GPU pairs", [], kind="words", one="pair", may_be_empty=True,
              help="ordered pairs source-destination, e.g. 0-1,1-0 (default: every ordered pair of the GPUs)"),
    axes.Axis("whole_matrix_gpus", "GPUs measured on every pair", WHOLE_MATRIX_GPUS, kind="int", low=2, high=1024,
              help="the largest node whose every pair gets every copy; on more GPUs the copy engine's pull takes every "
                   "ordered pair and the other copies a sample (each GPU to the next and to the one half the node "
                   "away), so a node's time grows with its GPUs, not their square (named pairs are measured whole)"),
)


def parse_pair(text: str) -> tuple[int, int] | None:
    """(source, destination) of "0-1" ("0>1", "0→1", "0to1"), or None."""
    found = PAIR.match(str(text))
    return (int(found.group(1)), int(found.group(2))) if found else None


def places(params, point) -> list[tuple[int, int | None]]:
    """Where a variant is measured: each GPU of the job for a host variant (no peer), else its ordered pairs."""
    if point["variant"] in HOST_VARIANTS:
        return [(gpu, None) for gpu in params.gpu_list()]
    return params.pairs_for(point["variant"])


# Each variant, at each of its places, each size, each method; the latency chase is one launch a sample whatever the
# methods asked (one point, method "single", keyed by LATENCY_TIMER).
GRID = grid.Grid([
    grid.Coordinate("variant", axis="variants"),
    grid.Coordinate(("gpu_index", "peer_index"), values=places),
    grid.Coordinate("elements", axis="sizes"),
    grid.Coordinate("method", key=False,
                    values=lambda params, point: ["single"] if point["variant"] == "latency" else params.methods),
    grid.Coordinate("timer", derive=lambda point: LATENCY_TIMER if point["variant"] == "latency"
                    else TIMERS[point["method"]]),
])


class Params(axes.parameters(AXES, grid=GRID, key_columns=KEY_COLUMNS)):
    def pair_list(self) -> list[tuple[int, int]]:
        """The ordered pairs measured: those named, else every ordered pair of ``gpus`` (sources in order)."""
        if self.pairs:
            named = [parse_pair(p) for p in self.pairs]
            return list(dict.fromkeys(p for p in named if p is not None and p[0] != p[1]))
        return [(a, b) for a in self.gpus for b in self.gpus if a != b]

    def pairs_for(self, variant: str) -> list[tuple[int, int]]:
        """The ordered pairs ``variant`` is measured on: every one of ``pair_list``, or on a node of more than
        ``whole_matrix_gpus`` (without named pairs) for all but ``EVERY_PAIR_VARIANT`` each GPU to the next and to the
        one half the node away."""
        every = self.pair_list()
        if self.pairs or variant == EVERY_PAIR_VARIANT or len(self.gpu_list()) <= self.whole_matrix_gpus:
            return every
        return sampled(self.gpu_list(), every)

    def gpu_list(self) -> list[int]:
        """The GPUs the job touches: ``gpus``, else those its pairs name."""
        if self.gpus:
            return list(self.gpus)
        return list(dict.fromkeys(g for pair in self.pair_list() for g in pair))


parse_params = axes.parser(Params)


def sampled(gpus: list[int], every: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The sample of ``every`` ordered pair of ``gpus`` (n of them): each GPU to the next (i → i + 1 mod n) and to the
    one half the node away (i → i + n/2): 2n pairs, or n where the two coincide (2 GPUs: both pairs), in the order of
    ``every``."""
    n = len(gpus)
    chosen = {(gpus[i], gpus[(i + shift) % n]) for shift in dict.fromkeys((1, n // 2)) if shift for i in range(n)}
    return [pair for pair in every if pair in chosen]


def with_devices(params: Params, ordinals) -> Params:
    """``params`` with the GPUs named: those of the worker's set (``ordinals``) where neither GPUs nor pairs are."""
    if params.gpus or params.pairs:
        return params
    return dataclasses.replace(params, gpus=[int(o) for o in ordinals])


def invalid_reasons(params: Params, limits) -> list[str]:
    """Why these parameters cannot run (empty when they can): the axes' checks and the pairs' spelling. What needs
    the device set (how many GPUs, which exist, their memory and peer access) is ``set_reasons``'."""
    reasons = axes.reasons(params, limits)
    for text in params.pairs:
        pair = parse_pair(text)
        if pair is None:
            reasons.append(f"pair '{str(text)[:40]}' is not source-destination GPU indices, e.g. 0-1")
        elif pair[0] == pair[1]:
            reasons.append(f"pair {text} names GPU {pair[0]} twice; a pair needs two different GPUs")
    n_points = GRID.count(params) if not reasons else 0
    if n_points > MAX_POINTS:
        reasons.append(f"{n_points} points requested; at most {MAX_POINTS} per run")
    return reasons


def device_bytes_needed(params: Params) -> int:
    """Per GPU: a source and a destination of the largest size, and the guard after the destination."""
    return 2 * max(params.sizes, default=0) + GUARD_BYTES


def set_reasons(params: Params, gpus, limits: dict) -> list[str]:
    """Why ``params`` cannot run on the device set ``gpus`` (its ``ordinals``, ``name(i)``, ``can_peer(a, b)`` and
    ``peer_refusals``; ``limits`` by ordinal), each reason naming the GPU: one GPU in the set, a GPU it lacks, fewer
    than two GPUs named, memory short on any GPU, an SM copy or the latency chase where peer access is refused."""
    ordinals = list(gpus.ordinals)
    if len(ordinals) < 2:
        return [f"peers needs two GPUs; this set has {len(ordinals)}: " + ", ".join(gpus.name(o) for o in ordinals)]
    named = list(dict.fromkeys([*params.gpus, *(g for pair in params.pair_list() for g in pair)]))
    missing = [g for g in named if g not in ordinals]
    if missing:
        have = ", ".join(gpus.name(o) for o in ordinals)
        return [f"GPU {g} is not in this set, which has {have}" for g in missing]
    used = params.gpu_list()
    if len(used) < 2 or not params.pair_list() and any(v in PAIR_VARIANTS for v in params.variants):
        return [f"peers needs two GPUs; these parameters name {len(used)}: " + ", ".join(gpus.name(o) for o in used)]
    reasons = []
    largest = max(params.sizes)
    for gpu in used:
        free = limits[gpu].free_device_bytes
        room = free - DEVICE_RESERVE_BYTES
        if device_bytes_needed(params) > room:
            needed = format_bytes(device_bytes_needed(params))
            reasons.append(f"{gpus.name(gpu)}: size {format_bytes(largest)} needs {needed} of device memory (source "
                           f"and destination); {format_bytes(free)} is free and "
                           f"{format_bytes(DEVICE_RESERVE_BYTES)} is kept in reserve, so at most "
                           f"{format_bytes(max(room, 0))}")
    host = [v for v in params.variants if v in HOST_VARIANTS]
    if host:
        pinned = largest * len(used)
        budget = limits[used[0]].pinned_budget_bytes
        if pinned > budget:
            reasons.append(f"host copies of {format_bytes(largest)} on {len(used)} GPUs need {format_bytes(pinned)} of "
                           f"pinned memory, over the budget of {format_bytes(budget)} (PINPOINT_PINNED_BUDGET_BYTES)")
    for variant, (who, whose) in NEEDS_PEER_ACCESS.items():
        if variant not in params.variants:
            continue
        for source, destination in params.pair_list():
            ends = {"source": source, "destination": destination}
            if not gpus.can_peer(ends[who], ends[whose]):
                refusal = gpus.peer_refusals.get((ends[who], ends[whose]), "peer access is not enabled")
                reasons.append(f"{variant} from GPU {source} to GPU {destination} needs peer access from "
                               f"{gpus.name(ends[who])} to GPU {ends[whose]}'s memory: {refusal}")
    return reasons


def crosses_nvlink(columns: dict) -> bool:
    """A pair variant's data goes from GPU to GPU (over NVLink where the pair has it); a host variant's goes over each
    GPU's host link, so NVLink's error counters name no cause of its points (the harness reads them only for points
    that cross)."""
    return columns.get("variant") in PAIR_VARIANTS


def bytes_moved(variant: str, size: int) -> int:
    """Bytes counted once, as nvbandwidth counts them: a copy's size; the latency chase: one 8-byte pointer (its
    ``median_ms`` is per access)."""
    return 8 if variant == "latency" else int(size)


def point_label(row) -> str:
    """A point in words: 'GPU 0 → GPU 1 ce_read 256 MiB batched', 'GPU 1 h2d_all 1 GiB single'; without a GPU
    (the same copy over every pair, as the Fleet page's link matrix shows it) 'ce_read 256 MiB batched'."""
    gpu, peer = row.get("gpu_index"), row.get("peer_index")
    try:
        where = "" if gpu is None or gpu != gpu else \
            f"GPU {int(gpu)}" + (f" → GPU {int(peer)}" if peer is not None and peer == peer else "") + " "
    except (TypeError, ValueError):
        where = "GPU ? "
    method = METHOD_OF_TIMER.get(str(row.get("timer")), "")
    return f"{where}{row['variant']} {format_bytes(row['elements'])}" + (f" {method}" if method else "")


def figure_is_mean(row) -> bool:
    """Whether a row's ``median_ms`` may be the mean of its ``samples_ms`` rather than their median (the import
    contract reads it): the latency chase's figure is the mean over every SM's launch, as nvbandwidth's; its rows
    recorded before it walked from every SM hold the median of one SM's."""
    return row.get("variant") == "latency"


def noise_kind(row) -> str | None:
    """Compare's kind: host copies follow the generic rule (pinned, small copy); the chase and peer copies of at
    least ``SHORT_COPY_MS`` are device work (``kernel``), shorter copies their issue cost (``small copy``)."""
    if row.get("variant") in HOST_VARIANTS:
        return None
    if row.get("variant") == "latency":
        return "kernel"
    return "small copy" if float(row.get("median_ms") or 0) < SHORT_COPY_MS else "kernel"

