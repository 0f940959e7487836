"""The runs store under attack, on SQLite and on a real PostgreSQL server: hostile files (each refused with its
row or column named, the store unchanged), values at the contract's edges (stored alike in both databases),
partial and divergent runs, spreadsheet formulas, the first-open race, read-only stores and a silent server."""

import json
import multiprocessing
import os
import socket
import subprocess
import sys
import time
import types
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa

from gpu.core import schema
from gpu.results.analysis import compare
from gpu.results.exchange import catalog, contract, imports, runfiles
from gpu.results.persistence import database, store
from tests.conftest import new_postgres_database

ROOT = Path(__file__).resolve().parent.parent
MANAGED = next(catalog.BUNDLED_DIRS[1].glob("managed_*.parquet"))
TRANSFERS = next(catalog.BUNDLED_DIRS[1].glob("transfers_nvidia-h100*.parquet"))


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/runs.sqlite"
    return new_postgres_database(request.getfixturevalue("postgres_url"))


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def seeded(request, tmp_path_factory):
    """One store per database with one run in it, shared by the hostile-file cases (none may change it)."""
    if request.param == "sqlite":
        address = f"sqlite:///{tmp_path_factory.mktemp('seeded')}/runs.sqlite"
    else:
        address = new_postgres_database(request.getfixturevalue("postgres_url"))
    runs = catalog.Catalog(store.RunStore(address))
    runs.save(schema.read_results(MANAGED), "import", label="seed")
    return runs


def snapshot(runs: catalog.Catalog) -> tuple:
    with runs.store.engine.connect() as connection:
        return (connection.execute(sa.text("SELECT run_id, points, label FROM runs ORDER BY run_id")).all(),
                connection.execute(sa.text("SELECT count(*), sum(length(row_json)) FROM points")).one())


def good() -> pd.DataFrame:
    return schema.read_results(MANAGED).assign(run_id="hostile0001")


def parquet(frame: pd.DataFrame) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), sink)
    return sink.getvalue().to_pybytes()


def csv(frame: pd.DataFrame) -> bytes:
    out = frame.copy()
    out["samples_ms"] = out["samples_ms"].map(lambda s: json.dumps([float(v) for v in s]))
    return out.to_csv(index=False).encode()


def changed(column, value, row=3, maker=parquet):
    def build():
        frame = good()
        frame[column] = frame[column].astype(object)
        frame.at[row, column] = value
        return maker(frame)
    return build


def csv_cell(column, text, row=3):
    def build():
        frame = pd.read_csv(pd.io.common.BytesIO(csv(good())), dtype=str, keep_default_na=False)
        frame.at[row, column] = text
        return frame.to_csv(index=False).encode()
    return build


def whole_frame(change, maker=parquet):
    def build():
        frame = good()
        change(frame)
        return maker(frame)
    return build


def exported_csv_cut():
    data = runfiles.to_csv_bytes(good()).decode().splitlines(keepends=True)
    return "".join(data[:8]).encode()  # header + 7 of 15 rows, cut at a row boundary


def exported_csv_edited():
    frame = pd.read_csv(pd.io.common.BytesIO(runfiles.to_csv_bytes(good())), dtype=str, keep_default_na=False)
    frame.at[2, "gbps"] = str(float(frame.at[2, "gbps"]) * 2)
    return frame.to_csv(index=False).encode()


def exported_csv_manifest_edited():
    frame = pd.read_csv(pd.io.common.BytesIO(runfiles.to_csv_bytes(good())), dtype=str, keep_default_na=False)
    frame.at[5, "manifest_points"] = "14"
    return frame.to_csv(index=False).encode()


def exported_parquet_missing_rows():
    path = pa.BufferOutputStream()
    frame = good()
    table = pa.Table.from_pandas(frame.iloc[:9], preserve_index=False)
    meta = {**table.schema.metadata, runfiles.MANIFEST_KEY: json.dumps(runfiles.manifest(frame)).encode()}
    pq.write_table(table.replace_schema_metadata(meta), path)
    return path.getvalue().to_pybytes()


def two_devices(frame):
    frame.loc[7:, "device_name"] = "NVIDIA H200"


def two_timestamps(frame):
    frame.loc[7:, "timestamp"] = "2026-11-24T01:02:03+00:00"


def repeated_point(frame):
    frame.loc[4, list(frame.columns)] = frame.loc[3].to_numpy()


def scalar_samples(frame):
    frame["samples_ms"] = 0.5


def nan_sample(frame):
    samples = list(frame.at[1, "samples_ms"])
    samples[0] = float("nan")
    frame.at[1, "samples_ms"] = samples


def negative_sample(frame):
    samples = list(frame.at[1, "samples_ms"])
    samples[0] = -1.0
    frame.at[1, "samples_ms"] = samples


def few_samples(frame):
    frame.at[1, "samples_ms"] = list(frame.at[1, "samples_ms"])[:-1]


def shifted_median(frame):
    frame.at[6, "median_ms"] = frame.at[6, "median_ms"] * 1.5


