"""The device-to-device copy experiment without a GPU: parameters and their reasons, points, roofs, noise kinds,
the chart's axes and escaping, and the SM copy kernel's PTX (16-byte accesses)."""

import math
import shutil
import subprocess

import pytest

from gpu import bench
from gpu.core import paths, schema
from gpu.core.errors import ValidationError
from gpu.core.roofline import MEMORY
from gpu.core.units import GiB, KiB, MiB
from gpu.experiments import device_copy as dc
from gpu.experiments.device_copy import view as chart
from gpu.sweeps import harness

L2 = 60 * MiB
PROVENANCE = {"device_name": "NVIDIA H200", "compute_capability": "9.0", "sm_count": 132, "memory_total_bytes": 1,
              "driver_version": "580", "cuda_version": "13.0", "pycuda_version": "2026.1", "pcie_gen": 5,
              "pcie_width": 16, "pcie_gbps_theoretical": 63.0, "hbm_gbps_theoretical": 4800.0,
              "sm_clock_max_mhz": 1980, "mem_clock_max_mhz": 2619, "host": "box", "timestamp": "2026-11-25T10:00:00",
              "git_commit": "abc", "backend": "replay", "l2_bytes": L2, "gpu_uuid": "GPU-0123-4567"}


def fake_frame(points, provenance=None):
    """Rows in the experiment's shape: (variant, size, method, GB/s) each, the time derived from GB/s."""
    rows = []
    for variant, size, method, gbps in points:
        median_ms = 2 * size / (gbps * 1e6)
        row = {"run_id": "run1", "experiment": dc.NAME, "variant": variant, "direction": "device",
               "bytes": dc.bytes_moved(size), "elements": size, "median_ms": median_ms, "min_ms": median_ms,
               "max_ms": median_ms, "cv": 0.01, "samples": 10, "gbps": gbps, "stop_reason": "converged",
               "profile": "precise", "timer": dc.TIMERS[method], "verified": True, "samples_ms": [median_ms] * 10}
        if method == "batched":
            row.update(copies_per_sample=8)
        if variant == "l2_copy":
            passes = dc.l2_passes(size, L2)
            row.update(passes_per_launch=passes, bytes=dc.bytes_moved(size, passes),
                       median_ms=median_ms * passes)
        rows.append(row)
    return schema.make_frame(rows, {**PROVENANCE, **(provenance or {})})


SWEEP = [("copy_engine", 4 * KiB, "batched", 3.0), ("sm_copy", 4 * KiB, "batched", 2.5),
         ("copy_engine", 4 * MiB, "batched", 3900.0), ("sm_copy", 4 * MiB, "batched", 5200.0),
         ("sm_copy", 8 * MiB, "batched", 6100.0), ("sm_copy", 16 * MiB, "batched", 7000.0),  # 32 MiB: > half of L2
         ("copy_engine", 256 * MiB, "batched", 4160.0), ("copy_engine", 1 * GiB, "batched", 4240.0),
         ("sm_copy", 1 * GiB, "batched", 3900.0), ("copy_engine", 1 * GiB, "single", 4200.0),
         ("copy_engine", 4 * KiB, "single", 1.1),
         ("l2_copy", 1 * MiB, "single", 9500.0), ("l2_copy", 4 * MiB, "single", 10400.0)]


# --- parameters ------------------------------------------------------------------------------------------------------
def test_the_defaults_are_4_kib_to_1_gib_in_x4_steps_every_copy_both_methods_and_valid():
    params = dc.parse_params({})
    assert params.sizes == [4 * KiB * 4**i for i in range(10)] and params.sizes[-1] == GiB
    assert dc.invalid_reasons(params, None) == []
    points = list(params.points())
    assert len(points) == 10 * 3 * 2  # the L2 copy answers only at L2-resident sizes, single method (others: no row)
    assert points[:4] == [("copy_engine", 4 * KiB, "cuda_event"), ("copy_engine", 4 * KiB, "cuda_event_batched_held"),
                          ("sm_copy", 4 * KiB, "cuda_event"), ("sm_copy", 4 * KiB, "cuda_event_batched_held")]


def test_the_runner_takes_the_full_range_to_4_gib():
    [job] = bench.experiment_jobs(bench.parse_args(["device-copy", "--sizes", dc.FULL_RANGE,
                                                    "--methods", "batched"]))
    params = dc.parse_params(job)
    assert params.sizes[0] == 4 * KiB and params.sizes[-1] == 4 * GiB and len(params.sizes) == 21
    assert params.methods == ["batched"] and dc.invalid_reasons(params, None) == []


