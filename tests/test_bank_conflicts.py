"""Bank conflicts without a GPU: the point grid and its checks, the bank model, the exact sums the strided kernel must
write, and the sweep's bookkeeping on a stand-in runtime whose "kernels" are replayed in NumPy read by read."""

import contextlib

import numpy as np
import pandas as pd
import pytest

from gpu import bench
from gpu.core.errors import ValidationError, VerificationError
from gpu.core.limits import Limits
from gpu.experiments import bank_conflicts as bank
from gpu.experiments import sweep_of
from gpu.experiments.bank_conflicts import sweep as bank_sweep

GiB = 1024**3
H100_LIMITS = Limits(79 * GiB, 80 * GiB, 16 * GiB, 120 * GiB, 1024, 32)


# --- parameters and the point grid -----------------------------------------------------------------------------------
def test_defaults_are_valid_and_the_runner_takes_them():
    params = bank.parse_params({})
    assert bank.invalid_reasons(params, H100_LIMITS) == []
    points = list(params.points())
    strided = [p for p in points if not p[0].startswith("transpose")]
    assert len(strided) == 2 * 2 * 6 and len(points) == len(strided) + 4 and len(set(points)) == len(points)
    assert points[0] == ("strided_4B", 256, 1, 4096) and points[6] == ("padded_4B", 256, 1, 4096)
    assert points[-4:] == [("transpose_naive_4B", 256, 8192, None), ("transpose_padded_4B", 256, 8192, None),
                           ("transpose_naive_8B", 256, 8192, None), ("transpose_padded_8B", 256, 8192, None)]
    [job] = bench.experiment_jobs(bench.parse_args(["bank-conflicts", "--profile", "interactive"]))
    assert bank.parse_params(job) == params
    [job] = bench.experiment_jobs(bench.parse_args(["bank-conflicts", "--groups", "strided", "--word-sizes", "8",
                                                    "--layouts", "padded", "--strides", "32,4", "--block-sizes",
                                                    "128", "--reads-per-thread", "2^10"]))
    assert list(bank.parse_params(job).points()) == [("strided_8B", 128, 1, 1024), ("padded_8B", 128, 4, 1024),
                                                     ("padded_8B", 128, 32, 1024)]


def test_the_conflict_free_reference_is_measured_whatever_strides_and_layouts_are_chosen():
    params = bank.parse_params({"groups": ["strided"], "word_sizes": [4], "layouts": ["plain"], "strides": [32],
                                "block_sizes": [128, 512]})
    assert list(params.points()) == [("strided_4B", 128, 1, 4096), ("strided_4B", 128, 32, 4096),
                                     ("strided_4B", 512, 1, 4096), ("strided_4B", 512, 32, 4096)]
    transposes = bank.parse_params({"groups": ["transpose"], "word_sizes": [8], "matrix_side": 1024})
    assert list(transposes.points()) == [("transpose_naive_8B", 256, 1024, None),
                                         ("transpose_padded_8B", 256, 1024, None)]


@pytest.mark.parametrize("raw,message", [
    ({"strides": [3]}, "stride 3 must be a power of two from 1 to 32"),
    ({"strides": [64]}, "stride 64 must be a power of two from 1 to 32"),
    ({"strides": []}, "choose at least one stride"),
    ({"word_sizes": [2]}, "unknown word size '2 B' (known: 4 B, 8 B)"),
    ({"layouts": ["swizzled"]}, "unknown layout 'swizzled'"),
    ({"groups": []}, "choose at least one group"),
    ({"block_sizes": [100]}, "block size 100 is not a multiple of 32 (the warp size)"),
    ({"reads_per_thread": 1000}, "reads per thread 1000 must be a power of two from 1024 to 65536"),
    ({"matrix_side": 1 << 15}, "matrix side 32768 must be a power of two from 1024 to 16384"),
    ({"profile": "fastest"}, "unknown profile 'fastest'"),
])
def test_bad_parameters_are_explained(raw, message):
    reasons = bank.invalid_reasons(bank.parse_params(raw), H100_LIMITS)
    assert any(message in r for r in reasons), reasons