def with_arrow_column(column, array):
    """A Parquet file of the good frame with one column swapped for an Arrow array of another type."""
    def build():
        table = pa.Table.from_pandas(good(), preserve_index=False)
        table = table.set_column(table.schema.get_field_index(column), column, array(len(table)))
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        return sink.getvalue().to_pybytes()
    return build


def without_column(frame):
    del frame["median_ms"]


# (case, file name, builder, what the message must name)
# Figures the refusals name, read from the bundled run the hostile files are made of.
SAMPLES_OF_ROW_2 = int(schema.read_results(MANAGED).at[1, "samples"])
HOURS_TO_THE_SECOND_TIME = (pd.Timestamp("2026-11-24T01:02:03+00:00")
                            - pd.to_datetime(schema.read_results(MANAGED)["timestamp"]).min()).total_seconds() / 3600
HOSTILE = [
    ("run id of 65 characters", "a.parquet", changed("run_id", "r" * 65), ["row 4", "column run_id", "64 characters"]),
    ("newline in a run id", "a.parquet", whole_frame(lambda f: f.__setitem__("run_id", "run\nid")),
     ["row 1", "column run_id", "control character"]),
    ("tab in a run id (CSV)", "a.csv", whole_frame(lambda f: f.__setitem__("run_id", "run\tid"), maker=csv),
     ["row 1", "column run_id", "control character"]),
    ("NUL in a text column", "a.parquet", changed("device_name", "H100\x00"), ["row 4", "column device_name", "NUL"]),
    ("NUL in a run id (CSV)", "a.csv", csv_cell("run_id", "abc\x00def"), ["row 4", "column run_id", "NUL"]),
    ("text of 300 characters", "a.parquet", changed("variant", "v" * 300), ["column variant", "256 characters"]),
    ("binary, not UTF-8, text", "a.parquet",
     with_arrow_column("host", lambda n: pa.array([b"\xff\xfe\x00bad"] * n, pa.binary())),
     ["row 1", "column host", "binary data"]),
    ("timestamp that is no time", "a.parquet", whole_frame(lambda f: f.__setitem__("timestamp", "yesterday")),
     ["row 1", "column timestamp", "ISO 8601"]),
    ("samples as one number", "a.parquet", whole_frame(scalar_samples), ["row 1", "column samples_ms", "not a list"]),
    ("samples as strings", "a.parquet", with_arrow_column("samples_ms", lambda n: pa.array([["fast"]] * n)),
     ["column samples_ms", "type list<element: string>", "before decoding"]),
    ("a 100 KB fixed-size binary a row", "a.parquet",
     with_arrow_column("host", lambda n: pa.array([b"x" * 100_000] * n, pa.binary(100_000))),
     ["column host", "fixed_size_binary[100000]", "before decoding"]),
    ("a list of text in a text column", "a.parquet",
     with_arrow_column("variant", lambda n: pa.array([["a", "b"]] * n, pa.list_(pa.string()))),
     ["column variant", "list<", "before decoding"]),
    ("a struct column", "a.parquet",
     with_arrow_column("device_name", lambda n: pa.array([{"a": 1}] * n)),
     ["column device_name", "struct<", "before decoding"]),
    ("samples that are not JSON (CSV)", "a.csv", csv_cell("samples_ms", "[1.0, 2.0"), ["row 4", "column samples_ms",
                                                                                      "not JSON"]),
    ("a NaN sample", "a.parquet", whole_frame(nan_sample), ["row 2", "column samples_ms", "non-finite"]),
    ("a negative sample", "a.parquet", whole_frame(negative_sample), ["row 2", "column samples_ms", "non-positive"]),
    ("fewer samples than counted", "a.parquet", whole_frame(few_samples), ["row 2", f"samples = {SAMPLES_OF_ROW_2}"]),
    ("median that its samples do not give", "a.parquet", whole_frame(shifted_median), ["row 7", "column median_ms",
                                                                                       "does not match"]),
    ("infinite median", "a.parquet", changed("median_ms", float("inf")), ["row 4", "column median_ms",
                                                                          "not a finite number"]),
    ("median as text (CSV)", "a.csv", csv_cell("median_ms", "fast"), ["row 4", "column median_ms",
                                                                      "not a finite number"]),
    ("fractional byte count", "a.parquet", changed("bytes", 4096.5), ["row 4", "column bytes", "whole number"]),
    ("byte count of 1e30", "a.parquet", changed("bytes", 1e30), ["row 4", "column bytes", "beyond"]),
    ("negative bandwidth", "a.parquet", changed("gbps", -3.0), ["row 4", "column gbps", "negative"]),
    ("verified that is neither", "a.csv", csv_cell("verified", "maybe"), ["row 4", "column verified",
                                                                          "not true or false"]),
    ("unknown experiment", "a.parquet", changed("experiment", "mining"), ["row 4", "column experiment"]),
    ("one run, two devices", "a.parquet", whole_frame(two_devices), ["row 8", "column device_name", "differs"]),
    ("one run, two timestamps", "a.parquet", whole_frame(two_timestamps), ["row 8", "column timestamp",
                                                                           f"{HOURS_TO_THE_SECOND_TIME:.1f} h from"]),
    ("a point twice", "a.parquet", whole_frame(repeated_point), ["row 5", "repeats a point"]),
    ("a missing column", "a.parquet", whole_frame(without_column), ["missing column(s) median_ms"]),
    ("header only", "a.csv", lambda: csv(good()).split(b"\n")[0] + b"\n", ["holds no rows"]),
    ("exported CSV cut at a row boundary", "a.csv", exported_csv_cut, ["run hostile0001", "7 of the 15 points"]),
    ("exported Parquet missing rows", "a.parquet", exported_parquet_missing_rows, ["9 of the 15 points"]),
    ("exported CSV with an edited value", "a.csv", exported_csv_edited, ["differ from its manifest"]),
    ("exported CSV with an edited manifest", "a.csv", exported_csv_manifest_edited, ["row 6", "manifest"]),
    ("truncated Parquet", "a.parquet", lambda: MANAGED.read_bytes()[:5000], ["not a readable Parquet file"]),
    ("binary junk named .csv", "a.csv", lambda: bytes(range(256)) * 40, ["a.csv"]),
    ("Parquet with 300,000 rows", "a.parquet",
     lambda: parquet(pd.DataFrame({"run_id": pa.nulls(300_000, pa.string()).to_pandas()})),
     ["300,000 rows (from the file's metadata)", "before decoding"]),
]


