"""Host-memory latency: the chain, the parameters, and the recording as the Memory modes page replays it."""

from pathlib import Path

import numpy as np
import pytest

from gpu.core.errors import ValidationError
from gpu.core.limits import Limits
from gpu.core.schema import read_results
from gpu.core.units import GiB, KiB, MiB
from gpu.experiments import host_latency
from gpu.experiments.host_latency import view as host_latency_view
from tests.test_app_streams import open_page, replay_mode  # noqa: F401 (the fixture: pages in replay mode)

REPLAY_DIR = Path(__file__).resolve().parent.parent / "assets" / "replay"


@pytest.mark.parametrize("size", [512, 4 * KiB, 1 * MiB])
def test_the_chain_is_one_cycle_through_every_node_one_per_256_bytes(size):
    chain, start, order = host_latency.chain_for(size, seed=7)
    nodes = size // host_latency.NODE_BYTES
    assert chain.dtype == np.uint64 and chain.nbytes == size
    seen, at = [], start
    for _ in range(nodes):
        seen.append(at)
        at = int(chain[at])
    assert at == start and sorted(seen) == [i * 32 for i in range(nodes)]  # every node once, then back
    assert np.count_nonzero(chain) >= nodes - 1  # only node slots are written; the rest stays zero
    steps = 4096
    assert int(order[steps % nodes]) == _walk(chain, start, steps)  # what verify() expects is the walk's end


def _walk(chain, start, steps):
    at = start
    for _ in range(steps):
        at = int(chain[at])
    return at


def test_parameters_are_checked_before_anything_is_allocated():
    h200 = Limits(free_device_bytes=139 * GiB, total_device_bytes=140 * GiB, pinned_budget_bytes=16 * GiB,
                  host_available_bytes=1500 * GiB, max_threads_per_block=1024, warp_size=32)
    assert host_latency.invalid_reasons(host_latency.parse_params({}), h200) == []
    reasons = host_latency.invalid_reasons(host_latency.parse_params({"sizes": [100, 1000, 2 * GiB],
                                                                       "variants": ["mapped", "l3"]}), h200)
    assert any("100 B must be from 512 B" in r for r in reasons)
    assert any("1000 B is not a multiple of 256 B" in r for r in reasons)
    assert any("2 GiB must be from 512 B to 1 GiB" in r for r in reasons)
    assert any("unknown memory 'l3'" in r for r in reasons)
    small_budget = Limits(free_device_bytes=139 * GiB, total_device_bytes=140 * GiB, pinned_budget_bytes=64 * MiB,
                          host_available_bytes=1500 * GiB, max_threads_per_block=1024, warp_size=32)
    assert any("pinned-memory budget" in r for r in host_latency.invalid_reasons(
        host_latency.parse_params({"sizes": [256 * MiB]}), small_budget))
    with pytest.raises(ValidationError, match="unknown parameter: depth"):
        host_latency.parse_params({"depth": 3})


def test_a_sample_loads_eight_bytes_a_step():
    assert host_latency.bytes_moved("mapped") == 8 * host_latency.STEPS["mapped"]


def recording():
    [path] = sorted(REPLAY_DIR.glob("host_latency_*.parquet"))
    return read_results(path)


def test_the_recording_shows_host_memory_slower_than_device_memory_at_every_working_set():
    frame = recording()
    assert frame["verified"].all() and set(frame["variant"]) == {"mapped", "device"}
    ns = (frame["median_ms"] * 1e6 / frame["elements"]).groupby([frame["variant"], frame["working_set_bytes"]]).first()
    for size in sorted(set(frame["working_set_bytes"])):
        assert ns[("mapped", size)] > ns[("device", size)]
    figure = host_latency_view.host_latency_figure(frame)
    assert {t.name for t in figure.data} == set(host_latency.LABELS.values())
    assert figure.layout.yaxis.type == "log" and figure.layout.xaxis.type == "log"
    for trace in figure.data:  # x: the working sets; y: ns per load, as the recording gives them
        variant = next(v for v, label in host_latency.LABELS.items() if label == trace.name)
        assert list(trace.x) == sorted(set(frame["working_set_bytes"]))
        assert np.allclose(trace.y, [ns[(variant, size)] for size in trace.x])


def test_the_memory_modes_page_draws_the_latency_chart_when_its_tab_is_open():
    at = open_page("pages/memory_modes.py")
    assert not any("Host-memory latency" in str(c.proto.spec) for c in at.get("plotly_chart"))  # closed: not run
    at.session_state["memory_modes_tab"] = "Host-memory latency"
    at.run()
    assert not at.exception
    titles = [c.proto.spec for c in at.get("plotly_chart")]
    assert any("Host-memory latency: one GPU thread chasing pointers" in t for t in titles)
    assert any("a dependent load takes" in m.value and "over PCIe" in m.value for m in at.markdown)


def test_the_runner_names_the_experiment_by_its_subcommand():
    from gpu.experiments import registry

    entry = registry.BY_COMMAND["host-latency"]
    assert entry.name == "host_latency" and entry.page == "pages/memory_modes.py"
    assert [job["sizes"] for job in registry.runner_jobs(entry, _args(sizes="4KiB,1MiB"))] == [[4 * KiB, 1 * MiB]]


def _args(**values):
    import argparse

    from gpu.experiments import registry

    parser = argparse.ArgumentParser()
    registry.add_arguments(parser, registry.BY_COMMAND["host-latency"])
    parser.add_argument("--profile", default="interactive")
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in values.items()]
    return parser.parse_args(flags)
