"""The memory experiments' generated point grids on a real GPU (run on the GPU machine: pytest -m gpu): every row a
run returns is a declared point, in ``Params.points()`` order, and every declared point has its row (device copies:
but the l2_copy points the device cannot run, which give no row by design). Peers needs two GPUs (skipped with the
reason on fewer)."""

import pytest

from gpu.core.schema import key_value
from gpu.core.units import KiB, MiB
from gpu.experiments import device_copy, host_latency, managed, peers, pools
from gpu.service.backends import submit_values
from tests.gpu.test_peers_gpu import gpu_count, pair_backend, two_gpus  # noqa: F401 (the fixture, by name)

pytestmark = pytest.mark.gpu


def keys(frame, module) -> list[tuple]:
    return [tuple(key_value(v) for v in row) for row in frame[module.KEY_COLUMNS].itertuples(index=False)]


def declared(params) -> list[tuple]:
    return [tuple(key_value(v) for v in point) for point in params.points()]


@pytest.mark.parametrize("module,raw", [
    (host_latency, {"sizes": [4 * KiB, 1 * MiB]}),
    (managed, {"sizes": [1 * MiB, 64 * MiB]}),
    (managed, {"sizes": [1 * MiB], "variants": ["resident"]}),  # the host writes the data first: its checksum holds
    (pools, {"sizes": [4 * KiB, 1 * MiB]}),
])
def test_every_declared_point_has_its_row_in_point_order(live_backend, module, raw):
    raw = {**raw, "profile": "interactive"}
    frame = submit_values(live_backend, module.NAME, raw).outcome()
    assert frame["verified"].all()
    assert keys(frame, module) == declared(module.parse_params(raw))


def test_device_copies_measure_every_declared_point_but_the_l2_copies_the_device_cannot_run(live_backend):
    raw = {"sizes": [4 * KiB, 1 * MiB, 1 * MiB + 12, 2 * MiB, 64 * MiB], "variants": list(device_copy.VARIANTS),
           "methods": list(device_copy.METHODS), "profile": "interactive"}
    frame = submit_values(live_backend, device_copy.NAME, raw).outcome()
    l2 = int(frame["l2_bytes"].iloc[0])
    runs = [(v, s, t) for v, s, t in device_copy.parse_params(raw).points()
            if v != "l2_copy" or (t == device_copy.TIMERS["single"] and device_copy.l2_passes(s, l2) is not None)]
    assert frame["verified"].all() and any(v == "l2_copy" for v, _, _ in runs)
    assert keys(frame, device_copy) == [tuple(key_value(v) for v in point) for point in runs]


@two_gpus
def test_peers_measure_every_declared_point_on_a_pair(pair_backend):  # noqa: F811 (the fixture)
    raw = {"sizes": [4 * KiB, 1 * MiB], "variants": list(peers.VARIANTS), "methods": list(peers.METHODS),
           "gpus": [0, 1], "profile": "interactive"}
    frame = submit_values(pair_backend, peers.NAME, raw).outcome()
    assert frame["verified"].all()
    assert keys(frame, peers) == declared(peers.parse_params(raw))
