"""Device-to-device copies on a real GPU (run on the GPU machine: pytest -m gpu)."""

import pytest

from gpu.core import schema
from gpu.core.units import GiB, KiB, MiB
from gpu.experiments import device_copy
from gpu.service.backends import submit_values
from gpu.sweeps import harness

pytestmark = pytest.mark.gpu


def test_every_copy_verifies_at_odd_and_large_sizes_in_both_methods(live_backend):
    """Sizes that are not a multiple of 16 bytes take the SM copy's byte tail; every point is checked whole on the
    GPU inside the worker (a wrong word fails the job), so a complete frame means every copy was exact."""
    sizes = [4, 4 * KiB, 4 * KiB + 4, 1 * MiB + 12, 256 * MiB]
    frame = submit_values(live_backend, device_copy.NAME, {"sizes": sizes, "profile": "interactive"}).outcome()
    schema.validate(frame)
    assert len(frame) == len(sizes) * 2 * 2 and frame["verified"].all()
    assert (frame["bytes"] == 2 * frame["elements"]).all()  # read + write counted
    batched = frame[frame["timer"] == device_copy.TIMERS["batched"]]
    assert (batched["copies_per_sample"] >= 1).all()
    # A batched sample lasts >= 1 ms unless it hit the batch cap.
    assert ((batched["median_ms"] * batched["copies_per_sample"] >= 0.9 * harness.BATCH_MS)
            | (batched["copies_per_sample"] == harness.MAX_BATCH)).all()
    gbps = frame.set_index(["variant", "elements", "timer"])["gbps"]
    engine = gbps[("copy_engine", 256 * MiB, device_copy.TIMERS["batched"])]
    sm = gbps[("sm_copy", 256 * MiB, device_copy.TIMERS["batched"])]
    print(f"\n256 MiB batched: copy engine {engine:,.0f} GB/s, SM copy {sm:,.0f} GB/s ({sm / engine:.1%})")
    assert sm > 0.8 * engine  # coalescing's copy_f4, the same loop, reached 93 % of memcpy_dtod on an H200


def test_a_damaged_destination_is_caught_and_named():
    from gpu.service.client import WorkerClient

    client = WorkerClient(service="tests.gpu.device_copy_service:DamagedCopyService")
    try:
        answer = client.run("device_copy_damaged")
    finally:
        client.close()
    print(f"\n{answer}")
    words = (1 * MiB + 12) // 4
    assert answer["none"] == "passed: 2 rows"
    assert f"1 of {words} words wrong, first at word 1000" in answer["one_word"]
    assert f"1 of {words} words wrong, first at word {words - 1}" in answer["last_word_unwritten"]
    assert "wrote past its end" in answer["past_the_end"]


def test_copy_engine_at_256_mib_batched_is_within_3_percent_of_memcpy_dtod_measured_the_coalescing_way(live_backend):
    """The same driver copy timed two ways on the same device: one L2-flushed, held copy per sample (coalescing's
    memcpy_dtod over 2^26 floats = 256 MiB) and back-to-back held copies (this experiment); both count read + write."""
    profile = "precise/timeout_s=3"
    coalescing = submit_values(live_backend, "coalescing",
                               {"elements": 1 << 26, "block_sizes": [256], "groups": ["copy"],
                                "profile": profile}).outcome()
    copies = submit_values(live_backend, device_copy.NAME, {"sizes": [256 * MiB], "variants": ["copy_engine"],
                                                            "methods": ["batched"], "profile": profile}).outcome()
    theirs = coalescing[coalescing["variant"] == "memcpy_dtod"]["gbps"].iloc[0]
    ours = copies["gbps"].iloc[0]
    print(f"\ncopy engine 256 MiB batched {ours:,.0f} GB/s vs coalescing memcpy_dtod {theirs:,.0f} GB/s "
          f"({ours / theirs - 1:+.2%})")
    assert abs(ours / theirs - 1) < 0.03


def test_the_run_gives_an_hbm_roof_below_the_theoretical_figure_and_an_l2_roof(live_backend):
    frame = submit_values(live_backend, device_copy.NAME, {"sizes": [1 * MiB, 4 * MiB, 8 * MiB, 256 * MiB, 1 * GiB],
                                                           "methods": ["single", "batched"],
                                                           "profile": "interactive"}).outcome()
    roofs = {roof.name: roof for roof in device_copy.roofs(frame)}
    theoretical = frame["hbm_gbps_theoretical"].iloc[0] * 1e9
    print("\n" + "\n".join(f"{r.name}: {r.per_second / 1e9:,.0f} GB/s ({r.source})" for r in roofs.values())
          + f"\nHBM theoretical {theoretical / 1e9:,.0f} GB/s")
    assert set(roofs) == {"HBM", "L2"}
    # Read + write against the bus's figure (each byte crosses it once): a copy of 1 GiB, far beyond L2, cannot
    # beat it, and a working copy engine reaches most of it (4,240 of 4,800 GB/s with bandwidthTest on an H200).
    assert 0.7 * theoretical < roofs["HBM"].per_second < theoretical
    # The L2 serves a working set that fits it faster than HBM can (an L2 roof at or below HBM measures launches)
    assert roofs["L2"].per_second > 1.3 * roofs["HBM"].per_second
    l2 = frame[frame["variant"] == "l2_copy"]
    assert set(l2["elements"]) <= {1 * MiB, 4 * MiB, 8 * MiB} and (l2["timer"] == "cuda_event").all()
