"""A point's coordinates by axis name (schema version 11): every declaration names its coordinates by typed schema
columns and every coordinate column is some declaration's; a point's empty coordinates are empty; rows recorded
before (the overloaded ``param``/``param_value``) map onto those columns by each declaration's ``LEGACY_PARAMS``
when a recording is read, an old export imported (its content hash checked on the file as written) or a store
migrated (SQLite and PostgreSQL); an unknown ``param`` is refused in one line that names it."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa

from gpu.core import schema
from gpu.core.access import Actor
from gpu.core.errors import ImportProblem, SchemaError, StoreError
from gpu.experiments import coalescing, reduction, registry
from gpu.results.exchange import imports, relayout, runfiles
from gpu.results.exchange.catalog import BUNDLED_DIRS
from gpu.results.persistence import legacy, store
from tests.old_stores import store_at_version

ADMIN = Actor.local("cli")
AXIS_COLUMNS = schema.COORDINATE_COLUMNS + schema.DETAIL_COLUMNS


# --- declared once -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("entry", registry.REGISTRY, ids=lambda e: e.name)
def test_a_declarations_key_and_legacy_columns_are_schema_columns_of_their_type(entry):
    module = entry.module
    assert set(module.KEY_COLUMNS) <= set(schema.COLUMNS), module.NAME
    if module.Params.GRID is not None:  # points generated from its declared grid
        assert set(module.Params.GRID.key_columns) == set(module.KEY_COLUMNS)
    for column in set(module.KEY_COLUMNS) & set(schema.COORDINATE_COLUMNS):
        assert column in schema.WHOLE_COLUMNS and column in schema.NUMBER_COLUMNS
    for old, column in getattr(module, "LEGACY_PARAMS", {}).items():
        assert column is None or column in AXIS_COLUMNS, (module.NAME, old)
        if column in schema.COORDINATE_COLUMNS:  # a coordinate it wrote is one of its keys still
            assert column in module.KEY_COLUMNS, (module.NAME, column)


def test_every_axis_column_is_some_declarations_and_the_overloaded_pair_is_gone():
    keys = {c for e in registry.REGISTRY for c in e.module.KEY_COLUMNS}
    legacy_targets = {c for e in registry.REGISTRY for c in getattr(e.module, "LEGACY_PARAMS", {}).values()}
    assert set(schema.COORDINATE_COLUMNS) <= keys  # no coordinate column that no experiment uses
    assert set(schema.DETAIL_COLUMNS) <= legacy_targets
    assert not set(schema.LEGACY_COLUMNS) & set(schema.COLUMNS)
    assert set(AXIS_COLUMNS) <= set(schema.WHOLE_COLUMNS) and not set(AXIS_COLUMNS) & set(schema.SIGNED_COLUMNS)


def test_a_points_empty_coordinates_are_empty_never_zero():
    points = [dict(p) for p in coalescing.parse_params({}).grid()]
    copies = [p for p in points if p["group"] in ("copy", "layout")]
    assert copies and all(p["stride"] is None and p["offset"] is None and p["matrix_side"] is None for p in copies)
    assert {p["offset"] for p in points if p["variant"] == "offset"} >= {0}  # offset 0 is a value, not "none"
    assert not set(reduction.KEY_COLUMNS) & set(AXIS_COLUMNS)


# --- legacy rows ---------------------------------------------------------------------------------------------------
def as_legacy(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as PinPoint wrote it before schema version 11: each row's coordinate or detail in param/param_value
    (the name its experiment wrote), "none" and 0 where its experiment wrote that, the axis columns gone."""
    frame = frame.copy()
    names, values = [], []
    for row in frame.to_dict("records"):
        table = getattr(registry.EXPERIMENTS[row["experiment"]], "LEGACY_PARAMS", {})
        held = [(old, column) for old, column in table.items()
                if column is not None and schema.key_value(row.get(column)) is not None]
        if held:
            names.append(held[0][0])
            values.append(schema.key_value(row[held[0][1]]))
        elif None in table.values():
            names.append(next(old for old, column in table.items() if column is None))
            values.append(0)
        else:
            names.append(None)
            values.append(None)
    frame["param"], frame["param_value"] = names, values
    return frame.drop(columns=[c for c in AXIS_COLUMNS if c in frame.columns])