def test_unknown_keys_and_non_numbers_are_refused():
    with pytest.raises(ValidationError, match="unknown parameter: stride"):
        bank.parse_params({"stride": [1]})
    with pytest.raises(ValidationError, match="whole numbers"):
        bank.parse_params({"strides": ["wide"]})


def test_the_transposes_buffers_must_fit_in_the_memory_free():
    small = Limits(2 * GiB, 80 * GiB, 16 * GiB, 120 * GiB, 1024, 32)
    [reason] = bank.invalid_reasons(bank.parse_params({"matrix_side": 1 << 14}), small)
    assert reason.startswith("this sweep needs 4.26 GiB of device memory; 2 GiB is free")
    assert bank.invalid_reasons(bank.parse_params({"matrix_side": 1 << 14, "groups": ["strided"]}), small) == []


# --- the bank model ------------------------------------------------------------------------------------------------
def test_the_bank_model_gives_the_textbook_conflicts():
    assert [bank.strided_ways(s, 4, False) for s in bank.STRIDES] == [1, 2, 4, 8, 16, 32]
    # 8-byte words are served a half-warp at a time: 16 threads cover the 32 banks, so stride 32 is no worse than 16
    assert [bank.strided_ways(s, 8, False) for s in bank.STRIDES] == [1, 2, 4, 8, 16, 16]
    assert bank.passes([lane for lane in range(32)], 8) == 2  # the fewest for 256 bytes
    assert all(bank.strided_ways(s, w, True) == 1 for s in bank.STRIDES for w in bank.WORD_SIZES)
    assert bank.conflict_ways([0] * 32, 4) == 1  # one word read by every thread: a broadcast, no conflict
    assert bank.conflict_ways([3, 35, 3, 35] * 8, 4) == 2  # two distinct words of bank 3
    assert bank.strided_ways(3, 4, False) == 1 and bank.strided_ways(6, 4, False) == 2  # only the power of two counts
    assert {v: bank.transpose_ways(v) for v in bank.VARIANTS["transpose"]} == {
        "transpose_naive_4B": 32, "transpose_padded_4B": 1, "transpose_naive_8B": 16, "transpose_padded_8B": 1}


def test_padding_makes_every_row_odd_and_leaves_odd_rows_alone():
    assert [bank.row_words(s, True) for s in bank.STRIDES] == [1, 3, 5, 9, 17, 33]
    assert [bank.row_words(s, False) for s in bank.STRIDES] == list(bank.STRIDES)
    # lane 31's row and the 31 shifts after it stay inside the block's shared words
    assert 31 * bank.row_words(32, True) + bank.READS_PER_TRIP - 1 < bank.SHARED_WORDS


# --- exact sums ----------------------------------------------------------------------------------------------------
def replayed_lane_sums(word_bytes: int, row: int, trips: int) -> list[int]:
    """The strided kernel replayed read by read in Python integers, wrapping at the word's width."""
    mask = (1 << (8 * word_bytes)) - 1
    factor = 2654435761 if word_bytes == 4 else 0x9E3779B97F4A7C15
    sums = []
    for lane in range(32):
        total = 0
        for _ in range(trips):
            for k in range(bank.READS_PER_TRIP):
                total = (total + ((lane * row + k) * factor + 1 & mask)) & mask
        sums.append(total)
    return sums


@pytest.mark.parametrize("word_bytes", [4, 8])
@pytest.mark.parametrize("stride,padded", [(1, False), (2, True), (32, False), (32, True), (8, False)])
def test_expected_sums_match_the_kernel_replayed_read_by_read(word_bytes, stride, padded):
    expected = bank.expected_lane_sums(word_bytes, stride, padded, 3 * bank.READS_PER_TRIP)
    assert expected.dtype == (np.uint32 if word_bytes == 4 else np.uint64)
    assert [int(v) for v in expected] == replayed_lane_sums(word_bytes, bank.row_words(stride, padded), 3)


