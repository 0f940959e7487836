"""The peers experiment's declaration and the device set's logic that needs no GPU: parameters, the point grid,
reasons that name the GPU, ordered pairs, link text from NVML-like answers (a stand-in for pynvml)."""

from types import SimpleNamespace

import pytest

from gpu.core.errors import ValidationError
from gpu.core.units import GiB, KiB, MiB
from gpu.device.device_set import DeviceSet, gpu_name, link_text, nvml_link, ordered_pairs
from gpu.experiments import peers

H100 = "NVIDIA H100 80GB HBM3"


class FakeSet:
    """What ``set_reasons`` reads of a DeviceSet."""

    def __init__(self, count: int, peer: bool = True):
        self.ordinals = list(range(count))
        self.peer = peer
        self.peer_refusals = {} if peer else {(a, b): "the driver reports no peer access"
                                               for a, b in ordered_pairs(self.ordinals)}

    def name(self, ordinal):
        return gpu_name(ordinal, H100, f"GPU-1111-2222-{ordinal}abcdef{ordinal}")

    def can_peer(self, a, b):
        return self.peer


def limits(free=80 * GiB, budget=16 * GiB):
    return SimpleNamespace(free_device_bytes=free, pinned_budget_bytes=budget)


def resolved(raw: dict, ordinals=(0, 1)):
    return peers.with_devices(peers.parse_params(raw), list(ordinals))


def test_every_ordered_pair_of_the_set_is_a_point_of_each_variant_and_host_rows_have_no_peer():
    params = resolved({**peers.FULL_SWEEP, "sizes": [4 * KiB, 256 * MiB]})
    assert params.gpus == [0, 1] and params.pair_list() == [(0, 1), (1, 0)]
    points = list(params.points())
    assert len(points) == len(set(points))
    batched = peers.TIMERS["batched"]
    assert ("ce_read", 0, 1, 256 * MiB, batched) in points and ("ce_read", 1, 0, 256 * MiB, batched) in points
    assert ("h2d_all", 1, None, 4 * KiB, batched) in points
    latency = [p for p in points if p[0] == "latency"]
    assert {p[4] for p in latency} == {peers.LATENCY_TIMER} and len(latency) == 2 * 2  # one method: a launch a sample
    # 5 copy variants × 2 pairs × 2 methods + latency 2 pairs, + 4 host variants × 2 GPUs × 2 methods, per size
    assert len(points) == 2 * (5 * 2 * 2 + 2 + 4 * 2 * 2)


def test_the_defaults_are_the_matrix_at_one_size_batched_and_the_health_suite_measures_them():
    """The page's live Measure asks for the declaration's defaults: the matrix nvbandwidth prints, at one size, batched
    (copy engine both ways, both directions at once, latency, every GPU's host link); the health suite asks for the
    same, so a fleet's peer figures and the page's agree."""
    from gpu.experiments import suites

    params = resolved({})
    points = list(params.points())
    assert params.sizes == [peers.MATRIX_SIZE] == [256 * MiB] and params.methods == ["batched"]
    assert set(params.variants) == {"ce_read", "ce_write", "ce_bidir", "latency", *peers.HOST_VARIANTS}
    assert len(points) == 4 * 2 + 4 * 2  # 4 pair variants × 2 ordered pairs + 4 host variants × 2 GPUs
    assert points[0][:3] == ("ce_read", 0, 1)  # the matrix the page draws first is measured first
    [run] = [r for r in suites.load("health").runs if r.experiment == peers.NAME]
    assert run.request.params == peers.parse_params({})  # the profile too: the page's interactive, not precise
    full = resolved(peers.FULL_SWEEP)
    assert len(list(full.points())) == 10 * (5 * 2 * 2 + 2 + 4 * 2 * 2)


def test_named_pairs_limit_the_grid_and_the_gpus_they_touch():
    params = resolved({"pairs": ["1-2"], "variants": ["ce_write", "h2d_alone"], "sizes": [4 * KiB],
                       "methods": ["single"]}, ordinals=(0, 1, 2, 3))
    assert params.pair_list() == [(1, 2)] and params.gpu_list() == [1, 2]
    assert list(params.points()) == [("ce_write", 1, 2, 4 * KiB, "cuda_event"), ("h2d_alone", 1, None, 4 * KiB,
                                                                                  "cuda_event"),
                                     ("h2d_alone", 2, None, 4 * KiB, "cuda_event")]
    eight = resolved({"variants": ["ce_read"], "sizes": [4 * KiB], "methods": ["single"]}, ordinals=range(8))
    assert len(list(eight.points())) == 8 * 7


