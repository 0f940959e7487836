"""Coalescing, reduction and occupancy experiments on a real GPU (pytest -m gpu on the GPU machine)."""

import pytest

from gpu.core.errors import ValidationError
from gpu.core.occupancy import DeviceLimits, KernelResources, occupancy
from gpu.experiments import coalescing
from gpu.experiments.coalescing import view as coalescing_view
from gpu.service.backends import submit_values

pytestmark = pytest.mark.gpu


def test_coalescing_every_kernel_verifies_and_the_patterns_rank_as_expected(live_backend):
    frame = submit_values(live_backend, "coalescing", {"elements": 1 << 24, "block_sizes": [256],
                                                       "profile": "interactive"}).outcome()
    assert frame["verified"].all() and len(frame) == 3 + 7 + 8 + 4 + 3
    gbps = frame.set_index(["variant", "param_value"])["gbps"]
    assert gbps[("strided", 64)] < gbps[("strided", 1)] / 2  # scattered reads waste most of each sector
    assert gbps[("transpose_padded", 4096)] > gbps[("transpose_naive", 4096)]
    assert gbps[("aos_x", 0)] < gbps[("soa_x", 0)]


def test_the_contiguous_reference_is_the_copy_and_stride_1_and_offset_0_match_it(live_backend):
    """Stride 1, offset 0 and copy_f32 move the same bytes with one load and one store per thread: all verified, and
    within 3 % of each other (before the strided index lost its 64-bit division, stride 1 read 12 % slower). The
    verdicts read the reference itself."""
    frame = submit_values(live_backend, "coalescing", {"elements": 1 << 26, "block_sizes": [256, 512],
                                                       "groups": ["copy", "strided", "offset"], "strides": [1, 2],
                                                       "offsets": [0, 1], "profile": "interactive"}).outcome()
    assert frame["verified"].all()
    for block, rows in frame.groupby("block_size"):
        gbps = rows.set_index(["variant", "param_value"])["gbps"]
        reference = gbps[(coalescing.CONTIGUOUS_REFERENCE, 0)]
        print(f"\nblock {block}: copy_f32 {reference:,.0f} GB/s, stride 1 {gbps[('strided', 1)]:,.0f}, "
              f"offset 0 {gbps[('offset', 0)]:,.0f}, stride 2 costs {reference / gbps[('strided', 2)]:.2f}×")
        assert abs(gbps[("strided", 1)] / reference - 1) < 0.03
        assert abs(gbps[("offset", 0)] / reference - 1) < 0.03
    costs = coalescing_view.stride_costs(frame)
    assert costs["reference_gbps"] == frame[(frame["variant"] == coalescing.CONTIGUOUS_REFERENCE)
                                            & (frame["block_size"] == 256)]["gbps"].iloc[0]


def test_coalescing_measures_its_grid_in_story_order_and_gives_it_back_in_grid_order(live_backend):
    """The declared grid given to the sweep: the copy group though not chosen, the transposes' matrix side, the
    strides unsorted as asked, every point verified and the rows in ``Params.points()`` order."""
    raw = {"elements": 1 << 21, "block_sizes": [512, 128], "groups": ["transpose", "strided"], "strides": [8, 1, 64],
           "profile": "interactive"}
    frame = submit_values(live_backend, "coalescing", raw).outcome()
    points = coalescing.parse_params(raw).points()
    assert list(zip(*(frame[c] for c in coalescing.KEY_COLUMNS), strict=True)) == points
    assert len(frame) == 2 * (3 + 3 + 3) and frame["verified"].all()
    assert set(frame[frame["variant"].str.startswith("transpose")]["param_value"]) == {1024}


def test_reduction_variants_are_exact_on_integers_and_accurate_on_floats(live_backend):
    frame = submit_values(live_backend, "reduction", {"sizes": [1 << 20], "block_sizes": [128, 1024],
                                                      "profile": "interactive"}).outcome()
    assert len(frame) == 2 * 7 and frame["verified"].all()
    doubles = frame[frame["variant"].isin(["shared_tree", "warp_shuffle", "grid_stride"])]
    assert (doubles["rel_error"] < 1e-5).all()


