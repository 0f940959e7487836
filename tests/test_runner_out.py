"""The runner's output arguments are checked before anything is measured (--out's folder, kind of file and suffix,
--label, --notes), and a run measured but not writable to --out is kept in a file the message names, and stored.
The GPU is the in-process stand-in of tests/test_one_request.py, which counts what it copied."""

import os

import pytest

from gpu import bench
from gpu.core import schema
from gpu.results.persistence.store import RunStore
from tests.test_one_request import CopySweep, counted  # noqa: F401 (the stand-in GPU, a fixture)

TRANSFERS = ["transfers", "--sizes", "4KiB", "--modes", "pinned", "--directions", "h2d"]


@pytest.mark.parametrize(("flags", "says"), [
    (["--out", "/proc/x.parquet"], "--out /proc/x.parquet cannot be written"),
    (["--out", "{tmp}/missing/run.parquet"], "--out {tmp}/missing/run.parquet cannot be written: no such folder"),
    (["--out", "{tmp}"], "--out {tmp}: the name must end in .parquet or .csv"),
    (["--out", "{tmp}/folder.parquet"], "--out {tmp}/folder.parquet is not a regular file"),
    (["--out", "{tmp}/run.txt"], "--out {tmp}/run.txt: the name must end in .parquet or .csv, the format it is"),
    (["--out", "/dev/null"], "--out /dev/null: the name must end in .parquet or .csv"),
    (["--out", "{tmp}/fifo.parquet"], "--out {tmp}/fifo.parquet is not a regular file"),
    (["--label", "x" * 257], "--label: the label must be text of at most 256 characters"),
    (["--notes", "x" * 5000], "--notes: the notes must be text of at most 4,096 characters"),
])
def test_output_arguments_are_refused_before_anything_is_measured(counted, monkeypatch, capsys, tmp_path,  # noqa: F811
                                                                  flags, says):
    backend, _ = counted
    (tmp_path / "folder.parquet").mkdir()
    os.mkfifo(tmp_path / "fifo.parquet")  # opening it to write would wait for a reader
    monkeypatch.setenv("PINPOINT_DB_URL", f"sqlite:///{tmp_path}/runs.sqlite")
    monkeypatch.setattr(bench, "open_runner_backend", lambda experiment, args: backend)
    CopySweep.copied = []
    code = bench.main([*TRANSFERS, *[f.replace("{tmp}", str(tmp_path)) for f in flags]])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert says.replace("{tmp}", str(tmp_path)) in err
    assert CopySweep.copied == []  # nothing was measured
    assert sorted(os.listdir(tmp_path)) == ["fifo.parquet", "folder.parquet"]  # nothing written, no store made


def test_a_run_that_cannot_be_written_after_measuring_is_kept_and_stored(counted, monkeypatch, capsys,  # noqa: F811
                                                                         tmp_path):
    backend, _ = counted
    out = tmp_path / "later" / "run.parquet"
    out.parent.mkdir()
    monkeypatch.setenv("PINPOINT_DB_URL", f"sqlite:///{tmp_path}/runs.sqlite")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def submit_then_lose_the_folder(request):  # the folder goes away while the GPU measures
        handle = submit(request)
        out.parent.rmdir()
        return handle

    submit = backend.submit
    monkeypatch.setattr(backend, "submit", submit_then_lose_the_folder)
    monkeypatch.setattr(bench, "open_runner_backend", lambda experiment, args: backend)
    code = bench.main([*TRANSFERS, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    [line] = [line for line in err.splitlines() if line.startswith("error: ")]
    kept = line.split("the run is kept in ")[1]
    assert line.startswith(f"error: --out {out} could not be written after measuring (")
    frame = schema.read_results(kept)
    [stored] = RunStore().runs()["run_id"].tolist()
    assert frame["run_id"].iloc[0] == stored and len(frame) == 1


def test_a_run_the_store_refuses_without_out_is_kept_in_a_file_the_message_names(counted, monkeypatch,  # noqa: F811
                                                                                  capsys, tmp_path):
    import tempfile

    backend, _ = counted
    monkeypatch.setenv("PINPOINT_DB_URL", "sqlite://")  # in memory: keeps nothing
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(bench, "open_runner_backend", lambda experiment, args: backend)
    assert bench.main(TRANSFERS) == 0
    [line] = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: ")]
    assert line.startswith("warning: the run was not stored: PINPOINT_DB_URL is a SQLite database in memory")
    kept = line.split("; it is kept in ")[1]
    assert kept.startswith(str(tmp_path)) and len(schema.read_results(kept)) == 1
