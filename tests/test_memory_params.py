"""Parameter checks of the Streams and memory-mode experiments: messages name the limit, before allocation."""

import numpy as np
import pytest

from gpu.core.errors import ValidationError
from gpu.core.limits import Limits
from gpu.core.units import GiB, KiB, MiB
from gpu.experiments import batching, managed, pools, streams

H200 = Limits(free_device_bytes=140 * GiB, total_device_bytes=141 * GiB, pinned_budget_bytes=16 * GiB,
              host_available_bytes=120 * GiB, max_threads_per_block=1024, warp_size=32)
SMALL = Limits(free_device_bytes=1 * GiB, total_device_bytes=2 * GiB, pinned_budget_bytes=256 * MiB,
               host_available_bytes=1 * GiB, max_threads_per_block=1024, warp_size=32)


def reasons(module, **raw):
    return module.invalid_reasons(module.parse_params(raw), H200)


def test_the_default_streams_request_is_valid_and_its_points_cover_every_row():
    params = streams.parse_params({})
    assert streams.invalid_reasons(params, H200) == []
    points = list(params.points())
    # pinned: 3 chunk counts × (4 sums/serial + 5 round-robin pipelines + 1 staged + the both-ways copies sampled
    # between them) + 3 bidirectional; pageable only its lesson, 16 chunks × 4 streams depth-first with its sums and
    # serial run, and no bidirectional copies
    assert len(points) == 3 * (4 + 5 + 1 + 1) + 3 + (4 + 1)
    assert len(set(points)) == len(points)
    pageable = {(p[3], p[4], p[5]) for p in points if p[1] == "pageable" and p[0] == "pipeline"}
    assert pageable == {(16, 4, "depth_first")}
    assert not [p for p in points if p[1] == "pageable" and p[0].startswith("bidir")]
    staged = sorted((p[3], p[4]) for p in points if p[1] == "pinned" and p[5] == "staged")
    assert staged == [(4, 3), (16, 3), (64, 3)]  # once per chunk count, on one stream per stage


def test_the_full_pageable_grid_is_one_setting_away():
    points = list(streams.parse_params({"pageable_grid": True}).points())
    assert len(points) == 2 * (3 * (4 + 5 + 1 + 1) + 3)


def test_pageable_alone_keeps_its_bidirectional_copies():
    points = list(streams.parse_params({"host_memory": ["pageable"]}).points())
    assert {p[0] for p in points if p[0].startswith("bidir")} == {"bidir_h2d", "bidir_d2h", "bidir_both",
                                                                   "bidir_paired"}
    assert not [p for p in streams.parse_params({"bidirectional": False, "host_memory": ["pageable"]}).points()
                if p[0].startswith("bidir")]


def test_a_staged_pipeline_is_measured_once_whatever_stream_counts_are_chosen():
    points = list(streams.parse_params({"chunks": [32], "streams": [2, 3, 8], "host_memory": ["pinned"],
                                        "issue_orders": ["staged", "depth_first"]}).points())
    pipelines = [(p[4], p[5]) for p in points if p[0] == "pipeline"]
    assert pipelines == [(2, "depth_first"), (3, "depth_first"), (3, "staged"), (8, "depth_first")]


@pytest.mark.parametrize("chunks,stream_counts,lesson", [
    ([4, 16, 64], [1, 2, 4, 8, 16], (16, 4)),
    ([1, 8, 32], [1, 2, 8], (8, 2)),  # the nearest counts that can overlap
    ([1], [1], (1, 1)),  # nothing can overlap: pageable is measured where pinned is
])
def test_pageable_is_measured_at_the_configuration_nearest_its_lesson(chunks, stream_counts, lesson):
    params = streams.parse_params({"chunks": chunks, "streams": stream_counts})
    assert params.counts("pageable") == ([lesson[0]], [lesson[1]])
    assert params.counts("pinned") == (chunks, stream_counts)