def test_occupancy_sweep_reports_registers_and_theory(live_backend):
    light = submit_values(live_backend, "occupancy", {"block_sizes": [64, 256], "extra_registers": 0,
                                                      "profile": "interactive"}).outcome()
    heavy = submit_values(live_backend, "occupancy",
                          {"block_sizes": [64, 256], "extra_registers": 128,
                           "dynamic_shared_bytes": 48 * 1024, "profile": "interactive"}).outcome()
    chase_light = light[light["variant"] == "chase"]
    chase_heavy = heavy[heavy["variant"] == "chase"]
    assert (chase_heavy["registers_per_thread"].to_numpy() > chase_light["registers_per_thread"].to_numpy()).all()
    assert (chase_heavy["theoretical_occupancy"].to_numpy() < chase_light["theoretical_occupancy"].to_numpy()).all()
    # Latency-bound work needs resident warps: lower occupancy, lower throughput.
    assert chase_heavy["gbps"].max() < chase_light["gbps"].max()


def test_calculator_agrees_exactly_with_the_driver(live_backend):
    table = live_backend.client.run("occupancy_driver")
    device = table["device"]
    device["compute_capability"] = tuple(device["compute_capability"])
    limits = DeviceLimits(**device)
    answers = [a for a in table["answers"] if a["blocks_per_sm"] is not None]
    assert len(answers) >= 1000
    wrong = [a for a in answers if occupancy(limits, KernelResources(a["registers"], a["static_shared"],
                                                                      a["max_dynamic_shared"]),
                                             a["block_size"], a["dynamic_shared"]).blocks_per_sm != a["blocks_per_sm"]]
    print(f"\ncalculator vs driver on {limits.name}: {len(answers) - len(wrong)}/{len(answers)} agree")
    assert not wrong, wrong[:5]


@pytest.mark.parametrize("experiment,params,message", [
    ("coalescing", {"block_sizes": [1025]}, "block size 1025 must be from 32 to 1024"),
    ("reduction", {"block_sizes": [0]}, "block size 0 must be from 32 to 1024"),
    ("occupancy", {"block_sizes": [100]}, "block size 100 is not a multiple of 32"),
])
def test_bad_block_sizes_are_refused_by_the_worker(live_backend, experiment, params, message):
    with pytest.raises(ValidationError, match=message):
        submit_values(live_backend, experiment, params).outcome()


def test_a_fresh_worker_warms_up_gpuarray_dot_and_the_chase_cycle_as_it_starts():
    """As a worker starts, each sweep's declared warm-up runs (the reduction's ``gpuarray.dot`` built and verified
    on 4096 ones, occupancy's chase cycle started on a thread), so a first Measure compiles nothing; the app's
    first job pins the pool; the dot product and the chase then verify in real jobs."""
    from gpu.service.backends import LiveBackend
    from gpu.service.client import WorkerClient

    client = WorkerClient()
    try:
        backend = LiveBackend(client)
        assert backend.warm().outcome()["pooled_bytes"] > 0
        warmed = backend.client.info["warmed"]  # from the worker's hello
        print(f"\nwarm-ups: {warmed}")
        assert isinstance(warmed["reduction"], float) and isinstance(warmed["occupancy"], float)
        frame = submit_values(backend, "reduction", {"sizes": [1 << 20], "block_sizes": [256],
                                                     "variants": ["gpuarray_dot"], "profile": "interactive"}).outcome()
        assert frame["verified"].all() and frame["rel_error"].max() < 1e-4
        frame = submit_values(backend, "occupancy", {"block_sizes": [256], "kernels": ["chase"],
                                                     "profile": "interactive"}).outcome()
        assert frame["verified"].all() and len(frame) == 1
    finally:
        client.close()


def test_a_second_worker_reads_every_kernel_from_the_cubin_cache(tmp_path, monkeypatch):
    """The first worker compiles every kernel source (gpu/kernels/*.cu and each experiment package's own) into the
    cubin cache (all at once); the next one reads them all from it (no file is written again) and measures with
    them."""
    import time

    from gpu.core import paths
    from gpu.device import cubins
    from gpu.service.backends import LiveBackend
    from gpu.service.client import WorkerClient

    monkeypatch.setenv(cubins.CACHE_ENV, str(tmp_path / "cubins"))  # the spawned workers inherit it
    starts = []
    for _ in range(2):
        began = time.perf_counter()
        client = WorkerClient()
        try:
            backend = LiveBackend(client)
            starts.append(time.perf_counter() - began)
            frame = submit_values(backend, "reduction", {"sizes": [1 << 20], "block_sizes": [256],
                                                         "variants": ["warp_shuffle"], "profile": "interactive"}
                                  ).outcome()
            assert frame["verified"].all()
        finally:
            client.close()
        if len(starts) == 1:
            written = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "cubins").glob("*.cubin")}
    print(f"\nworker start: cold cubin cache {starts[0]:.2f} s, warm {starts[1]:.2f} s")
    assert len(written) == len(paths.kernel_sources())
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "cubins").glob("*.cubin")} == written
