import hashlib
import json
import math

import pandas as pd
import pytest

from gpu.core import schema
from gpu.results.exchange import runfiles

PROVENANCE = {c: "x" for c in schema.PROVENANCE_COLUMNS}


def row(**overrides):
    base = {"run_id": "r1", "experiment": "transfers", "variant": "pinned", "direction": "h2d", "bytes": 4096,
            "include_alloc": False, "median_ms": 0.01, "min_ms": 0.009, "max_ms": 0.02, "cv": 0.01, "samples": 10,
            "gbps": 0.4, "stop_reason": "converged", "profile": "precise", "timer": "cuda_event", "verified": True,
            "sm_clock_mhz": 1980.0, "throttled": False, "samples_ms": [0.01] * 10}
    return {**base, **overrides}


def test_make_frame_has_every_column_in_order():
    frame = schema.make_frame([row(), row(bytes=8192)], PROVENANCE)
    assert list(frame.columns) == schema.COLUMNS
    assert len(frame) == 2


@pytest.mark.parametrize("bad,message", [
    ({"median_ms": 0}, "non-positive"), ({"bytes": -1}, "non-positive"), ({"gbps": None}, "missing"),
    ({"verified": False}, "unverified"),
])
def test_validate_rejects_impossible_rows(bad, message):
    with pytest.raises(schema.SchemaError, match=message):
        schema.make_frame([row(**bad)], PROVENANCE)


def test_validate_names_missing_columns():
    frame = schema.make_frame([row()], PROVENANCE).drop(columns=["gbps", "host"])
    with pytest.raises(schema.SchemaError, match="gbps, host"):
        schema.validate(frame)


def test_parquet_and_csv_round_trip_keep_samples(tmp_path):
    frame = schema.make_frame([row(samples_ms=[0.01, 0.02, 0.03])], PROVENANCE)
    schema.to_parquet(frame, tmp_path / "run.parquet")
    assert list(schema.read_results(tmp_path / "run.parquet")["samples_ms"].iloc[0]) == [0.01, 0.02, 0.03]
    (tmp_path / "run.csv").write_bytes(runfiles.to_csv_bytes(frame))
    back = schema.read_results(tmp_path / "run.csv")
    assert back["samples_ms"].iloc[0] == [0.01, 0.02, 0.03]
    pd.testing.assert_series_equal(back["gbps"], frame["gbps"])


def test_a_damaged_file_is_a_schema_error_not_a_crash(tmp_path):
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet at all")
    with pytest.raises(schema.SchemaError, match="cannot read"):
        schema.read_results(broken)


def test_theoretical_limits_come_from_link_and_memory_facts():
    assert schema.pcie_gbps_per_direction(5, 16) == pytest.approx(63.015, rel=1e-4)  # 32 GT/s × 16 × 128/130 / 8
    assert schema.pcie_gbps_per_direction(4, 16) == pytest.approx(31.51, rel=1e-3)
    assert schema.pcie_gbps_per_direction(3, 8) == pytest.approx(7.877, rel=1e-3)
    assert math.isnan(schema.pcie_gbps_per_direction(None, 16))
    assert schema.hbm_gbps(3201, 6144) == pytest.approx(4916.7, rel=1e-4)  # 3201 MHz × 2 × 6144 bit / 8
    assert math.isnan(schema.hbm_gbps(None, 6144))


def test_the_board_uuid_is_provenance_and_older_runs_keep_their_content_hash(tmp_path):
    """gpu_uuid joined the schema after runs were hashed: a run without it hashes as it did before the column
    existed (the bundled files' manifests stay valid), and the board a run was measured on is part of its content."""
    frame = schema.make_frame([row(), row(bytes=8192)], {**PROVENANCE, "gpu_uuid": None, "method_version": None})
    # the schema before the column (and the later ones that also count only where set)
    before = [c for c in schema.COLUMNS if c not in ("run_id", *schema.HASHED_WHEN_SET)]
    old_hash = hashlib.sha256("\n".join(sorted(
        json.dumps({c: runfiles._canonical(r.get(c)) for c in before}, sort_keys=True, separators=(",", ":"))
        for r in schema.frame_rows(frame))).encode()).hexdigest()
    assert runfiles.content_hash(schema.frame_rows(frame)) == old_hash
    board_a = frame.assign(gpu_uuid="GPU-e92dfc77-a3c6-015b-adb0-e79c09c13736")
    board_b = frame.assign(gpu_uuid="GPU-fef4569a-cbcb-d3e3-2c40-4ed67b024793")
    hashes = {runfiles.content_hash(schema.frame_rows(f)) for f in (frame, board_a, board_b)}
    assert len(hashes) == 3
    # A file written before the column (no gpu_uuid at all) loads with it empty and verifies against its manifest.
    old_file = tmp_path / "old.parquet"
    runfiles.write_parquet(frame, old_file)
    assert schema.read_results(old_file)["gpu_uuid"].isna().all()
    (tmp_path / "board.csv").write_bytes(runfiles.to_csv_bytes(board_a))
    assert schema.read_results(tmp_path / "board.csv")["gpu_uuid"].iloc[0] == board_a["gpu_uuid"].iloc[0]


def test_a_peer_row_names_its_device_and_its_peer_and_older_runs_keep_their_hash():
    """gpu_index, peer_index, peer_uuid and link joined after runs were hashed: a run without them hashes as before,
    and each is part of a peer row's content; read back typed (ordinals as numbers, the link as text)."""
    plain = schema.make_frame([row()], PROVENANCE)
    peer = schema.make_frame([row(gpu_index=2, peer_index=5, peer_uuid="GPU-5", link="NVLink 4 ×18")],
                             {**PROVENANCE, "gpu_uuid": "GPU-2"})
    assert peer.loc[0, "gpu_index"] == 2 and peer.loc[0, "peer_index"] == 5 and peer.loc[0, "link"] == "NVLink 4 ×18"
    without = {c: runfiles._canonical(v) for c, v in schema.frame_rows(plain)[0].items()}
    assert all(without[c] is None for c in ("gpu_index", "peer_index", "peer_uuid", "link"))
    hashes = {runfiles.content_hash(schema.frame_rows(f)) for f in
              (plain, peer, peer.assign(peer_index=6), peer.assign(link="PCIe via host bridge"))}
    assert len(hashes) == 4
    assert {"gpu_index", "peer_index"} <= set(schema.WHOLE_COLUMNS) and {"peer_uuid", "link"} <= set(
        schema.TEXT_COLUMNS)
