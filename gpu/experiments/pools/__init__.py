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

from gpu.core.units import KiB, MiB, format_bytes
from gpu.experiments import _kernels as k
from gpu.experiments import axes, grid

NAME = "pools"
# Registration (gpu/experiments/registry.py): the runner's subcommand, the page, the place in lists.
COMMAND, ORDER, PAGE = "pools", 7, "pages/memory_modes.py"
HELP = "allocate → copy → free per call vs DeviceMemoryPool/PageLockedMemoryPool"
BYTE_LABELS = True  # Compare writes bytes as a size
VARIANTS = ("device_per_call", "device_pooled", "pinned_per_call", "pinned_pooled")
LABELS = {"device_per_call": "device: mem_alloc per call", "device_pooled": "device: DeviceMemoryPool",
          "pinned_per_call": "pinned + device: allocate per call",
          "pinned_pooled": "pinned + device: PageLockedMemoryPool + DeviceMemoryPool"}
KEY_COLUMNS = ["variant", "bytes"]
SHOW_COLUMNS = ["variant", "bytes"]
DEFAULT_SIZES = [4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB, 256 * MiB]
MAX_SIZE = 1024 * MiB
TITLE = "Memory pools vs allocating per call"
AXES = (
    axes.Axis("sizes", "buffer sizes", DEFAULT_SIZES, kind="sizes", one="size", low=4, high=MAX_SIZE, multiple_of=4,
              unit="bytes"),
    axes.Axis("variants", "ways to allocate", list(VARIANTS), values=VARIANTS, one="variant"),
)


# Each size (the buffer's ``bytes``), every way to allocate at it.
GRID = grid.Grid([grid.Coordinate("bytes", axis="sizes"), grid.Coordinate("variant", axis="variants")])


class Params(axes.parameters(AXES, grid=GRID, key_columns=KEY_COLUMNS)):
    pass


parse_params = axes.parser(Params)


def invalid_reasons(params: Params, limits) -> list[str]:
    reasons = axes.reasons(params, limits)
    return reasons or memory_reasons(params, limits)


def memory_reasons(params: Params, limits) -> list[str]:
    """What can change between the check and the run: whether the buffers fit in the memory free now."""
    largest = max(params.sizes)
    # Per-call and pooled blocks can coexist with the pool's held block for a moment.
    reasons = k.memory_reasons(3 * largest, limits, f"{format_bytes(largest)} buffers (per call and pooled)")
    if limits is not None and 4 * largest > limits.pinned_budget_bytes:
        reasons.append(f"size {format_bytes(largest)} needs {format_bytes(4 * largest)} of pinned memory (two sources, "
                       f"a per-call and a pooled buffer) over the budget of {format_bytes(limits.pinned_budget_bytes)} "
                       "(PINPOINT_PINNED_BUDGET_BYTES sets it)")
    return reasons


def bytes_moved(size: int) -> int:
    return int(size)
