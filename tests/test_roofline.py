"""The roofline from runs (gpu.present.roofline) and its figure: which roof binds each kernel, the fraction it
reaches, the ridge, kernels without arithmetic, missing roofs and run content as data. The experiments and rows here
are fakes built for the tests (a fake ceiling experiment, fake kernels); no page ever shows them."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import pytest

from gpu.core import schema
from gpu.core.roofline import COMPUTE, MEMORY, Roof
from gpu.experiments import coalescing, occupancy_sweep, reduction, streams, suites
from gpu.present import roofline as rl
from gpu.present.charts import roofline as chart
from gpu.service.backends import ReplayBackend

HBM, L2 = 4e12, 10e12  # bytes/s
FP32, FP64 = 40e12, 20e12  # FLOP/s: FP32 ridge at 10 FLOP/B over HBM, FP64 at 5


def row(experiment="kern", variant="v", ms=1.0, nbytes=8e9, elements=1e9, run_id="r1", direction="device",
        intensity=None, block=256, timestamp="2026-11-25T10:00:00", device="NVIDIA H200", **extra) -> dict:
    return {"run_id": run_id, "experiment": experiment, "variant": variant, "direction": direction, "bytes": nbytes,
            "median_ms": ms, "group": extra.get("group"),
            **{c: extra.get(c) for c in schema.COORDINATE_COLUMNS + schema.DETAIL_COLUMNS}, "elements": elements,
            "intensity": intensity,
            "block_size": block, "device_name": device, "timestamp": timestamp, **extra}


def ceiling_rows(run_id="c1", timestamp="2026-11-25T09:00:00", device="NVIDIA H200") -> list[dict]:
    """A fake ceiling run: its rows carry the rates its fake ``roofs`` reads back."""
    return [row("ceil", name, run_id=run_id, timestamp=timestamp, device=device, rate=rate)
            for name, rate in (("HBM", HBM), ("L2", L2), ("FP32 FMA", FP32), ("FP64 FMA", FP64))]


def fake_roofs(frame: pd.DataFrame) -> list[Roof]:
    kinds = {"HBM": (MEMORY, ""), "L2": (MEMORY, ""), "FP32 FMA": (COMPUTE, "fp32"), "FP64 FMA": (COMPUTE, "fp64")}
    return [Roof(r.variant, kinds[r.variant][0], r.rate, f"fake {r.variant}", r.run_id, kinds[r.variant][1],
                 cache=r.variant == "L2") for r in frame.itertuples()]


def per_element(count: float):
    return lambda r: count * r["elements"] if r["variant"] != "end_to_end" else math.nan


EXPERIMENTS = {
    "ceil": SimpleNamespace(roofs=fake_roofs),
    "kern": SimpleNamespace(flops=per_element(2), LABELS={"v": "dot product"}),
    "copy": SimpleNamespace(flops=lambda r: 0.0, LABELS={}),
    "chain": SimpleNamespace(flops=lambda r: 2.0 * r["intensity"] * r["elements"], LABELS={"k": "FMA chain"}),
    "dchain": SimpleNamespace(flops=lambda r: 2.0 * r["intensity"] * r["elements"], precision=lambda r: r["variant"],
                              LABELS={"fp64": "FP64 chain", "fp32": "FP32 chain"}),
    "latency": SimpleNamespace(LABELS={}),  # declares no flops: its device rows are not kernels on the roofline
}


def frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows)


def placed(rows: list[dict]) -> tuple[list[Roof], pd.DataFrame]:
    data = frame(rows)
    roofs = rl.measured_roofs(data, EXPERIMENTS)
    return roofs, rl.kernel_points(data, roofs, EXPERIMENTS)


def test_roofs_come_from_the_experiments_that_declare_them_highest_rate_per_name():
    data = frame(ceiling_rows() + [row("ceil", "HBM", run_id="c0", rate=3e12)])
    roofs = rl.measured_roofs(data, EXPERIMENTS)
    assert [r.name for r in roofs] == ["HBM", "L2", "FP64 FMA", "FP32 FMA"]  # memory first, each from the lowest
    assert next(r for r in roofs if r.name == "HBM").per_second == HBM  # the higher of the two runs' HBM
    assert rl.ceiling_experiments(EXPERIMENTS) == ["ceil"]
    assert rl.kernel_experiments(EXPERIMENTS) == ["kern", "copy", "chain", "dchain"]


def test_a_kernel_below_the_ridge_is_memory_bound_at_its_fraction_of_the_hbm_roof():
    # 2 FLOP per 8 bytes: 0.25 FLOP/B; 8 GB in 4 ms = 2,000 GB/s = half the HBM roof
    _, points = placed(ceiling_rows() + [row(ms=4.0)])
    point = points.iloc[0]
    assert point["flop_per_byte"] == pytest.approx(0.25)
    assert point["bound"] == MEMORY and point["roof"] == "HBM"
    assert point["fraction"] == pytest.approx(0.5)
    assert point["sentence"] == "kern · dot product (1,000,000,000 elements; block 256): memory-bound at " \
                                "0.25 FLOP/B; 2,000 GB/s, 50 % of the HBM roof"


def test_a_kernel_above_the_ridge_is_compute_bound_at_its_fraction_of_the_fp32_roof():
    # intensity 64 FMA per element: 128 FLOP / 8 B = 16 FLOP/B, above the ridge at 10; 128e9 FLOP in 8 ms = 16 TFLOP/s
    _, points = placed(ceiling_rows() + [row("chain", "k", ms=8.0, intensity=64)])
    point = points.iloc[0]
    assert point["flop_per_byte"] == pytest.approx(16)
    assert point["bound"] == COMPUTE and point["roof"] == "FP32 FMA"
    assert point["fraction"] == pytest.approx(16e12 / FP32)
    assert "compute-bound at 16 FLOP/B; 16.0 TFLOP/s, 40 % of the FP32 FMA roof" in point["sentence"]


def test_a_kernel_is_judged_against_the_compute_roof_of_the_precision_its_experiment_declares():
    # 16,384 FMA per element over 8 bytes: far above both ridges; 2 × 16,384 × 1e9 FLOP in 1.8 s = 18.2 TFLOP/s
    _, points = placed(ceiling_rows() + [row("dchain", p, ms=1800.0, intensity=16384) for p in ("fp64", "fp32")])
    points = points.set_index("variant")
    assert points.loc["fp64", "roof"] == "FP64 FMA" and points.loc["fp64", "fraction"] == pytest.approx(18.2e12 / FP64,
                                                                                                     rel=1e-3)
    assert "91 % of the FP64 FMA roof" in points.loc["fp64", "sentence"]
    assert points.loc["fp32", "roof"] == "FP32 FMA" and "46 % of the FP32 FMA roof" in points.loc["fp32", "sentence"]
    # an experiment that declares no precision computes in FP32
    _, points = placed(ceiling_rows() + [row("chain", "k", ms=8.0, intensity=64)])
    assert points.iloc[0]["precision"] == "fp32" and points.iloc[0]["roof"] == "FP32 FMA"


def test_a_cache_roof_measured_below_the_dram_roof_bounds_nothing_and_is_named():
    """An L2 figure under HBM (copies too short to show the cache's rate) would make HBM-bound kernels read as
    "110 % of the L2 roof" and move the ridge: kernels are judged against HBM, and the page names the figure."""
    rows = [r if r["variant"] != "L2" else {**r, "rate": 3.5e12} for r in ceiling_rows()]
    roofs, points = placed(rows + [row("copy", "c", ms=2.0), row(ms=4.0)])
    assert [r.name for r in rl.memory_roofs(roofs)] == ["HBM"]
    assert [(c.name, d.name) for c, d in rl.unused_roofs(roofs)] == [("L2", "HBM")]
    assert rl.ridges(roofs)[0].memory.name == "HBM" and rl.ridges(roofs)[0].intensity == pytest.approx(10)
    assert set(points["roof"]) == {"HBM"}
    assert "4,000 GB/s, 100 % of the HBM roof" in points.set_index("variant").loc["c", "sentence"]
    said = rl.unused_roof_sentence(*rl.unused_roofs(roofs)[0])
    assert said.startswith("The L2 figure (fake L2) is below the HBM roof (4,000 GB/s)") and "not drawn" in said
    figure = chart.figure(points, roofs, "test")
    assert not any("L2" in (t.name or "") for t in figure.data) and not any("L2" in a.text
                                                                             for a in figure.layout.annotations)
    assert rl.unused_roofs(rl.measured_roofs(frame(ceiling_rows()), EXPERIMENTS)) == []  # an L2 above HBM is used


def test_the_ridge_is_named_for_the_gpu_per_precision_fp32_first():
    roofs = rl.measured_roofs(frame(ceiling_rows()), EXPERIMENTS)
    ridges = rl.ridges(roofs)
    assert [(r.compute.precision, r.intensity) for r in ridges] == [("fp32", 10), ("fp64", 5)]
    assert all(r.memory.name == "HBM" for r in ridges)
    assert rl.ridge_sentence("NVIDIA H200", ridges) == \
        "H200: the ridge is at 10 FLOP/B (FP32), 5 FLOP/B (FP64) over the HBM roof"
    assert rl.ridge_sentence("NVIDIA H200", rl.ridges([r for r in roofs if r.kind == MEMORY])) is None


def test_kernels_without_arithmetic_stand_by_bytes_per_second_against_the_memory_roofs():
    rows = ceiling_rows() + [row("copy", "c", ms=2.0), row("copy", "fast", ms=1.9), row("copy", "cached", ms=1.0)]
    _, points = placed(rows)
    points = points.set_index("variant")
    assert points["memory_only"].all() and points["flop_per_byte"].isna().all()
    assert points.loc["c", "roof"] == "HBM" and points.loc["c", "fraction"] == pytest.approx(1.0)
    assert "memory only (no arithmetic); 4,000 GB/s, 100 % of the HBM roof" in points.loc["c", "sentence"]
    # within the margin above HBM (conventions, noise): still judged against HBM, and says it exceeds it
    assert points.loc["fast", "roof"] == "HBM" and points.loc["fast", "fraction"] > 1
    # 8,000 GB/s is twice the HBM roof: its data came from L2, the next memory roof
    assert points.loc["cached", "roof"] == "L2" and points.loc["cached", "fraction"] == pytest.approx(0.8)
    assert rl.placed_counts(points) == {"roofline": 0, "memory": 3}


def test_a_tiny_fraction_is_written_with_its_digits_never_as_zero():
    _, points = placed(ceiling_rows() + [row("copy", "slow", ms=7000.0)])
    assert "1.14 GB/s, 0.029 % of the HBM roof" in points.iloc[0]["sentence"]


def test_without_roofs_kernels_are_placed_by_their_own_figures_and_the_page_is_told_what_it_needs():
    rows = [row(ms=4.0), row("copy", "c", ms=2.0)]
    data = frame(rows)
    roofs, points = placed(rows)
    assert roofs == [] and len(points) == 2 and points["fraction"].isna().all() and (points["roof"] == "").all()
    by_variant = points.set_index("variant")["sentence"]
    assert by_variant["v"].endswith("0.25 FLOP/B; 2,000 GB/s (500 GFLOP/s); no roof recorded for this GPU")
    assert by_variant["c"].endswith("4,000 GB/s; no memory roof recorded for this GPU")
    assert rl.missing_ceilings(data, roofs, EXPERIMENTS) == [
        "Not measured for this GPU: a memory roof (HBM bytes/s) and an FP32 compute roof (FLOP/s). The roofline "
        "needs a recording of ceil on it."]
    assert rl.missing_ceilings(frame(ceiling_rows() + rows), rl.measured_roofs(frame(ceiling_rows()), EXPERIMENTS),
                               EXPERIMENTS) == []


def test_with_memory_roofs_only_the_fraction_of_hbm_is_given_and_the_binding_roof_is_not_guessed():
    rows = [r for r in ceiling_rows() if r["variant"] in ("HBM", "L2")] + [row(ms=4.0)]
    roofs, points = placed(rows)
    point = points.iloc[0]
    assert point["roof"] == "HBM" and point["bound"] == "" and point["fraction"] == pytest.approx(0.5)
    assert "no FP32 compute roof recorded, so which roof binds is not known" in point["sentence"]
    assert rl.missing_ceilings(frame(rows), roofs, EXPERIMENTS)[0].startswith(
        "Not measured for this GPU: an FP32 compute roof")


def test_only_device_rows_of_kernel_experiments_with_a_flop_count_are_placed():
    rows = [row(ms=4.0), row(variant="end_to_end", ms=9.0), row(direction="h2d", variant="copy_in"),
            row("latency", "chase", ms=3.0)]
    _, points = placed(rows)
    assert list(points["variant"]) == ["v"]


def test_a_kernel_measured_at_several_configurations_is_placed_once_at_its_fastest():
    _, points = placed([row(ms=4.0, block=128), row(ms=2.0, block=512), row(ms=3.0, block=1024),
                        row(ms=1.0, elements=2**20, nbytes=8 * 2**20)])
    assert len(points) == 2  # two problem sizes
    big = points[points["elements"] == 1e9].iloc[0]
    assert big["block_size"] == 512 and big["configurations"] == 3 and big["median_ms"] == 2.0
    assert "(1,000,000,000 elements; block 512, the fastest of 3 configurations)" in big["sentence"]


def test_the_points_of_one_kernel_that_differ_in_intensity_form_one_path():
    rows = ceiling_rows() + [row("chain", "k", ms=1.0 + i, intensity=i) for i in (1, 4, 64, 256)] + \
        [row("chain", "k", ms=1.0, intensity=0), row(ms=4.0)]
    _, points = placed(rows)
    on_path = points[points["path"] != ""]
    assert set(on_path["intensity"]) == {1, 4, 64, 256} and set(on_path["path"]) == {"chain · FMA chain"}
    assert points[points["intensity"] == 0]["memory_only"].all()  # intensity 0 is a copy: no FLOP axis for it
    assert (points[points["variant"] == "v"]["path"] == "").all()
    # it climbs from the memory roof to the compute roof
    assert list(on_path.sort_values("flop_per_byte")["bound"]) == [MEMORY, MEMORY, COMPUTE, COMPUTE]


HOSTILE = '<a href="https://evil.example">x</a> **bold** [l](https://e.example) <b>b</b>'


def test_hostile_variant_names_stay_text_in_sentences_and_escaped_in_the_chart():
    rows = ceiling_rows() + [row(variant=HOSTILE, ms=4.0), row("copy", HOSTILE, ms=2.0, device=HOSTILE)]
    roofs, points = placed(rows)
    assert all(HOSTILE in s for s in points["sentence"])  # run content is data: the page shows it as plain text
    figure = chart.figure(points, roofs, subtitle=HOSTILE, highlight=points["kernel"].iloc[0])
    texts = [figure.layout.title.text] + [t.name or "" for t in figure.data]
    texts += [h for t in figure.data for h in (t.hovertext if isinstance(t.hovertext, tuple) else [t.hovertext or ""])]
    assert not any("<a " in t or "<b>b" in t for t in texts)
    assert any("&lt;a href=" in t for t in texts)


def test_newest_runs_takes_the_newest_run_of_each_experiment_on_the_device_model():
    rows = ceiling_rows("old", "2026-11-20T00:00:00") + ceiling_rows("new", "2026-11-24T00:00:00") + \
        [row(run_id="k1"), row("copy", "c", run_id="other", device="NVIDIA H100 80GB HBM3"),
         row("latency", "chase", run_id="l1")]
    chosen = rl.newest_runs(frame(rows), "NVIDIA H200", EXPERIMENTS)
    assert set(chosen["run_id"]) == {"new", "k1"}  # no H100 run, no run of an experiment the roofline ignores


def test_the_chart_is_log_log_with_every_roof_the_ridge_and_the_path_in_intensity_order():
    rows = ceiling_rows() + [row("chain", "k", ms=1.0, intensity=i) for i in (64, 1, 16, 4)] + \
        [row(ms=4.0), row("copy", "c", ms=2.0)]
    roofs, points = placed(rows)
    figure = chart.figure(points, roofs, "test")
    assert figure.layout.xaxis.type == "log" and figure.layout.yaxis.type == "log"
    names = [t.name for t in figure.data]
    for expected in ("HBM roof: 4,000 GB/s", "L2 roof: 10,000 GB/s", "FP32 FMA roof: 40.0 TFLOP/s",
                     "FP64 FMA roof: 20.0 TFLOP/s", "ridge: 10 FLOP/B (FP32)", "ridge: 5 FLOP/B (FP64)"):
        assert expected in names
    hbm = next(t for t in figure.data if t.name.startswith("HBM roof"))
    assert hbm.y[0] / hbm.x[0] == pytest.approx(HBM / 1e12)  # the memory roof is a slope: bytes/s × FLOP/byte
    fp32 = next(t for t in figure.data if t.name.startswith("FP32 FMA roof"))
    assert fp32.y[0] == fp32.y[-1] == FP32 / 1e12 and fp32.x[0] == pytest.approx(10)  # flat from the ridge on
    path = next(t for t in figure.data if t.name == "chain · FMA chain")
    assert list(path.x) == sorted(path.x) and len(path.x) == 4
    strip = [t for t in figure.data if t.xaxis == "x2" and t.mode == "markers"]
    assert [list(t.y) for t in strip] == [[4000.0]]  # the copy, by GB/s, on the right panel
    assert sorted(t.y[0] for t in figure.data if t.xaxis == "x2" and t.mode == "lines") == [4000.0, 10000.0]
    # each roof named where it is drawn, in log10 units on the log axes, and each ridge under its dotted line
    labels = {a.text: a for a in figure.layout.annotations if a.xref in ("x", "x2")}
    for text in ("HBM 4,000 GB/s", "L2 10,000 GB/s", "FP32 FMA 40.0 TFLOP/s", "FP64 FMA 20.0 TFLOP/s",
                 "ridge 10 FLOP/B (FP32)", "ridge 5 FLOP/B (FP64)"):
        assert text in labels, text
    assert labels["FP32 FMA 40.0 TFLOP/s"].y == pytest.approx(math.log10(FP32 / 1e12))
    assert labels["ridge 10 FLOP/B (FP32)"].x == pytest.approx(1)
    right = [a for a in figure.layout.annotations if a.xref == "x2"]
    assert sorted(a.y for a in right) == [4000.0, 10000.0]  # the memory roofs, named on the right panel too
    assert figure.layout.yaxis2.range[1] > 10000  # above the highest roof: its label stays inside the panel
    stage = chart.figure(points, roofs, "test", stage=True)
    # on stage every roof and ridge drawn is named on the chart too, and the legend names each colour
    assert {a.text for a in stage.layout.annotations if a.xref == "x"} == {
        a.text for a in figure.layout.annotations if a.xref == "x"}
    assert len([t for t in stage.data if (t.name or "").startswith("ridge")]) == 2
    assert all(a.font.size >= 20 for a in stage.layout.annotations)
    assert stage.layout.height == chart.STAGE_HEIGHT and stage.layout.font.size >= 20
    legend = [t.name for t in stage.data if "markers" in t.mode and t.showlegend is not False]
    assert all(any(name.split(" · ")[0] == e for name in legend) for e in points["experiment"])


def test_the_experiments_declare_flops_counted_from_their_kernels():
    n = 2**20
    assert coalescing.flops({"variant": "aos_sum", "elements": n}) == 3 * n
    assert coalescing.flops({"variant": "soa_x", "elements": n}) == n
    assert coalescing.flops({"variant": "transpose_padded", "elements": n}) == 0
    assert reduction.flops({"variant": "grid_stride", "elements": n}) == 2 * n
    assert math.isnan(reduction.flops({"variant": "end_to_end_pinned", "elements": n}))
    assert streams.flops({"variant": "kernel_alone", "intensity": 16, "elements": n}) == 32 * n
    assert streams.flops({"variant": "h2d_alone", "intensity": 16, "elements": n}) == 0
    assert occupancy_sweep.flops({"variant": "stream", "extra_registers": 0, "elements": n}) == 0
    assert occupancy_sweep.flops({"variant": "chase", "extra_registers": 64, "elements": n}) == 64 * n
    assert occupancy_sweep.flops({"variant": "chase", "extra_registers": None, "elements": n}) == 0


def test_the_bundled_recordings_place_at_least_twelve_kernels_each_with_its_sentence():
    data = ReplayBackend().data
    for device in sorted(set(data["device_name"])):
        runs = rl.newest_runs(data, device)
        if runs.empty:
            continue
        points = rl.kernel_points(runs, rl.measured_roofs(runs))
        assert len(points) >= 12, device
        assert points["sentence"].str.len().gt(20).all()
        assert points["sentence"].is_unique


def test_the_live_suite_is_a_checked_suite_whose_streams_run_climbs_in_intensity():
    suite = suites.load("roofline")
    assert set(rl.kernel_experiments()) <= set(suite.experiments)  # every registered kernel experiment runs live
    intensities = suite.run_for("streams").params["intensities"]
    assert intensities == sorted(intensities) and len(intensities) >= 8 and max(intensities) >= 1024


def test_device_models_are_the_models_with_something_to_place():
    frame = pd.DataFrame({"device_name": ["A GPU", "B GPU", "B GPU", "C GPU", "D GPU"],
                          "experiment": ["peers", "coalescing", "device_copy", "transfers", "device_copy"]})
    assert rl.device_models(frame) == ["B GPU", "D GPU"]  # a peer matrix or transfers place nothing on a roofline