@pytest.mark.parametrize("raw,message", [
    ({"chunks": [3]}, "3 chunks do not divide 256 MiB into equal chunks of whole floats"),
    ({"chunks": [0]}, "chunk count 0 must be from 1 to 64"),
    ({"chunks": [128]}, "chunk count 128 must be from 1 to 64"),
    ({"streams": [17]}, "stream count 17 must be from 1 to 16"),
    ({"streams": []}, "choose at least one stream count"),
    ({"host_memory": ["mapped"]}, "unknown host memory 'mapped'"),
    ({"issue_orders": ["random"]}, "unknown issue order 'random'"),
    ({"intensities": [-1]}, "kernel intensity -1 must be from 0"),
    ({"size_bytes": 1000}, "must be from 64 KiB"),
    ({"size_bytes": 64 * KiB + 2}, "is not a multiple of 4 B (a whole number of floats)"),
    ({"profile": "turbo"}, "unknown profile 'turbo'"),
])
def test_bad_streams_settings_are_refused_with_the_reason(raw, message):
    assert any(message in r for r in reasons(streams, **raw)), reasons(streams, **raw)


def test_streams_sizes_past_the_device_the_pinned_budget_or_the_host_name_the_limit():
    found = streams.invalid_reasons(streams.parse_params({"size_bytes": 512 * MiB}), SMALL)
    assert any("of device memory" in r and "is free" in r for r in found)
    assert any("over the pinned-memory budget of 256 MiB" in r for r in found)
    assert any("of host memory" in r for r in found)
    pageable = streams.invalid_reasons(streams.parse_params({"size_bytes": 128 * MiB, "host_memory": ["pageable"]}),
                                       SMALL)
    assert not any("pinned" in r for r in pageable)


def test_more_streams_than_chunks_is_allowed_but_said_to_be_pointless():
    params = streams.parse_params({"chunks": [4], "streams": [2, 8, 16]})
    assert streams.invalid_reasons(params, H200) == []
    assert any(n.startswith("8, 16 streams for at most 4 chunks") for n in streams.notes(params))


def test_unknown_parameters_are_refused():
    with pytest.raises(ValidationError, match="unknown parameter"):
        streams.parse_params({"chunk": [4]})


def test_the_fma_chain_result_is_known_exactly():
    x = np.array([0, 1, 4095], np.float32)
    assert streams.expected_output(x, 2).tolist() == [0, 1, 4095]
    assert streams.expected_output(x, 3).tolist() == [3, 2, -4092]


def test_streams_slider_top_fits_device_pinned_budget_and_host():
    assert streams.max_size(SMALL) == 128 * MiB  # the pinned budget (2 buffers) binds first
    assert streams.max_size(H200) == 8 * GiB


@pytest.mark.parametrize("module,raw,message", [
    (managed, {"sizes": [512 * KiB]}, "must be from 1 MiB"),
    (managed, {"sizes": [1 * MiB + 4096]}, "not a multiple of 64 KiB"),
    (managed, {"variants": ["zero_copy"]}, "unknown case 'zero_copy'"),
    (pools, {"sizes": [6]}, "not a multiple of 4 B"),
    (pools, {"sizes": [2 * GiB]}, "must be from 4 B to 1 GiB"),
    (pools, {"variants": ["arena"]}, "unknown variant 'arena'"),
    (batching, {"pieces": 1}, "piece count 1 must be from 2"),
    (batching, {"piece_sizes": [8 * MiB]}, "must be from 4 B to 4 MiB"),
    (batching, {"piece_sizes": [4 * MiB], "pieces": 1024}, "over the 512 MiB this experiment allows"),
])
def test_bad_memory_mode_settings_are_refused(module, raw, message):
    assert any(message in r for r in reasons(module, **raw)), reasons(module, **raw)


def test_memory_modes_check_device_and_pinned_limits():
    assert any("of device memory" in r for r in managed.invalid_reasons(managed.parse_params(
        {"sizes": [1 * GiB]}), SMALL))
    assert any("of pinned memory" in r for r in pools.invalid_reasons(pools.parse_params(
        {"sizes": [128 * MiB]}), SMALL))
    assert any("of pinned memory" in r for r in batching.invalid_reasons(batching.parse_params(
        {"piece_sizes": [1 * MiB], "pieces": 128}), SMALL))


def test_managed_cases_run_in_dependency_order():
    params = managed.parse_params({"variants": ["resident", "after_prefetch", "first_touch"]})
    assert params.variants == ["first_touch", "after_prefetch", "resident"]
