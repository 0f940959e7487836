"""A point's ``conditions`` and ``witness`` kept by the store (SQLite and PostgreSQL), migrated into a store of schema
version 7, exported and imported (Parquet, CSV, another store's file), with hostile text kept as plain text."""

import json

import pandas as pd
import pytest
import sqlalchemy as sa

from gpu.core import conditions, schema
from gpu.core.access import Actor
from gpu.core.errors import ImportProblem
from gpu.results.exchange import imports, runfiles, sqlite_store
from gpu.results.exchange.catalog import BUNDLED_DIRS
from gpu.results.persistence import store
from tests.old_stores import store_at_version

TRANSFERS = next(BUNDLED_DIRS[0].glob("transfers_*.parquet"))
HOSTILE = "=HYPERLINK(\"http://x\")<script>alert(1)</script> **bold** [link](javascript:x) | a |"
ADMIN = Actor.local("cli")


def _witnessed(run_id: str = "witnessed01") -> pd.DataFrame:
    """A bundled run with a witness on its points: clean, one shared, one throttled and downtrained."""
    frame = schema.read_results(TRANSFERS).head(3).assign(run_id=run_id)
    frame["conditions"] = [conditions.CLEAN, "shared with pid 1039 (python3) for 100 % of samples",
                           conditions.join(["SW power cap in 38 % of samples", "PCIe Gen4 ×8 of Gen5 ×16"])]
    frame["witness"] = [json.dumps({"n": 12, "interval_ms": 50, "sm_mhz": [1980, 1980, 1980]})] * 3
    return schema.validate(frame)


def _points_conditions(url: str, run_id: str) -> list:
    engine = sa.create_engine(url)
    with engine.connect() as connection:
        found = connection.execute(sa.select(store.POINTS.c.conditions).where(store.POINTS.c.run_id == run_id)
                                   .order_by(store.POINTS.c.idx)).scalars().all()
    engine.dispose()
    return found


def test_conditions_and_witness_round_trip_through_the_store_and_its_trash(store_url):
    runs = store.RunStore(store_url)
    frame = _witnessed()
    runs.save(frame, "runner")
    loaded = runs.load("witnessed01")
    assert list(loaded["conditions"]) == list(frame["conditions"])
    assert list(loaded["witness"]) == list(frame["witness"])
    assert _points_conditions(store_url, "witnessed01") == list(frame["conditions"])
    assert runs.save(frame, "runner")[0].stored is False  # the same content: conditions are part of it
    bulk = runs.points(["witnessed01"], fields=["conditions"], samples=False)
    assert conditions.summary(bulk["conditions"]).startswith("shared with pid 1039")
    runs.trash(ADMIN, ["witnessed01"])
    runs.restore(ADMIN, ["witnessed01"])
    assert _points_conditions(store_url, "witnessed01") == list(frame["conditions"])
    assert list(runs.load("witnessed01")["conditions"]) == list(frame["conditions"])


def test_a_run_without_a_witness_is_stored_as_not_observed_and_reads_back_empty(store_url):
    runs = store.RunStore(store_url)
    old = schema.read_results(TRANSFERS).head(4)  # a run recorded before the witness (4 of its points)
    runs.save(old, "import")
    run_id = str(old["run_id"].iloc[0])
    assert set(_points_conditions(store_url, run_id)) == {conditions.NOT_OBSERVED}
    loaded = runs.load(run_id)
    assert loaded["conditions"].isna().all() and conditions.summary(loaded["conditions"]) == conditions.NOT_OBSERVED
    assert runfiles.content_hash(schema.frame_rows(loaded)) == runfiles.content_hash(schema.frame_rows(old))


def _version_seven_store(url: str, frame: pd.DataFrame) -> None:
    """A store as PinPoint wrote it at schema version 7 (before points kept their conditions), holding ``frame``."""
    store_at_version(url, 7, frame)


def test_a_version_seven_store_migrates_to_eight_and_its_points_read_as_not_observed(store_url):
    old_frame = schema.read_results(TRANSFERS).head(4)
    _version_seven_store(store_url, old_frame)
    run_id = str(old_frame["run_id"].iloc[0])
    old = store.RunStore(store_url)
    assert old.version == 7 and old.load(run_id)["conditions"].isna().all()  # read as it is, before migrating
    assert old.migrate(ADMIN) == store.SCHEMA_VERSION == 11
    assert set(_points_conditions(store_url, run_id)) == {conditions.NOT_OBSERVED}
    migrated = old.load(run_id)
    assert conditions.summary(migrated["conditions"]) == conditions.NOT_OBSERVED
    assert runfiles.content_hash(schema.frame_rows(migrated)) == runfiles.content_hash(schema.frame_rows(old_frame))
    assert old.save(old_frame, "runner")[0].stored is False  # its content did not change
    old.save(_witnessed(), "runner")
    assert _points_conditions(store_url, "witnessed01")[1].startswith("shared with pid 1039")


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_export_and_import_carry_conditions_and_hostile_text_stays_text(tmp_path, suffix):
    frame = _witnessed()
    frame.loc[0, "conditions"] = HOSTILE
    path = tmp_path / f"run{suffix}"
    runfiles.write(frame, str(path))
    if suffix == ".csv":
        assert "'=HYPERLINK" in path.read_text()  # a spreadsheet would run it: written with a leading quote
    read = imports.read_upload(path.name, path=path)
    assert list(read["conditions"]) == list(frame["conditions"]) and read.loc[0, "conditions"] == HOSTILE
    assert list(read["witness"]) == list(frame["witness"])


def test_a_file_recorded_before_the_witness_imports_and_reads_not_observed():
    import pyarrow.parquet as pq

    assert "conditions" not in pq.read_schema(TRANSFERS).names  # a bundled recording, made before witnesses
    read = imports.read_upload(TRANSFERS.name, path=TRANSFERS)
    assert conditions.summary(read["conditions"]) == conditions.NOT_OBSERVED


def test_another_stores_file_carries_conditions(tmp_path):
    source = tmp_path / "source.sqlite"
    store.RunStore(f"sqlite:///{source}").save(_witnessed(), "runner")
    (part, *_), = sqlite_store.read_store(source.name, source)
    assert list(part["conditions"]) == list(_witnessed()["conditions"])


@pytest.mark.parametrize("column, value, problem", [
    ("conditions", "clean\nsecond line", "control character"),
    ("conditions", "x" * 1025, "longer than 1,024 characters"),
    ("conditions", "clean\x00", "NUL character"),
    ("witness", "[1, 2]", "not a JSON object"),
    ("witness", "{not json", "not a JSON object"),
    ("witness", "{" + '"a":' * 5000 + "1" + "}" * 5000, "longer than 8,192 characters"),
])
def test_a_bad_imported_conditions_or_witness_is_one_line_naming_it(tmp_path, column, value, problem):
    frame = _witnessed().astype({column: object})
    frame.loc[1, column] = value
    path = tmp_path / "bad.csv"
    path.write_bytes(frame.assign(samples_ms=frame["samples_ms"].map(lambda s: json.dumps(list(s))))
                     .to_csv(index=False).encode())
    with pytest.raises(ImportProblem) as raised:
        imports.read_upload(path.name, path=path, unverified=True)
    message = str(raised.value)
    assert f"row 2 (run witnessed01), column {column}" in message and problem in message and "\n" not in message