def test_the_sums_tell_layouts_and_counts_apart():
    plain, padded = bank.expected_lane_sums(4, 32, False, 1024), bank.expected_lane_sums(4, 32, True, 1024)
    assert not np.array_equal(plain, padded)  # a kernel that ignored the padding fails
    assert not np.array_equal(plain, bank.expected_lane_sums(4, 32, False, 2048))  # and one that read half as much
    assert np.array_equal(bank.expected_lane_sums(8, 1, False, 1024), bank.expected_lane_sums(8, 1, True, 1024))


def test_a_wrong_or_missing_sum_is_caught_and_named():
    lanes = bank.expected_lane_sums(4, 2, False, 1024)
    got = np.tile(lanes, 100)
    bank.check_lane_sums(lanes, got, "fine")
    got[70] += np.uint32(1)
    got[3000] = np.uint32(0xFFFFFFFF)  # the poison: a thread that never wrote
    with pytest.raises(VerificationError, match=r"4-byte words, stride 2: 2 of 3,200 threads wrote a wrong sum, "
                                                rf"first thread 70 \(expected {int(lanes[6])}, got "
                                                rf"{int(lanes[6]) + 1}\)"):
        bank.check_lane_sums(lanes, got, "4-byte words, stride 2")
    with pytest.raises(VerificationError, match="expected whole warps"):
        bank.check_lane_sums(lanes, got[:40], "short")
    with pytest.raises(VerificationError, match="expected whole warps of uint32"):
        bank.check_lane_sums(lanes, got.view(np.uint64), "read back as 8-byte words")


