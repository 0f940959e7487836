"""Fleets under attack, with real processes: whatever is not a Dask scheduler at ``--cluster`` (a silent port, a web
server, random bytes), malformed addresses, a scheduler killed mid-run, two fleet commands with one fleet id, a
resume with a changed suite, a suite file name with spaces, a worker that hangs. Each is refused or reported in one
line, never a traceback."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpu.experiments import suites
from gpu.fleet import cluster as fleet_cluster
from gpu.fleet import run as fleet_run
from gpu.fleet.command import FLEET_ID
from gpu.results.persistence.store import RunStore
from tests.conftest import new_postgres_database
from tests.simulated_fleet import board_uuid
from tests.test_fleet import ONE_GPU_RUNS, Cluster, fleet, free_port, stored

# A TCP server that is not a Dask scheduler: ``silent`` accepts and never writes, ``http`` answers as a web server
# answers what is not HTTP (after reading it), ``garbage`` sends random bytes from the start.
FAKE_SERVER = """
import os, socket, sys, threading
mode, port = sys.argv[1], int(sys.argv[2])
server = socket.socket()
server.bind(("127.0.0.1", port))
server.listen(16)
print("listening", flush=True)
def serve(connection):
    try:
        if mode == "http":
            connection.recv(65536)
            connection.sendall(b"HTTP/1.1 400 Bad Request\\r\\nContent-Type: text/html\\r\\nContent-Length: 11\\r\\n"
                               b"\\r\\nBad Request")
        elif mode == "garbage":
            while True:
                connection.sendall(os.urandom(4096))
        while connection.recv(65536):
            pass
    except OSError:
        pass
while True:
    threading.Thread(target=serve, args=(server.accept()[0],), daemon=True).start()