@pytest.mark.parametrize("case,name,build,named", HOSTILE, ids=[c[0] for c in HOSTILE])
@pytest.mark.slow
def test_a_hostile_file_is_refused_by_name_and_the_store_is_unchanged(seeded, case, name, build, named):
    before = snapshot(seeded)
    with pytest.raises(imports.ImportProblem) as caught:
        seeded.save(imports.read_upload(name, data=build()), "import")
    message = str(caught.value)
    assert "\n" not in message and message.startswith(name), message
    for part in named:
        assert part in message, (case, message)
    assert snapshot(seeded) == before


def test_non_regular_files_are_refused_before_they_are_opened(tmp_path):
    fifo = tmp_path / "run.csv"
    os.mkfifo(fifo)  # opening it for reading would wait forever for a writer
    zero = tmp_path / "zeros.parquet"
    zero.symlink_to("/dev/zero")
    folder = tmp_path / "folder.csv"
    folder.mkdir()
    for path, kind in ((fifo, "a FIFO"), (zero, "a device"), (folder, "a directory")):
        with pytest.raises(imports.ImportProblem, match=f"is {kind}, not a regular file"):
            imports.read_upload(path.name, path=path)


def test_decoding_is_capped_before_text_is_expanded(monkeypatch):
    monkeypatch.setattr(contract, "MAX_DECODED_BYTES", 1_000_000)
    frame = good().assign(host="h" * 100_000)  # one dictionary entry, repeated on every row
    with pytest.raises(imports.ImportProblem, match="decoding would take 2 MB, over the limit of 1 MB"):
        imports.read_upload("a.parquet", data=parquet(frame))
    monkeypatch.setattr(contract, "MAX_VALUES", 1000)
    with pytest.raises(imports.ImportProblem, match=r"values \(from the file's metadata\) is over the limit of 1,000"):
        imports.read_upload("a.parquet", data=parquet(good()))


def test_declared_decoded_sizes_are_checked_before_any_column_is_decoded(monkeypatch):
    decoded = []
    real_read = pq.ParquetFile.read
    monkeypatch.setattr(pq.ParquetFile, "read", lambda self, *a, **k: decoded.append(k) or real_read(self, *a, **k))
    monkeypatch.setattr(contract, "MAX_DECODED_BYTES", 2_000)
    with pytest.raises(imports.ImportProblem, match=r"declare \d+ MB decoded \(from the file's metadata\)"):
        imports.read_upload("a.parquet", data=parquet(good()))
    assert decoded == []  # refused from the metadata: no column was read


def test_columns_outside_the_schema_are_never_decoded(monkeypatch):
    table = pa.Table.from_pandas(good(), preserve_index=False)
    bomb = pa.array([b"z" * 1_000_000] * table.num_rows, pa.binary(1_000_000))  # 15 MB decoded, a few KB on disk
    sink = pa.BufferOutputStream()
    pq.write_table(table.append_column("attachment", bomb), sink, compression="zstd")
    data = sink.getvalue().to_pybytes()
    assert len(data) < 200_000
    monkeypatch.setattr(contract, "MAX_DECODED_BYTES", 5_000_000)
    frame = imports.read_upload("a.parquet", data=data)
    assert "attachment" not in frame.columns and len(frame) == table.num_rows


EDGES = {"run_id": "é'\";--" + "x" * 58, "device_name": "Ünïcödé GPU 🚀 " + "d" * 242, "host": "=cmd|' /C calc'!A0",
         "git_commit": "'); DROP TABLE runs; --"}


