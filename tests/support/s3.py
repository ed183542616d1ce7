"""A local S3 server for the tests: moto's server mode on 127.0.0.1, started by the tests.

The port is chosen when this module is imported, so the shared Spark session can point its
``s3a`` settings at it before the server runs; the server starts when the first test asks for
it (:func:`server`), and stops with the test session. moto keeps everything in memory and
checks no signatures: any key works, which lets the secret tests use a distinctive secret.

moto >= 5.1.14 answers S3's conditional writes (``If-None-Match: *``, delta-rs' commits) and
the AWS Java SDK v2's uploads (aws-chunked bodies with trailing checksums, Hadoop 3.4+).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field

import pyarrow.fs as pafs

from spark_mlt.storage import StorageOptions, s3a_conf


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


PORT = int(os.environ.get("SPARK_MLT_TEST_S3_PORT") or _free_port())
ENDPOINT = f"http://127.0.0.1:{PORT}"
REGION = "us-east-1"
ACCESS_KEY = "mlt-test-access"
#: a secret no output may ever show (tests/storage/test_s3.py checks)
SECRET_KEY = "mlt-test-s3cr3t-4f9d2c7b1e"


def storage_options(**extra: str) -> StorageOptions:
    """delta-rs' settings for the local server (what a user passes as ``storage_options``)."""
    return StorageOptions(
        {
            "AWS_ENDPOINT_URL": ENDPOINT,
            "AWS_REGION": REGION,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            **extra,
        }
    )


def spark_conf() -> dict[str, str]:
    """The session's ``s3a`` settings for the local server, derived as a user would derive them,
    with short retries: a test that reaches a stopped server fails in seconds, not minutes."""
    return {
        **s3a_conf(storage_options()),
        "spark.hadoop.fs.s3a.attempts.maximum": "2",
        "spark.hadoop.fs.s3a.retry.limit": "2",
        "spark.hadoop.fs.s3a.connection.establish.timeout": "5000",
    }


@dataclass
class MotoServer:
    """The running server: make buckets and read its objects through pyarrow."""

    process: subprocess.Popen[bytes]
    names: itertools.count[int] = field(default_factory=itertools.count)

    @property
    def filesystem(self) -> pafs.S3FileSystem:
        return pafs.S3FileSystem(
            access_key=ACCESS_KEY,
            secret_key=SECRET_KEY,
            region=REGION,
            endpoint_override=f"127.0.0.1:{PORT}",
            scheme="http",
            allow_bucket_creation=True,
            allow_bucket_deletion=True,
        )

    def bucket(self, prefix: str = "mlt") -> str:
        """A new, empty bucket's name."""
        name = f"{prefix}-{os.getpid()}-{next(self.names)}"
        self.filesystem.create_dir(name)
        return name

    def upload(self, folder: str, prefix: str = "zoo") -> str:
        """A copy of the local ``folder`` (a table) in a new bucket; its ``s3a://`` URI."""
        bucket = self.bucket(prefix)
        filesystem = self.filesystem  # file by file: pyarrow 14's copy_files hangs against moto
        for root, _, names in os.walk(folder):
            for name in names:
                local = os.path.join(root, name)
                key = f"{bucket}/table/{os.path.relpath(local, folder)}"
                with open(local, "rb") as source, filesystem.open_output_stream(key) as target:
                    target.write(source.read())
        return f"s3a://{bucket}/table"

    def objects(self, bucket: str) -> dict[str, bytes]:
        """Every object in ``bucket``, by key."""
        selector = pafs.FileSelector(bucket, recursive=True)
        found = {}
        for info in self.filesystem.get_file_info(selector):
            if info.type == pafs.FileType.File:
                with self.filesystem.open_input_stream(info.path) as stream:
                    found[info.path] = stream.read()
        return found

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


@functools.cache
def server() -> MotoServer:
    """The local S3 server, started on :data:`PORT` at the first call."""
    command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(PORT)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"{ENDPOINT}/moto-api/", timeout=1):
                break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(f"moto's S3 server did not start on {ENDPOINT}") from None
            time.sleep(0.2)
    started = MotoServer(process)
    atexit.register(started.stop)
    return started
