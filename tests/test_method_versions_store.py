"""A run's method version through the store (SQLite and PostgreSQL: saved, listed, trashed and restored, migrated
into a store of schema version 8), through exports and imports (Parquet, CSV, another store's file, an old export
without it), and said by Compare, ``check`` and the review report: the same, different, or unknown, never guessed."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pandas as pd
import pytest
import sqlalchemy as sa

from gpu.core import method_versions, schema
from gpu.core.access import Actor
from gpu.core.errors import ImportProblem
from gpu.results.analysis import compare, report
from gpu.results.exchange import imports, runfiles, sqlite_store
from gpu.results.exchange.catalog import BUNDLED_DIRS, Catalog
from gpu.results.persistence import store
from tests.old_stores import store_at_version
from tests.test_check import coalescing_runs, gate, on_board5

TRANSFERS = next(BUNDLED_DIRS[0].glob("transfers_*.parquet"))
ADMIN = Actor.local("cli")
OLD, NEW = "0123456789abcdef", "fedcba9876543210"


def _run(run_id: str = "method01", version: str | None = OLD) -> pd.DataFrame:
    """Four points of a bundled transfers recording as a run measured with method ``version``."""
    return schema.validate(schema.read_results(TRANSFERS).head(4).assign(run_id=run_id, method_version=version))


def _stored_version(url: str, run_id: str):
    engine = sa.create_engine(url)
    with engine.connect() as connection:
        found = connection.execute(sa.select(store.RUNS.c.method_version).where(store.RUNS.c.run_id == run_id)).scalar()
    engine.dispose()
    return found


def test_the_words_say_same_different_or_which_run_is_unknown():
    old, new, unknown = _run("a", OLD), _run("b", NEW), _run("c", None)
    assert method_versions.words(old, _run("d", OLD)) == f"Method: the same in both runs (method version {OLD})."
    differ = method_versions.words(old, new)
    assert differ.startswith(f"Methods differ: the baseline was measured with method version {OLD} and the "
                             f"candidate with {NEW}")
    assert method_versions.differ(old, new) is True and method_versions.differ(old, old) is False
    assert method_versions.words(unknown, new).startswith("Method version unknown for the baseline (recorded before "
                                                          f"PinPoint kept method versions, as the bundled recordings "
                                                          f"were); the candidate's is {NEW}")
    assert method_versions.words(new, unknown).startswith("Method version unknown for the candidate")
    assert method_versions.words(unknown, unknown).startswith("Method version unknown for both runs")
    assert method_versions.differ(unknown, new) is None
    # a bundled recording carries no method version: unknown, never a version made up for it
    bundled = schema.read_results(TRANSFERS)
    assert bundled["method_version"].isna().all() and method_versions.shown(bundled) == method_versions.UNKNOWN
    diff = compare.provenance_diff(bundled, new).set_index("field").loc["method_version"]
    assert (diff["baseline"], diff["candidate"], bool(diff["differs"])) == ("unknown", NEW, True)


def test_the_method_version_is_saved_listed_and_kept_through_the_trash(store_url):
    runs = store.RunStore(store_url)
    runs.save(_run(), "runner")
    assert _stored_version(store_url, "method01") == OLD
    assert runs.runs().set_index("run_id").loc["method01", "method_version"] == OLD
    assert set(runs.load("method01")["method_version"]) == {OLD}
    assert runs.save(_run(), "runner")[0].stored is False  # the same content, its version included
    with pytest.raises(store.StoreError, match="different content"):
        runs.save(_run(version=NEW), "runner")  # another method measured other points
    runs.trash(ADMIN, ["method01"])
    runs.restore(ADMIN, ["method01"])
    assert _stored_version(store_url, "method01") == OLD and set(runs.load("method01")["method_version"]) == {OLD}
    # a run recorded before runs kept one: NULL in the store, unknown when read, its content hash unchanged
    old = schema.read_results(TRANSFERS).head(4)
    runs.save(old, "import")
    run_id = str(old["run_id"].iloc[0])
    assert _stored_version(store_url, run_id) is None and pd.isna(runs.runs().set_index("run_id").loc[run_id,
                                                                                                      "method_version"])
    assert method_versions.shown(runs.load(run_id)) == method_versions.UNKNOWN
    assert runfiles.content_hash(schema.frame_rows(runs.load(run_id))) == runfiles.content_hash(
        schema.frame_rows(old))


def test_a_version_eight_store_is_read_as_it_is_then_migrated_and_its_runs_read_as_unknown(store_url):
    old_frame = schema.read_results(TRANSFERS).head(4)
    store_at_version(store_url, 8, old_frame)  # before runs kept their method version
    run_id = str(old_frame["run_id"].iloc[0])
    old = store.RunStore(store_url)
    assert old.version == 8
    listed = old.runs()  # opening never writes: the column is not there yet, and reads empty
    assert listed["method_version"].isna().all() and method_versions.of_run(old.load(run_id)) is None
    assert old.migrate(ADMIN) == store.SCHEMA_VERSION == 11
    pd.testing.assert_frame_equal(old.runs(), listed)
    assert _stored_version(store_url, run_id) is None
    assert old.audit_trail(ADMIN)["what"].iloc[0] == "migrated the runs store from schema version 8 to 11"
    assert old.save(old_frame, "runner")[0].stored is False  # its content did not change
    old.save(_run("method02", NEW), "runner")
    assert _stored_version(store_url, "method02") == NEW
    said = compare.method_words(old.load(run_id), old.load("method02"))
    assert said.startswith("Method version unknown for the baseline") and NEW in said


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_exports_carry_the_method_version_and_imports_store_it(tmp_path, suffix):
    source = store.RunStore(f"sqlite:///{tmp_path}/source.sqlite")
    source.save(_run(), "runner")
    path = tmp_path / f"run{suffix}"
    runfiles.write(source.load("method01"), str(path))  # as `pinpoint export` writes a stored run
    read = imports.read_upload(path.name, path=path)
    assert set(read["method_version"]) == {OLD}
    target = store.RunStore(f"sqlite:///{tmp_path}/target.sqlite")
    target.save(read, "import")
    assert target.runs().set_index("run_id").loc["method01", "method_version"] == OLD


def test_another_stores_file_and_an_old_export_carry_what_they_have(tmp_path):
    source = tmp_path / "source.sqlite"
    store.RunStore(f"sqlite:///{source}").save(_run(), "runner")
    (part, *_), = sqlite_store.read_store(source.name, source)
    assert set(part["method_version"]) == {OLD}
    import pyarrow.parquet as pq

    assert "method_version" not in pq.read_schema(TRANSFERS).names  # exported before runs kept one
    read = imports.read_upload(TRANSFERS.name, path=TRANSFERS)
    assert method_versions.of_run(read) is None and method_versions.shown(read) == "unknown"


def test_a_run_whose_rows_name_two_methods_is_refused_in_one_line(tmp_path):
    frame = _run().astype({"method_version": object})
    frame.loc[2, "method_version"] = NEW
    path = tmp_path / "mixed.csv"
    path.write_bytes(frame.assign(samples_ms=frame["samples_ms"].map(lambda s: json.dumps(list(s))))
                     .to_csv(index=False).encode())
    with pytest.raises(ImportProblem) as refused:
        imports.read_upload(path.name, path=path, unverified=True)
    said = str(refused.value)
    assert "\n" not in said and "row 3 (run method01), column method_version" in said
    assert f"differs from the run's first row ('{OLD}'): one run is measured by one method" in said


def _check_store(url: str) -> str:
    """Board 5's coalescing repeat as a baseline measured with one method, and the same points measured later with
    another; the bundled repeat beside them has none."""
    _, board5 = coalescing_runs()
    runs = store.RunStore(url)
    runs.save(board5[1].assign(run_id="method-base", method_version=OLD), "import")
    runs.save(on_board5(1.0, "method-new").assign(method_version=NEW), "import")
    runs.save(on_board5(1.0, "method-same").assign(method_version=OLD), "import")
    runs.close()
    return str(board5[1]["run_id"].iloc[0])


@pytest.mark.slow
def test_check_and_its_files_say_when_methods_differ_or_are_unknown(monkeypatch, capsys, store_url, tmp_path):
    bundled = _check_store(store_url)
    junit, summary = tmp_path / "junit.xml", tmp_path / "summary.md"
    code, out, err = gate(monkeypatch, capsys, store_url, "--candidate", "method-new", "--against", "method-base",
                          "--junit", str(junit), "--summary", str(summary))
    assert code == 0 and err == ""  # a change of method is said, never a verdict of its own
    assert f"Methods differ: the baseline was measured with method version {OLD} and the candidate with {NEW}" in out
    assert "Methods differ" in summary.read_text()
    properties = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}
    assert properties["method"].startswith("Methods differ")
    _, out, _ = gate(monkeypatch, capsys, store_url, "--candidate", "method-same", "--against", "method-base")
    assert f"Method: the same in both runs (method version {OLD})." in out
    _, out, _ = gate(monkeypatch, capsys, store_url, "--candidate", "method-new", "--against", bundled)
    assert f"Method version unknown for the baseline (recorded before PinPoint kept method versions, as the bundled " \
           f"recordings were); the candidate's is {NEW}" in out


def test_the_review_report_says_when_methods_differ(tmp_path):
    url = f"sqlite:///{tmp_path}/runs.sqlite"
    bundled = _check_store(url)
    catalog = Catalog(store.RunStore(url))
    html = report.render(catalog.load("method-base"), [catalog.load("method-new"), catalog.load(bundled)])
    assert f"Methods differ: the baseline was measured with method version {OLD} and the candidate with {NEW}" in html
    assert "Method version unknown for the candidate" in html


@pytest.mark.slow
def test_the_compare_page_warns_when_methods_differ_and_names_an_unknown_one(monkeypatch, tmp_path):
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    url = f"sqlite:///{tmp_path}/runs.sqlite"
    _check_store(url)
    # the bundled H200 coalescing recording the page replays (Compare lists it; the noise runs it does not)
    bundled = str(schema.read_results(next(BUNDLED_DIRS[0].glob("coalescing_*.parquet")))["run_id"].iloc[0])
    monkeypatch.setenv("PINPOINT_BACKEND", "replay")
    monkeypatch.setenv("PINPOINT_DB_URL", url)
    st.cache_resource.clear()
    at = AppTest.from_file(str(BUNDLED_DIRS[0].parents[1] / "app.py"), default_timeout=120).run()
    at.switch_page("pages/compare.py").run()
    at.selectbox(key="compare_experiment").set_value("coalescing").run()
    at.selectbox(key="compare_baseline").set_value("method-base").run()
    at.multiselect(key="compare_candidates").set_value(["method-new", bundled]).run()
    assert not at.exception, at.exception
    assert [w.value for w in at.warning if "Methods differ" in w.value] == [  # plain text: Markdown escaped
        f"Methods differ\\: the baseline was measured with method version {OLD} and the candidate with {NEW} \\(its "
        "sweep, kernels or the shared timing code changed between them\\), so a difference may come from the method "
        "as well as from the GPU or its software\\."]
    assert any(c.value.startswith("Method version unknown for the candidate") for c in at.caption)
    diff = at.dataframe[0].value.set_index("field")
    assert diff.loc["method_version", "candidate"] == NEW
    st.cache_resource.clear()
