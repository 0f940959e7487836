"""Bank conflicts: shared-memory reads whose warp neighbours sit 1, 2, 4 … 32 words apart, in 4- and 8-byte words,
unpadded and padded; and a matrix transpose through a shared-memory tile, naive and padded.

Shared memory is 32 banks of 4 bytes (word w in bank w mod 32); a bank serves one word per clock, so a warp whose
threads read n different words of one bank waits n passes (an n-way conflict). The kernels
(``bank_conflicts.cu``):

* strided (group ``strided``) – shared memory alone. Each block fills its shared words, then lane l of every warp
  reads words l · row + k, k = 0 … 31, ``reads_per_thread / 32`` times over: row = ``stride`` words unpadded, and
  ``stride + 1`` padded where the stride is even (each thread's row padded to an odd length, so the 32 rows start in
  32 different banks; an odd stride needs no pad). Each of the 32 reads shifts every lane by the same word, so all
  have the conflict of the first. The pointer is volatile: each read is one shared load with an immediate offset
  plus one add, so the bank passes set the time, not the arithmetic or a register the compiler kept. Each thread
  writes the wrapping sum of what it read, which is checked exactly: it proves the reads, the layout and the count.
* transpose (group ``transpose``) – an n × n matrix through 32 × 32 tiles (32 × 8 threads), naive (``[32][32]``: a
  tile column is one bank for 4-byte words, one pair of banks for 8-byte words) and padded (``[32][33]``). Global
  reads and writes are coalesced in both; only the tile's layout differs. Checked exactly against the input
  transposed on the host.

Timing (``KernelTimer``): CUDA events around one launch, the stream held while it is queued. The strided reads
flush nothing (they read no global memory; their one store per thread is a few MB); the transposes flush the L2
before every sample, as the Coalescing transposes do. The grid fills every SM ``WAVES`` times at the most threads
it holds, so a launch is millions of warp reads and its start and its one store per thread are a small part of it.

Bytes: a strided point counts the shared-memory bytes its threads read (threads × reads × word size; GB/s = 10^9 B/s
of them), its ``direction`` is ``shared`` (no HBM or PCIe limit applies); a transpose counts its global reads and
writes once (2 n² words, ``direction`` device). The view derives each point's slowdown against conflict-free
access (a strided point against stride 1 of its word size and block size, a transpose against the padded tile of its
word size) and the SM clocks one warp's read took.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from gpu.core.errors import VerificationError
from gpu.experiments import _kernels as k
from gpu.experiments import axes
from gpu.experiments.grid import Coordinate, Grid
from gpu.experiments.page import PageEntry

NAME = "bank_conflicts"
# Registration (gpu/experiments/registry.py): the runner's subcommand, the page, the place in lists.
COMMAND, ORDER, PAGE = "bank-conflicts", 2.5, "pages/bank_conflicts.py"
PAGE_ENTRY = PageEntry(PAGE, "Bank conflicts", "bank-conflicts", ":material/grid_view:",
                       "Bank conflicts: shared-memory strides, padding and a tiled transpose", place=2.5)
HELP = "shared-memory reads 1 … 32 words apart (4- and 8-byte words, padded or not) and a tiled transpose"
TITLE = "Bank conflicts: shared-memory access patterns"

BANKS, BANK_BYTES, WARP = 32, 4, 32
WORD_SIZES = (4, 8)
STRIDES = (1, 2, 4, 8, 16, 32)
LAYOUTS = ("plain", "padded")
GROUPS = ("strided", "transpose")
READS_PER_TRIP = 32  # the kernel's unrolled inner loop: reads_per_thread is a multiple of it
SHARED_WORDS = 2048  # each block's strided words (bank_conflicts.cu)
TILE, TILE_ROWS = 32, 8  # a transpose's tile and its threads (TILE × TILE_ROWS)
WAVES = 4  # the strided grid holds every SM full this many times over
TRANSPOSE_BLOCK = TILE * TILE_ROWS
TRANSPOSE_READS = TILE // TILE_ROWS  # the tile words each transpose thread reads back (one per ROWS of its column)


def variant_of(group: str, layout: str, word_bytes: int) -> str:
    """The variant of a point: ``strided_4B``, ``padded_8B``, ``transpose_naive_4B``, ``transpose_padded_8B``."""
    if group == "strided":
        return f"{'padded' if layout == 'padded' else 'strided'}_{word_bytes}B"
    return f"transpose_{'padded' if layout == 'padded' else 'naive'}_{word_bytes}B"


VARIANTS = {group: tuple(variant_of(group, layout, size) for size in WORD_SIZES for layout in LAYOUTS)
            for group in GROUPS}
LABELS = {
    "strided_4B": "4-byte words", "padded_4B": "4-byte words, padded rows",
    "strided_8B": "8-byte words", "padded_8B": "8-byte words, padded rows",
    "transpose_naive_4B": "transpose, 4-byte words: naive tile [32][32]",
    "transpose_padded_4B": "transpose, 4-byte words: padded tile [32][33]",
    "transpose_naive_8B": "transpose, 8-byte words: naive tile [32][32]",
    "transpose_padded_8B": "transpose, 8-byte words: padded tile [32][33]",
}
KERNELS = {"strided_4B": "strided_4B", "padded_4B": "strided_4B", "strided_8B": "strided_8B",
           "padded_8B": "strided_8B", **{v: v for v in VARIANTS["transpose"]}}


def word_bytes_of(variant: str) -> int:
    return int(variant.rsplit("_", 1)[1].removesuffix("B"))


def is_padded(variant: str) -> bool:
    return "padded" in variant


def group_of(variant: str) -> str:
    return "transpose" if variant.startswith("transpose") else "strided"


KEY_COLUMNS = ["variant", "block_size", "param_value", "intensity"]
SHOW_COLUMNS = ["variant", "block_size", "param_value", "intensity", "elements", "sm_clock_mhz"]
AXES = (
    axes.Axis("groups", "groups", list(GROUPS), values=GROUPS, order="declared",
              help="comma-separated: strided, transpose"),
    axes.Axis("word_sizes", "word sizes", list(WORD_SIZES), kind="ints", one="word size", values=WORD_SIZES,
              help="comma-separated: 4, 8 (bytes per word read)"),
    axes.Axis("layouts", "layouts", list(LAYOUTS), values=LAYOUTS, order="declared",
              help="comma-separated: plain, padded (rows padded to an odd length; the transpose's tile to [32][33])"),
    axes.Axis("strides", "strides", list(STRIDES), kind="ints", low=1, high=32, power_of_two=True, unit="words",
              help="comma-separated powers of two, 1 … 32: words between neighbouring threads' reads"),
    k.block_sizes_axis(help="comma-separated block sizes of the strided reads (multiples of 32); the transpose "
                            "runs 32 × 8 threads per tile"),
    axes.Axis("reads_per_thread", "reads per thread", 1 << 12, kind="int", low=1 << 10, high=1 << 16,
              power_of_two=True, multiple_of=READS_PER_TRIP,
              help="shared-memory reads each thread makes, a power of two (2^10 … 2^16): the length of a sample"),
    axes.Axis("matrix_side", "matrix side", 1 << 13, kind="int", low=1 << 10, high=1 << 14, power_of_two=True,
              one="matrix side", help="rows (and columns) of the transposed matrix, a power of two (2^10 … 2^14)"),
)


def _variants_and_values(params, point) -> list[tuple[str, int]]:
    """(variant, param_value) of a group's points at one word size: strided reads, the conflict-free reference first
    (stride 1 unpadded, measured whichever strides and layouts are chosen; the same point among the chosen ones is
    measured once), then each layout at each stride; transposes, each layout at the matrix side."""
    word = point["word_bytes"]
    if point["group"] == "strided":
        return [(variant_of("strided", "plain", word), 1)] + [
            (variant_of("strided", layout, word), stride) for layout in params.layouts for stride in params.strides]
    return [(variant_of("transpose", layout, word), params.matrix_side) for layout in params.layouts]


# The strided reads (param_value the stride), then the transposes (param_value the matrix side, 32 × 8 threads), in
# that order whatever order the groups were given in; intensity is the shared-memory reads per thread (the axis' for
# the strided reads, 4 tile words for a transpose).
GRID = Grid([
    Coordinate("group", values=lambda params, point: [g for g in GROUPS if g in params.groups], key=False),
    Coordinate("word_bytes", axis="word_sizes", key=False),
    Coordinate("block_size", values=lambda params, point: params.block_sizes if point["group"] == "strided"
               else [TRANSPOSE_BLOCK]),
    Coordinate(("variant", "param_value"), values=_variants_and_values),
    Coordinate("intensity", values=lambda params, point: [params.reads_per_thread if point["group"] == "strided"
                                                          else TRANSPOSE_READS]),
])


class Params(axes.parameters(AXES, grid=GRID, key_columns=KEY_COLUMNS)):
    pass


parse_params = axes.parser(Params)


def device_bytes_needed(params: Params, threads_per_sm: int = 2048, sm_count: int = 160) -> int:
    """The largest strided output (8 bytes a thread) and, with the transposes, their input and output in the largest
    word size chosen. The L2 flush buffer (twice the L2) is the timer's, counted at 256 MiB as Coalescing does."""
    needed = 0
    if "strided" in params.groups:
        needed += max(strided_threads(sm_count, threads_per_sm, b) for b in params.block_sizes) * 8
    if "transpose" in params.groups:
        needed += 2 * params.matrix_side ** 2 * max(params.word_sizes) + 256 * 1024**2
    return needed


