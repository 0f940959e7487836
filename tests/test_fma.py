"""The compute ceiling without a GPU: the FMA lanes table and theoretical rate, the experiment's parameters, its exact
expected sums, flops, roofs and chart, on fake rows."""

import math

import numpy as np
import pandas as pd
import pytest

from gpu import bench
from gpu.core import compute
from gpu.core.errors import ValidationError, VerificationError
from gpu.core.limits import Limits
from gpu.core.roofline import COMPUTE
from gpu.experiments import fma, sweep_of
from gpu.experiments.fma import sweep as fma_sweep
from gpu.experiments.fma import view as compute_chart
from tests.sweep_walk import StandInTelemetry

GiB = 1024**3
H200_LIMITS = Limits(139 * GiB, 140 * GiB, 16 * GiB, 120 * GiB, 1024, 32)
H200_THREADS = 132 * 8 * fma.WAVES * 256  # block 256: 8 blocks fill an SM's 2048 threads


# --- gpu.core.compute -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("capability,fp32,fp64", [
    ("9.0", 128, 64), ((9, 0), 128, 64), ("8.0", 64, 32), ("8.6", 128, 2), ("8.9", 128, 2), ("7.5", 64, 2),
    ("7.0", 64, 32),
])
def test_fma_lanes_follow_the_programming_guide_table(capability, fp32, fp64):
    assert compute.fma_lanes(capability, "fp32") == fp32 and compute.fma_lanes(capability, "fp64") == fp64


@pytest.mark.parametrize("capability", ["10.0", "12.0", "8.7", "", None, "nine", (9,), "9.x"])
def test_a_capability_not_in_the_table_has_no_theoretical_figure(capability):
    assert compute.fma_lanes(capability, "fp32") is None
    assert compute.theoretical_flops(132, capability, "fp32", 1980) is None


def test_theoretical_rate_is_sms_times_lanes_times_two_times_clock():
    assert compute.theoretical_flops(132, "9.0", "fp32", 1980) == pytest.approx(66.908e12, rel=1e-4)
    assert compute.theoretical_flops(132, "9.0", "fp64", 1980) == pytest.approx(33.454e12, rel=1e-4)
    assert compute.theoretical_flops(108, "8.0", "fp32", 1410) == pytest.approx(19.49e12, rel=1e-3)  # A100's 19.5
    # at the clock a run recorded, not the maximum: a GPU that slowed down is judged at its own clock
    assert compute.theoretical_flops(132, "9.0", "fp32", 1755) / compute.theoretical_flops(132, "9.0", "fp32", 1980) \
        == pytest.approx(1755 / 1980)
    for clock in (math.nan, None, 0, "fast"):
        assert compute.theoretical_flops(132, "9.0", "fp32", clock) is None
    with pytest.raises(ValueError, match="fp16"):
        compute.fma_lanes("9.0", "fp16")


# --- parameters -----------------------------------------------------------------------------------------------
def test_defaults_are_valid_and_the_runner_takes_them():
    params = fma.parse_params({})
    assert fma.invalid_reasons(params, H200_LIMITS) == []
    points = list(params.points())
    assert len(points) == 2 * 5 and points[0] == ("fp32", 256, 1, 1 << 14) and points[-1] == ("fp64", 256, 16, 1 << 14)
    [job] = bench.experiment_jobs(bench.parse_args(["fma", "--profile", "interactive"]))
    assert fma.parse_params(job) == params
    [job] = bench.experiment_jobs(bench.parse_args(["fma", "--precisions", "fp64", "--chains", "1,8",
                                                    "--block-sizes", "128,1024", "--fmas-per-thread", "2^16"]))
    assert list(fma.parse_params(job).points()) == [("fp64", b, c, 1 << 16) for b in (128, 1024) for c in (1, 8)]


@pytest.mark.parametrize("raw,message", [
    ({"chains": [3]}, "unknown chain count '3' (known: 1, 2, 4, 8, 16)"),
    ({"chains": [32]}, "unknown chain count '32'"),
    ({"chains": []}, "choose at least one chain count"),
    ({"precisions": ["fp16"]}, "unknown precision 'fp16'"),
    ({"precisions": []}, "choose at least one precision"),
    ({"block_sizes": [100]}, "block size 100 is not a multiple of 32 (the warp size)"),
    ({"block_sizes": [2048]}, "block size 2048 must be from 32 to 1024"),
    ({"fmas_per_thread": 1000}, "FMAs per thread 1000 must be a power of two from 1024 to 1048576"),
    ({"fmas_per_thread": 1 << 21}, "must be a power of two from 1024"),
    ({"profile": "fastest"}, "unknown profile 'fastest'"),
])
def test_bad_parameters_are_explained(raw, message):
    reasons = fma.invalid_reasons(fma.parse_params(raw), H200_LIMITS)
    assert any(message in r for r in reasons), reasons