@pytest.mark.slow
def test_values_at_the_contract_edges_store_alike_in_both_databases(url):
    frame = good().assign(**EDGES)
    frame["timestamp"] = pd.Timestamp("2026-11-22T13:08:10+00:00")  # a typed timestamp is coerced to text
    assert len(EDGES["run_id"]) == 64 and len(EDGES["device_name"]) == 256
    runs = catalog.Catalog(store.RunStore(url))
    [result] = runs.save(imports.read_upload("edge.parquet", data=parquet(frame)), "import", label="l" * 256)
    assert result.stored and result.points == 15
    loaded = runs.store.load(EDGES["run_id"])
    for column, value in EDGES.items():
        assert loaded[column].iloc[0] == value
    assert loaded["timestamp"].iloc[0] == "2026-11-22T13:08:10+00:00"
    with pytest.raises(store.StoreError, match="label must be text of at most 256 characters without NUL"):
        runs.save(loaded, "import", label="nul\x00")


@pytest.mark.slow
def test_a_cut_file_without_manifest_is_one_run_and_the_whole_file_replaces_it_only_when_asked(url, tmp_path):
    env = {**os.environ, "PINPOINT_DB_URL": url}
    whole = schema.read_results(TRANSFERS).assign(run_id="cut0001")
    complete, cut = tmp_path / "complete.csv", tmp_path / "cut.csv"
    complete.write_bytes(csv(whole))  # written by hand: no manifest, so a cut cannot be seen
    lines = complete.read_text().splitlines(keepends=True)
    cut.write_text("".join(lines[:50]))
    refused = cli("import", str(cut), env=env)
    assert refused.returncode == 2 and "a CSV without a manifest (not a PinPoint export)" in refused.stderr
    assert "--unverified" in refused.stderr and store.RunStore(url).runs().empty
    assert cli("import", str(cut), "--unverified", env=env).returncode == 0
    assert store.RunStore(url).runs().loc[0, "points"] == 49
    again = cli("import", str(complete), "--unverified", env=env)
    assert again.returncode == 2 and "already in the store with different content" in again.stderr
    assert "stored: 49 points, new: 152 points" in again.stderr and "Traceback" not in again.stderr
    assert store.RunStore(url).runs().loc[0, "points"] == 49
    replaced = cli("import", str(complete), "--replace", "--unverified", env=env)
    assert replaced.returncode == 0 and "replaced run cut0001 (152 points)" in replaced.stderr
    listed = store.RunStore(url).runs()
    assert len(listed) == 1 and listed.loc[0, "points"] == 152
    same = cli("import", str(complete), "--unverified", env=env)
    assert same.returncode == 0 and "already in the store with the same content" in same.stderr


@pytest.mark.parametrize("run_id", ["=cmd|calc!A0", "+1run", "-1run", "@sum", "'quoted"])
@pytest.mark.slow
def test_a_run_whose_id_starts_like_a_formula_exports_to_csv_and_comes_back(url, tmp_path, run_id):
    env = {**os.environ, "PINPOINT_DB_URL": url}
    runs = catalog.Catalog(store.RunStore(url))
    runs.save(good().assign(run_id=run_id), "import")
    out = tmp_path / "out.csv"
    done = cli("export", "--out", str(out), "--", run_id, env=env)  # "--": an id may start with -
    assert done.returncode == 0, done.stderr
    back = imports.read_upload("out.csv", path=out)
    assert back["run_id"].iloc[0] == run_id
    assert runfiles.manifest(back) == runfiles.manifest(runs.load(run_id))


@pytest.mark.slow
def test_empty_text_survives_a_csv_export_and_import(url, tmp_path):
    env = {**os.environ, "PINPOINT_DB_URL": url}
    runs = catalog.Catalog(store.RunStore(url))
    runs.save(good().assign(host="", git_commit="'"), "import")
    out = tmp_path / "out.csv"
    assert cli("export", "hostile0001", "--out", str(out), env=env).returncode == 0
    back = imports.read_upload("out.csv", path=out)
    assert back["host"].iloc[0] == "" and back["git_commit"].iloc[0] == "'"
    again = cli("import", str(out), env=env)
    assert again.returncode == 0 and "already in the store with the same content" in again.stderr, again.stderr


@pytest.mark.slow
def test_a_csv_without_manifest_keeps_its_apostrophes_as_written(url):
    frame = good().assign(host="'=x", git_commit="'plain")
    back = imports.read_upload("a.csv", data=csv(frame), unverified=True)
    assert back["host"].iloc[0] == "'=x" and back["git_commit"].iloc[0] == "'plain"
    runs = catalog.Catalog(store.RunStore(url))
    runs.save(back, "import")
    assert runs.load("hostile0001")["host"].iloc[0] == "'=x"


