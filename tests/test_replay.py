"""Replay backend over the committed recording and over files made for the test."""

import re
import shutil
from pathlib import Path

import pytest

from gpu.core import schema
from gpu.core.errors import ValidationError
from gpu.core.units import GiB, KiB, MiB
from gpu.service.backends import REPLAY_DIR, ReplayBackend, submit_values


@pytest.fixture(scope="module")
def replay():
    return ReplayBackend()


def test_committed_recording_is_a_real_gpu_run_with_provenance(replay):
    recordings = replay.recordings("transfers")
    assert len(recordings) >= 1 and not replay.problems
    data = replay.data
    assert data["backend"].eq("live").all()  # recorded live by the runner
    for column in ("device_name", "driver_version", "pycuda_version", "timestamp", "git_commit", "host"):
        assert data[column].notna().all() and (data[column].astype(str) != "").all(), column
    assert (data["samples_ms"].map(len) == data["samples"]).all()  # every sample kept


def test_replay_returns_exactly_the_requested_recorded_points(replay):
    handle = submit_values(replay, "transfers",
                           {"sizes": [4 * KiB, 1 * MiB], "modes": ["pinned"], "directions": ["h2d"]})
    frame = handle.outcome()
    assert sorted(frame["bytes"]) == [4 * KiB, 1 * MiB]
    assert set(frame["variant"]) == {"pinned"} and set(frame["direction"]) == {"h2d"}
    assert frame["backend"].eq("replay").all()
    assert not handle.notes


def test_unrecorded_sizes_are_named_never_interpolated(replay):
    handle = submit_values(replay, "transfers", {"sizes": [4 * KiB, 48 * KiB], "modes": ["pinned"]})
    frame = handle.outcome()
    assert set(frame["bytes"]) == {4 * KiB}
    assert any("48 KiB" in note and "never interpolates" in note for note in handle.notes)


STREAMS_DEFAULT_VIEW = {"size_bytes": 256 * MiB, "chunks": [4, 16, 64], "streams": [1, 2, 4, 8, 16],
                        "host_memory": ["pinned", "pageable"], "issue_orders": ["depth_first", "staged"],
                        "intensities": [0], "pageable_grid": False}


def test_a_recording_made_before_a_later_variant_is_not_told_it_lacks_it(replay):
    """The Streams page's default view over the H200 recording of 2026-11-23, made before the runner paired both-way
    copies with the pipelines (bidir_paired): every point of the view is there but those, and nothing is said."""
    handle = submit_values(replay, "streams", STREAMS_DEFAULT_VIEW)
    frame = handle.outcome()
    assert "bidir_paired" not in set(frame["variant"]) and (frame["variant"] == "pipeline").any()
    assert not handle.notes
    # a point the recording could have held, of a variant it holds, is still named
    handle = submit_values(replay, "streams", {**STREAMS_DEFAULT_VIEW, "intensities": [0, 4096]})
    handle.outcome()
    assert any("never interpolates" in note for note in handle.notes)


def test_nothing_recorded_is_a_clear_error(replay):
    with pytest.raises(ValidationError, match="none of the requested points were recorded"):
        submit_values(replay, "transfers", {"sizes": [48 * KiB]}).outcome()
    with pytest.raises(ValidationError, match="no recording with run id"):
        submit_values(replay, "transfers", {"sizes": [4 * KiB]}, run_id="nope").outcome()


def test_bad_parameters_are_refused_in_replay_too(replay):
    with pytest.raises(ValidationError, match="must be at least 16 B"):
        submit_values(replay, "transfers", {"sizes": [0]}).outcome()
    assert replay.check("transfers", {"sizes": [100]}) == [
        "size 100 B is not a multiple of 16 B (the zero-copy kernel moves 16-byte vectors)"]