def test_unknown_keys_and_non_numbers_are_refused():
    with pytest.raises(ValidationError, match="unknown parameter: chain"):
        fma.parse_params({"chain": [1]})
    with pytest.raises(ValidationError, match="whole numbers"):
        fma.parse_params({"chains": ["many"]})


def test_the_grid_fills_every_sm_many_times():
    assert fma.grid_blocks(132, 2048, 256) * 256 == H200_THREADS == 132 * 2048 * 16
    assert fma.grid_blocks(132, 2048, 96) == 132 * 21 * 16  # 21 blocks of 96 fit in 2048 threads
    assert fma.grid_blocks(132, 1536, 1024) == 132 * 1 * 16


# --- exact expected sums --------------------------------------------------------------------------------------
@pytest.mark.parametrize("precision", ["fp32", "fp64"])
@pytest.mark.parametrize("chains", [1, 4, 16])
def test_expected_sums_match_the_kernels_arithmetic_step_by_step(precision, chains):
    """The kernel's chains, replayed in NumPy in the kernel's precision (a = b = 1: every step is exact)."""
    dtype = np.float32 if precision == "fp32" else np.float64
    threads, fmas = 3000, 1024
    start = (np.arange(threads) & 1023).astype(dtype)
    x = np.stack([start + dtype(c) for c in range(chains)])
    for _ in range(fmas // chains):
        x = x * dtype(fma.A) + dtype(fma.B)
    got = x[0].copy()
    for c in range(1, chains):
        got += x[c]
    expected = fma.expected_sums(threads, chains, fmas, precision)
    assert expected.dtype == dtype and np.array_equal(expected, got)
    fma.check_sums(expected, got, "replay")


def test_the_largest_sums_stay_exact_in_fp32():
    sums = fma.expected_sums(2048, 16, 1 << 20, "fp32")
    exact = (np.arange(2048) & 1023) * 16 + 120 + (1 << 20)
    assert sums.max() < 2**24 and np.array_equal(sums.astype(np.int64), exact)


def test_a_wrong_or_missing_sum_is_caught_and_named():
    expected = fma.expected_sums(4096, 4, 1 << 14, "fp32")
    got = expected.copy()
    got[1000] -= 1  # one FMA short in one thread
    got[3000] = np.nan  # a thread that never wrote (the poison)
    with pytest.raises(VerificationError, match=r"FP32 FMA \(4 chains, block 256\): 2 of 4,096 threads wrote a wrong "
                                                r"sum, first thread 1,000 \(expected 20390, got 20389\)"):
        fma.check_sums(expected, got, "FP32 FMA (4 chains, block 256)")
    with pytest.raises(VerificationError, match="got 10 results, expected 4,096"):
        fma.check_sums(expected, expected[:10], "short")
    # the count of FMAs is in the sum: a kernel that ran half the work fails
    with pytest.raises(VerificationError):
        fma.check_sums(expected, fma.expected_sums(4096, 4, 1 << 13, "fp32"), "half the work")


# --- flops, roofs ---------------------------------------------------------------------------------------------
def fake_run(rates_tflops: dict, capability="9.0", clock=1980.0, device="NVIDIA H200", block=256) -> pd.DataFrame:
    """Rows as the experiment writes them, with the median time that gives each (precision, chains) its rate."""
    rows = []
    for (precision, chains), tflops in rates_tflops.items():
        flop = 2 * H200_THREADS * (1 << 14)
        rows.append({"run_id": "run-fma-1", "experiment": "fma", "variant": precision, "group": "fma",
                     "direction": "device", "block_size": block, "elements": H200_THREADS,
                     "chains": chains, "intensity": 1 << 14, "bytes": H200_THREADS * fma.ITEM_BYTES[precision],
                     "median_ms": flop / (tflops * 1e12) * 1e3, "cv": 0.004, "sm_clock_mhz": clock,
                     "sm_clock_max_mhz": 1980, "sm_count": 132, "compute_capability": capability,
                     "device_name": device, "timestamp": "2026-11-25T10:00:00+00:00", "backend": "live",
                     "profile": "interactive", "gpu_uuid": "GPU-1234abcd-0000-0000-0000-00000000beef"})
    return pd.DataFrame(rows)


H200_RUN = {("fp32", 1): 30.0, ("fp32", 2): 50.0, ("fp32", 4): 62.0, ("fp32", 8): 63.0, ("fp32", 16): 61.0,
            ("fp64", 1): 20.0, ("fp64", 2): 31.0, ("fp64", 4): 32.5, ("fp64", 8): 32.0, ("fp64", 16): 31.0}


def test_flops_count_two_per_fma_of_every_thread():
    row = fake_run({("fp32", 4): 60.0}).iloc[0].to_dict()
    assert fma.flops(row) == 2 * H200_THREADS * 16384
    assert fma.flops_per_second(row) == pytest.approx(60e12)


def test_roofs_are_each_precisions_best_median_rate_with_its_share_of_theoretical():
    fp32, fp64 = fma.roofs(fake_run(H200_RUN))
    assert (fp32.name, fp32.kind, fp32.precision, fp32.run_id) == ("FP32 FMA", COMPUTE, "fp32", "run-fma-1")
    assert (fp64.name, fp64.precision) == ("FP64 FMA", "fp64")
    assert fp32.per_second == pytest.approx(63e12) and fp64.per_second == pytest.approx(32.5e12)
    assert "8 independent chains per thread, block 256" in fp32.source
    assert "94% of the theoretical 66.9 TFLOP/s at the 1,980 MHz recorded" in fp32.source
    assert "4 independent chains" in fp64.source and "97% of the theoretical 33.5 TFLOP/s" in fp64.source
    assert "writes one 4-byte result per thread" in fp32.source and "8-byte" in fp64.source


def test_roofs_of_a_partial_or_unknown_run():
    only_fp64 = fma.roofs(fake_run({("fp64", 8): 1.0}, capability="12.0"))
    assert [r.name for r in only_fp64] == ["FP64 FMA"]
    assert "no theoretical figure for compute capability 12.0" in only_fp64[0].source
    assert fma.roofs(fake_run({}).reindex(columns=["variant", "median_ms"])) == []


# --- chart ----------------------------------------------------------------------------------------------------
def test_chart_draws_tflops_against_chains_with_each_theoretical_line_and_its_share():
    fig = compute_chart.figure(fake_run(H200_RUN))
    names = [t.name for t in fig.data]
    assert names == ["FP32 FMA", "FP32 FMA theoretical at 1,980 MHz: 66.9 TFLOP/s (best 94 %)",
                     "FP64 FMA", "FP64 FMA theoretical at 1,980 MHz: 33.5 TFLOP/s (best 97 %)"]
    fp32 = fig.data[0]
    assert list(fp32.x) == [1, 2, 4, 8, 16] and list(np.round(fp32.y, 3)) == [30, 50, 62, 63, 61]
    assert fig.data[1].line.dash == "dash" and list(fig.data[1].y) == pytest.approx([66.908] * 2, rel=1e-4)
    assert fig.layout.xaxis.type == "log" and list(fig.layout.xaxis.tickvals) == [1, 2, 4, 8, 16]
    assert "TFLOP/s" in fig.layout.yaxis.title.text and "chains per thread" in fig.layout.xaxis.title.text
    assert fp32.text is None and "cv" in fp32.hovertemplate


def test_stage_chart_labels_each_point_with_its_share():
    fig = compute_chart.figure(fake_run(H200_RUN), stage=True)
    assert list(fig.data[0].text) == ["45 %", "75 %", "93 %", "94 %", "91 %"]
    assert "cv" not in fig.data[0].hovertemplate


def test_chart_of_several_blocks_an_unknown_capability_and_a_hostile_device_name():
    frame = pd.concat([fake_run({("fp32", 1): 5.0, ("fp32", 8): 9.0}, capability="12.0", device="<b>GPU</b>"),
                       fake_run({("fp32", 1): 6.0, ("fp32", 8): 9.5}, capability="12.0", device="<b>GPU</b>",
                                block=1024)])
    fig = compute_chart.figure(frame)
    names = [t.name for t in fig.data]
    assert names == ["FP32 FMA, block 256", "FP32 FMA, block 1024",
                     "FP32 FMA: no theoretical figure for compute capability 12.0"]
    assert "&lt;b&gt;GPU&lt;/b&gt;" in fig.layout.title.text and "<b>GPU" not in fig.layout.title.text


# --- the sweep's bookkeeping, on a stand-in runtime -------------------------------------------------------------
class _StandInRuntime:
    """Just enough of GpuRuntime for the sweep: each "launch" records its arguments, and reading the output back
    gives what a kernel running ``trips × 256 + short`` FMAs per thread would have written."""

    sm_count, attributes = 132, {"MAX_THREADS_PER_MULTIPROCESSOR": 2048}

    def __init__(self, short: int = 0):
        import contextlib

        from gpu.core.limits import Limits

        runtime = self
        self.launches, self.poisoned, self.short = [], [], short

        class Ledger:
            def device_buffer(self, nbytes):
                return 0xD000

            def host_buffer(self, nbytes, mode):
                return np.zeros(nbytes // 4, np.uint32)  # as AllocationLedger: uint32 words

        class Cuda:
            @staticmethod
            def memset_d32(pointer, value, words):
                runtime.poisoned.append((value, words))

            @staticmethod
            def memcpy_dtoh(destination, source):
                name, trips, threads = runtime.launches[-1]
                _, precision, chains = name.split("_")
                sums = fma.expected_sums(threads, int(chains[1:]), trips * fma.FMAS_PER_TRIP + runtime.short,
                                         precision)
                destination[:] = sums[:destination.size]

        self.cuda, self.telemetry, self.Ledger = Cuda, StandInTelemetry(), Ledger
        self.job_scope = lambda: contextlib.nullcontext(Ledger())
        self.limits = lambda: Limits(1 << 36, 1 << 37, 1 << 34, 1 << 36, 1024, 32)

    def kernel(self, stem, name):
        assert stem == "fma"

        def launch(out, a, b, trips, block, grid, stream):
            assert (type(a), type(b)) == ((np.float32,) * 2 if "fp32" in name else (np.float64,) * 2)
            assert (float(a), float(b), type(trips)) == (fma.A, fma.B, np.uint32)
            self.launches.append((name, int(trips), block[0] * grid[0]))

        return launch


class _Timer:
    def __init__(self, gpu, ledger, flush_l2=True, hold=True):
        assert not flush_l2 and hold  # nothing is read: no flush; the stream is held while the launch is queued

    def timer_name(self, hold=None):
        return "cuda_event_held"

    def once(self, launch):
        launch("stream")
        return 2.0


def test_each_point_launches_its_kernel_over_the_whole_grid_and_verifies_every_thread(monkeypatch):
    monkeypatch.setattr(fma_sweep, "KernelTimer", _Timer)
    runtime = _StandInRuntime()
    params = fma.parse_params({"block_sizes": [96, 256], "chains": [1, 16], "fmas_per_thread": 1 << 12})
    rows = pd.DataFrame(sweep_of(fma.NAME)(params, runtime, lambda *a: None, lambda: False))
    assert list(zip(rows["variant"], rows["block_size"], rows["chains"], rows["intensity"], strict=True)) == \
        list(params.points())
    threads_96 = 132 * 21 * 16 * 96
    assert list(rows["elements"][:2]) == [threads_96] * 2 and rows["elements"].iloc[2] == H200_THREADS
    assert list(rows["bytes"]) == [n * (4 if v == "fp32" else 8) for n, v in zip(rows["elements"], rows["variant"],
                                                                                   strict=True)]
    assert rows["verified"].all() and rows["chains"].notna().all() and set(rows["timer"]) == {"cuda_event_held"}
    launched = {(name, trips, threads) for name, trips, threads in runtime.launches}
    assert ("fma_fp32_x16", 16, H200_THREADS) in launched and ("fma_fp64_x1", 16, threads_96) in launched
    assert (0xFFFFFFFF, 2 * H200_THREADS) in runtime.poisoned  # FP64 output poisoned (NaN) before its point


def test_a_kernel_one_fma_short_fails_the_job(monkeypatch):
    monkeypatch.setattr(fma_sweep, "KernelTimer", _Timer)
    params = fma.parse_params({"precisions": ["fp64"], "chains": [8], "fmas_per_thread": 1 << 10})
    with pytest.raises(VerificationError, match=r"FP64 FMA \(8 chains, block 256\): 4,325,376 of 4,325,376 threads"):
        sweep_of(fma.NAME)(params, _StandInRuntime(short=-1), lambda *a: None, lambda: False)