@pytest.mark.slow
def test_an_exported_run_carries_its_manifest_and_a_cut_copy_is_refused(url, tmp_path):
    env = {**os.environ, "PINPOINT_DB_URL": url}
    runs = store.RunStore(url)
    runs.save(schema.read_results(TRANSFERS).assign(run_id="whole0001"), "import")
    for suffix in ("parquet", "csv"):
        out = tmp_path / f"out.{suffix}"
        assert cli("export", "whole0001", "--out", str(out), env=env).returncode == 0
        back = imports.read_upload(out.name, path=out)
        assert runfiles.manifest(back) == runfiles.manifest(runs.load("whole0001"))
    lines = (tmp_path / "out.csv").read_text().splitlines(keepends=True)
    (tmp_path / "cut.csv").write_text("".join(lines[:50]))
    cut = cli("import", str(tmp_path / "cut.csv"), env=env)
    assert cut.returncode == 2 and "has 49 of the 152 points its manifest lists" in cut.stderr


@pytest.mark.slow
def test_a_bundled_run_id_cannot_be_shadowed(url):
    bundled = schema.read_results(MANAGED)
    runs = catalog.Catalog(store.RunStore(url))
    other = bundled.assign(gbps=bundled["gbps"] * 2)
    with pytest.raises(store.StoreError, match="is bundled with PinPoint .* a stored run cannot shadow"):
        runs.save(other, "import")
    assert runs.store.runs().empty
    assert runs.save(bundled, "import")[0].stored  # the identical run may be stored (and labelled)


def test_formula_cells_are_escaped_in_csv_and_come_back_unchanged(tmp_path):
    frame = schema.read_results(MANAGED).assign(run_id="formula01")
    attacks = ["=HYPERLINK(\"https://evil.example\",\"x\")", "=1+1", "=cmd|' /C calc'!A0", "+1", "-2", "@SUM(A1)",
               "\tTAB", "\rCR", "'=already", "plain"]
    frame["variant"] = [attacks[i % len(attacks)] + f" {i}" if i >= len(attacks) else attacks[i]
                        for i in range(len(frame))]
    frame["rel_error"] = -3.0  # a negative number is a number, never prefixed
    data = runfiles.to_csv_bytes(frame)
    cells = pd.read_csv(pd.io.common.BytesIO(data), dtype=str, keep_default_na=False)
    for value in cells["variant"]:
        assert not value.startswith(runfiles.FORMULA_STARTS), value
    assert set(cells["rel_error"]) == {"-3.0"}
    back = imports.read_upload("f.csv", data=data)
    assert back["variant"].tolist() == frame["variant"].tolist()
    assert runfiles.manifest(back) == runfiles.manifest(frame)


def open_and_save(url, frame, barrier, index, results):
    try:
        barrier.wait(30)
        results.put((index, store.RunStore(url).save(frame.assign(run_id=f"race{index}"), "import")[0].stored))
    except Exception as exc:  # reported to the test, which fails with it
        results.put((index, f"{type(exc).__name__}: {exc}"))


@pytest.mark.slow  # eight processes at once, 20 rounds: minutes on a loaded 2-core machine
@pytest.mark.parametrize("dialect,trials", [("sqlite", 20), ("postgresql", 5)])
def test_eight_processes_opening_a_new_store_together_all_succeed(request, tmp_path, monkeypatch, dialect, trials):
    # Openers forked from a single-threaded server that has imported PinPoint already: no interpreter start per
    # opener, and no fork of this (threaded) test process. The server must not re-run this process's __main__: after
    # an AppTest it is the temporary script Streamlit ran (and fails there, so no opener ever answers).
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    frame = schema.read_results(MANAGED).iloc[:2]
    failures = []
    for trial in range(trials):
        url = f"sqlite:///{tmp_path}/race{trial}.sqlite" if dialect == "sqlite" else \
            new_postgres_database(request.getfixturevalue("postgres_url"))
        barrier, results = context.Barrier(8), context.Queue()
        processes = [context.Process(target=open_and_save, args=(url, frame, barrier, i, results)) for i in range(8)]
        for p in processes:
            p.start()
        outcomes = [results.get(timeout=120) for _ in processes]
        for p in processes:
            p.join(60)
        failures += [(trial, o) for o in outcomes if o[1] is not True]
        stored = len(store.RunStore(url).runs())
        if stored != 8:
            failures.append((trial, f"{stored} of 8 runs stored"))
    assert not failures, failures


def cli(*args, env=None, timeout=120):
    """The runner's review commands in this process (fast); a subprocess where the clock or the exit matters."""
    import contextlib
    import io
    from types import SimpleNamespace
    from unittest import mock

    from gpu import bench

    out, err = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, env or {}), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = bench.main(list(args))
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def cli_process(*args, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "gpu.bench", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env)


def read_only(*paths: Path):
    """Make paths unwritable, also for root (which writes through file modes): the immutable attribute."""
    if os.geteuid() == 0:
        import shutil

        if not shutil.which("chattr"):
            pytest.skip("running as root, which writes through file modes, and chattr is missing (e2fsprogs)")
        done = subprocess.run(["chattr", "+i", *map(str, paths)], capture_output=True, text=True)
        if done.returncode:
            pytest.skip(f"cannot make files immutable here: {done.stderr.strip()}")
    else:
        for path in paths:
            os.chmod(path, 0o555 if path.is_dir() else 0o444)


