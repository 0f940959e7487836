"""Occupancy, measured: a block-size sweep of a memory-bound and a latency-bound kernel.

``stream`` copies one float per thread (memory-bound); ``chase`` follows a chain of dependent loads
through a random cycle far larger than L2 (latency-bound: only more resident warps hide the latency).
A dynamic shared-memory "spoiler" (as gpu-benches does) caps the blocks per SM of both, and register
pressure (``chase`` rebuilt with EXTRA_REGS values held live across its load chain) caps the latency-bound
one's, so occupancy is the variable. The memory-bound copy gets no register pressure: filling registers
costs instructions that, in a one-element-per-thread copy, would outweigh the copy itself. Each row carries the
kernel's real register count and shared memory and the theoretical occupancy from ``gpu.core.occupancy``.
Bytes: stream reads and writes 4 bytes per element; chase counts 4 bytes per dependent load.
"""

from __future__ import annotations

from gpu.experiments import _kernels as k
from gpu.experiments import axes
from gpu.experiments.grid import Coordinate, Grid
from gpu.experiments.page import PageEntry

NAME = "occupancy"
# Registration (gpu/experiments/registry.py): the runner's subcommand, the page, the place in lists.
COMMAND, ORDER, PAGE = "occupancy", 4, "pages/occupancy.py"
PAGE_ENTRY = PageEntry(PAGE, "Occupancy", "occupancy", ":material/bar_chart:",
                        "Occupancy: calculator and measurement", place=4)
HELP = "block-size sweep of a memory-bound and a latency-bound kernel"
EXPAND = ("extra_registers", "dynamic_shared_bytes")
KERNELS = ("stream", "chase")
LABELS = {"stream": "memory-bound: copy", "chase": "latency-bound: dependent loads"}
EXTRA_REGS = (0, 32, 64, 128)
KEY_COLUMNS = ["variant", "block_size", "param_value", "shared_bytes_per_block"]
STREAM_ELEMENTS = 1 << 26
CHASE_NODES = 1 << 26
CHASE_THREADS = 1 << 20
CHASE_STEPS = 32
TITLE = "Occupancy: calculator and measurement"
AXES = (
    k.block_sizes_axis(range(32, 1025, 32)),
    axes.Axis("kernels", "kernels", list(KERNELS), values=KERNELS),
    axes.Axis("extra_registers", "extra registers", 0, kind="int", one="register pressure", values=EXTRA_REGS,
              unit="registers", help="comma-separated: 0, 32, 64, 128 (one run each)"),
    # Its upper limit is the device's (the per-block opt-in maximum, less the kernel's static shared memory).
    axes.Axis("dynamic_shared_bytes", "dynamic shared memory", 0, kind="int", low=0, unit="bytes",
              help="comma-separated bytes of spoiler shared memory (one run each)", cli_flag="--dynamic-shared"),
)


# Each kernel at every block size; the register pressure (param_value) is the chase's alone (see the module
# docstring), the spoiler's shared memory every point's.
GRID = Grid([Coordinate("variant", axis="kernels"), Coordinate("block_size", axis="block_sizes"),
             Coordinate("param_value", values=lambda params, point: [
                 params.extra_registers if point["variant"] == "chase" else 0]),
             Coordinate("shared_bytes_per_block", axis="dynamic_shared_bytes")])


class Params(axes.parameters(AXES, grid=GRID, key_columns=KEY_COLUMNS)):
    pass


parse_params = axes.parser(Params)


def invalid_reasons(params: Params, limits, max_dynamic_shared: int = 227 * 1024) -> list[str]:
    reasons = axes.reasons(params, limits) + shared_memory_reasons(params, max_dynamic_shared)
    return reasons or memory_reasons(params, limits)


def shared_memory_reasons(params: Params, max_dynamic_shared: int) -> list[str]:
    """The device's per-block shared-memory opt-in, which only the worker reads (its occupancy limits)."""
    if params.dynamic_shared_bytes > max_dynamic_shared:
        return [f"dynamic shared memory {params.dynamic_shared_bytes} B must be 0 … {max_dynamic_shared} B "
                "(the device's per-block opt-in maximum, less the kernel's static shared memory)"]
    return []


def memory_reasons(params: Params, limits) -> list[str]:
    """What can change between the check and the run: whether the buffers fit in the memory free now."""
    return k.memory_reasons(3 * STREAM_ELEMENTS * 4 + 256 * 1024**2, limits, "this sweep")


def flops(row) -> float:
    """FLOPs of one execution of the point (``gpu.core.roofline``), counted from occupancy.cu (beside this file).
    ``stream`` copies one float per thread: 0. ``chase`` follows dependent loads (integer indices: no FLOPs); built
    with register pressure it also sums its ``EXTRA_REGS`` held values once per thread after the chain (the
    row's ``param_value``): that many float additions per thread (``elements`` threads)."""
    if row["variant"] != "chase":
        return 0.0
    extra = row["param_value"]
    return float(extra) * float(row["elements"]) if extra == extra and extra else 0.0