def recording(pattern: str) -> pd.DataFrame:
    return schema.read_results(next(p for d in BUNDLED_DIRS for p in sorted(d.glob(pattern))))


def test_legacy_rows_map_onto_the_columns_their_experiment_names():
    frame = pd.concat([recording("coalescing_nvidia-h200_2026-11-25*"), recording("device_copy_nvidia-h200*"),
                       recording("host_latency_nvidia-h200*")], ignore_index=True)
    old = as_legacy(frame)
    assert {"stride", "none", "matrix_side", "copies per sample", "passes per launch", "working set"} \
        <= set(old["param"].dropna())
    mapped = schema.validate(legacy.map_frame(old, "old.parquet"))
    pd.testing.assert_frame_equal(mapped, frame, check_exact=True)
    one = legacy.map_row({"experiment": "coalescing", "variant": "copy_f32", "param": "none", "param_value": 0}, "r")
    assert one == {"experiment": "coalescing", "variant": "copy_f32"}  # "none" was no axis: empty, never 0


@pytest.mark.parametrize(("param", "value", "said"), [
    ("bogus", 8, "param 'bogus' is not one of coalescing's ('stride', 'offset', 'matrix_side', 'none')"),
    ("stride", 2.5, "param 'stride' has the value 2.5, not a whole number of at least 0"),
    ("stride", -1, "param 'stride' has the value -1, not a whole number"),
    ("stride", "eight", "param 'stride' has the value eight, not a whole number"),
    (None, 8, "param_value 8 has no param naming its axis"),
])
def test_a_legacy_row_its_experiment_never_wrote_is_refused_in_one_line_naming_it(param, value, said):
    frame = pd.DataFrame([{"experiment": "coalescing", "variant": "strided", "param": "stride", "param_value": 4},
                          {"experiment": "coalescing", "variant": "strided", "param": param, "param_value": value}])
    with pytest.raises(SchemaError) as caught:
        legacy.map_frame(frame, "old.parquet")
    assert said in str(caught.value) and "old.parquet: row 2" in str(caught.value) and "\n" not in str(caught.value)


def test_a_legacy_pair_disagreeing_with_its_column_or_of_an_unknown_experiment_is_refused():
    with pytest.raises(SchemaError, match="disagrees with its column stride"):
        legacy.map_frame(pd.DataFrame([{"experiment": "coalescing", "param": "stride", "param_value": 4,
                                        "stride": 8}]), "f")
    with pytest.raises(SchemaError, match="'nonesuch' is not a PinPoint experiment"):
        legacy.map_frame(pd.DataFrame([{"experiment": "nonesuch", "param": "stride", "param_value": 4}]), "f")
    with pytest.raises(SchemaError, match="param 'stride' is not one of managed's"):  # managed wrote no param
        legacy.map_row({"experiment": "managed", "param": "stride", "param_value": 4}, "f")


def _legacy_file(frame: pd.DataFrame, path, manifest: bool = True):
    """``frame`` written as PinPoint wrote a run file before schema version 11: legacy columns, provenance on every
    row, its manifest's content hash over the rows as written."""
    old = as_legacy(frame)
    table = pa.Table.from_pandas(old, preserve_index=False)
    runs = {str(r): {"points": len(p), "sha256": runfiles.content_hash(runfiles.rows_as_written(p))}
            for r, p in old.groupby("run_id", sort=False)}
    metadata = {**(table.schema.metadata or {}), **({runfiles.MANIFEST_KEY: json.dumps(runs).encode()}
                                                    if manifest else {})}
    pq.write_table(table.replace_schema_metadata(metadata), path)
    return old


def test_an_old_recording_reads_by_axis_name_and_the_core_reader_refuses_it(tmp_path):
    frame = recording("bank_conflicts_*")
    path = tmp_path / "bank.parquet"
    _legacy_file(frame, path, manifest=False)
    pd.testing.assert_frame_equal(legacy.read_results(path), frame, check_exact=True)
    with pytest.raises(SchemaError, match="param, param_value, columns of rows recorded before schema version 11"):
        schema.read_results(path)


