"""Managed (unified) memory: what a kernel pays when its data must first migrate from the host.

One kernel (``checksum_u32`` in ``gpu/experiments/managed/memory_modes.cu``: reads every word once, 16-byte loads,
adds them into one 64-bit sum) reads the same bytes in five situations (variants):

* ``device`` – an ordinary ``cudaMalloc`` buffer: the reference;
* ``first_touch`` – a managed buffer the host has just written, so its pages live on the host and migrate
  on the kernel's page faults (the sample covers the kernel, faults and migration included);
* ``prefetch`` – ``cuMemPrefetchAsync`` of the host-written buffer to the device, alone: the migration cost
  done explicitly (GB/s of pages moved);
* ``after_prefetch`` – the kernel straight after that prefetch (the two are timed in one sample with an
  event between them, so each sample of ``prefetch`` has its ``after_prefetch`` partner);
* ``resident`` – the kernel again on a managed buffer already on the device (migrated once, untimed; where no case
  before it wrote the buffer, the host writes it first).

Before every first-touch and prefetch sample the host rewrites the whole buffer (untimed), which pulls its
pages back to the host. Kernel samples flush L2 first (as the kernel pages do). Every kernel's checksum must
equal the host's exact sum of the words; a wrong sum fails the job. Bytes: the buffer's size, read once.
"""

from __future__ import annotations

from gpu.core.units import GiB, MiB, format_bytes
from gpu.experiments import _kernels as k
from gpu.experiments import axes, grid
from gpu.experiments.page import PageEntry

NAME = "managed"
# Registration (gpu/experiments/registry.py): the runner's subcommand, the page, the place in lists.
COMMAND, ORDER, PAGE = "managed", 6, "pages/memory_modes.py"
PAGE_ENTRY = PageEntry(PAGE, "Memory modes", "memory-modes", ":material/memory:",
                        "Memory modes: managed memory, pools, batching and host-memory latency", place=7)
HELP = "managed memory: first touch, prefetch, resident vs device memory"
BYTE_LABELS = True  # Compare writes bytes as a size
VARIANTS = ("device", "first_touch", "prefetch", "after_prefetch", "resident")
LABELS = {"device": "device memory (cudaMalloc)", "first_touch": "managed, first touch (migrates on fault)",
          "prefetch": "managed, prefetch to device (migration alone)",
          "after_prefetch": "managed, kernel after prefetch", "resident": "managed, already resident"}
KEY_COLUMNS = ["variant", "bytes"]
SHOW_COLUMNS = ["variant", "bytes"]
MIN_SIZE, MAX_SIZE, ALIGN = 1 * MiB, 8 * GiB, 64 * 1024
BLOCK = 256
TITLE = "Managed memory: migration on first touch, prefetch, resident"
AXES = (
    axes.Axis("sizes", "buffer sizes", [256 * MiB], kind="sizes", one="size", low=MIN_SIZE, high=MAX_SIZE,
              multiple_of=ALIGN, why="managed memory migrates in such pages", unit="bytes",
              help="sizes, multiples of 64 KiB (a list or a 1MiB:1GiB range)"),
    # Measured in this order: after_prefetch needs prefetch's samples; resident needs a migrated buffer.
    axes.Axis("variants", "cases", list(VARIANTS), values=VARIANTS, order="declared"),
)


# Each size (its buffers' ``bytes``), every case at it in the declared order.
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
    # Never ask for more managed memory than the device has free: oversubscription can hang a GPU.
    reasons = k.memory_reasons(2 * largest, limits, f"{format_bytes(largest)} of managed memory plus a device copy")
    if limits is not None and limits.host_available_bytes and 3 * largest > limits.host_available_bytes:
        reasons.append(f"size {format_bytes(largest)} needs {format_bytes(3 * largest)} of host memory (pattern, "
                       f"migrated pages) but {format_bytes(limits.host_available_bytes)} is available")
    return reasons


def bytes_moved(size: int) -> int:
    return int(size)


def noise_kind(row) -> str | None:
    """Compare's kind for a point: first touches and prefetches time page migration ("managed migration"); the
    other cases read memory already resident, which the generic rule judges."""
    return "managed migration" if row.get("variant") in ("first_touch", "prefetch") else None