def writable_again(*paths: Path):
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", *map(str, paths)], capture_output=True, check=True)
    for path in paths:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)


@pytest.mark.parametrize("place", ["file", "folder"])
@pytest.mark.slow
def test_a_read_only_sqlite_store_lists_exports_and_compares_and_refuses_imports(tmp_path, place):
    folder = tmp_path / "ro"
    folder.mkdir()
    url = f"sqlite:///{folder}/runs.sqlite"
    runs = store.RunStore(url)
    runs.save(schema.read_results(MANAGED).assign(run_id="ro0001"), "import")
    runs.close()
    locked = [folder / "runs.sqlite"] + ([folder] if place == "folder" else [])  # a folder: like a read-only mount
    before = (folder / "runs.sqlite").read_bytes()
    env = {**os.environ, "PINPOINT_DB_URL": url}
    read_only(*locked)
    try:
        listed = cli("runs", env=env)
        assert listed.returncode == 0 and "ro0001" in listed.stdout, listed.stderr
        exported = cli("export", "ro0001", "--out", str(tmp_path / "ro.csv"), env=env)
        assert exported.returncode == 0, exported.stderr
        bundled = schema.read_results(next(catalog.BUNDLED_DIRS[0].glob("managed_*.parquet")))["run_id"].iloc[0]
        reported = cli("report", "--baseline", bundled, "--candidate", "ro0001", "--out", str(tmp_path / "r.html"),
                       env=env)
        assert reported.returncode == 0, reported.stderr
        refused = cli("import", str(TRANSFERS), env=env)
        assert refused.returncode == 2 and "read-only here" in refused.stderr and "Traceback" not in refused.stderr
        assert (folder / "runs.sqlite").read_bytes() == before
    finally:
        writable_again(*locked)


@pytest.mark.slow
def test_a_select_only_postgresql_role_lists_exports_and_compares_and_refuses_imports(postgres_url, tmp_path):
    url = new_postgres_database(postgres_url)
    store.RunStore(url).save(schema.read_results(MANAGED).assign(run_id="ro0001"), "import")
    role = f"reviewer{os.getpid()}"
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(sa.text(f"CREATE ROLE {role} LOGIN"))
        connection.execute(sa.text(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}"))
    engine.dispose()
    reviewer = url.replace("//postgres@", f"//{role}@")
    env = {**os.environ, "PINPOINT_DB_URL": reviewer}
    listed = cli("runs", env=env)
    assert listed.returncode == 0 and "ro0001" in listed.stdout, listed.stderr
    assert cli("export", "ro0001", "--out", str(tmp_path / "ro.parquet"), env=env).returncode == 0
    bundled = schema.read_results(next(catalog.BUNDLED_DIRS[0].glob("managed_*.parquet")))["run_id"].iloc[0]
    assert cli("report", "--baseline", bundled, "--candidate", "ro0001", "--out", str(tmp_path / "r.html"),
               env=env).returncode == 0
    refused = cli("import", str(TRANSFERS), env=env)
    assert refused.returncode == 2 and "read-only" in refused.stderr and "permission denied" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert len(store.RunStore(url).runs()) == 1


@pytest.mark.slow
def test_a_server_that_never_answers_gives_an_error_within_10_s():
    with socket.socket() as listener:  # accepts TCP (the kernel's backlog) and never says a word
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        env = {**os.environ, "PINPOINT_DB_URL": f"postgresql+psycopg://team:secret@127.0.0.1:{port}/pinpoint"}
        started = time.monotonic()
        done = cli_process("runs", env=env, timeout=30)
        took = time.monotonic() - started
    assert done.returncode == 2 and "did not answer within 5 s" in done.stderr, done.stderr
    assert took < 10 and "secret" not in done.stderr and "Traceback" not in done.stderr


class SilencingProxy:
    """A loopback TCP proxy to the PostgreSQL server that forwards both ways until ``silence()``, then keeps
    every socket open and forwards nothing more: the server looks alive (TCP acknowledges) but never answers."""

    def __init__(self, target: tuple[str, int]):
        import threading

        self.target, self.silent, self.sockets = target, threading.Event(), []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        import threading

        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            self.sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source, sink):
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                return
            if not data:
                return
            if self.silent.is_set():
                continue  # swallowed: the peer's kernel acknowledged it, nobody answers
            sink.sendall(data)

    def silence(self):
        self.silent.set()

    def close(self):
        self.listener.close()
        for sock in self.sockets:
            sock.close()


