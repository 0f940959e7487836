"""Another runs store (a SQLite file, e.g. a fleet's from a GPU machine) imports through the same contract and
limits as a Parquet or CSV file, and whole or not at all, into SQLite and PostgreSQL."""

import json
import sqlite3

import pandas as pd
import pytest

from gpu import bench
from gpu.results.persistence.store import RunStore
from tests.conftest import new_postgres_database
from tests.simulated_fleet import as_board, recorded


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request, tmp_path, monkeypatch):
    """The store imported into, on SQLite and on PostgreSQL (a fresh database each)."""
    url = f"sqlite:///{tmp_path}/team.sqlite" if request.param == "sqlite" else \
        new_postgres_database(request.getfixturevalue("postgres_url"))
    monkeypatch.setenv("PINPOINT_DB_URL", url)
    monkeypatch.chdir(tmp_path)  # files are named as given, relative: a message names them whole
    return url


def runs(count: int = 2):
    return [as_board(recorded("reduction"), board) for board in range(count)]


def source_store(tmp_path, frames, name: str = "gpu_machine.sqlite"):
    """A SQLite runs store holding ``frames`` as a fleet's runs."""
    path = tmp_path / name
    store = RunStore(f"sqlite:///{path}")
    for frame in frames:
        store.save(frame, "fleet", "health suite", fleet=("f-1", "health"), suite_text='[[run]]\nexperiment = '
                   '"reduction"\n')
    store.close()
    return path


def edit_point(path, run_number: int, **values):
    """Change the stored JSON (and the query columns) of the first point of the ``run_number``-th run, as a file
    written by hand or another tool would hold it."""
    with sqlite3.connect(path) as connection:
        run_id = connection.execute("SELECT run_id FROM runs ORDER BY run_id").fetchall()[run_number][0]
        text, = connection.execute("SELECT row_json FROM points WHERE run_id = ? AND idx = 0", (run_id,)).fetchone()
        row = json.loads(text)
        row.update(values)
        connection.execute("UPDATE points SET row_json = ? WHERE run_id = ? AND idx = 0", (json.dumps(row), run_id))
    connection.close()
    return run_id


def imported(path, capsys) -> tuple[int, list[str]]:
    code = bench.main(["import", path.name])
    return code, capsys.readouterr().err.strip().splitlines()


@pytest.mark.slow
def test_a_fleets_store_imports_whole_with_its_fleet_and_suite_text(tmp_path, target, capsys):
    path = source_store(tmp_path, runs(2))
    code, lines = imported(path, capsys)
    assert code == 0 and len(lines) == 2 and all("stored run" in line for line in lines)
    team = RunStore(target)
    assert len(team.runs(fleet_id="f-1")) == 2 and team.fleet_suite("f-1")[0] == "health"
    assert "reduction" in team.fleet_suite("f-1")[1]


@pytest.mark.slow
def test_a_store_whose_second_run_is_bad_stores_nothing(tmp_path, target, capsys):
    path = source_store(tmp_path, runs(2))
    run_id = edit_point(path, 1, median_ms=-1)
    code, lines = imported(path, capsys)
    assert code == 2 and len(lines) == 1, lines
    assert f"{path.name}: row" in lines[0] and f"(run {run_id}), column median_ms" in lines[0]
    assert f"nothing from {path.name} was stored" in lines[0]
    assert RunStore(target).runs().empty and RunStore(target).fleet_suite("f-1") is None


def _repeated(frame):
    return pd.concat([frame, frame.iloc[[0]]], ignore_index=True)


@pytest.mark.parametrize(("change", "column", "words"), [
    (lambda f: f.assign(experiment="no_such_experiment"), "experiment", "is not a PinPoint experiment"),
    (lambda f: f.assign(run_id="run\n\x1b[31mred"), "run_id", "holds a control character"),
    (lambda f: f.assign(host="h" * 10_000), "host", "is longer than 256 characters"),
    (_repeated, "variant", "repeats a point already in this run"),
    (lambda f: f.assign(median_ms=f["median_ms"] * 2), "median_ms", "the summary does not match its samples"),
])
@pytest.mark.slow
def test_each_breach_of_the_import_contract_is_refused_in_one_line_naming_file_run_and_column(
        tmp_path, target, capsys, change, column, words):
    good, bad = runs(2)
    path = tmp_path / "gpu_machine.sqlite"
    store = RunStore(f"sqlite:///{path}")
    store.save(good, "fleet", fleet=("f-1", "health"))
    store.save(change(bad), "fleet", fleet=("f-1", "health"))
    store.close()
    code, lines = imported(path, capsys)
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"error: {path.name}: row ") and "(run " in lines[0] and f"column {column}" in lines[0]
    assert words in lines[0] and "\x1b" not in lines[0]
    assert RunStore(target).runs().empty


