"""Bank conflicts without a GPU: the point grid and its checks, the bank model, the exact sums the strided kernel must
write, the sweep's bookkeeping on a simulated board whose "kernels" are replayed in NumPy read by read, and the view's
derived figures, takeaway and charts on rows made up here."""

import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from gpu import bench
from gpu.core import paths
from gpu.core.errors import ValidationError, VerificationError
from gpu.core.limits import Limits
from gpu.core.schema import key_value
from gpu.experiments import bank_conflicts as bank
from gpu.experiments import sweep_of
from gpu.experiments.bank_conflicts import sweep as bank_sweep
from gpu.experiments.bank_conflicts import view
from tests.bank_conflicts_board import StandInRuntime, StandInTimer, replayed_lane_sums

GiB = 1024**3
H100_LIMITS = Limits(79 * GiB, 80 * GiB, 16 * GiB, 120 * GiB, 1024, 32)


# --- parameters and the point grid -----------------------------------------------------------------------------------
def test_defaults_are_valid_and_the_runner_takes_them():
    params = bank.parse_params({})
    assert bank.invalid_reasons(params, H100_LIMITS) == []
    points = list(params.points())
    strided = [p for p in points if not p[0].startswith("transpose")]
    assert len(strided) == 2 * 2 * 6 and len(points) == len(strided) + 4 and len(set(points)) == len(points)
    assert points[0] == ("strided_4B", 256, 1, None, 4096) and points[6] == ("padded_4B", 256, 1, None, 4096)
    assert points[-4:] == [("transpose_naive_4B", 256, None, 8192, 4), ("transpose_padded_4B", 256, None, 8192, 4),
                           ("transpose_naive_8B", 256, None, 8192, 4), ("transpose_padded_8B", 256, None, 8192, 4)]
    [job] = bench.experiment_jobs(bench.parse_args(["bank-conflicts", "--profile", "interactive"]))
    assert bank.parse_params(job) == params
    [job] = bench.experiment_jobs(bench.parse_args(["bank-conflicts", "--groups", "strided", "--word-sizes", "8",
                                                    "--layouts", "padded", "--strides", "32,4", "--block-sizes",
                                                    "128", "--reads-per-thread", "2^10"]))
    assert list(bank.parse_params(job).points()) == [("strided_8B", 128, 1, None, 1024),
                                                     ("padded_8B", 128, 4, None, 1024),
                                                     ("padded_8B", 128, 32, None, 1024)]


def test_the_conflict_free_reference_is_measured_whatever_strides_and_layouts_are_chosen():
    params = bank.parse_params({"groups": ["strided"], "word_sizes": [4], "layouts": ["plain"], "strides": [32],
                                "block_sizes": [128, 512]})
    assert list(params.points()) == [("strided_4B", 128, 1, None, 4096), ("strided_4B", 128, 32, None, 4096),
                                     ("strided_4B", 512, 1, None, 4096), ("strided_4B", 512, 32, None, 4096)]
    transposes = bank.parse_params({"groups": ["transpose"], "word_sizes": [8], "matrix_side": 1024})
    assert list(transposes.points()) == [("transpose_naive_8B", 256, None, 1024, 4),
                                         ("transpose_padded_8B", 256, None, 1024, 4)]