# --- the sweep's bookkeeping, on a stand-in runtime ------------------------------------------------------------------
class _StandInRuntime:
    """Just enough of GpuRuntime for the sweep: each "launch" is replayed in NumPy (the strided kernel lane by lane
    from its row and trip arguments; a transpose by transposing), so what the sweep reads back is what the kernel's
    arguments would have produced. ``wrong`` names a kernel whose result is off by one in one word."""

    sm_count, attributes = 4, {"MAX_THREADS_PER_MULTIPROCESSOR": 2048}

    def __init__(self, wrong: str = ""):
        runtime = self
        self.launches, self.poisoned, self.buffers, self.wrong = [], [], {}, wrong
        self.next_pointer = 0x1000

        class Ledger:
            def device_buffer(self, nbytes):
                runtime.next_pointer += 0x1000
                runtime.buffers[runtime.next_pointer] = np.zeros(nbytes, np.uint8)
                return runtime.next_pointer

            def host_buffer(self, nbytes, mode):
                return np.zeros(nbytes // 4, np.uint32)  # as AllocationLedger: uint32 words

        class Cuda:
            @staticmethod
            def memset_d32(pointer, value, words):
                runtime.poisoned.append((value, words))
                runtime.buffers[pointer][:4 * words].view(np.uint32)[:] = value

            @staticmethod
            def memcpy_htod(pointer, host):
                runtime.buffers[pointer][:host.nbytes] = host.view(np.uint8).ravel()

            @staticmethod
            def memcpy_dtoh(host, pointer):
                host.view(np.uint8).ravel()[:] = runtime.buffers[pointer][:host.nbytes]

        class Telemetry:
            def sample(self, force=False):
                pass

            def start_point(self):
                pass

            def point_summary(self):
                return {"sm_clock_mhz": 1980.0, "throttled": False}

        self.cuda, self.telemetry = Cuda, Telemetry()
        self.job_scope = lambda: contextlib.nullcontext(Ledger())
        self.limits = lambda: Limits(1 << 36, 1 << 37, 1 << 34, 1 << 36, 1024, 32)

    def kernel(self, stem, name):
        assert stem == "bank_conflicts"
        runtime = self
        dtype = np.uint32 if name.endswith("4B") else np.uint64

        def strided(out, row, trips, block, grid, stream):
            assert (type(row), type(trips)) == (np.uint32, np.uint32)
            threads = block[0] * grid[0]
            runtime.launches.append((name, int(row), int(trips), threads))
            sums = replayed_lane_sums(dtype().itemsize, int(row), int(trips))
            result = np.tile(np.array(sums, dtype), threads // 32)
            if runtime.wrong == name:
                result[5] += dtype(1)
            runtime.buffers[out][:result.nbytes] = result.view(np.uint8)

        def transpose(source, out, side, block, grid, stream):
            assert block == (32, 8, 1) and grid == (int(side) // 32,) * 2
            runtime.launches.append((name, int(side)))
            words = int(side) ** 2
            matrix = runtime.buffers[source][:words * dtype().itemsize].view(dtype).reshape(int(side), int(side))
            result = np.ascontiguousarray(matrix.T).ravel()
            if runtime.wrong == name:
                result[7] += dtype(1)
            runtime.buffers[out][:result.nbytes] = result.view(np.uint8)

        return transpose if name.startswith("transpose") else strided


class _Timer:
    made = []

    def __init__(self, gpu, ledger, flush_l2=True, hold=True):
        self.flush = flush_l2
        _Timer.made.append(flush_l2)

    def timer_name(self, hold=None):
        return "cuda_event" + ("_l2_flushed" if self.flush else "") + "_held"

    def once(self, launch):
        launch("stream")
        return 2.0


SMALL = {"reads_per_thread": 1024, "matrix_side": 1024, "strides": [1, 32], "block_sizes": [256],
         "profile": "interactive"}


def test_each_point_launches_its_kernel_and_verifies_every_thread_and_word(monkeypatch):
    monkeypatch.setattr(bank_sweep, "KernelTimer", _Timer)
    _Timer.made.clear()
    runtime = _StandInRuntime()
    params = bank.parse_params(SMALL)
    rows = pd.DataFrame(sweep_of(bank.NAME)(params, runtime, lambda *a: None, lambda: False))
    key = [(v, b, p, None if pd.isna(i) else int(i)) for v, b, p, i in
           zip(rows["variant"], rows["block_size"], rows["param_value"], rows["intensity"], strict=True)]
    assert key == list(params.points()) and rows["verified"].all()
    threads = 4 * 8 * bank.WAVES * 256
    strided = rows[rows["group"] == "strided"]
    assert set(strided["elements"]) == {threads} and set(strided["direction"]) == {"shared"}
    assert list(strided["bytes"]) == [threads * 1024 * (4 if v.endswith("4B") else 8) for v in strided["variant"]]
    assert set(strided["timer"]) == {"cuda_event_held"} and set(strided["param"]) == {"stride"}
    transposes = rows[rows["group"] == "transpose"]
    assert list(transposes["bytes"]) == [2 * 1024**2 * w for w in (4, 4, 8, 8)]
    assert set(transposes["timer"]) == {"cuda_event_l2_flushed_held"} and set(transposes["direction"]) == {"device"}
    assert list(transposes["shared_bytes_per_block"]) == [4096, 4224, 8192, 8448]
    assert _Timer.made == [False, True]  # the strided reads flush nothing; the transposes flush the L2
    # padded stride 32 reads rows of 33 words; stride 1 needs no pad; 32 trips of 32 reads make 1,024
    assert ("strided_4B", 33, 32, threads) in runtime.launches and ("strided_8B", 1, 32, threads) in runtime.launches
    assert (0xFFFFFFFF, 2 * threads) in runtime.poisoned and (0xFFFFFFFF, 2 * 1024**2) in runtime.poisoned


@pytest.mark.parametrize("wrong,message", [
    ("strided_8B", r"8-byte words, stride 1, block 256: 1 of 32,768 threads wrote a wrong sum, first thread 5"),
    ("transpose_padded_4B", r"transpose, 4-byte words: padded tile \[32\]\[33\], 1,024 × 1,024: .*word 7"),
])
def test_a_wrong_word_fails_the_job(monkeypatch, wrong, message):
    monkeypatch.setattr(bank_sweep, "KernelTimer", _Timer)
    with pytest.raises(VerificationError, match=message):
        sweep_of(bank.NAME)(bank.parse_params(SMALL), _StandInRuntime(wrong=wrong), lambda *a: None, lambda: False)
