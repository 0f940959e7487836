"""Host-memory latency: one GPU thread chasing a chain of indices through pinned host memory mapped into the
device's address space (zero-copy: every load crosses PCIe) against the same chase through device memory, at a few
working-set sizes.

The chain is one random cycle through the working set's nodes, one 8-byte index every 256 bytes (neighbouring nodes
never share a cache line), so each load depends on the one before and the walk visits every node before it repeats:
a step costs one whole access to wherever the chain lives, or to the cache that holds it when it fits one. This is
nvbandwidth's ``host_device_latency_sm`` pointer chase, with indices instead of pointers so one chain serves both
memories (``gpu/experiments/host_latency/host_latency.cu``).

A sample is one launch of one thread, timed by the kernel timer: the L2 cache flushed first (every sample starts
each walk cold, as a sample always walks from the same node: without the flush a chain of any size would answer
from L2 after the first sample), the stream held while the launch is queued, CUDA events around it. A chain that
fits a cache is walked round and round within the sample, so small working sets show the cache's latency and large
ones the memory's. Steps per sample (``elements``) are chosen per memory so that a sample lasts milliseconds: the
launch's own microsecond is under 1 % of it at 256 MiB.
ns per load = sample ÷ steps. Rows: ``variant`` (mapped / device), ``working_set_bytes`` the working set in bytes,
``bytes`` the bytes loaded (8 per step). The walk's end is checked against the same walk on the host.
"""

from __future__ import annotations

import numpy as np

from gpu.core.units import GiB, KiB, MiB, format_bytes
from gpu.experiments import _kernels as k
from gpu.experiments import axes, grid

NAME = "host_latency"
# Registration (gpu/experiments/registry.py): the runner's subcommand, the page, the place in lists.
COMMAND, ORDER, PAGE = "host-latency", 9, "pages/memory_modes.py"
HELP = "one GPU thread chasing pointers through mapped pinned host memory vs device memory"
BYTE_LABELS = True  # Compare writes its sizes (bytes, working_set_bytes) as sizes
TITLE = "Host-memory latency: a pointer chase over PCIe vs in device memory"
VARIANTS = ("mapped", "device")
LABELS = {"mapped": "pinned host memory, mapped (zero-copy)", "device": "device memory"}
KEY_COLUMNS = ["variant", "working_set_bytes"]
# What rows recorded before schema version 11 named their coordinate (``param``), and its column now.
LEGACY_PARAMS = {"working set": "working_set_bytes"}
SHOW_COLUMNS = ["variant", "working_set_bytes"]
NODE_BYTES = 256
STEPS = {"mapped": 4096, "device": 16384}  # ~5 ms a sample over PCIe at ~1.2 µs; 1–12 ms on the device
DEFAULT_SIZES = [4 * KiB, 256 * KiB, 16 * MiB, 256 * MiB]
MIN_SIZE, MAX_SIZE = 2 * NODE_BYTES, 1 * GiB
AXES = (
    axes.Axis("sizes", "working sets", DEFAULT_SIZES, kind="sizes", low=MIN_SIZE, high=MAX_SIZE,
              multiple_of=NODE_BYTES, unit="bytes",
              help="comma-separated working-set sizes, multiples of 256 B (512 B … 1 GiB)"),
    axes.Axis("variants", "memories", list(VARIANTS), values=VARIANTS, one="memory",
              help="comma-separated: mapped, device"),
)


# Each memory, each working set (``working_set_bytes``), measured in this order.
GRID = grid.Grid([grid.Coordinate("variant", axis="variants"), grid.Coordinate("working_set_bytes", axis="sizes")])


class Params(axes.parameters(AXES, grid=GRID, key_columns=KEY_COLUMNS)):
    pass


parse_params = axes.parser(Params)


def invalid_reasons(params: Params, limits) -> list[str]:
    reasons = axes.reasons(params, limits)
    return reasons or memory_reasons(params, limits)


def memory_reasons(params: Params, limits) -> list[str]:
    """What can change between the check and the run: whether the buffers fit in the memory free now."""
    largest = max(params.sizes)
    reasons = k.memory_reasons(largest, limits, f"a {format_bytes(largest)} chain")
    if "mapped" in params.variants and limits is not None and largest > limits.pinned_budget_bytes:
        reasons.append(f"working set {format_bytes(largest)} is over the pinned-memory budget of "
                       f"{format_bytes(limits.pinned_budget_bytes)} (PINPOINT_PINNED_BUDGET_BYTES sets it)")
    return reasons


def bytes_moved(variant: str) -> int:
    """The bytes a sample loads: one 8-byte index per step."""
    return 8 * STEPS[variant]


def chain_for(size: int, seed: int) -> tuple[np.ndarray, int, np.ndarray]:
    """(chain, start, order): a ``size``-byte array of uint64 whose node slots (every NODE_BYTES) hold the index of
    the next node's slot, in one random cycle through all nodes; ``order`` is the cycle, from ``start``."""
    stride = NODE_BYTES // 8
    nodes = size // NODE_BYTES
    order = np.random.default_rng(seed).permutation(nodes).astype(np.uint64) * np.uint64(stride)
    chain = np.zeros(size // 8, np.uint64)
    chain[order] = np.roll(order, -1)
    return chain, int(order[0]), order