def test_a_damaged_recording_is_reported_and_the_others_still_load(tmp_path):
    for path in REPLAY_DIR.glob("*.parquet"):
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / "zz-broken.parquet").write_bytes(b"garbage")
    replay = ReplayBackend(tmp_path)
    assert len(replay.problems) == 1 and "zz-broken.parquet" in replay.problems[0]
    assert not replay.recordings("transfers").empty


def test_an_empty_directory_gives_a_message(tmp_path):
    replay = ReplayBackend(tmp_path)
    with pytest.raises(ValidationError, match="no recorded transfers runs"):
        submit_values(replay, "transfers", {"sizes": [4 * KiB]}).outcome()


def test_recordings_list_each_run_with_device_and_date(tmp_path):
    frame = ReplayBackend().data
    second = frame[frame["bytes"] <= 1 * GiB].assign(run_id="second", timestamp="2027-01-01T00:00:00+00:00",
                                                     device_name="NVIDIA H100 80GB HBM3")
    schema.to_parquet(frame, tmp_path / "a.parquet")
    schema.to_parquet(second, tmp_path / "b.parquet")
    replay = ReplayBackend(tmp_path)
    recordings = replay.recordings("transfers")
    assert list(recordings["run_id"])[0] == "second"  # newest first
    picked = submit_values(replay, "transfers", {"sizes": [4 * KiB]}, run_id="second").outcome()
    assert picked["device_name"].eq("NVIDIA H100 80GB HBM3").all()


def test_an_unrecorded_kernel_setting_names_what_the_recording_has(replay):
    with pytest.raises(ValidationError) as refused:
        submit_values(replay, "reduction", {"sizes": [1 << 22], "block_sizes": [256]}).outcome()
    message = str(refused.value)
    assert "vector sizes 1,048,576, 16,777,216, 268,435,456" in message
    assert "block sizes 128, 256, 512, 1,024" in message


def test_the_point_cache_answers_only_when_every_point_is_known():
    from gpu.service.backends import PointCache, ReplayBackend

    replay = ReplayBackend()
    frame = submit_values(replay, "transfers", {"sizes": [65536, 1 << 20], "modes": ["pinned"]}).outcome()
    cache = PointCache()
    profile = frame["profile"].iloc[0]

    def lookup(params):
        return cache.lookup(replay.request("transfers", {"modes": ["pinned"], **params}))

    assert lookup({"sizes": [65536], "profile": profile}) is None
    cache.remember(frame)
    hit = lookup({"sizes": [65536], "profile": profile})
    assert hit is not None and set(hit["bytes"]) == {65536} and len(hit) == 2
    assert lookup({"sizes": [65536, 4096], "profile": profile}) is None
    assert lookup({"sizes": [65536], "profile": "interactive"}) is None


def test_the_replay_docs_count_the_transfers_recordings_converged_points_as_the_data_does(replay):
    data = replay.data
    frame = data[(data["experiment"] == "transfers") & (data["profile"] == "precise/timeout_s=3")]  # the 304 points
    docs = Path(__file__).resolve().parent.parent / "docs" / "methodology" / "replay.md"
    readme = " ".join(docs.read_text(encoding="utf-8").split())
    converged, total = map(int, re.search(r"\*\*(\d+) of the (\d+) points converged\*\*", readme).groups())
    counts = frame["stop_reason"].value_counts()
    assert (converged, total) == (counts["converged"], len(frame))
    assert f"{counts['max_samples']} stopped at 5,000 samples and {counts['timeout']} at the 3 s limit" in readme
    stopped = frame[frame["stop_reason"] != "converged"]
    assert (stopped["cv"] > 0.005).all()  # "every one of them still noisier than 0.5 %"
    large = stopped[~stopped["include_alloc"].astype(bool) & (stopped["variant"] != "pageable")
                    & (stopped["bytes"] >= 16 << 20)]
    assert f"{len(large)} copy-only copies of 16–512 MiB at 0.5–{large['cv'].max():.1%}".replace("%", " %") in readme