@pytest.mark.parametrize("raw,reason", [
    ({"sizes": [4 * KiB + 2]}, "size 4098 B is not a multiple of 4 B (the check pattern is made of 4-byte words"),
    ({"sizes": [8 * GiB]}, "size 8 GiB must be from 4 B to 4 GiB"),
    ({"sizes": [0]}, "size 0 B must be"),
    ({"sizes": []}, "choose at least one size"),
    ({"variants": ["dma"]}, "unknown copy 'dma' (known: copy_engine, sm_copy, l2_copy)"),
    ({"variants": []}, "choose at least one copy"),
    ({"methods": ["twice"]}, "unknown timing method 'twice' (known: single, batched)"),
    ({"methods": []}, "choose at least one timing method"),
    ({"profile": "fastest"}, "fastest"),
    ({"sizes": list(range(4, 4 * 1200, 4))}, "points requested; at most 2000"),
])
def test_each_bad_value_is_refused_with_its_reason(raw, reason):
    reasons = dc.invalid_reasons(dc.parse_params(raw), None)
    assert any(reason in r for r in reasons), reasons


def test_sizes_not_a_multiple_of_16_bytes_are_accepted():
    assert dc.invalid_reasons(dc.parse_params({"sizes": [4 * KiB + 4, 1 * MiB + 12, 4]}), None) == []


def test_unknown_keys_and_non_numbers_are_refused():
    with pytest.raises(ValidationError, match="unknown parameter: size"):
        dc.parse_params({"size": [4096]})
    with pytest.raises(ValidationError, match="copy sizes must be whole numbers"):
        dc.parse_params({"sizes": ["big"]})


def test_memory_is_checked_against_the_device():
    class Limits:
        free_device_bytes = 4 * GiB

    reasons = dc.invalid_reasons(dc.parse_params({"sizes": [2 * GiB]}), Limits())
    assert reasons and "needs 4 GiB of device memory" in reasons[0]
    assert dc.invalid_reasons(dc.parse_params({"sizes": [1 * GiB]}), Limits()) == []


def test_bytes_count_the_read_and_the_write():
    assert dc.bytes_moved(256 * MiB) == 512 * MiB


# --- declarations ----------------------------------------------------------------------------------------------------
def test_roofs_hbm_is_the_largest_batched_copy_engine_point_and_l2_the_best_many_pass_copy():
    roofs = {r.name: r for r in dc.roofs(fake_frame(SWEEP))}
    assert set(roofs) == {"HBM", "L2"}
    assert roofs["HBM"].kind == roofs["L2"].kind == MEMORY
    assert roofs["HBM"].per_second == pytest.approx(4240e9)  # 1 GiB batched, not the faster single or 256 MiB
    # the L2 copy of 4 MiB, not the back-to-back launches of small SM copies (launch-bound, 6,100-7,000 here)
    assert roofs["L2"].per_second == pytest.approx(10400e9)
    assert "1 GiB batched" in roofs["HBM"].source and "read + write" in roofs["HBM"].source
    assert "4 MiB kept in the L2" in roofs["L2"].source and "passes in one launch" in roofs["L2"].source
    assert roofs["HBM"].run_id == "run1"
    assert roofs["L2"].cache and not roofs["HBM"].cache  # the roofline judges kernels against HBM first


def test_the_l2_copy_runs_only_where_its_working_set_fits_and_fills_the_gpu():
    assert dc.l2_passes(512 * KiB, L2) is None  # too small to keep every SM busy
    assert dc.l2_passes(4 * MiB, L2) == dc.L2_LAUNCH_BYTES // (8 * MiB)
    assert dc.l2_passes(15 * MiB, L2) is not None and dc.l2_passes(16 * MiB, L2) is None  # 4 × 16 MiB > 60 MiB
    assert dc.bytes_moved(4 * MiB, 512) == 2 * 4 * MiB * 512


def test_a_roof_the_run_cannot_give_is_left_out():
    small = [p for p in SWEEP if p[1] < 256 * MiB]
    assert [r.name for r in dc.roofs(fake_frame(small))] == ["L2"]
    without_l2_copy = [p for p in SWEEP if p[0] != "l2_copy"]
    assert [r.name for r in dc.roofs(fake_frame(without_l2_copy))] == ["HBM"]
    singles = [p for p in SWEEP if p[2] == "single" and p[0] != "l2_copy"]
    assert dc.roofs(fake_frame(singles)) == []  # HBM comes from batched copies only
    assert dc.roofs(fake_frame(SWEEP).iloc[0:0]) == []


def test_noise_kind_short_copies_are_small_copies_and_longer_ones_kernels():
    assert dc.noise_kind({"median_ms": 0.003}) == "small copy"
    assert dc.noise_kind({"median_ms": 0.019}) == "small copy"
    assert dc.noise_kind({"median_ms": 0.5}) == "kernel"
    from gpu.results.analysis.compare import RUN_TO_RUN_FLOORS

    assert {dc.noise_kind({"median_ms": ms}) for ms in (0.001, 1)} <= set(RUN_TO_RUN_FLOORS)