def invalid_reasons(params: Params, limits) -> list[str]:
    reasons = axes.reasons(params, limits)
    return reasons or memory_reasons(params, limits)


def memory_reasons(params: Params, limits) -> list[str]:
    """What can change between the check and the run: whether the buffers fit in the memory free now."""
    return k.memory_reasons(device_bytes_needed(params), limits, "this sweep")


# --- the strided reads ---------------------------------------------------------------------------------------------
def row_words(stride: int, padded: bool) -> int:
    """Words between neighbouring lanes' reads: the stride, or the stride padded to an odd length."""
    return stride + 1 if padded and stride % 2 == 0 else stride


def strided_threads(sm_count: int, threads_per_sm: int, block: int) -> int:
    """Threads of a strided launch: blocks that fill every SM ``WAVES`` times at the most threads it holds."""
    return sm_count * max(1, threads_per_sm // block) * WAVES * block


def word_values(count: int, word_bytes: int) -> np.ndarray:
    """The words each block writes into shared memory (``word_value`` in bank_conflicts.cu): i · φ-constant + 1,
    wrapping in the word's width."""
    i = np.arange(count, dtype=np.uint64)
    if word_bytes == 4:
        return ((i * np.uint64(2654435761) + np.uint64(1)) & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    return i * np.uint64(0x9E3779B97F4A7C15) + np.uint64(1)


def expected_lane_sums(word_bytes: int, stride: int, padded: bool, reads_per_thread: int) -> np.ndarray:
    """What lane 0 … 31 of every warp must write: the wrapping sum of its reads, trips × Σₖ word[l · row + k]."""
    row = row_words(stride, padded)
    words = word_values(SHARED_WORDS, word_bytes).astype(np.uint64)
    lanes = np.arange(WARP)[:, None] * row + np.arange(READS_PER_TRIP)[None, :]
    trip_sums = words[lanes].sum(axis=1, dtype=np.uint64)  # wraps modulo 2^64, as the 8-byte kernel does
    sums = trip_sums * np.uint64(reads_per_thread // READS_PER_TRIP)
    return (sums & np.uint64(0xFFFFFFFF)).astype(np.uint32) if word_bytes == 4 else sums


def check_lane_sums(expected_lanes: np.ndarray, got: np.ndarray, what: str) -> None:
    """Every thread's sum is its lane's (``expected_lane_sums``); VerificationError names the first wrong thread and
    how many are wrong (the output is poisoned before each point, so a thread that wrote nothing fails too)."""
    if got.size % WARP or got.dtype != expected_lanes.dtype:
        raise VerificationError(f"{what}: got {got.size:,} results of {got.dtype}, expected whole warps of "
                                f"{expected_lanes.dtype}")
    wrong = np.flatnonzero((got.reshape(-1, WARP) != expected_lanes[None, :]).ravel())
    if wrong.size:
        first = int(wrong[0])
        raise VerificationError(f"{what}: {wrong.size:,} of {got.size:,} threads wrote a wrong sum, first thread "
                                f"{first:,} (expected {int(expected_lanes[first % WARP])}, got {int(got[first])})")


def strided_bytes(threads: int, reads_per_thread: int, word_bytes: int) -> int:
    """The shared-memory bytes a strided launch reads (the useful bytes: each thread's words, once per read)."""
    return threads * reads_per_thread * word_bytes


# --- the transposes ------------------------------------------------------------------------------------------------
def transpose_bytes(side: int, word_bytes: int) -> int:
    """The global bytes a transpose reads and writes, once each."""
    return 2 * side * side * word_bytes


def tile_shared_bytes(variant: str) -> int:
    """Shared memory of one transpose block: a [32][32] or [32][33] tile of its words."""
    return TILE * (TILE + (1 if is_padded(variant) else 0)) * word_bytes_of(variant)


# --- the bank model ------------------------------------------------------------------------------------------------
def passes(word_indices, word_bytes: int) -> int:
    """Bank passes one warp's shared-memory request takes (the CUDA programming guide's model for compute capability
    5.0 and later): 32 banks of 4 bytes, a request served 128 bytes of threads at a time (the whole warp for 4-byte
    words, each half-warp for 8-byte words), each part taking as many passes as the most distinct 4-byte words asked
    of one bank (threads reading the same word share it)."""
    units = word_bytes // BANK_BYTES
    per_part = BANKS // units
    indices = list(word_indices)
    total = 0
    for start in range(0, len(indices), per_part):
        banks: dict[int, set[int]] = defaultdict(set)
        for index in indices[start:start + per_part]:
            for unit in range(index * units, (index + 1) * units):
                banks[unit % BANKS].add(unit)
        total += max(len(words) for words in banks.values())
    return total


def conflict_ways(word_indices, word_bytes: int) -> int:
    """How many times the fewest passes a request of that size needs (1: conflict-free; 32: every thread in one
    bank)."""
    return passes(word_indices, word_bytes) // (word_bytes // BANK_BYTES)


def strided_ways(stride: int, word_bytes: int, padded: bool) -> int:
    """The bank model's conflict for one read of the strided kernel (lane l at word l · row)."""
    return conflict_ways([lane * row_words(stride, padded) for lane in range(WARP)], word_bytes)


def transpose_ways(variant: str) -> int:
    """The bank model's conflict for the transpose's column read of its tile (lane l at word l · (32 + pad))."""
    row = TILE + (1 if is_padded(variant) else 0)
    return conflict_ways([lane * row for lane in range(WARP)], word_bytes_of(variant))


def predicted_ways(row) -> int:
    """The bank model's conflict for a point's reads (strided: its stride and layout; transpose: its tile)."""
    variant = str(row["variant"])
    if group_of(variant) == "transpose":
        return transpose_ways(variant)
    return strided_ways(int(row["param_value"]), word_bytes_of(variant), is_padded(variant))


def point_label(row) -> str:
    """A point in words (Compare, Runs, the noisy-points line)."""
    variant = str(row["variant"])
    if group_of(variant) == "transpose":
        side = int(row["param_value"])
        return f"{LABELS[variant]}, {side:,} × {side:,}"
    return f"{LABELS[variant]}, stride {int(row['param_value'])}, block {int(row['block_size'])}"


def short_point_label(row) -> str:
    variant = str(row["variant"])
    if group_of(variant) == "transpose":
        return f"{'padded' if is_padded(variant) else 'naive'} tile {word_bytes_of(variant)} B"
    return f"{'padded ' if is_padded(variant) else ''}stride {int(row['param_value'])} · {word_bytes_of(variant)} B"
