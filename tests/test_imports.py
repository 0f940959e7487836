"""Bad input to the store: each file gets a clear message naming its first problem, and nothing is written."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gpu.core import schema
from gpu.results.exchange import contract, imports, runfiles
from gpu.results.exchange.catalog import BUNDLED_DIRS
from gpu.results.persistence.store import RunStore
from tests import pair_frames

ROOT = Path(__file__).resolve().parent.parent
MANAGED = next(BUNDLED_DIRS[1].glob("managed_*.parquet"))


@pytest.fixture
def good():
    return schema.read_results(MANAGED)


def problem(tmp_path, name, data: bytes, **kw) -> str:
    with pytest.raises(imports.ImportProblem) as caught:
        imports.read_upload(name, data=data, **kw)
    return str(caught.value)


def test_a_good_file_passes(good):
    data = MANAGED.read_bytes()
    assert len(imports.read_upload("run.parquet", data=data)) == len(good)


def test_a_truncated_parquet_is_named(tmp_path):
    data = MANAGED.read_bytes()
    assert "run.parquet: not a readable Parquet file" in problem(tmp_path, "run.parquet", data[: len(data) // 2])


def test_a_csv_with_wrong_columns_is_named(tmp_path):
    message = problem(tmp_path, "run.csv", b"size,seconds\n4096,0.1\n")
    assert "missing column(s) run_id, experiment, variant" in message and "runner output" in message


@pytest.mark.parametrize("column,value,message", [
    ("median_ms", np.nan, "column median_ms: value nan is missing"),
    ("min_ms", -1.0, "column min_ms: value -1.0 is negative"),
    ("cv", -0.5, "column cv: value -0.5 is negative"),
    ("bytes", 10 * 1024**4, "column bytes: value 10995116277760.0 is beyond any PinPoint measurement"),
    ("experiment", "mining", "column experiment: value 'mining' is not a PinPoint experiment"),
])
def test_bad_values_are_named_with_their_row(tmp_path, good, column, value, message):
    frame = good.copy()
    frame[column] = frame[column].astype(object)
    frame.loc[3, column] = value
    path = tmp_path / "bad.parquet"
    frame.to_parquet(path)
    text = problem(tmp_path, "bad.parquet", path.read_bytes())
    assert message in text and "bad.parquet: row 4 (run " in text


def test_samples_that_do_not_match_the_summary_are_refused(tmp_path, good):
    frame = good.copy()
    frame.at[0, "samples_ms"] = [v * 2 for v in frame.at[0, "samples_ms"]]
    path = tmp_path / "bad.parquet"
    frame.to_parquet(path)
    assert "the summary does not match its samples" in problem(tmp_path, "bad.parquet", path.read_bytes())
    frame = good.copy()
    kept = list(frame.at[1, "samples_ms"])[:-1]
    frame.at[1, "samples_ms"] = kept
    frame.to_parquet(path)
    text = problem(tmp_path, "bad.parquet", path.read_bytes())
    assert f"column samples_ms: value [{str(kept[0])[:6]}" in text
    assert f"holds {len(kept)} samples but samples = {len(kept) + 1}" in text


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path):
    message = problem(tmp_path, "huge.parquet", b"x" * 2048, limit=1024)
    assert "over the import limit" in message and "PINPOINT_IMPORT_MAX_BYTES" in message


def test_only_runner_formats_are_taken(tmp_path):
    assert "as .parquet or .csv" in problem(tmp_path, "run.xlsx", b"PK")


def test_csv_written_by_pinpoint_round_trips(tmp_path, good):
    data = runfiles.to_csv_bytes(good)
    frame = imports.read_upload("run.csv", data=data)
    assert frame["samples_ms"].map(len).tolist() == good["samples_ms"].map(len).tolist()


def cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "gpu.bench", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env=env)


@pytest.mark.slow
def test_the_runner_imports_exports_and_reports_without_a_gpu(tmp_path):
    import os

    env = {**os.environ, "PINPOINT_DB_URL": f"sqlite:///{tmp_path}/runs.sqlite", "PINPOINT_BACKEND": "replay"}
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    done = cli("import", str(MANAGED), str(bad), "--label", "it's'; DROP TABLE runs;--", env=env)
    assert done.returncode == 2
    assert "stored run" in done.stderr and "nothing from" in done.stderr and "missing column(s)" in done.stderr
    again = cli("import", str(MANAGED), env=env)
    assert again.returncode == 0 and "already in the store" in again.stderr
    runs = RunStore(env["PINPOINT_DB_URL"]).runs()
    assert len(runs) == 1 and runs.loc[0, "label"] == "it's'; DROP TABLE runs;--"
    run_id = runs.loc[0, "run_id"]
    out = tmp_path / "back.parquet"
    assert cli("export", run_id, "--out", str(out), env=env).returncode == 0
    assert schema.read_results(out)["median_ms"].tolist() == schema.read_results(MANAGED)["median_ms"].tolist()
    bundled = schema.read_results(next(BUNDLED_DIRS[0].glob("managed_*.parquet")))["run_id"].iloc[0]
    html = tmp_path / "review.html"
    made = cli("report", "--baseline", bundled, "--candidate", run_id, "--out", str(html), env=env)
    assert made.returncode == 0, made.stderr
    text = html.read_text()
    assert "PinPoint review: managed" in text and "Provenance: what differs" in text and "Mann-Whitney" in text
    assert "plotly" in text.lower() and "cdn" not in text.lower().split("<body")[0]  # JavaScript inlined
    mixed = cli("report", "--baseline", bundled, "--candidate",
                schema.read_results(next(BUNDLED_DIRS[0].glob("pools_*.parquet")))["run_id"].iloc[0],
                "--out", str(html), env=env)
    assert mixed.returncode == 2 and "different experiments" in mixed.stderr
    assert cli("export", "nope", "--out", str(out), env=env).returncode == 2
    listed = cli("runs", env=env)
    assert run_id in listed.stdout and "bundled" in listed.stdout
    json.dumps(None)


def test_the_gpu_board_uuid_is_text_and_a_hostile_one_is_named(tmp_path, good):
    board = "GPU-1b94c864-4a5c-bea0-af8d-f4521d70170a"
    for suffix in ("parquet", "csv"):
        path = tmp_path / f"board.{suffix}"
        runfiles.write(good.assign(gpu_uuid=board), str(path))
        assert set(imports.read_upload(path.name, data=path.read_bytes())["gpu_uuid"]) == {board}
    frame = good.assign(gpu_uuid=board)
    frame.loc[2, "gpu_uuid"] = "x" * 10_000
    frame.to_parquet(tmp_path / "long.parquet")
    text = problem(tmp_path, "long.parquet", (tmp_path / "long.parquet").read_bytes())
    assert "row 3" in text and "column gpu_uuid" in text and "longer than" in text and len(text) < 300


def test_a_peer_run_imports_with_its_pair_columns_typed_by_the_schema(tmp_path, monkeypatch):
    pair_frames.register(monkeypatch)
    node = pair_frames.peer_run("node-8", 8)
    csv = imports.read_upload("node.csv", data=runfiles.to_csv_bytes(node))
    runfiles.write_parquet(node, tmp_path / "node.parquet")
    parquet = imports.read_upload("node.parquet", path=tmp_path / "node.parquet")
    for frame in (csv, parquet):
        assert frame["gpu_index"].tolist() == node["gpu_index"].tolist()
        assert frame["peer_uuid"].tolist() == node["peer_uuid"].tolist() and set(frame["link"]) == {"NVLink 4 ×18"}
    bad = node.assign(peer_index=node["peer_index"].astype(float))
    bad.loc[4, "peer_index"] = 2.5
    runfiles.write_parquet(bad, tmp_path / "bad.parquet")
    text = problem(tmp_path, "bad.parquet", (tmp_path / "bad.parquet").read_bytes())
    assert "row 5 (run node-8), column peer_index: value 2.5 is not a whole number" in text
    assert contract.WHOLE_COLUMNS is schema.WHOLE_COLUMNS and contract.TEXT_COLUMNS is schema.TEXT_COLUMNS


def test_the_bundled_peer_recording_imports_though_its_latency_rows_name_no_peer():
    """Its latency rows leave ``peer_index`` empty, part of a peer point's key: the repeated-point check makes each key
    text cell by cell (pandas' astype(str) kept the empty cell empty, and joining the key failed with a TypeError)."""
    path = next(BUNDLED_DIRS[0].glob("peers_*.parquet"))
    read = imports.read_upload(path.name, path=path)
    assert read["peer_index"].isna().any() and runfiles.manifest(read) == runfiles.manifest(schema.read_results(path))
