"""The installed command, ``pinpoint``: the app and the headless runner under one name.

``pinpoint app [STREAMLIT OPTIONS]`` starts PinPoint's server (serve.py of this copy, checkout or installed, with
its own .streamlit/config.toml) through ``streamlit run``; ``pinpoint measure EXPERIMENT …`` is ``python -m gpu.bench
EXPERIMENT …``; ``fleet``, ``check``, ``import``, ``export``, ``report``, ``runs``, ``migrate``, ``trash``,
``restore``, ``purge``, ``audit`` and ``db-roles`` are the runner's commands of the same names. Each takes exactly
the runner's options: this module only dispatches to gpu.bench.
"""

from __future__ import annotations

import argparse
import os
import sys

from gpu.core import paths, serving
from gpu.experiments import registry

RUNNER_COMMANDS = {
    "fleet": "run a suite on every GPU of a Dask cluster, each run into the runs store",
    "check": "CI gate: exit 1 when a point of a run got slower beyond noise, 0 when none did, 2 when it cannot check",
    "import": "import runner Parquet/CSV files, or another runs store's SQLite file, into the runs store",
    "export": "write a stored (or bundled) run to a Parquet/CSV file",
    "report": "a self-contained HTML review: a baseline against one or more candidates",
    "runs": "list the stored and bundled runs",
    "migrate": "bring the runs store to this PinPoint's schema version",
    "trash": "move stored runs to the trash (restorable until purged or expired)",
    "restore": "bring runs back from the trash",
    "purge": "delete runs from the trash for good, or every expired one (--expired)",
    "audit": "export the audit trail as CSV or JSON",
    "db-roles": "print the SQL of a PostgreSQL store's owner, writer and reader roles",
}
DRIVER_COMMAND = "occupancy-driver"  # a measurement too: the driver's occupancy answers for the calculator's tests


def experiment_commands() -> list[str]:
    return [entry.command for entry in registry.REGISTRY] + [DRIVER_COMMAND]


def top_parser() -> argparse.ArgumentParser:
    """For the help only: every command passes its own arguments on to the runner's parser."""
    parser = argparse.ArgumentParser(
        prog="pinpoint", description="PinPoint: a live GPU memory-performance lab (the app and its headless runner)",
        epilog="Each command's own options: pinpoint COMMAND --help (measure: pinpoint measure EXPERIMENT --help).")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("app", help="start the app (Streamlit; options such as --server.port 8502 pass through)")
    sub.add_parser("measure", help="measure one experiment on this machine's GPU: "
                                   + ", ".join(experiment_commands()))
    for name, text in RUNNER_COMMANDS.items():
        sub.add_parser(name, help=text)
    return parser


def app_help() -> str:
    """``pinpoint app --help``: PinPoint's own words, not ``streamlit run``'s (whose options it passes on)."""
    return f"""usage: pinpoint app [STREAMLIT OPTIONS]

Start PinPoint's app: `streamlit run` of this copy's serve.py, with its own .streamlit/config.toml, serving
http://127.0.0.1:8501 to this machine only. It measures live on a working NVIDIA GPU, and otherwise replays the
runs recorded on real GPUs that come with PinPoint (every page says which).

Streamlit's options pass through, for example:
  --server.port 8502        another port
  --server.headless true    do not open a browser
(every option: python -m streamlit run --help)

Environment:
  PINPOINT_BACKEND   auto (the default: live when a GPU works, else replay), live or replay
  PINPOINT_DB_URL    the runs store: a SQLite or PostgreSQL URL (default: a SQLite file in your data folder)
  PINPOINT_DEVICE    the GPU to measure on (an index or a UUID prefix)
  PINPOINT_SERVE     local (the default) or team: serving a team with sign-in is described in
                     {serving.DOCS}
"""


# serve.py prints its address once the server answers; Streamlit's banner would print one seconds before (as make app)
APP_ENVIRONMENT = {"STREAMLIT_LOGGER_HIDE_WELCOME_MESSAGE": "true"}


def app_command(streamlit_args: list[str]) -> int:
    """Replaces this process with ``streamlit run serve.py``, so signals and the exit status are Streamlit's own."""
    argv = [sys.executable, "-m", "streamlit", "run", str(paths.ROOT / "serve.py"), *streamlit_args]
    os.execve(sys.executable, argv, {**os.environ, **APP_ENVIRONMENT})
    return 0  # not reached


def runner():
    """The runner, gpu.bench, imported only for a command that runs: it loads pandas, PyArrow and the results store,
    which the help and ``pinpoint app`` never need (``pinpoint --help`` answers in a tenth of a second)."""
    from gpu import bench

    return bench


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        top_parser().print_help(file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "app":
        if "-h" in rest or "--help" in rest:
            print(app_help(), end="")
            return 0
        return app_command(rest)
    if command == "measure":
        if not rest or rest[0] in ("-h", "--help"):
            print("usage: pinpoint measure EXPERIMENT [options]\n\nEXPERIMENT: " + ", ".join(experiment_commands())
                  + "\n\nEach experiment's options: pinpoint measure EXPERIMENT --help",
                  file=sys.stdout if rest else sys.stderr)
            return 0 if rest else 2
        if rest[0] not in experiment_commands():
            print(f"error: no experiment '{rest[0][:40]}'; the experiments are: {', '.join(experiment_commands())}",
                  file=sys.stderr)
            return 2
        return runner().main(rest, prog="pinpoint measure")
    if command in RUNNER_COMMANDS:
        return runner().main(argv, prog="pinpoint")
    print(f"error: no command '{command[:40]}'; the commands are: app, measure, {', '.join(RUNNER_COMMANDS)} "
          "(pinpoint --help)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
