"""A run's provenance kept once (``gpu.core.schema``): in the runs store (schema version 10, migrated from
versions 7 and 9 on SQLite and PostgreSQL, carried by the trash), in Parquet recordings and run files (every bundled
recording rewritten, reading as before), in exports that import again, old exports (provenance on every row) that
still import as the same runs, and hostile provenance blocks refused in one line that names them."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa

from gpu.core import schema
from gpu.core.access import Actor
from gpu.core.errors import ImportProblem, SchemaError, StoreError
from gpu.results.exchange import catalog, imports, runfiles, sqlite_store
from gpu.results.exchange.catalog import BUNDLED_DIRS
from gpu.results.persistence import legacy, store
from tests.old_stores import store_at_version

OLD_EXPORTS = Path(__file__).parent / "old_exports"
REPO = Path(__file__).resolve().parent.parent
ADMIN = Actor.local("cli")
# The last commit whose recordings kept provenance on every row: each recording rewritten since reads as it did there.
ROWS_BEFORE = "a3adf7acb219f142346f01efb7aea98186e1672b"


def _recording(pattern: str, run_id: str) -> pd.DataFrame:
    return schema.read_results(next(BUNDLED_DIRS[0].glob(pattern))).assign(run_id=run_id)


def several_runs() -> list[pd.DataFrame]:
    """Runs of five experiments: one whose jobs started at different times (its timestamps differ by row) and a peer
    run of two GPUs (its rows name different devices)."""
    peers = _recording("peers_*", "peers01")
    return [_recording("managed_*", "managed01").head(5), _recording("pools_*", "pools01").head(5),
            _recording("bank_conflicts_*", "bank01").head(5), _recording("batching_*", "batching01").iloc[::6],
            peers.groupby(["gpu_index", "peer_index"], dropna=False).head(2)]


def _as_read(runs: store.RunStore, run_ids) -> dict[str, tuple[list[dict], str]]:
    """run id → (its rows as the store reads them, its content hash)."""
    found = {}
    for run_id in run_ids:
        rows = schema.frame_rows(runs.load(run_id))
        found[run_id] = (rows, runfiles.content_hash(rows))
    return found


def _stored(url: str, sql: str) -> list:
    engine = sa.create_engine(url)
    with engine.connect() as connection:
        found = connection.execute(sa.text(sql)).all()
    engine.dispose()
    return found


def _check_kept_once(url: str) -> None:
    """Every run keeps its shared provenance in ``runs.provenance`` and no row repeats it; a peer run's rows keep the
    device each names."""
    for run_id, text in _stored(url, "SELECT run_id, provenance FROM runs"):
        kept = json.loads(text)
        assert {"device_name", "driver_version", "host", "sm_count"} <= set(kept), run_id
        rows = [json.loads(t) for (t,) in _stored(url, f"SELECT row_json FROM points WHERE run_id = '{run_id}'")]
        assert rows and not any(set(kept) & set(row) for row in rows)
        if run_id.startswith("peers"):
            assert "gpu_index" not in kept and {r["gpu_index"] for r in rows} == {0, 1}
        if run_id.startswith("batching"):
            assert "timestamp" not in kept and len({r["timestamp"] for r in rows}) > 1


def test_a_saved_run_keeps_its_provenance_once_reads_back_as_saved_and_the_trash_carries_it(store_url):
    frames = several_runs()
    runs = store.RunStore(store_url)
    runs.save(pd.concat(frames, ignore_index=True), "import")
    _check_kept_once(store_url)
    read = _as_read(runs, [f["run_id"].iloc[0] for f in frames])
    for frame in frames:
        rows = schema.frame_rows(frame)
        assert read[frame["run_id"].iloc[0]] == (rows, runfiles.content_hash(rows))
    assert all(not r.stored for r in runs.save(pd.concat(frames, ignore_index=True), "import"))  # the same runs
    runs.trash(ADMIN, ["peers01", "managed01"])
    trashed = {r: json.loads(t) for r, t in _stored(store_url, "SELECT run_id, run_json FROM trash")}
    assert json.loads(trashed["peers01"]["provenance"])["device_name"] == frames[-1]["device_name"].iloc[0]
    runs.restore(ADMIN, ["peers01", "managed01"])
    assert _as_read(runs, read) == read
    _check_kept_once(store_url)


@pytest.mark.parametrize("version", [7, 9])
def test_a_store_of_schema_version_7_or_9_migrates_its_runs_provenance_out_of_their_rows(store_url, version):
    frames = several_runs()
    store_at_version(store_url, version, frames)
    old = store.RunStore(store_url)
    assert old.version == version
    before = _as_read(old, [f["run_id"].iloc[0] for f in frames])  # opening never writes: read as it is
    for frame in frames:  # a sanity check on the old store: its rows are the frames saved
        assert before[frame["run_id"].iloc[0]][1] == runfiles.content_hash(schema.frame_rows(frame))
    chars_before = old.count_points()[1]
    assert old.migrate(ADMIN) == store.SCHEMA_VERSION == 11
    assert _as_read(old, before) == before  # every run's frame and content hash, as before
    _check_kept_once(store_url)
    assert old.count_points()[1] < chars_before  # the rows lost what they repeated
    assert old.audit_trail(ADMIN)["what"].iloc[0] == f"migrated the runs store from schema version {version} to 11"
    assert all(not r.stored for r in old.save(pd.concat(frames, ignore_index=True), "import"))


def test_a_schema_9_store_written_by_an_older_pinpoint_migrates_its_runs_and_its_trash(tmp_path):
    path = tmp_path / "store_v9.sqlite"
    shutil.copy(OLD_EXPORTS / "store_v9.sqlite", path)
    url = f"sqlite:///{path}"
    old = store.RunStore(url)
    assert old.version == 9
    run_ids = list(old.runs()["run_id"])
    assert sorted(run_ids) == ["v9bank", "v9managed", "v9peers", "v9pools"]
    before = _as_read(old, run_ids)
    # the trashed run as version 9 kept it: whole rows, its boards beside them
    (trash_id, boards_json), = _stored(url, "SELECT trash_id, boards_json FROM trash")
    boards = {index: uuid for index, uuid in json.loads(boards_json)}
    trashed = [store.restored_row(t, boards) for (t,) in _stored(
        url, f"SELECT row_json FROM trash_points WHERE trash_id = {trash_id} ORDER BY idx")]
    assert old.migrate(ADMIN) == 11
    assert _as_read(old, run_ids) == before
    _check_kept_once(url)
    [(run_json,)] = _stored(url, "SELECT run_json FROM trash")
    assert json.loads(json.loads(run_json)["provenance"])["device_name"] == trashed[0]["device_name"]
    assert not any("device_name" in t for (t,) in _stored(url, "SELECT row_json FROM trash_points"))
    old.restore(ADMIN, ["v9trashed"])
    # its rows as version 9 kept them, their legacy param/param_value mapped by axis name (schema version 11)
    mapped = [legacy.map_row(t, "the trashed run") for t in trashed]
    assert runfiles.content_hash(schema.frame_rows(old.load("v9trashed"))) == runfiles.content_hash(mapped)


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, timeout=60)


def _empty_as_none(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.astype(object).where(frame.notna(), None)


def test_every_bundled_recording_keeps_its_provenance_once_and_reads_as_it_did(tmp_path):
    recordings = [p for d in BUNDLED_DIRS for p in sorted(Path(d).glob("*.parquet"))]
    compared = 0
    known = shutil.which("git") and _git("cat-file", "-e", f"{ROWS_BEFORE}^{{commit}}").returncode == 0
    for path in recordings:
        arrow_schema = pq.read_schema(path)
        block = json.loads(arrow_schema.metadata[schema.PROVENANCE_KEY])
        frame = schema.read_results(path)
        assert set(block) == set(frame["run_id"]), path.name
        assert "device_name" not in arrow_schema.names and "driver_version" not in arrow_schema.names, path.name
        relative = path.relative_to(REPO).as_posix()
        # a recording rewritten since (not measured again: once for provenance, once for the axis columns of schema
        # version 11): column by column as the old file read, its legacy param/param_value mapped
        # (a recording bundled since, as 2026-11-28's peers one, has no old file to compare with)
        existed = known and _git("cat-file", "-e", f"{ROWS_BEFORE}:{relative}").returncode == 0
        if existed and len(_git("rev-list", f"{ROWS_BEFORE}..HEAD", "--", relative).stdout.split()) in (1, 2):
            old = tmp_path / path.name
            old.write_bytes(_git("show", f"{ROWS_BEFORE}:{relative}").stdout)
            assert schema.PROVENANCE_KEY not in (pq.read_schema(old).metadata or {})
            pd.testing.assert_frame_equal(frame, legacy.read_results(old), check_exact=True)
            # the list of runs reads the same (a column the old file lacked is now there, empty: same emptiness)
            listed, listed_before = (_empty_as_none(catalog._listed_columns(p)) for p in (path, old))
            pd.testing.assert_frame_equal(listed, listed_before)
            compared += 1
    if known and not _git("diff", "--quiet", ROWS_BEFORE, "--", "assets").returncode:
        pytest.fail("no recording differs from before: the rewrite is missing")
    assert compared or not known


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_an_old_export_with_provenance_on_every_row_still_imports_as_the_same_runs(tmp_path, suffix):
    path = OLD_EXPORTS / f"two_runs{suffix}"
    if suffix == ".parquet":
        assert schema.PROVENANCE_KEY not in (pq.read_schema(path).metadata or {})
    expected = json.loads((OLD_EXPORTS / "manifest.json").read_text())
    read = imports.read_upload(path.name, path=path)  # its manifest checked on the file as written (schema 9)
    # its legacy param/param_value (the peer run's "copies per sample") mapped onto their columns: a new hash
    assert {r: e["points"] for r, e in runfiles.manifest(read).items()} == {r: e["points"] for r, e in expected.items()}
    peers = read[read["experiment"] == "peers"]
    assert peers["copies_per_sample"].tolist()[::2] == [1, 1] and "param" not in read.columns
    expected = runfiles.manifest(read)
    assert imports.params_of(read) == {"oldexport01": '{"sizes":[1]}'}
    runs = store.RunStore(f"sqlite:///{tmp_path}/runs.sqlite")
    runs.save(read, "import", params=imports.params_of(read))
    for run_id, entry in expected.items():
        assert runfiles.manifest(runs.load(run_id)) == {run_id: entry}
    _check_kept_once(runs.url)


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_an_export_keeps_provenance_once_in_parquet_on_every_row_in_csv_and_imports_again(tmp_path, suffix):
    frames = several_runs()
    source = store.RunStore(f"sqlite:///{tmp_path}/source.sqlite")
    source.save(pd.concat(frames, ignore_index=True), "import")
    exported = pd.concat([source.load(f["run_id"].iloc[0]) for f in frames], ignore_index=True)
    path = tmp_path / f"runs{suffix}"
    runfiles.write(exported, str(path))  # as `pinpoint export` and the runner's --out write it
    if suffix == ".parquet":
        names = pq.read_schema(path).names
        assert "device_name" not in names and "gpu_index" in names  # the peer run's rows name their own devices
    else:
        csv = pd.read_csv(path, dtype=str)
        assert csv["device_name"].notna().all() and csv["driver_version"].notna().all()  # for spreadsheets
    read = imports.read_upload(path.name, path=path)
    assert runfiles.manifest(read) == runfiles.manifest(exported)
    if suffix == ".parquet":  # as a recording is read for replay
        assert runfiles.manifest(schema.read_results(path)) == runfiles.manifest(exported)
    target = store.RunStore(f"sqlite:///{tmp_path}/target.sqlite")
    target.save(read, "import")
    assert _as_read(target, read["run_id"].unique()) == _as_read(source, read["run_id"].unique())


def _hostile_file(tmp_path, block: bytes, with_rows: bool = False) -> Path:
    """A run file whose provenance block is ``block``; ``with_rows``: its rows keep their provenance too."""
    frame = _recording("managed_*", "hostile01").head(3)
    good = tmp_path / "good.parquet"
    runfiles.write_parquet(frame, good)
    table = pq.read_table(good)
    if with_rows:
        import pyarrow as pa

        table = pa.Table.from_pandas(schema.validate(frame), preserve_index=False) \
            .replace_schema_metadata(table.schema.metadata)
    path = tmp_path / "hostile.parquet"
    pq.write_table(table.replace_schema_metadata({**table.schema.metadata, schema.PROVENANCE_KEY: block}), path)
    return path


HOSTILE_BLOCKS = [
    (b"{", "is not JSON"),
    (b"[1, 2]", "not an object of runs"),
    (b'{"hostile01": [1]}', "not an object of provenance columns"),
    (b'{"hostile01": {"favourite_colour": "red"}}', "favourite_colour, which is not a provenance column"),
    (b'{"hostile01": {"sm_count": "many"}}', "sm_count is many, not a finite number"),
    (b'{"hostile01": {"device_name": 7}}', "device_name is 7, not text"),
    (b'{"somebody_else": {"host": "h"}}', "names run somebody_else, which has no rows"),
    (b'{"hostile01": {"host": "' + b"x" * 20_000 + b'"}}', "over the limit"),
]


@pytest.mark.parametrize(("block", "said"), HOSTILE_BLOCKS, ids=[s for _, s in HOSTILE_BLOCKS])
def test_a_hostile_provenance_block_in_a_file_is_refused_in_one_line_naming_it(tmp_path, block, said):
    path = _hostile_file(tmp_path, block)
    with pytest.raises(ImportProblem) as refused:
        imports.read_upload(path.name, path=path)
    message = str(refused.value)
    assert message.startswith("hostile.parquet: ") and "provenance block" in message and said in message
    assert "\n" not in message and len(message) < 400
    with pytest.raises(SchemaError, match="provenance block"):
        schema.read_results(path)


def test_a_provenance_block_that_disagrees_with_a_rows_own_value_is_refused(tmp_path):
    path = _hostile_file(tmp_path, b'{"hostile01": {"device_name": "Another GPU"}}', with_rows=True)
    with pytest.raises(ImportProblem, match=r"hostile\.parquet: run hostile01: its provenance block's device_name "
                                            r"\(Another GPU\) disagrees with row 1's \(NVIDIA H200\)"):
        imports.read_upload(path.name, path=path)
    agreeing = _hostile_file(tmp_path, json.dumps({"hostile01": {"device_name": str(
        _recording("managed_*", "x")["device_name"].iloc[0])}}).encode(), with_rows=True)
    assert len(imports.read_upload(agreeing.name, path=agreeing)) == 3  # saying it twice alike is no disagreement


HOSTILE_STORED = [
    ("[1]", "not an object of provenance columns"),
    ('{"favourite_colour": "red"}', "not a provenance column"),
    ('{"sm_count": "many"}', "not a finite number"),
    ('{"gpu_index": 5}', "disagrees with a row's"),
    ("{" + '"host": "' + "x" * 20_000 + '"}', "over the limit"),
    ("not json", "not JSON"),
]


@pytest.mark.parametrize(("text", "said"), HOSTILE_STORED, ids=[s for _, s in HOSTILE_STORED])
def test_a_hostile_provenance_in_another_store_is_refused_in_one_line_naming_it(tmp_path, text, said):
    path = tmp_path / "other.sqlite"
    other = store.RunStore(f"sqlite:///{path}")
    other.save(several_runs()[-1], "import")  # the peer run: its rows keep their gpu_index
    engine = sa.create_engine(other.url)
    with engine.begin() as connection:
        connection.execute(sa.text("UPDATE runs SET provenance = :p"), {"p": text})
    engine.dispose()
    with pytest.raises(StoreError) as refused:
        other.load("peers01")
    assert "run peers01: its provenance block" in str(refused.value) and said in str(refused.value)
    with pytest.raises(ImportProblem) as refused:
        sqlite_store.read_store(path.name, path)
    message = str(refused.value)
    assert message.startswith("other.sqlite: ") and "provenance block" in message and said in message
    assert "\n" not in message