def test_relayout_rewrites_an_old_run_file_equal_to_the_old_one_mapped_with_its_new_hashes(tmp_path):
    frame = recording("peers_*")
    path = tmp_path / "peers.parquet"
    _legacy_file(frame, path)
    assert relayout.relayout(path) is not None and relayout.relayout(path) is None  # once: then already done
    assert not set(schema.LEGACY_COLUMNS) & set(pq.read_schema(path).names)
    pd.testing.assert_frame_equal(schema.read_results(path), frame, check_exact=True)
    read = imports.read_upload(path.name, path=path)  # the rewritten manifest holds the mapped rows' hashes
    assert runfiles.manifest(read) == runfiles.manifest(frame)


def test_relayout_refuses_an_old_run_file_whose_rows_do_not_match_its_manifest(tmp_path):
    path = tmp_path / "fma.parquet"
    old = _legacy_file(recording("fma_*"), path)
    table = pq.read_table(path)
    changed = old.assign(param_value=old["param_value"] + 1)
    pq.write_table(pa.Table.from_pandas(changed, preserve_index=False).replace_schema_metadata(table.schema.metadata),
                   path)
    before = path.read_bytes()
    with pytest.raises(AssertionError, match="does not match its manifest's content hash"):
        relayout.relayout(path)
    assert path.read_bytes() == before


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_an_old_export_is_checked_on_the_file_as_written_then_mapped(tmp_path, suffix):
    frame = recording("coalescing_nvidia-h200_2026-11-25*")
    parquet = tmp_path / "old.parquet"
    old = _legacy_file(frame, parquet)
    path = parquet
    if suffix == ".csv":  # the CSV an older PinPoint exported: its manifest on every row
        runs = json.loads(pq.read_schema(parquet).metadata[runfiles.MANIFEST_KEY])
        csv = old.assign(samples_ms=old["samples_ms"].map(lambda s: json.dumps([float(v) for v in s])),
                         manifest_points=old["run_id"].map(lambda r: runs[r]["points"]),
                         manifest_sha256=old["run_id"].map(lambda r: runs[r]["sha256"]))
        path = tmp_path / "old.csv"
        csv.to_csv(path, index=False)
    read = imports.read_upload(path.name, path=path)
    assert "param" not in read.columns
    pd.testing.assert_frame_equal(read[["variant", "stride", "offset", "matrix_side"]].astype(object)
                                  .where(read[["stride", "offset", "matrix_side"]].notna(), None)
                                  .reset_index(drop=True),
                                  frame[["variant", "stride", "offset", "matrix_side"]].astype(object)
                                  .where(frame[["stride", "offset", "matrix_side"]].notna(), None)
                                  .reset_index(drop=True))


def test_an_old_export_changed_after_export_or_naming_an_unknown_param_is_refused(tmp_path):
    frame = recording("fma_*")
    path = tmp_path / "old.parquet"
    old = _legacy_file(frame, path)
    metadata = pq.read_schema(path).metadata
    changed = old.assign(param_value=old["param_value"].where(old.index != 3, 99))
    pq.write_table(pa.Table.from_pandas(changed, preserve_index=False).replace_schema_metadata(metadata), path)
    with pytest.raises(ImportProblem, match="differ from its manifest's content hash"):
        imports.read_upload(path.name, path=path)
    hostile = old.assign(param=old["param"].where(old.index != 3, "=cmd|' /C calc'!A0"))
    _written_as_is(hostile, path)
    with pytest.raises(ImportProblem) as caught:
        imports.read_upload(path.name, path=path)
    assert "row 4: param \"=cmd|' /C calc'!A0\" is not one of fma's ('chains')" in str(caught.value)


def _written_as_is(old: pd.DataFrame, path) -> None:
    """``old`` (legacy columns) as a run file with a manifest that matches it."""
    table = pa.Table.from_pandas(old, preserve_index=False)
    runs = {str(r): {"points": len(p), "sha256": runfiles.content_hash(runfiles.rows_as_written(p))}
            for r, p in old.groupby("run_id", sort=False)}
    pq.write_table(table.replace_schema_metadata({runfiles.MANIFEST_KEY: json.dumps(runs).encode()}), path)


def test_every_bundled_recording_holds_its_coordinates_by_axis_name():
    for path in [p for d in BUNDLED_DIRS for p in sorted(d.glob("*.parquet"))]:
        assert not set(schema.LEGACY_COLUMNS) & set(pq.read_schema(path).names), path.name
    coalescing_run = recording("coalescing_nvidia-h200_2026-11-25*")
    assert sorted(coalescing_run["stride"].dropna().unique()) == [1, 2, 4, 8, 16, 32, 64]
    assert coalescing_run.loc[coalescing_run["variant"] == "copy_f32", ["stride", "offset", "matrix_side"]] \
        .isna().all().all()