@pytest.mark.parametrize("raw,message", [
    ({"strides": [3]}, "stride 3 must be a power of two from 1 to 32"),
    ({"strides": [64]}, "stride 64 must be a power of two from 1 to 32"),
    ({"strides": []}, "choose at least one stride"),
    ({"word_sizes": [2]}, "unknown word size '2' (known: 4, 8)"),
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


# --- the sweep's bookkeeping, on the simulated board (tests/bank_conflicts_board.py) ------------------------------
SMALL = {"reads_per_thread": 1024, "matrix_side": 1024, "strides": [1, 32], "block_sizes": [256],
         "profile": "interactive"}


def test_each_point_launches_its_kernel_and_verifies_every_thread_and_word(monkeypatch):
    monkeypatch.setattr(bank_sweep, "KernelTimer", StandInTimer)
    StandInTimer.made.clear()
    runtime = StandInRuntime()
    params = bank.parse_params(SMALL)
    rows = pd.DataFrame(sweep_of(bank.NAME)(params, runtime, lambda *a: None, lambda: False))
    key = [tuple(key_value(v) for v in point) for point in rows[list(bank.KEY_COLUMNS)].itertuples(index=False)]
    assert key == list(params.points()) and rows["verified"].all()
    threads = 4 * 8 * bank.WAVES * 256
    strided = rows[rows["group"] == "strided"]
    assert set(strided["elements"]) == {threads} and set(strided["direction"]) == {"shared"}
    assert list(strided["bytes"]) == [threads * 1024 * (4 if v.endswith("4B") else 8) for v in strided["variant"]]
    assert set(strided["timer"]) == {"cuda_event_held"} and strided["stride"].notna().all()
    assert strided["matrix_side"].isna().all()
    transposes = rows[rows["group"] == "transpose"]
    assert list(transposes["bytes"]) == [2 * 1024**2 * w for w in (4, 4, 8, 8)]
    assert set(transposes["timer"]) == {"cuda_event_l2_flushed_held"} and set(transposes["direction"]) == {"device"}
    assert list(transposes["shared_bytes_per_block"]) == [4096, 4224, 8192, 8448]
    assert StandInTimer.made == [False, True]  # the strided reads flush nothing; the transposes flush the L2
    # padded stride 32 reads rows of 33 words; stride 1 needs no pad; 32 trips of 32 reads make 1,024
    assert ("strided_4B", 33, 32, threads) in runtime.launches and ("strided_8B", 1, 32, threads) in runtime.launches
    assert (0xFFFFFFFF, 2 * threads) in runtime.poisoned and (0xFFFFFFFF, 2 * 1024**2) in runtime.poisoned


@pytest.mark.parametrize("wrong,message", [
    ("strided_8B", r"8-byte words, stride 1, block 256: 1 of 32,768 threads wrote a wrong sum, first thread 5"),
    ("transpose_padded_4B", r"transpose, 4-byte words: padded tile \[32\]\[33\], 1,024 × 1,024: .*word 7"),
])
def test_a_wrong_word_fails_the_job(monkeypatch, wrong, message):
    monkeypatch.setattr(bank_sweep, "KernelTimer", StandInTimer)
    with pytest.raises(VerificationError, match=message):
        sweep_of(bank.NAME)(bank.parse_params(SMALL), StandInRuntime(wrong=wrong), lambda *a: None, lambda: False)


# --- the view: costs, takeaway, headline and charts, on rows made up here -------------------------------------------
THREADS = 132 * 8 * bank.WAVES * 256


def fake_run(times_ms: dict, run_id="run-bank-1", block=256, reads=4096, side=8192, clock=1980.0) -> pd.DataFrame:
    """Rows as the experiment writes them: {(variant, stride or side): median ms}."""
    rows = []
    for (variant, value), ms in times_ms.items():
        word = bank.word_bytes_of(variant)
        strided = bank.group_of(variant) == "strided"
        nbytes = bank.strided_bytes(THREADS, reads, word) if strided else bank.transpose_bytes(value, word)
        rows.append({"run_id": run_id, "experiment": bank.NAME, "variant": variant, "group": bank.group_of(variant),
                     "direction": "shared" if strided else "device", "block_size": block if strided else 256,
                     "elements": THREADS if strided else value * value, "stride": value if strided else None,
                     "matrix_side": None if strided else value, "intensity": reads if strided else bank.TRANSPOSE_READS,
                     "bytes": nbytes,
                     "median_ms": ms, "cv": 0.003, "samples": 40, "gbps": nbytes / (ms * 1e6),
                     "sm_clock_mhz": clock, "sm_count": 132, "stop_reason": "converged",
                     "device_name": "NVIDIA H100 80GB HBM3", "timestamp": "2026-11-28T07:00:00+00:00",
                     "backend": "live", "profile": "precise", "gpu_uuid": "GPU-1234abcd-0000-0000-0000-00000000beef"})
    return pd.DataFrame(rows)


# 1 clock per warp read at stride 1 (4-byte words): 132 SMs, each 8 × 4 blocks of 8 warps × 4,096 reads at 1,980 MHz
ONE_CLOCK_MS = 8 * bank.WAVES * 8 * 4096 / 1980e6 * 1e3
RUN = {**{("strided_4B", s): ONE_CLOCK_MS * s * 1.01 ** (s > 1) for s in bank.STRIDES},
       **{("padded_4B", s): ONE_CLOCK_MS * 1.02 for s in bank.STRIDES},
       **{("strided_8B", s): 2 * ONE_CLOCK_MS * min(s, 16) for s in bank.STRIDES},
       **{("padded_8B", s): 2 * ONE_CLOCK_MS for s in bank.STRIDES},
       ("transpose_naive_4B", 8192): 0.31, ("transpose_padded_4B", 8192): 0.155,
       ("transpose_naive_8B", 8192): 0.45, ("transpose_padded_8B", 8192): 0.30}


def test_costs_are_judged_against_conflict_free_access_of_the_same_run_word_size_and_block():
    other = fake_run({("strided_4B", 1): 1.0, ("strided_4B", 32): 4.0}, run_id="run-bank-2")
    data = view.with_costs(pd.concat([fake_run(RUN), other]))
    value = data["stride"].fillna(data["matrix_side"].astype("float64"))  # one dtype: pandas 4 refuses a mixed fill
    cost = data.assign(value=value).set_index(["run_id", "variant", "value"])
    assert cost.loc[("run-bank-1", "strided_4B", 32), "slowdown"] == pytest.approx(32 * 1.01)
    assert cost.loc[("run-bank-1", "padded_4B", 32), "slowdown"] == pytest.approx(1.02)
    assert cost.loc[("run-bank-1", "strided_8B", 32), "slowdown"] == pytest.approx(16)
    assert cost.loc[("run-bank-2", "strided_4B", 32), "slowdown"] == pytest.approx(4)  # its own run's stride 1
    assert cost.loc[("run-bank-1", "transpose_naive_4B", 8192), "slowdown"] == pytest.approx(2)
    assert cost.loc[("run-bank-1", "transpose_padded_8B", 8192), "slowdown"] == pytest.approx(1)
    assert cost.loc[("run-bank-1", "strided_4B", 1), "clocks_per_read"] == pytest.approx(1)
    assert cost.loc[("run-bank-1", "strided_8B", 32), "clocks_per_read"] == pytest.approx(32)
    assert np.isnan(cost.loc[("run-bank-1", "transpose_naive_8B", 8192), "clocks_per_read"])
    assert cost.loc[("run-bank-1", "strided_8B", 32), "model_ways"] == 16
    assert cost.loc[("run-bank-1", "transpose_naive_4B", 8192), "model_ways"] == 32
    # another block size, or another reads per thread, has no reference here: no slowdown rather than a wrong one
    lone = view.with_costs(pd.concat([fake_run({("strided_4B", 1): 1.0}), fake_run({("strided_4B", 2): 2.0},
                                                                                     block=512)]))
    assert np.isnan(lone["slowdown"].iloc[1]) and view.with_costs(fake_run({}).head(0)).empty


def test_clocks_per_read_needs_a_clock():
    row = fake_run({("strided_4B", 1): ONE_CLOCK_MS}).iloc[0].to_dict()
    assert view.clocks_per_read(row) == pytest.approx(1)
    for clock in (np.nan, 0, None):
        assert np.isnan(view.clocks_per_read({**row, "sm_clock_mhz": clock}))


def test_the_takeaway_says_what_the_widest_stride_and_the_naive_tile_cost():
    assert view.takeaway(fake_run(RUN)) == (
        "4-byte words 32 apart take 32.3× as long as neighbouring words (32-way in the bank model), 1.02× in rows "
        "padded to 33 words; 8-byte words 32 apart 16.0× (16-way), padded 1.00×; the padded tile transposes 4-byte "
        "words 2.0× as fast as the naive one (3,464 vs 1,732 GB/s); 8-byte words 1.50× (3,579 vs 2,386 GB/s).")


def test_the_takeaway_of_a_partial_run():
    only_4 = {k: v for k, v in RUN.items() if k[0] in ("strided_4B",) and k[1] in (1, 8)}
    assert view.takeaway(fake_run(only_4)) == ("4-byte words 8 apart take 8.1× as long as neighbouring words (8-way "
                                               "in the bank model).")
    only_8 = {k: v for k, v in RUN.items() if k[0].endswith("8B")}
    assert view.takeaway(fake_run(only_8)).startswith("8-byte words 32 apart take 16.0× as long as neighbouring words "
                                                      "(16-way in the bank model), 1.00× in rows padded to 33 words; "
                                                      "the padded tile transposes 8-byte words 1.50× as fast")
    assert view.takeaway(fake_run({("strided_4B", 1): 1.0})) is None  # nothing to judge against
    assert view.takeaway(fake_run({("transpose_naive_8B", 8192): 1.0})) is None  # the padded tile is missing
    assert view.takeaway(fake_run({}).head(0)) is None


def test_the_headline_gives_conflict_free_reads_per_word_size():
    line = view.headline(fake_run(RUN))
    assert line.startswith("**Conflict-free shared-memory reads (stride 1), all SMs together: 4-byte words ")
    assert "1.00 SM clocks per warp read; 8-byte words" in line and "2.00 SM clocks per warp read**" in line


def test_the_strided_chart_draws_each_series_against_stride_one():
    fig = view.strided_figure(fake_run(RUN))
    assert [t.name for t in fig.data] == [bank.LABELS[v] for v in view.STRIDED_SERIES]
    assert list(fig.data[0].x) == list(bank.STRIDES) and list(fig.data[2].y) == pytest.approx([1, 2, 4, 8, 16, 16])
    assert fig.data[1].line.dash == "dash" and fig.data[0].line.color == fig.data[1].line.color
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert "block 256, 4,096 reads per thread" in fig.layout.title.text and fig.data[0].text is None
    _, clocks, ways = fig.data[0].customdata[-1][:3]  # stride 32 of 4-byte words, in the hover
    assert clocks == pytest.approx(32.32) and ways == 32 and "-way conflict" in fig.data[0].hovertemplate


def test_the_transpose_chart_labels_the_naive_tile_with_its_cost():
    fig = view.transpose_figure(fake_run(RUN))
    assert list(fig.data[0].x) == ["4-byte words: naive tile [32][32]", "4-byte words: padded tile [32][33]",
                                   "8-byte words: naive tile [32][32]", "8-byte words: padded tile [32][33]"]
    assert list(fig.data[0].text) == ["1,732 GB/s · 2.0× the time", "3,464 GB/s", "2,386 GB/s · 1.50× the time",
                                      "3,579 GB/s"]
    assert "8,192 × 8,192" in fig.layout.title.text


def test_the_table_names_its_columns_in_words():
    table = view.table(fake_run(RUN))
    assert {"× conflict-free", "SM clocks per warp read", "bank model (ways)", "reads per thread"} <= set(table)
    assert table["variant"].iloc[0] == "4-byte words"


# --- the kernel: every read a shared load of its own -----------------------------------------------------------------
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA toolkit) is not on PATH")
def test_each_read_of_a_trip_is_one_volatile_shared_load_at_its_own_offset(tmp_path):
    """The strided kernels' inner loop, as nvcc compiles it: 32 shared loads a trip (none merged into a wide load, none
    kept in a register), at offsets 0 … 31 words from one base, and no global load at all."""
    source = paths.kernel_sources()["bank_conflicts"]
    done = subprocess.run(["nvcc", "--ptx", "-arch=sm_90", "-O3", "-o", str(tmp_path / "k.ptx"), str(source)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    ptx = (tmp_path / "k.ptx").read_text()
    for name, width in (("strided_4B", 4), ("strided_8B", 8)):
        body = ptx[ptx.index(f".entry {name}("):]
        body = body[:body.index("\n}")]
        loads = re.findall(rf"ld\.volatile\.shared\.u{8 * width}\s+%\w+, \[(%\w+)(?:\+(\d+))?\];", body)
        assert len(loads) == bank.READS_PER_TRIP and len({base for base, _ in loads}) == 1, (name, loads)
        assert sorted(int(offset or 0) for _, offset in loads) == [width * k for k in range(bank.READS_PER_TRIP)]
        assert "ld.global" not in body and "ld.shared" not in body.replace("ld.volatile.shared", "")


def test_a_talk_scene_may_draw_the_strided_reads_or_the_transposes():
    from gpu.present import talks

    assert talks.talk_charts(bank.NAME) == ["strided", "transpose"]
    assert view.TALK_FIGURES["strided"](fake_run(RUN)).data[0].name == "4-byte words"