def test_a_pair_naming_one_gpu_twice_or_misspelt_is_refused_in_one_line_each():
    reasons = peers.invalid_reasons(peers.parse_params({"pairs": ["0-0", "zero-one", "0>1"]}), None)
    assert reasons == ["pair 0-0 names GPU 0 twice; a pair needs two different GPUs",
                       "pair 'zero-one' is not source-destination GPU indices, e.g. 0-1"]
    assert peers.parse_pair("0>1") == peers.parse_pair(" 0 - 1 ") == (0, 1)
    assert "size 100 B must be" in " ".join(peers.invalid_reasons(peers.parse_params({"sizes": [100]}), None))
    with pytest.raises(ValidationError, match="unknown parameter"):
        peers.parse_params({"pair": ["0-1"]})


def test_a_one_gpu_set_says_peers_needs_two_and_names_the_gpu():
    reasons = peers.set_reasons(resolved({}, ordinals=[0]), FakeSet(1), {0: limits()})
    assert reasons == [f"peers needs two GPUs; this set has 1: GPU 0 ({H100}, …0abcdef0)"]


def test_a_gpu_the_set_lacks_is_named_with_the_gpus_it_has():
    [reason] = peers.set_reasons(resolved({"gpus": [0, 5]}), FakeSet(2), {0: limits(), 1: limits()})
    assert reason.startswith("GPU 5 is not in this set, which has GPU 0 (") and "GPU 1 (" in reason


def test_memory_is_checked_on_every_gpu_and_each_reason_names_its_gpu():
    reasons = peers.set_reasons(resolved({"sizes": [8 * GiB], "variants": ["ce_read"]}), FakeSet(2),
                                {0: limits(), 1: limits(free=10 * GiB)})
    assert len(reasons) == 1 and reasons[0].startswith(f"GPU 1 ({H100}, …1abcdef1): size 8 GiB needs 16 GiB")
    host = peers.set_reasons(resolved({"sizes": [8 * GiB], "variants": ["h2d_all"]}), FakeSet(2),
                             {0: limits(), 1: limits()})
    assert host == []
    short = peers.set_reasons(resolved({"sizes": [8 * GiB], "variants": ["h2d_all"]}), FakeSet(2),
                              {0: limits(budget=8 * GiB), 1: limits()})
    assert short and "pinned memory" in short[0] and "16 GiB" in short[0]


def test_sm_copies_and_the_chase_need_peer_access_while_engine_copies_go_through_the_host():
    no_peer = FakeSet(2, peer=False)
    lim = {0: limits(), 1: limits()}
    assert peers.set_reasons(resolved({"variants": ["ce_read", "ce_write", "ce_bidir"]}), no_peer, lim) == []
    reasons = peers.set_reasons(resolved({"variants": ["sm_read", "latency"]}), no_peer, lim)
    assert len(reasons) == 4
    assert reasons[0] == (f"sm_read from GPU 0 to GPU 1 needs peer access from GPU 1 ({H100}, …1abcdef1) to GPU 0's "
                          "memory: the driver reports no peer access")
    assert link_text({"nvlinks": 18, "version": 4}, peer_access=False) == "through host (no peer access)"


def test_labels_and_noise_kinds():
    row = {"variant": "ce_read", "gpu_index": 0.0, "peer_index": 1.0, "elements": 256 * MiB,
           "timer": peers.TIMERS["batched"], "median_ms": 0.7}
    assert peers.point_label(row) == "GPU 0 → GPU 1 ce_read 256 MiB batched"
    host = {**row, "variant": "d2h_all", "peer_index": float("nan"), "timer": "cuda_event"}
    assert peers.point_label(host) == "GPU 0 d2h_all 256 MiB single"
    # a figure over every pair (the Fleet page's link matrix) names no GPU
    assert peers.point_label({**row, "gpu_index": None, "peer_index": None}) == "ce_read 256 MiB batched"
    assert peers.noise_kind(row) == "kernel" and peers.noise_kind({**row, "median_ms": 0.005}) == "small copy"
    assert peers.noise_kind(host) is None and peers.noise_kind({**row, "variant": "latency"}) == "kernel"
    assert peers.bytes_moved("latency", 256 * MiB) == 8 and peers.bytes_moved("ce_read", 4 * KiB) == 4 * KiB


class FakeNvml:
    """NVML's answers for a source GPU: its active links, each link's far end and version, P2P status, ancestor."""

    NVML_P2P_CAPS_INDEX_NVLINK = 2
    NVML_P2P_STATUS_OK = 0

    def __init__(self, links: dict, p2p_nvlink: bool = False, ancestor: int = 30, switch: bool = False):
        self.links, self.p2p_nvlink, self.ancestor, self.switch = links, p2p_nvlink, ancestor, switch

    def nvmlDeviceGetNvLinkState(self, handle, link):
        if link not in self.links:
            raise RuntimeError("NVML_ERROR_INVALID_ARGUMENT")
        return 1

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle, link):
        return SimpleNamespace(busId=self.links[link])

    def nvmlDeviceGetNvLinkVersion(self, handle, link):
        return 6  # NVML_NVLINK_VERSION_4_0

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle, link):
        return 2 if self.switch else 0

    def nvmlDeviceGetP2PStatus(self, handle, peer, index):
        return 0 if self.p2p_nvlink and index == 2 else 5

    def nvmlDeviceGetTopologyCommonAncestor(self, handle, peer):
        return self.ancestor