"""


@pytest.fixture
def fake_server():
    started = []

    def start(mode: str) -> str:
        port = free_port()
        process = subprocess.Popen([sys.executable, "-c", FAKE_SERVER, mode, str(port)], stdout=subprocess.PIPE,
                                   text=True)
        started.append(process)
        assert process.stdout.readline().strip() == "listening"
        return f"tcp://127.0.0.1:{port}"

    yield start
    for process in started:
        process.kill()
        process.wait(10)


def one_line_refusal(err: str, expected: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and expected in lines[0], err
    assert "Traceback" not in err and "Error:" not in err.replace("error:", ""), err
    return lines[0]


@pytest.mark.slow  # a fake server and the fleet command, which waits up to 10 s for a silent one
@pytest.mark.parametrize(("mode", "expected"), [
    ("silent", "nothing answered as a Dask scheduler within 10 s"),
    ("http", "within 10 s"),  # an HTTP server waits for a request, as a silent one
    ("garbage", "answered with bytes that are not a Dask handshake"),
])
def test_something_other_than_a_dask_scheduler_is_refused_in_one_line_within_10_s(fake_server, tmp_path, mode,
                                                                                   expected):
    address = fake_server(mode)
    started = time.monotonic()
    code, out, err = fleet(f"sqlite:///{tmp_path}/runs.sqlite", "health", "--cluster", address, timeout=60)
    elapsed = time.monotonic() - started
    assert code == 2, err
    one_line_refusal(err, f"no Dask scheduler at {address}: ")
    assert expected in err and elapsed < 25, (elapsed, err)  # the probe's 10 s and the command's start


@pytest.mark.slow
def test_the_probe_tells_a_scheduler_from_other_servers_within_its_limit(fake_server, tmp_path):
    for mode, expected in (("garbage", "not a Dask handshake"), ("http", "within 3 s"), ("silent", "within 3 s")):
        host, port = fleet_cluster.scheduler_address(fake_server(mode))
        started = time.monotonic()
        assert expected in fleet_cluster.probe_scheduler(host, port, timeout=3)
        assert time.monotonic() - started < 4.5
    assert "Connection refused" in fleet_cluster.probe_scheduler("127.0.0.1", free_port(), timeout=3)
    scheduler = Cluster(tmp_path)
    try:
        assert fleet_cluster.probe_scheduler("127.0.0.1", scheduler.port, timeout=10) is None
    finally:
        scheduler.stop()


@pytest.mark.parametrize(("cluster", "expected"), [
    ("tcp://" + "a" * 5000 + ":8786", "is not a host name"),
    ("tcp://" + "a" * 64 + ".example:8786", "is not a host name"),  # a label over 63 characters (idna refuses it)
    ("tcp://head\nnode:8786", r"host 'head\nnode' is not a host name"),
    ("tcp://head-node:8786\n", r"'tcp://head-node:8786\n' is not tcp://HOST:PORT"),
    ("tcp://head\x1b[2Jnode:8786", r"'tcp://head\x1b[2Jnode:8786'"),
    ("tcp://head-node:99999", "port 99999 is not 1–65535"),
    ("tcp://head-node:0", "port 0 is not 1–65535"),
    ("tcp://[::1:8786", "is not tcp://HOST:PORT"),
    ("tcp://[fe80::zz]:8786", "is not an IPv6 address"),
    ("tcp://-head:8786", "is not a host name"),
    ("tcp://head node:8786", "is not a host name"),
    ("tcp://:8786", "is not tcp://HOST:PORT"),
    ("local\n", r"unknown cluster 'local\n'"),
    ("kubernetes\x07", r"unknown cluster 'kubernetes\x07'"),
])
@pytest.mark.slow
def test_a_malformed_cluster_address_is_refused_in_one_line_that_shows_it_safely(tmp_path, cluster, expected):
    started = time.monotonic()
    code, out, err = fleet(f"sqlite:///{tmp_path}/runs.sqlite", "health", "--cluster", cluster, timeout=60)
    assert code == 2, err
    line = one_line_refusal(err, expected)
    assert err.count("\n") == 1 and "\x1b" not in err and "\x07" not in err and len(line) < 400, err
    assert time.monotonic() - started < 20 and not (tmp_path / "runs.sqlite").exists()  # refused before the store


def test_well_formed_addresses_pass_the_check():
    assert fleet_cluster.scheduler_address("tcp://head-node.example.org:8786") == ("head-node.example.org", 8786)
    assert fleet_cluster.scheduler_address("tcp://10.0.0.7:8786") == ("10.0.0.7", 8786)
    assert fleet_cluster.scheduler_address("tcp://[fe80::1]:8786") == ("fe80::1", 8786)


@pytest.mark.slow  # a Dask cluster whose scheduler is killed while the GPUs measure
def test_a_scheduler_killed_mid_run_names_the_gpus_left_unmeasured_and_how_to_resume(tmp_path):
    cluster = Cluster(tmp_path)
    try:
        url = f"sqlite:///{tmp_path}/runs.sqlite"
        cluster.add_worker(0)
        cluster.add_worker(1, PINPOINT_SIM_SECONDS_PER_POINT=0.5)  # 16 transfers points: 8 s, killed inside them
        cluster.wait_for_workers(2)
        process = fleet(url, "health", "--cluster", cluster.address, "--fleet-id", "lost-1", wait=False)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # board 0 is through its suite while board 1 is still in transfers
            if Path(f"{tmp_path}/runs.sqlite").exists() and len(stored(url, "lost-1")) >= ONE_GPU_RUNS:
                break
            time.sleep(0.2)
        os.killpg(cluster.scheduler.pid, signal.SIGKILL)
        killed = time.monotonic()
        out, err = process.communicate(timeout=120)
        assert process.returncode == 1, err
        assert time.monotonic() - killed < 60 and "Traceback" not in err and "CancelledError" not in out + err, err
        lost = [line for line in out.splitlines() if "the Dask scheduler" in line]
        assert lost and all(f"…{board_uuid(1)[-8:]}" in line or "node-0 (2 GPUs)" in line for line in lost), out
        assert f"{cluster.address} was lost (its connection closed): not measured on NVIDIA H200 …" \
               f"{board_uuid(1)[-8:]} on node-0, node-0 (2 GPUs); the runs stored so far are kept; measure what is " \
               "missing with --fleet-id lost-1" in err, err
        assert f"…{board_uuid(1)[-8:]} on node-0: coalescing: not run (the Dask scheduler at {cluster.address} " \
               "was lost)" in out and "measure what is missing with: --fleet-id lost-1" in out, out
        runs = stored(url, "lost-1")
        assert set(runs["gpu_uuid"]) == {board_uuid(0)}  # board 0's runs are kept, nothing of board 1
    finally:
        cluster.stop()


@pytest.mark.parametrize("name", ["my suite", "nightly (v2)", "ünïcode süite", "--", "." * 80, "a" * 200,
                                  "x\ny", "health"])
def test_the_default_fleet_id_is_always_a_valid_fleet_id(name):
    import datetime as dt

    suite = suites.Suite(name=name, title=name, runs=())
    fleet_id = fleet_run.new_fleet_id(suite, dt.datetime(2026, 11, 25, 4, 12, tzinfo=dt.UTC))
    assert FLEET_ID.fullmatch(fleet_id) and fleet_id.endswith("-20261125T0412Z"), fleet_id


@pytest.mark.slow
def test_a_suite_file_name_with_spaces_gives_a_default_fleet_id_the_command_takes(tmp_path):
    suite = tmp_path / "my night suite.toml"
    suite.write_text('[[run]]\nexperiment = "reduction"\n[run.params]\nsizes = [268435456]\n')
    code, out, err = fleet(f"sqlite:///{tmp_path}/runs.sqlite", str(suite), "--cluster", f"tcp://127.0.0.1:"
                           f"{free_port()}", timeout=60)
    assert code == 2 and "fleet id" not in err, err  # it got as far as the cluster, which is not there
    assert "fleet my-night-suite-20" in err and "no Dask scheduler at" in err, err


@pytest.mark.slow  # a Dask worker stopped (SIGSTOP) inside its task: the fleet waits its limit and 30 s more
def test_a_hung_worker_is_reported_with_how_long_past_its_limit_it_was_waited_for(tmp_path):
    suite = tmp_path / "quick.toml"
    suite.write_text('profile = "interactive"\ntimeout_s = 3\n[[run]]\nexperiment = "reduction"\n'
                     '[run.params]\nsizes = [268435456]\nvariants = ["warp_shuffle"]\n')
    cluster = Cluster(tmp_path)
    try:
        cluster.add_worker(0, PINPOINT_SIM_HANG="0:reduction")
        cluster.add_worker(1)
        cluster.wait_for_workers(2)
        process = fleet(f"sqlite:///{tmp_path}/runs.sqlite", str(suite), "--cluster", cluster.address,
                        "--fleet-id", "hung-1", wait=False)
        seen = []
        while "GPU 0 measuring reduction" not in (line := process.stderr.readline()):
            seen.append(line)
            assert line, "".join(seen)
        os.killpg(cluster.workers[0].pid, signal.SIGSTOP)  # the task can no longer cancel itself
        started = time.monotonic()
        out, err = process.communicate(timeout=120)
        waited = time.monotonic() - started
        assert process.returncode == 1, err
        found = re.search(r"hung: reduction was still running (\d+) s after its time limit of 3 s", out)
        assert found and 30 <= int(found.group(1)) <= 32, out
        assert 30 <= waited <= 45, waited  # what it says is what it waited
    finally:
        for process in cluster.workers.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGCONT)
        cluster.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/runs.sqlite"
    return new_postgres_database(request.getfixturevalue("postgres_url"))


@pytest.mark.slow  # a Dask cluster and three fleet commands, two of them at once
def test_a_second_fleet_command_with_a_fleet_id_being_measured_is_refused_naming_the_first(tmp_path, store_url):
    cluster = Cluster(tmp_path)
    try:
        cluster.add_worker(0, PINPOINT_SIM_SECONDS_PER_POINT=0.3)
        cluster.add_worker(1, PINPOINT_SIM_SECONDS_PER_POINT=0.3)
        cluster.wait_for_workers(2)
        first = fleet(store_url, "health", "--cluster", cluster.address, "--fleet-id", "one-writer", wait=False)
        seen = []
        while "GPU 1:" not in (line := first.stderr.readline()):  # measuring: its lease is held
            seen.append(line)
            assert line, "".join(seen)
        started = time.monotonic()
        code, out, err = fleet(store_url, "health", "--cluster", cluster.address, "--fleet-id", "one-writer")
        assert code == 2 and time.monotonic() - started < 30, err
        one_line_refusal(err, f"fleet one-writer is being measured by another command ({os.uname().nodename[:80]} "
                              f"pid {first.pid}, since ")
        assert first.poll() is None  # refused while the first one still measures
        out, err = first.communicate(timeout=180)
        assert first.returncode == 0, err
        runs = stored(store_url, "one-writer")
        assert len(runs) == 2 * ONE_GPU_RUNS + 1 and runs["run_id"].is_unique  # each pair once, not twice
        code, out, err = fleet(store_url, "health", "--cluster", cluster.address, "--fleet-id", "one-writer")
        assert code == 0 and err.count("already stored in fleet one-writer") == 3, err  # released at its end
        assert len(stored(store_url, "one-writer")) == 2 * ONE_GPU_RUNS + 1
    finally:
        cluster.stop()


@pytest.mark.slow  # six fleet commands on each database
def test_a_resume_with_a_suite_that_measures_differently_is_refused_naming_the_change(tmp_path, store_url):
    from gpu.results.exchange.catalog import Catalog
    from tests.simulated_fleet import as_board, recorded

    text = ('title = "Night"\ntimeout_s = 60\n[[run]]\nexperiment = "reduction"\n[run.params]\nsizes = [268435456]\n'
            '[[run]]\nexperiment = "host_latency"\n[run.params]\nsizes = [1048576]\nvariants = ["mapped"]\n')
    suite = tmp_path / "night.toml"
    catalog = Catalog(RunStore(store_url))
    catalog.save(as_board(recorded("reduction"), 0), "fleet", fleet=("n-1", "night"), suite_text=text)
    closed = f"tcp://127.0.0.1:{free_port()}"
    for changed, expected in [
        (text.replace("sizes = [268435456]", "sizes = [1048576]"),
         "run reduction (line 3): params.sizes [268435456] → [1048576]"),
        (text.replace("timeout_s = 60", "timeout_s = 30"), "run reduction (line 3): timeout_s 60.0 → 30.0; run "
                                                           "host_latency (line 7): timeout_s 60.0 → 30.0"),
        (text.replace('variants = ["mapped"]\n', ""), "run host_latency (line 7): params.variants ['mapped'] → "
                                                      "(not set)"),
        (text + '[[run]]\nexperiment = "coalescing"\n', "run coalescing: in this suite, not in the stored one"),
        (text.split("[[run]]\nexperiment = \"host_latency\"")[0], "run host_latency: in the stored suite, not in this "
                                                                  "one"),
    ]:
        suite.write_text(changed)
        code, out, err = fleet(store_url, str(suite), "--cluster", closed, "--fleet-id", "n-1", timeout=60)
        assert code == 2, err
        line = one_line_refusal(err, "fleet n-1 was measured with another suite night: ")
        assert expected in line and "resume with the suite as it was, or give another --fleet-id" in line, line
        assert "no Dask scheduler" not in err  # refused before any cluster
    # Comments, layout and the title measure nothing differently: the resume goes on with the stored text.
    suite.write_text("# tonight's run\n" + text.replace('title = "Night"', 'title = "Night, again"'))
    code, out, err = fleet(store_url, str(suite), "--cluster", closed, "--fleet-id", "n-1", timeout=60)
    assert code == 2 and "resuming with the stored suite" in err and "no Dask scheduler at" in err, err
