"""Batching small copies: K copies of s bytes, one copy of K·s bytes, or packing into a staging buffer first.

The K pieces live in pinned memory at a stride of 2·s (not contiguous, as separate objects are), and land
contiguously on the device. Variants, all H2D on one stream:

* ``separate`` – K ``memcpy_htod_async`` calls, one per piece; CUDA events around all of them (the host
  issues them while the GPU runs, as a program does, so each copy's fixed cost α shows);
* ``packed`` – the host gathers the pieces into one contiguous pinned staging buffer (one NumPy copy, host
  clock), then one copy (CUDA events); the sample is the sum;
* ``one_copy`` – one copy of K·s bytes already contiguous: the floor.

Effective GB/s = K·s / time. (separate − one_copy) / K is the per-copy overhead that the Transfers page's
model calls α. The device buffer is poisoned before each point and compared with the pieces after it.
"""

from __future__ import annotations

from gpu.core.units import KiB, MiB, format_bytes
from gpu.experiments import _kernels as k
from gpu.experiments import axes
from gpu.experiments.grid import Coordinate, Grid

NAME = "batching"
# Registration (gpu/experiments/registry.py): the runner's subcommand, the page, the place in lists.
COMMAND, ORDER, PAGE = "batching", 8, "pages/memory_modes.py"
HELP = "K small copies vs one big copy vs packing into pinned staging"
BYTE_LABELS = True  # Compare writes bytes and param_value as sizes
VARIANTS = ("separate", "packed", "one_copy")
LABELS = {"separate": "K separate copies", "packed": "pack into pinned staging + one copy",
          "one_copy": "one copy of K·s (already contiguous)"}
KEY_COLUMNS = ["variant", "param_value", "chunks"]
SHOW_COLUMNS = ["variant", "param_value", "chunks"]
DEFAULT_PIECES = [4 * 2**i for i in range(0, 21, 2)]  # 4 B … 4 MiB
MAX_PIECE, MAX_PIECES, MAX_TOTAL = 4 * MiB, 4096, 512 * MiB
TITLE = "Batching small copies"
AXES = (
    axes.Axis("piece_sizes", "piece sizes", [64, 1 * KiB, 16 * KiB, 256 * KiB, 4 * MiB], kind="sizes", low=4,
              high=MAX_PIECE, multiple_of=4, unit="bytes", help="piece sizes (list or range)"),
    axes.Axis("pieces", "pieces (K)", 64, kind="int", one="piece count", low=2, high=MAX_PIECES,
              help="how many pieces (K)"),
    axes.Axis("variants", "ways to copy", list(VARIANTS), values=VARIANTS, one="way to copy"),
)


# Each piece size (param_value), every way to copy, K pieces (chunks).
GRID = Grid([Coordinate("param_value", axis="piece_sizes"), Coordinate("variant", axis="variants"),
             Coordinate("chunks", axis="pieces")])


class Params(axes.parameters(AXES, grid=GRID, key_columns=KEY_COLUMNS)):
    pass


parse_params = axes.parser(Params)


def invalid_reasons(params: Params, limits) -> list[str]:
    reasons = axes.reasons(params, limits)
    for size in params.piece_sizes:
        if not reasons and size * params.pieces > MAX_TOTAL:
            reasons.append(f"{params.pieces} pieces of {format_bytes(size)} make {format_bytes(size * params.pieces)}, "
                           f"over the {format_bytes(MAX_TOTAL)} this experiment allows")
    return reasons or memory_reasons(params, limits)


def memory_reasons(params: Params, limits) -> list[str]:
    """What can change between the check and the run: whether the buffers fit in the memory free now."""
    total = max(params.piece_sizes) * params.pieces
    reasons = k.memory_reasons(total, limits, f"{format_bytes(total)} of pieces")
    if limits is not None and 3 * total > limits.pinned_budget_bytes:
        reasons.append(f"pieces, staging and read-back need {format_bytes(3 * total)} of pinned memory, over "
                       f"the budget of {format_bytes(limits.pinned_budget_bytes)} (PINPOINT_PINNED_BUDGET_BYTES)")
    return reasons


def bytes_moved(piece: int, pieces: int) -> int:
    return int(piece) * int(pieces)
