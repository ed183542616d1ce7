"""Speculative execution: a tokenise-into-Delta write commits every input row exactly once.

Spark never launches a speculative copy of a task on a host that already runs an attempt of
it (``TaskSetManager`` checks ``hasAttemptOnHost``), and ``local[...]`` or
``local-cluster[...]`` put every executor on one host, so they never speculate. Here a
standalone master and two one-core workers run on this machine under two loopback addresses,
``127.0.0.1`` and ``127.0.0.2`` (Linux routes all of 127.0.0.0/8 to the loopback device), so
their executors report different hosts and Spark will speculate across them.

``tests/support/speculation_job.py`` runs the driver in a subprocess: its first attempt of partition
0 stalls for a minute, the speculative copy on the other host finishes it, and the stalled
attempt is killed. Spark's output committer must let exactly one attempt's file through, and
``write_delta`` must commit exactly the files of Spark's job commit.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyspark
import pytest
from deltalake import DeltaTable

from spark_mlt import MLTCodec
from spark_mlt.storage import orphan_files, read_codecs
from tests.support.processes import stop, tail

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
JOB = ROOT / "tests" / "support" / "speculation_job.py"
SPARK_HOME = Path(pyspark.__file__).parent
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
HOSTS = ("127.0.0.1", "127.0.0.2")
READY_TIMEOUT = 60.0
JOB_TIMEOUT = 100.0
ROWS = 40_000
SLEEP = 60.0  # the stalled first attempt of partition 0


# ---------------------------------------------------------------------- helpers
def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _loopback_alias_works(host: str) -> bool:
    try:
        with socket.socket() as server:
            server.bind((host, 0))
            server.listen(1)
            with socket.create_connection(server.getsockname(), timeout=2):
                return True
    except OSError:
        return False


@dataclass
class Cluster:
    url: str
    home: Path
    work_dir: Path
    env: dict[str, str]
    logs: list[Path]

    def diagnostics(self, *extra: Path) -> str:
        parts = [f"--- {path.name} ---\n{tail(path)}" for path in (*extra, *self.logs)]
        for path in sorted(self.work_dir.glob("*/app-*/*/stderr")):
            parts.append(f"--- executor {path.relative_to(self.work_dir)} ---\n{tail(path, 3000)}")
        return "\n".join(parts)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A standalone master and two 1-core workers, on 127.0.0.1 and 127.0.0.2; always stopped."""
    if not all(_loopback_alias_works(host) for host in HOSTS):
        pytest.skip(f"cannot listen on all of {HOSTS} (need 127.0.0.0/8 routed to loopback)")
    home = tmp_path_factory.mktemp("speculation")
    conf_dir = home / "conf"
    conf_dir.mkdir()
    work_dir = home / "work"
    env = {key: value for key, value in os.environ.items() if not key.startswith(("SPARK_", "PYSPARK_"))}
    env.update(SPARK_HOME=str(SPARK_HOME), SPARK_CONF_DIR=str(conf_dir), SPARK_LOCAL_IP=HOSTS[0])
    master_port, master_ui = _free_port(HOSTS[0]), _free_port(HOSTS[0])
    url = f"spark://{HOSTS[0]}:{master_port}"
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    daemon_opts = {"SPARK_DAEMON_JAVA_OPTS": FAST_JVM, "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}
    commands: dict[str, tuple[list[str], dict[str, str]]] = {
        "master": (
            [
                *(spark_class, "org.apache.spark.deploy.master.Master", "--host", HOSTS[0]),
                *("--port", str(master_port), "--webui-port", str(master_ui)),
            ],
            {**env, **daemon_opts},
        )
    }
    for number, host in enumerate(HOSTS, start=1):
        worker_dir = work_dir / f"worker{number}"
        worker_dir.mkdir(parents=True)
        commands[f"worker{number}"] = (
            [
                *(spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", host),
                *("--port", str(_free_port(host)), "--webui-port", str(_free_port(host))),
                *("--cores", "1", "--memory", "1g", "--work-dir", str(worker_dir)),
            ],
            # Executors inherit the worker's environment: they bind to the worker's address.
            {**env, **daemon_opts, "SPARK_LOCAL_IP": host},
        )
    procs: list[subprocess.Popen[bytes]] = []
    running = Cluster(url, home, work_dir, env, [home / f"{name}.log" for name in commands])
    try:
        for name, (command, daemon_env) in commands.items():
            with open(home / f"{name}.log", "wb") as log:
                procs.append(
                    subprocess.Popen(
                        command, cwd=home, env=daemon_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                    )
                )
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            dead = [name for name, proc in zip(commands, procs, strict=True) if proc.poll() is not None]
            assert not dead, f"{dead} exited early\n{running.diagnostics()}"
            try:
                with urllib.request.urlopen(f"http://{HOSTS[0]}:{master_ui}/json/", timeout=2) as response:
                    state = json.load(response)
                alive = {worker.get("host") for worker in state.get("workers", []) if worker.get("state") == "ALIVE"}
                if alive >= set(HOSTS):
                    break
            except (OSError, ValueError):
                pass
            assert time.monotonic() < deadline, (
                f"no live workers on {HOSTS} after {READY_TIMEOUT} s\n{running.diagnostics()}"
            )
            time.sleep(0.5)
        yield running
    finally:
        for proc in reversed(procs):
            stop(proc)


@dataclass
class Run:
    returncode: int
    seconds: float
    log: Path
    report: dict[str, Any]
    output: Path
    markers: Path
    event_log: Path


@pytest.fixture(scope="module")
def run(cluster: Cluster) -> Run:
    """The job, run once as a driver process in client mode; stopped with its children."""
    output = cluster.home / "ratings_mlt"
    markers = cluster.home / "attempts"
    event_log = cluster.home / "events"
    event_log.mkdir()
    log = cluster.home / "driver.log"
    command = [sys.executable, str(JOB), cluster.url, str(output), str(markers), str(event_log), str(ROWS), str(SLEEP)]
    started = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            command, cwd=cluster.home, env=cluster.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        try:
            returncode = proc.wait(timeout=JOB_TIMEOUT)
        except subprocess.TimeoutExpired:
            returncode = -1  # reported as a failure, with the logs
    finally:
        stop(proc)
    seconds = time.monotonic() - started
    report: dict[str, Any] = {}
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                report = json.loads(line)
    return Run(returncode, seconds, log, report, output, markers, event_log)


def _task_events(event_log: Path) -> list[dict[str, Any]]:
    """The task start and end events of the application's event log (a folder of rolled
    files in Spark 4's default layout, or a single file)."""
    files = sorted(
        path
        for path in event_log.rglob("*")
        if path.is_file() and not path.name.startswith((".", "appstatus")) and not path.name.endswith(".inprogress")
    )
    assert files, list(event_log.rglob("*"))
    events = [json.loads(line) for path in files for line in path.read_text().splitlines() if line.strip()]
    return [event for event in events if event.get("Event") in ("SparkListenerTaskStart", "SparkListenerTaskEnd")]


# ---------------------------------------------------------------------- tests
def test_a_speculative_attempt_on_the_other_host_replaced_the_stalled_one(cluster: Cluster, run: Run) -> None:
    why = cluster.diagnostics(run.log)
    assert run.returncode == 0, f"job exited {run.returncode} after {run.seconds:.1f} s\n{why}"
    assert set(run.report["hosts"]) == set(HOSTS), f"{run.report}\n{why}"

    attempts = sorted(path.name for path in run.markers.iterdir())
    assert "0-0" in attempts, f"{attempts}\n{why}"
    assert "0-1" in attempts, f"{attempts}\n{why}"
    assert {name.split("-")[0] for name in attempts} == {"0", "1", "2", "3"}, attempts
    # Done before the stalled attempt could have woken up.
    assert run.report["write_seconds"] < SLEEP, f"{run.report}\n{why}"

    # Spark's own account (its event log): the job's one stage ran partition 0 twice, on two
    # hosts, the second attempt speculative, and only that one succeeded. (The stalled
    # attempt's kill is usually reported after the driver has stopped, so it may lack an end.)
    events = _task_events(run.event_log)
    starts = {
        (e["Task Info"]["Index"], e["Task Info"]["Attempt"]): e["Task Info"]
        for e in events
        if e["Event"] == "SparkListenerTaskStart"
    }
    ends = {
        (e["Task Info"]["Index"], e["Task Info"]["Attempt"]): e["Task End Reason"]["Reason"]
        for e in events
        if e["Event"] == "SparkListenerTaskEnd"
    }
    timeline = "\n".join(f"{event['Event']} {event['Task Info']}" for event in events)
    assert sorted(starts) == [(0, 0), (0, 1), (1, 0), (2, 0), (3, 0)], timeline
    original, copy = starts[(0, 0)], starts[(0, 1)]
    assert not original["Speculative"], timeline
    assert copy["Speculative"], timeline
    assert original["Host"] != copy["Host"], timeline
    assert ends[(0, 1)] == "Success", timeline
    assert ends.get((0, 0)) in (None, "TaskKilled"), timeline
    assert all(ends[(index, 0)] == "Success" for index in (1, 2, 3)), timeline


def test_every_row_is_committed_exactly_once(cluster: Cluster, run: Run) -> None:
    why = cluster.diagnostics(run.log)
    assert run.returncode == 0, f"job exited {run.returncode} after {run.seconds:.1f} s\n{why}"
    assert (run.report["rows"], run.report["files"]) == (ROWS, 4), run.report

    table = DeltaTable(str(run.output))
    assert table.version() == run.report["version"] == 1  # version 0 creates the table, 1 holds the data
    data = table.to_pyarrow_table()
    assert data.num_rows == ROWS
    ids = data.column("userId").to_numpy()
    assert len(np.unique(ids)) == ROWS  # no duplicates
    np.testing.assert_array_equal(np.sort(ids), np.arange(ROWS))

    codecs = read_codecs(run.output)
    assert codecs["userId"] == MLTCodec.from_seed(13, 6, 42)
    tokens = np.stack(data.column("userId_mlt").to_numpy(zero_copy_only=False))
    np.testing.assert_array_equal(codecs["userId"].decode(tokens), ids)


def test_no_file_outside_the_committed_snapshot(cluster: Cluster, run: Run) -> None:
    why = cluster.diagnostics(run.log)
    assert run.returncode == 0, f"job exited {run.returncode} after {run.seconds:.1f} s\n{why}"
    assert orphan_files(run.output) == []
    # A check of our own, which also looks into hidden folders (Spark's _temporary): every
    # Parquet file under the table is one of the snapshot's, and Spark left no scratch folder.
    on_disk = {
        str(path.relative_to(run.output))
        for path in run.output.rglob("*")
        if path.is_file() and "_delta_log" not in path.parts
    }
    committed = set(DeltaTable(str(run.output)).file_uris())
    committed = {os.path.relpath(uri.removeprefix("file://"), run.output) for uri in committed}
    assert on_disk == committed, sorted(on_disk ^ committed)
    assert not list(run.output.rglob("_temporary")), list(run.output.rglob("_temporary"))
