"""One Spark standalone cluster for the whole test session: a pytest plugin.

A master and two one-core workers run on this machine under two loopback addresses,
``127.0.0.1`` and ``127.0.0.2`` (Linux routes all of 127.0.0.0/8 to the loopback device), so
their executors report different hosts and Spark will speculate across them
(``tests/storage/test_speculation.py``); two one-core apps also run side by side on it
(``tests/project/test_spark_submit.py``). Where the second address is unusable both workers listen on
the first, and :attr:`Cluster.hosts` says so.

The daemons start through ``spark-class`` (PySpark's pip package ships no
``sbin/start-master.sh``) in their own sessions, with an environment that carries no Spark or
Python settings of the caller (nothing leaks spark-mlt into the executors), and are always
stopped. :func:`running_cluster` starts one; the session-scoped fixture of
``tests/support/cluster_plugin.py`` shares it between the test modules that need it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

from tests.support.processes import stop, tail

SPARK_HOME = Path(pyspark.__file__).parent
#: Short-lived JVMs start faster with the client compiler only and a serial GC.
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
HOSTS = ("127.0.0.1", "127.0.0.2")
READY_TIMEOUT = 60.0


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def loopback_alias_works(host: str) -> bool:
    """Whether this machine can listen on and connect to ``host``."""
    try:
        with socket.socket() as server:
            server.bind((host, 0))
            server.listen(1)
            with socket.create_connection(server.getsockname(), timeout=2):
                return True
    except OSError:
        return False


def clean_env(home: Path) -> dict[str, str]:
    """The caller's environment without Spark or Python settings that could leak spark-mlt in."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SPARK_", "PYSPARK_", "PYTHON", "VIRTUAL_ENV"))
    }
    conf_dir = home / "conf"
    conf_dir.mkdir(exist_ok=True)
    env.update(SPARK_HOME=str(SPARK_HOME), SPARK_CONF_DIR=str(conf_dir), SPARK_LOCAL_IP=HOSTS[0])
    return env


@dataclass
class Cluster:
    """A running standalone cluster.

    Attributes:
        url: the master's URL, for ``--master``.
        home: the daemons' folder (their logs, the conf folder).
        work_dir: the workers' work folders (``worker1``, ``worker2``: executors' files).
        env: the environment to run drivers and spark-submit with.
        hosts: the workers' addresses (two different ones when the loopback alias works).
    """

    url: str
    home: Path
    work_dir: Path
    env: dict[str, str]
    hosts: tuple[str, ...]
    logs: list[Path] = field(default_factory=list)

    def diagnostics(self, *extra: Path) -> str:
        """The ends of ``extra`` logs, the daemons' logs and the executors' stderr."""
        parts = [f"--- {path.name} ---\n{tail(path)}" for path in (*extra, *self.logs)]
        for path in sorted(self.work_dir.glob("*/app-*/*/stderr")):
            parts.append(f"--- executor {path.relative_to(self.work_dir)} ---\n{tail(path, 3000)}")
        return "\n".join(parts)


def _daemons(
    url: str, master_port: int, master_ui: int, hosts: tuple[str, ...], work_dir: Path
) -> dict[str, list[str]]:
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    commands = {
        "master": [
            *(spark_class, "org.apache.spark.deploy.master.Master", "--host", HOSTS[0]),
            *("--port", str(master_port), "--webui-port", str(master_ui)),
        ]
    }
    for number, host in enumerate(hosts, start=1):
        worker_dir = work_dir / f"worker{number}"
        worker_dir.mkdir(parents=True)
        commands[f"worker{number}"] = [
            *(spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", host),
            *("--port", str(free_port(host)), "--webui-port", str(free_port(host))),
            *("--cores", "1", "--memory", "1g", "--work-dir", str(worker_dir)),
        ]
    return commands


def _wait_for_workers(cluster: Cluster, procs: dict[str, subprocess.Popen[bytes]], master_ui: int) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        dead = [name for name, proc in procs.items() if proc.poll() is not None]
        assert not dead, f"{dead} exited early\n{cluster.diagnostics()}"
        try:
            with urllib.request.urlopen(f"http://{HOSTS[0]}:{master_ui}/json/", timeout=2) as response:
                state = json.load(response)
            alive = [worker for worker in state.get("workers", []) if worker.get("state") == "ALIVE"]
            if len(alive) >= len(cluster.hosts):
                return
        except (OSError, ValueError):
            pass
        assert time.monotonic() < deadline, f"no live workers after {READY_TIMEOUT} s\n{cluster.diagnostics()}"
        time.sleep(0.5)


@contextmanager
def running_cluster(home: Path) -> Iterator[Cluster]:
    """A standalone master and two 1-core, 1 GiB workers (on two loopback addresses where
    possible), their files in ``home``; always stopped."""
    hosts = HOSTS if all(loopback_alias_works(host) for host in HOSTS) else (HOSTS[0], HOSTS[0])
    env = clean_env(home)
    master_port, master_ui = free_port(HOSTS[0]), free_port(HOSTS[0])
    url = f"spark://{HOSTS[0]}:{master_port}"
    work_dir = home / "work"
    commands = _daemons(url, master_port, master_ui, hosts, work_dir)
    daemon_env = {**env, "SPARK_DAEMON_JAVA_OPTS": FAST_JVM, "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}
    cluster = Cluster(url, home, work_dir, env, hosts, [home / f"{name}.log" for name in commands])
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for name, command in commands.items():
            # Executors inherit the worker's environment: they bind to the worker's address.
            host = command[command.index("--host") + 1]
            with open(home / f"{name}.log", "wb") as log:
                procs[name] = subprocess.Popen(
                    command,
                    cwd=home,
                    env={**daemon_env, "SPARK_LOCAL_IP": host},
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        _wait_for_workers(cluster, procs, master_ui)
        yield cluster
    finally:
        for proc in reversed(procs.values()):
            stop(proc)
