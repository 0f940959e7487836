"""Host-memory latency on a real GPU (pytest -m gpu on the GPU machine)."""

import pytest

from gpu.core.units import KiB, MiB
from gpu.service.backends import submit_values

pytestmark = pytest.mark.gpu


def test_a_chase_through_mapped_host_memory_is_slower_than_through_device_memory(live_backend):
    frame = submit_values(live_backend, "host_latency",
                          {"sizes": [4 * KiB, 256 * MiB], "profile": "interactive"}).outcome()
    assert frame["verified"].all() and len(frame) == 4  # every walk ended where the host's walk did
    ns = (frame["median_ms"] * 1e6 / frame["elements"]).groupby([frame["variant"], frame["working_set_bytes"]]).first()
    print("\nns per dependent load:\n" + ns.round(1).to_string())
    # Across PCIe a load costs about a microsecond (nvbandwidth's host_device_latency_sm: 1,180 ns on an H200);
    # from HBM (L2 flushed before each sample) less, and a 4 KiB chain is walked from the L1 cache.
    assert 300 < ns[("mapped", 256 * MiB)] < 5000
    assert ns[("device", 256 * MiB)] < ns[("mapped", 256 * MiB)]
    assert ns[("device", 4 * KiB)] < ns[("device", 256 * MiB)] / 3
    assert set(frame["timer"]) == {"cuda_event_l2_flushed_held"}
