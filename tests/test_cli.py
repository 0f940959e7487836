"""The `pinpoint` command (gpu/cli.py) dispatches to the runner, and bundled files are located in one place."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from gpu import bench, cli
from gpu.core import paths

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def runner_calls(monkeypatch):
    calls = []
    monkeypatch.setattr(bench, "main", lambda argv, prog: calls.append((argv, prog)) or 0)
    return calls


@pytest.mark.parametrize("command", sorted(cli.RUNNER_COMMANDS))
def test_a_runner_command_passes_its_arguments_on_unchanged(runner_calls, command):
    assert cli.main([command, "--label", "x y", "FILE"]) == 0
    assert runner_calls == [([command, "--label", "x y", "FILE"], "pinpoint")]


def test_measure_runs_the_experiments_subcommand(runner_calls):
    assert cli.main(["measure", "host-latency", "--sizes", "4KiB"]) == 0
    assert runner_calls == [(["host-latency", "--sizes", "4KiB"], "pinpoint measure")]


@pytest.mark.parametrize("argv, message", [
    (["measure", "sideways"], "error: no experiment 'sideways'; the experiments are: transfers"),
    (["measure", "runs"], "error: no experiment 'runs'"),
    (["benchmark"], "error: no command 'benchmark'; the commands are: app, measure, fleet"),
])
def test_a_wrong_name_is_one_line_and_exit_2(runner_calls, capsys, argv, message):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1 and not runner_calls


def test_help_names_the_runners_options_under_pinpoints_name(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["measure", "transfers", "--help"])
    assert exit_.value.code == 0 and capsys.readouterr().out.startswith("usage: pinpoint measure transfers")
    with pytest.raises(SystemExit):
        bench.main(["export", "--help"])
    assert capsys.readouterr().out.startswith("usage: python -m gpu.bench export")  # the checkout's name, unchanged


def test_the_app_is_this_copys_serve_py(monkeypatch):
    started = []
    monkeypatch.setattr(cli.os, "execve", lambda path, argv, env: started.append((argv, env)))
    monkeypatch.setenv("PINPOINT_BACKEND", "replay")
    cli.main(["app", "--server.port", "8502"])
    [(argv, env)] = started
    assert argv[1:5] == ["-m", "streamlit", "run", str(ROOT / "serve.py")] and argv[5:] == ["--server.port", "8502"]
    # serve.py prints the address once it answers: Streamlit's banner, printed before, is hidden
    assert env["STREAMLIT_LOGGER_HIDE_WELCOME_MESSAGE"] == "true" and env["PINPOINT_BACKEND"] == "replay"


@pytest.mark.parametrize("argv", [["app", "--help"], ["app", "-h"], ["app", "--server.port", "8502", "--help"]])
def test_app_help_is_pinpoints_own_and_starts_nothing(monkeypatch, capsys, argv):
    from gpu.core import serving

    started = []
    monkeypatch.setattr(cli.os, "execve", lambda path, argv, env: started.append(argv))
    assert cli.main(argv) == 0 and started == []
    out = capsys.readouterr().out
    assert out.startswith("usage: pinpoint app [STREAMLIT OPTIONS]") and "streamlit run [OPTIONS]" not in out
    for name in ("--server.port", "PINPOINT_BACKEND", "PINPOINT_DB_URL", "PINPOINT_SERVE", str(serving.DOCS)):
        assert name in out, name


# What the help must not load: the app's, the store's and the runner's heavy libraries (pandas alone is ~0.6 s).
HEAVY = ("pandas", "streamlit", "pyarrow", "tree_sitter", "tree_sitter_toml", "sqlalchemy", "scipy", "dask")


def test_the_helps_load_none_of_the_heavy_libraries():
    """``pinpoint --help``, ``pinpoint measure --help`` (which lists every experiment: the declarations are loaded)
    and ``pinpoint app --help``, in a fresh Python as the installed command starts: the modules left loaded."""
    code = ("import sys; from gpu import cli\n"
            "for argv in (['--help'], ['measure', '--help'], ['app', '--help']): assert cli.main(argv) == 0\n"
            "print('\\n'.join(sorted(sys.modules)), file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    loaded = set(result.stderr.split())
    assert "gpu.experiments.registry" in loaded and "gpu.experiments.transfers" in loaded  # the list was made
    assert "transfers" in result.stdout and "usage: pinpoint app" in result.stdout
    assert sorted(m for m in loaded if m.split(".")[0] in HEAVY) == []
    assert "gpu.bench" not in loaded and not any(m.startswith(("gpu.results", "gpu.service")) for m in loaded)


def test_bundled_files_are_located_only_by_gpu_core_paths():
    """gpu.core.paths finds the copy through the ``gpu`` package's resources; a path built from a module's own
    location (``__file__``) would break in the installed copy or drift from it: everything goes through paths."""
    sources = [*(ROOT / "gpu").rglob("*.py"), *(ROOT / "pages").rglob("*.py"), ROOT / "app.py", ROOT / "serve.py"]
    using_file = sorted(str(path.relative_to(ROOT)) for path in sources
                        if any(isinstance(node, ast.Name) and node.id == "__file__"
                               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))))
    assert using_file == []
    assert paths.ROOT == ROOT and paths.CHECKOUT and (paths.asset("replay")).is_dir() and paths.KERNELS.is_dir()
