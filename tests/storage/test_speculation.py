"""Speculative execution: a tokenize-into-Delta write commits every input row exactly once.

Spark never launches a speculative copy of a task on a host that already runs an attempt of
it (``TaskSetManager`` checks ``hasAttemptOnHost``), and ``local[...]`` or
``local-cluster[...]`` put every executor on one host, so they never speculate. Here the
session's standalone cluster (``tests/support/cluster.py``) runs its two one-core workers
under two loopback addresses, ``127.0.0.1`` and ``127.0.0.2``, so their executors report
different hosts and Spark will speculate across them.

``tests/support/speculation_job.py`` runs the driver in a subprocess: its first attempt of partition
0 stalls for a minute, the speculative copy on the other host finishes it, and the stalled
attempt is killed. Spark's output committer must let exactly one attempt's file through, and
``write_delta`` must commit exactly the files of Spark's job commit.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from deltalake import DeltaTable

from spark_mlt import MLTCodec
from spark_mlt.storage import orphan_files, read_codecs
from tests.support.cluster import HOSTS, Cluster
from tests.support.paths import ROOT
from tests.support.processes import stop

pytestmark = pytest.mark.slow
pytest_plugins = ("tests.support.cluster_plugin",)  # the session's one standalone cluster

JOB = ROOT / "tests" / "support" / "speculation_job.py"
JOB_TIMEOUT = 100.0
ROWS = 40_000
SLEEP = 60.0  # the stalled first attempt of partition 0


@pytest.fixture(scope="module")
def cluster(standalone_cluster: Cluster) -> Cluster:
    """The session's cluster, when its workers run on two hosts (else Spark cannot speculate)."""
    if set(standalone_cluster.hosts) != set(HOSTS):
        pytest.skip(f"cannot listen on all of {HOSTS} (need 127.0.0.0/8 routed to loopback)")
    return standalone_cluster


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
def run(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The job, run once as a driver process in client mode; stopped with its children."""
    home = tmp_path_factory.mktemp("speculation")
    output = home / "ratings_mlt"
    markers = home / "attempts"
    event_log = home / "events"
    event_log.mkdir()
    log = home / "driver.log"
    command = [sys.executable, str(JOB), cluster.url, str(output), str(markers), str(event_log), str(ROWS), str(SLEEP)]
    started = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            command, cwd=home, env=cluster.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
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

    # The UDF leaves a marker per attempt that reached it. The stalled attempt may not reach
    # it: on a loaded machine its Python worker can still be starting when the copy is
    # launched, finishes and has it killed. Spark's event log below says that it ran.
    attempts = sorted(path.name for path in run.markers.iterdir())
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