@pytest.mark.slow
def test_a_server_that_goes_silent_mid_session_gives_one_line_within_the_answer_timeout(postgres_url, monkeypatch):
    assert store.ANSWER_TIMEOUT_S + store.CONNECT_TIMEOUT_S <= 30 and store.STATEMENT_TIMEOUT_S < store.ANSWER_TIMEOUT_S
    monkeypatch.setattr(database, "ANSWER_TIMEOUT_S", 3)  # the mechanism, quickly; the default's figure: benchmark
    address = sa.engine.make_url(new_postgres_database(postgres_url))
    proxy = SilencingProxy((address.host, address.port))
    try:
        runs = store.RunStore(address.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False))
        runs.save(good(), "import")  # the session is open and works through the proxy
        assert len(runs.runs()) == 1
        proxy.silence()
        for call in (runs.runs, lambda: runs.load("hostile0001")):
            started = time.monotonic()
            with pytest.raises(store.StoreError) as caught:
                call()
            took = time.monotonic() - started
            # The ping's deadline, then the pool's one reconnect attempt (its connect timeout): with the defaults
            # 25 + 5 = 30 s.
            assert took < 3 + store.CONNECT_TIMEOUT_S + 1.5, took
            message = str(caught.value)
            assert "\n" not in message and ("stopped answering" in message or "did not answer" in message), message
    finally:
        proxy.close()


@pytest.mark.slow
def test_hostile_run_content_reaches_the_report_and_its_charts_only_as_text(url):
    from gpu.results.analysis import report
    from tests.test_hostile_content import assert_no_live_markup, hostile_runs, strings

    runs = catalog.Catalog(store.RunStore(url))
    first, second = hostile_runs(runs.store)
    baseline, candidate = runs.load(first), runs.load(second)
    table = compare.compare(baseline, candidate)
    history = compare.history([baseline, candidate], baseline.iloc[0].to_dict())
    assert len(history) == 2
    figures = [report.ratio_figure(table, report.run_label(candidate)),
               report.history_figure(history, "history on " + baseline["device_name"].iloc[0])]
    for figure in figures:
        assert_no_live_markup(list(strings(figure.to_plotly_json())))
    page = report.render(baseline, [candidate])
    assert '<a href="https://evil' not in page and "&lt;a href=&quot;https://evil" in page


def test_another_applications_sqlite_database_is_refused_and_left_byte_identical(tmp_path):
    import sqlite3

    path = tmp_path / "theirs.sqlite"
    with sqlite3.connect(path) as theirs:
        theirs.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, name TEXT)")
        theirs.execute("INSERT INTO runs (name) VALUES ('their data')")
    theirs.close()
    before = path.read_bytes()
    env = {**os.environ, "PINPOINT_DB_URL": f"sqlite:///{path}"}
    for args in (("import", str(MANAGED)), ("runs",)):
        done = cli_process(*args, env=env)
        assert done.returncode != 0 and "is not a PinPoint runs store" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    with pytest.raises(store.StoreError, match="holds runs and no pinpoint_meta table; left untouched"):
        catalog.Catalog(store.RunStore(f"sqlite:///{path}")).save(good(), "import")
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["theirs.sqlite"]  # no -wal, no -shm, no journal


def test_a_postgresql_database_holding_foreign_tables_of_our_names_is_refused_untouched(postgres_url):
    address = new_postgres_database(postgres_url)
    engine = sa.create_engine(address)
    with engine.begin() as connection:
        connection.execute(sa.text("CREATE TABLE points (x integer)"))
    with pytest.raises(store.StoreError, match="is not a PinPoint runs store: it holds points"):
        catalog.Catalog(store.RunStore(address)).save(good(), "import")
    with engine.connect() as connection:
        assert sorted(sa.inspect(connection).get_table_names()) == ["points"]
    engine.dispose()