# --- the store -----------------------------------------------------------------------------------------------------
def _as_legacy_store(url: str) -> None:
    """The store at ``url`` as version 10 kept it: every stored and trashed row with its legacy pair (version 11 added
    no table or column)."""
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.execute(store.META.update().where(store.META.c.key == "schema_version").values(value="10"))
        for table, owner in ((store.POINTS, store.POINTS.c.run_id),
                             (store.TRASH_POINTS, store.TRASH_POINTS.c.trash_id)):
            for key, idx, text in connection.execute(sa.select(owner, table.c.idx, table.c.row_json)).all():
                row = json.loads(text)
                [old] = as_legacy(pd.DataFrame([row])).to_dict("records")
                old = {k: (None if isinstance(v, float) and v != v else v) for k, v in old.items()
                       if k in row or k in schema.LEGACY_COLUMNS}
                connection.execute(table.update().where((owner == key) & (table.c.idx == idx))
                                   .values(row_json=json.dumps(old)))
    engine.dispose()


def test_a_schema_10_store_reads_by_axis_name_and_migrates_in_one_step(store_url):
    frames = [recording("coalescing_nvidia-h200_2026-11-25*").head(12).assign(run_id="coal01"),
              recording("device_copy_nvidia-h200*").head(12).assign(run_id="copy01"),
              recording("managed_nvidia-h200*").head(3).assign(run_id="managed01")]
    store_at_version(store_url, 10, frames)
    store.RunStore(store_url).trash(ADMIN, ["copy01"])  # a write: the store migrates to 11 first
    _as_legacy_store(store_url)
    old = store.RunStore(store_url)
    assert old.version == 10
    engine = sa.create_engine(store_url)
    with engine.connect() as connection:
        assert connection.execute(sa.text("SELECT COUNT(*) FROM points WHERE row_json LIKE '%\"param\"%'")).scalar()
    before = {r: runfiles.manifest(old.load(r)) for r in ("coal01", "managed01")}  # unmigrated: read by axis name
    assert before["coal01"] == runfiles.manifest(frames[0])
    assert old.migrate(ADMIN) == store.SCHEMA_VERSION == 11
    with engine.connect() as connection:
        for table in ("points", "trash_points"):
            assert not connection.execute(sa.text(f"SELECT COUNT(*) FROM {table} WHERE row_json LIKE '%\"param%'"))\
                .scalar()
    engine.dispose()
    assert {r: runfiles.manifest(old.load(r)) for r in before} == before
    old.restore(ADMIN, ["copy01"])
    assert runfiles.manifest(old.load("copy01")) == runfiles.manifest(frames[1])


def test_a_store_holding_a_param_its_experiment_never_wrote_is_refused_and_left_as_it_was(tmp_path):
    url = f"sqlite:///{tmp_path}/runs.sqlite"
    store_at_version(url, 10, recording("fma_*").head(2).assign(run_id="fma01"))
    _as_legacy_store(url)
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        text = connection.execute(sa.text("SELECT row_json FROM points WHERE idx = 1")).scalar()
        connection.execute(sa.text("UPDATE points SET row_json = :t WHERE idx = 1"),
                           {"t": text.replace('"chains"', '"warp speed"')})
    engine.dispose()
    old = store.RunStore(url)
    with pytest.raises(StoreError) as caught:
        old.migrate(ADMIN)
    assert "stored run fma01, point 2: param 'warp speed' is not one of fma's ('chains')" in str(caught.value)
    assert store.RunStore(url).version == 10


def test_the_bundled_schema_9_store_migrates_its_peer_runs_copies_per_sample(tmp_path):
    path = tmp_path / "store_v9.sqlite"
    shutil.copy("tests/old_exports/store_v9.sqlite", path)
    old = store.RunStore(f"sqlite:///{path}")
    before = old.load("v9peers")
    assert old.migrate(ADMIN) == 11
    after = old.load("v9peers")
    pd.testing.assert_frame_equal(after, before)
    assert after["copies_per_sample"].notna().any() or after["loads_per_sample"].notna().any()