def test_links_to_the_peer_are_counted_by_their_far_end_and_named_with_their_generation():
    nvml = FakeNvml({i: "00000000:1B:00.0" for i in range(18)})
    link = nvml_link(nvml, "h0", "h1", "0000:1b:00.0")
    assert link == {"nvlinks": 18, "version": 4, "switched": False}
    assert link_text(link, peer_access=True) == "NVLink 4 ×18"
    other = nvml_link(FakeNvml({0: "00000000:1B:00.0", 1: "00000000:2C:00.0"}), "h0", "h2", "0000:2C:00.0")
    assert other["nvlinks"] == 1


def test_a_virtual_machines_unknown_far_ends_count_when_nvml_reports_nvlink_peer_status():
    hidden = {i: "FFFFFFFF:FF:FF.0" for i in range(18)}
    link = nvml_link(FakeNvml(hidden, p2p_nvlink=True, switch=True), "h0", "h1", "0000:00:07.0")
    assert link_text(link, peer_access=True) == "NVLink 4 ×18 via NVSwitch"
    # without NVML's word that the pair talks over NVLink, the links are not the peer's: the PCIe path is named
    assert link_text(nvml_link(FakeNvml(hidden), "h0", "h1", "0000:00:07.0"), True) == "PCIe via host bridge"


def test_without_nvlink_the_pcie_path_is_named_and_without_nvml_nothing_is_claimed():
    assert link_text(nvml_link(FakeNvml({}, ancestor=10), "h0", "h1", "0000:00:07.0"), True) == "PCIe via one switch"
    assert link_text(nvml_link(FakeNvml({}, ancestor=50), "h0", "h1", "0000:00:07.0"), True) == \
        "PCIe across CPU sockets"
    assert nvml_link(None, None, None, "0000:00:07.0") == {} and link_text({}, peer_access=True) == ""


def test_ordered_pairs_and_a_set_of_one_runtime_behave_as_the_runtime_alone():
    assert ordered_pairs([0, 1, 2]) == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]
    assert ordered_pairs([1, 1]) == []
    log = []

    class Runtime:
        device_ordinal = 3
        facts = {"device_name": H100, "gpu_uuid": "GPU-0000-4b1d07e2"}

        def job_scope(self):
            from contextlib import contextmanager

            @contextmanager
            def scope():
                log.append("open")
                yield "ledger"
                log.append("close")
            return scope()

    one = DeviceSet.of(Runtime())
    assert one.ordinals == [3] and len(one) == 1 and one.pairs() == [] and one.name(3) == f"GPU 3 ({H100}, …4b1d07e2)"
    with one.activate(3):  # nothing to switch in a set of one
        pass
    with one.job_scope() as ledgers:
        assert ledgers == {3: "ledger"}
    assert log == ["open", "close"]
    with pytest.raises(KeyError, match="GPU 5 is not in this set"):
        one.activate(5)


def test_the_chase_figure_is_the_mean_over_whole_rotations_of_every_sm_as_nvbandwidth_divides_it():
    """nvbandwidth times one launch per SM (each walked by a different block) and divides their summed time by every
    load: the mean over the chip. The sweep's figure is that mean over whole rotations, never one SM's, and never a
    rotation cut short; its cv is the mean's relative standard error."""
    from gpu.core import stats
    from gpu.experiments.peers.sweep import chase_summary

    per_block = [0.000800 + 0.000001 * (b % 7) for b in range(132)]  # ms per load: the SMs nearer the links faster
    walked = []

    def launch(block: int) -> float:
        walked.append(block)
        return per_block[block]

    summary = chase_summary(launch, 132, 2048, stats.get_profile("interactive"))
    assert walked[0] == 0 and walked[1:] == list(range(132))  # a warm-up launch, then one whole rotation
    assert summary.samples == 132 and summary.median_ms == pytest.approx(sum(per_block) / 132)
    assert summary.median_ms != pytest.approx(per_block[0]) and summary.stop_reason == "converged"
    assert (summary.min_ms, summary.max_ms) == (min(per_block), max(per_block))
    assert 0 < summary.cv < 0.001
    walked.clear()
    longer = chase_summary(launch, 132, 2048, stats.get_profile("interactive/min_time_s=0.5"))  # 0.22 s a rotation
    assert len(walked) == 1 + 3 * 132 and longer.samples == 3 * 132
    walked.clear()
    capped = chase_summary(launch, 132, 2048, stats.get_profile("interactive/min_time_s=5,timeout_s=0.000001"))
    assert len(walked) == 1 + 132 and capped.stop_reason == "timeout"  # at least one rotation, none begun past it