@pytest.mark.slow
def test_a_store_over_the_import_limits_is_refused_before_its_points_are_read(tmp_path, target, capsys,
                                                                               monkeypatch):
    path = source_store(tmp_path, runs(1))
    monkeypatch.setenv("PINPOINT_IMPORT_MAX_BYTES", "4096")
    code, lines = imported(path, capsys)
    assert code == 2 and "over the import limit of 0 MB" in lines[0] and RunStore(target).runs().empty
    monkeypatch.delenv("PINPOINT_IMPORT_MAX_BYTES")
    monkeypatch.setattr("gpu.results.exchange.contract.MAX_ROWS", 3)
    code, lines = imported(path, capsys)
    assert code == 2 and "over 3 points, the limit" in lines[0] and RunStore(target).runs().empty


@pytest.mark.slow
def test_a_store_of_schema_version_minus_one_is_refused(tmp_path, target, capsys):
    path = source_store(tmp_path, runs(1))
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE pinpoint_meta SET value = '-1' WHERE key = 'schema_version'")
    connection.close()
    code, lines = imported(path, capsys)
    assert code == 2 and "not a PinPoint runs store (schema version -1)" in lines[0]


REDUCTION = {"block_sizes": [256], "profile": "precise/timeout_s=1", "sizes": [268435456],
             "variants": ["warp_shuffle"]}


@pytest.mark.slow
def test_each_runs_parameters_travel_with_it_through_a_store_file_and_an_export(tmp_path, target, capsys):
    from gpu.results.persistence.store import canonical_params

    path = tmp_path / "gpu_machine.sqlite"
    source = RunStore(f"sqlite:///{path}")
    frames = runs(2)
    for frame in frames:
        source.save(frame, "fleet", fleet=("f-1", "health"), params={frame["run_id"].iloc[0]: REDUCTION}, gpus="one")
    source.close()
    assert imported(path, capsys)[0] == 0
    team = RunStore(target)
    ids = [f["run_id"].iloc[0] for f in frames]
    asked = team.run_params(ids).set_index("run_id")
    assert list(asked.loc[ids, "params"]) == [canonical_params(REDUCTION)] * 2 and set(asked["gpus"]) == {"one"}
    for suffix in ("parquet", "csv"):  # exported with its parameters, imported into a fresh store with them
        out = tmp_path / f"run.{suffix}"
        assert bench.main(["export", ids[0], "--out", str(out)]) == 0
        fresh = f"sqlite:///{tmp_path}/fresh-{suffix}.sqlite"
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("PINPOINT_DB_URL", fresh)
            assert bench.main(["import", str(out)]) == 0, capsys.readouterr().err
        assert RunStore(fresh).run_params([ids[0]]).loc[0, "params"] == canonical_params(REDUCTION)


def test_an_export_whose_parameters_were_edited_is_refused_naming_the_run(tmp_path):
    from gpu.results.exchange import imports, runfiles

    frame = runs(1)[0]
    run_id = frame["run_id"].iloc[0]
    out = tmp_path / "run.csv"
    runfiles.write(frame, str(out), {run_id: '{"sizes": [1]'})
    with pytest.raises(imports.ImportProblem, match=f"run.csv: run {run_id}: its parameters are not JSON"):
        imports.read_upload("run.csv", path=out)
    runfiles.write(frame, str(out), {run_id: '{"sizes":[1]}'})
    assert imports.params_of(imports.read_upload("run.csv", path=out)) == {run_id: '{"sizes":[1]}'}


def test_a_pages_download_of_a_stored_run_carries_its_parameters_and_imports_with_them(target, tmp_path):
    """'Download this run' on a page (a live run saved as measured, or a run opened from the store) writes the
    parameters the store keeps, so the file imports into another store with them; a run the store does not hold
    (a bundled recording) downloads without."""
    from gpu.results.exchange import imports, runfiles
    from pages._ui import backends, controls

    frame = runs(1)[0]
    run_id = frame["run_id"].iloc[0]
    store = RunStore(target)
    store.save(frame, "live", params={run_id: {"sizes": [1 << 20], "block_sizes": [256]}})
    store.close()
    backends._open_catalog.clear()
    try:
        params = controls.stored_params(frame)
        assert params == {run_id: '{"block_sizes":[256],"sizes":[1048576]}'}
        out = tmp_path / "download.csv"
        out.write_bytes(runfiles.to_csv_bytes(frame, params))
        assert imports.params_of(imports.read_upload("download.csv", path=out)) == params
        assert controls.stored_params(runs(2)[1]) is None  # not in the store: the points alone
    finally:
        backends._open_catalog.clear()