def test_declarations_cover_every_variant():
    assert set(dc.LABELS) == set(dc.VARIANTS)
    assert set(dc.SHOW_COLUMNS) <= set(schema.COLUMNS)
    assert set(dc.KEY_COLUMNS) <= set(schema.COLUMNS)


def test_copies_per_sample_grows_until_a_batch_lasts_a_millisecond():
    calls = []

    def timed(copies):  # 3 µs a copy
        calls.append(copies)
        return copies * 0.003

    copies = harness.copies_per_sample(timed)
    assert copies * 0.003 >= harness.BATCH_MS and calls[0] == 1 and copies <= harness.MAX_BATCH
    assert harness.copies_per_sample(lambda n: 2.0 * n) == 1  # a 2 ms copy is a sample on its own
    assert harness.copies_per_sample(lambda n: 1e-6 * n) == harness.MAX_BATCH


# --- the chart -------------------------------------------------------------------------------------------------------
def test_the_chart_draws_a_line_per_copy_and_method_and_both_roofs_on_log_axes():
    fig = chart.figure(fake_frame(SWEEP))
    names = [t.name for t in fig.data]
    assert "copy engine (cuMemcpyDtoDAsync), batched" in names and "SM copy kernel (16-byte vectors), batched" in names
    assert "copy engine (cuMemcpyDtoDAsync), single copy" in names
    assert "HBM roof (4,240 GB/s)" in names and "L2 roof (10,400 GB/s)" in names
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert "4 KiB" in fig.layout.xaxis.ticktext and "1 GiB" in fig.layout.xaxis.ticktext
    assert "NVIDIA H200" in fig.layout.title.text and "4567" in fig.layout.title.text  # device and board
    batched = next(t for t in fig.data if t.name == "copy engine (cuMemcpyDtoDAsync), batched")
    assert list(batched.x) == sorted(batched.x) and batched.customdata[0][0] == "4 KiB"
    assert "8 back-to-back copies a sample" in batched.customdata[0][3]


def test_the_chart_marks_where_each_roof_was_read_and_the_sizes_that_fit_in_l2():
    fig = chart.figure(fake_frame(SWEEP))
    rings = {(t.x[0], t.y[0]) for t in fig.data if t.mode == "markers"}
    assert rings == {(1 * GiB, 4240.0), (4 * MiB, 10400.0)}  # the HBM and the L2 point (the many-pass L2 copy)
    band = fig.layout.shapes[0]
    assert (band.x0, band.x1) == (4 * KiB, 15 * MiB)  # sizes whose source + destination fit in half the 60 MiB L2
    label = next(a for a in fig.layout.annotations if "L2" in a.text)
    assert "half the 60 MiB L2" in label.text and label.x == pytest.approx(math.log10(15 * MiB))  # log axis: log10


def test_an_l2_figure_below_the_hbm_roof_is_not_drawn_as_a_roof():
    """An L2 measurement that did not reach the cache's rate (as back-to-back launches of an L2-sized copy did: a
    launch lasts ~2 µs) is below HBM: named for what it is, never drawn as a roof."""
    slow = [(v, size, m, 3000.0 if (v, size) == ("l2_copy", 4 * MiB) else g) for v, size, m, g in SWEEP
            if (v, size) != ("l2_copy", 1 * MiB)]
    names = [t.name for t in chart.figure(fake_frame(slow)).data]
    assert "L2 figure (3,000 GB/s): below HBM, not a roof" in names and not any("L2 roof" in (n or "") for n in names)
    assert "HBM roof (4,240 GB/s)" in names


def test_the_chart_escapes_run_content_and_sizes_for_the_stage():
    fig = chart.figure(fake_frame(SWEEP, {"device_name": "<a href='x'>GPU</a>"}), stage=True)
    assert "<a href" not in fig.layout.title.text and "&lt;a href" in fig.layout.title.text
    assert fig.layout.height == chart.STAGE_HEIGHT and fig.layout.font.size >= 20
    empty = chart.figure(fake_frame(SWEEP).iloc[0:0])
    assert len(empty.data) == 0


# --- the kernel ------------------------------------------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA toolkit) is not on PATH")
def test_the_sm_copy_moves_16_byte_vectors_with_four_loads_in_flight(tmp_path):
    source = paths.kernel_sources()["device_copy"]
    done = subprocess.run(["nvcc", "--ptx", "-arch=sm_90", "-O3", "-o", str(tmp_path / "k.ptx"), str(source)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    ptx = (tmp_path / "k.ptx").read_text()
    assert ptx.count("ld.global.nc.v4.u32") >= 4 and ptx.count("st.global.v4.u32") >= 4
    assert ptx.count("ld.global.nc.u8") == 1 and ptx.count("st.global.u8") == 1  # the tail, a byte a thread