@pytest.mark.slow
def test_a_label_that_is_not_utf8_gets_one_line_and_nothing_is_stored(url):
    env = {**os.environ, "PINPOINT_DB_URL": url}
    done = subprocess.run([sys.executable, "-m", "gpu.bench", "import", str(MANAGED), "--label", b"bad\xff\xfelabel"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert done.returncode == 2 and "the label is not valid UTF-8 text" in done.stderr, done.stderr
    assert "unexpected" not in done.stderr and "Traceback" not in done.stderr
    assert store.RunStore(url).runs().empty


@pytest.mark.slow
def test_a_stored_run_id_holding_a_newline_stays_on_one_line_of_the_listing(url):
    store.RunStore(url).save(good().assign(run_id="two\nlines"), "import")  # not through an import: another tool
    done = cli_process("runs", env={**os.environ, "PINPOINT_DB_URL": url})
    [line] = [line for line in done.stdout.splitlines() if "two" in line]
    assert "two\\nlines" in line and "hostile" not in line


@pytest.mark.slow
def test_read_only_commands_never_create_a_store(tmp_path):
    place = tmp_path / "no" / "such" / "folder" / "runs.sqlite"
    env = {**os.environ, "PINPOINT_DB_URL": f"sqlite:///{place}"}
    listed = cli_process("runs", env=env)
    assert listed.returncode == 0, listed.stderr
    exported = cli_process("export", "nosuchrun", "--out", str(tmp_path / "x.csv"), env=env)
    assert exported.returncode != 0 and "Traceback" not in exported.stderr
    assert not (tmp_path / "no").exists()
    assert cli_process("import", str(MANAGED), env=env).returncode == 0  # the first write makes it
    assert place.is_file()


@pytest.mark.slow
def test_an_in_memory_store_is_refused_for_the_runner_and_migrate_is_explicit(tmp_path):
    memory = cli_process("import", str(MANAGED), env={**os.environ, "PINPOINT_DB_URL": "sqlite://"})
    assert memory.returncode == 2 and "in memory: it would keep nothing" in memory.stderr
    url = f"sqlite:///{tmp_path}/new.sqlite"
    assert cli("runs", env={**os.environ, "PINPOINT_DB_URL": url}).returncode == 0
    with sa.create_engine(url).connect() as connection:  # listing a new store created no table
        assert not sa.inspect(connection).get_table_names()
    migrated = cli("migrate", env={**os.environ, "PINPOINT_DB_URL": url})
    assert migrated.returncode == 0 and f"schema version 0 → {store.SCHEMA_VERSION}" in migrated.stderr
    assert store.RunStore(url).version == store.SCHEMA_VERSION


@pytest.mark.slow
def test_a_report_of_disjoint_runs_says_why(tmp_path):
    env = {**os.environ, "PINPOINT_DB_URL": f"sqlite:///{tmp_path}/runs.sqlite"}
    frame = schema.read_results(TRANSFERS)
    other = frame.assign(run_id="disjoint01", bytes=frame["bytes"] + 1)
    other["gbps"] = other["bytes"] / other["median_ms"] / 1e6
    store.RunStore(env["PINPOINT_DB_URL"]).save(other, "import")
    html = tmp_path / "r.html"
    done = cli("report", "--baseline", frame["run_id"].iloc[0], "--candidate", "disjoint01", "--out", str(html),
               env=env)
    assert done.returncode == 0, done.stderr
    assert "These runs share no points: different sizes" in done.stderr
    assert "These runs share no points: different sizes" in html.read_text()



@pytest.mark.slow
def test_a_run_stored_with_scalar_samples_by_an_older_pinpoint_is_named_not_crashed_on(url, tmp_path):
    runs = store.RunStore(url)
    runs.save(good(), "import")
    with runs.engine.begin() as connection:  # as an older PinPoint let it in
        connection.execute(sa.text("UPDATE points SET row_json = replace(row_json, :old, :new) WHERE idx = 2"),
                           {"old": '"samples_ms":[', "new": '"samples_ms":0.5,"x":['})
    with pytest.raises(store.StoreError, match=r"hostile0001 cannot be read: point 3: samples_ms is 0.5, not a list"):
        runs.load("hostile0001")
    exported = cli("export", "hostile0001", "--out", str(tmp_path / "x.csv"), env={"PINPOINT_DB_URL": url})
    assert exported.returncode == 2 and "samples_ms is 0.5" in exported.stderr


def test_an_unforeseen_failure_is_one_line_and_the_other_files_still_import(monkeypatch, tmp_path):
    real = imports.read_upload

    def fails_on_pools(name, **kw):
        if "pools" in name:
            raise RuntimeError("boom\nsecond line")
        return real(name, **kw)

    monkeypatch.setattr(imports, "read_upload", fails_on_pools)
    url = f"sqlite:///{tmp_path}/runs.sqlite"
    pools = next(catalog.BUNDLED_DIRS[1].glob("pools_*.parquet"))
    done = cli("import", str(pools), str(MANAGED), env={"PINPOINT_DB_URL": url})
    assert done.returncode == 2
    assert f"error: unexpected RuntimeError: boom second line; nothing from {pools} was stored" in done.stderr
    assert store.RunStore(url).runs()["experiment"].tolist() == ["managed"]


def test_csv_sample_values_are_capped_before_they_are_parsed(monkeypatch):
    monkeypatch.setattr(contract, "MAX_VALUES", 200)  # each of its points keeps 5,000
    with pytest.raises(imports.ImportProblem, match="row 1 .*column samples_ms: .*past 200: refused"):
        imports.read_upload("a.csv", data=csv(good()))


@pytest.mark.slow
def test_escape_sequences_from_a_file_never_reach_the_terminal(tmp_path):
    url = f"sqlite:///{tmp_path}/runs.sqlite"
    bad_id = tmp_path / "esc-id.parquet"
    bad_id.write_bytes(parquet(good().assign(run_id="esc\x1b[2J01")))
    refused = cli("import", str(bad_id), env={"PINPOINT_DB_URL": url})  # a run id is one line of printable text
    assert refused.returncode == 2 and "esc\\x1b[2J01" in refused.stderr and "\x1b" not in refused.stderr
    frame = good().assign(run_id="esc01", device_name="GPU\x1b]0;owned\x07")
    path = tmp_path / "esc.parquet"
    path.write_bytes(parquet(frame))
    imported = cli("import", str(path), "--label", "label\x1b[31m", env={"PINPOINT_DB_URL": url})
    assert imported.returncode == 0 and "stored run esc01" in imported.stderr
    listed = cli("runs", env={"PINPOINT_DB_URL": url})
    assert "\x1b" not in listed.stdout and "\x07" not in listed.stdout
    assert "GPU\\x1b]0;owned\\x07" in listed.stdout and "label\\x1b[31m" in listed.stdout
