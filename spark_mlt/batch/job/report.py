"""What a job run did: row counts, the codecs and layouts it used, its write, phase timings.

Every job returns a [`JobReport`][spark_mlt.batch.job.report.JobReport]; the ``spark-mlt`` command prints its
[`JobReport.summary`][spark_mlt.batch.job.report.JobReport.summary] (or, with ``--json``,
[`JobReport.to_dict`][spark_mlt.batch.job.report.JobReport.to_dict] as JSON) and exits 3 when a
verification counted mismatches.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spark_mlt._classic import is_classic, tagged_jobs
from spark_mlt.codec import MLTCodec
from spark_mlt.column.layouts import Layout
from spark_mlt.storage import DeltaWriteResult

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["JobReport", "RunLog", "added_counts", "codec_summary", "counted_jobs", "phase"]

log = logging.getLogger("spark_mlt")


@dataclass
class RunLog:
    """What a job records as it runs: the seconds of its phases, its warnings, and the Spark jobs
    it started per phase or window; the job's [`JobReport`][spark_mlt.batch.job.report.JobReport]
    takes them when it ends (``JobReport.logged``). A run's steps write here; a report is a value.

    Example::

        run_log = RunLog()
        with phase(run_log.seconds, "read"):
            ...
        report = JobReport(rows_in=3).logged(run_log)
    """

    seconds: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    spark_jobs: dict[str, int] = field(default_factory=dict)

    def warn(self, text: str) -> None:
        """Records a warning once (and logs it)."""
        if text not in self.warnings:
            self.warnings.append(text)
            log.warning(text)


def added_counts(mine: Mapping[str, Any], theirs: Mapping[str, Any]) -> dict[str, Any]:
    """Two counts per name (erased keys, Spark jobs, seconds) added up."""
    out = dict(mine)
    for name, value in theirs.items():
        out[name] = out.get(name, 0) + value
    return out


@dataclass(frozen=True)
class JobReport:
    """Counts and timings of one job run: a value, returned by the job.

    Attributes:
        rows_in: rows read; ``rows_out + rows_rejected`` for the tokenizing jobs.
        rows_out: rows written (or compared, for a verification).
        rows_rejected: rows with an invalid id, dropped (``skip``) or quarantined.
        mismatches: decoded ids that differ from the kept ones (a verification only).
        write: the Delta commit of the output, if any.
        codecs: the codec of each id column.
        layouts: the storage layout of each id column's token column.
        seconds: the duration of each phase.
        dry_run: the run only sized its codecs and layouts; it wrote nothing.
        source_version: the source version a mirror holds after a sync (None for other jobs).
        rows_deleted: the keys a sync deleted from its mirror (and quarantine).
        erased: the keys a sync erased from each string column's vocabulary.
        warnings: what the run warns of (a column past
            [`CAPACITY_WARNING`][spark_mlt.batch.job.capacity.CAPACITY_WARNING] of its codec).
        spark_jobs: the Spark jobs the run started, per phase or window where it counts them
            (``counted_jobs`` of this module; a sync: ``window`` or
            ``full refresh``); empty over Spark Connect, which does not tell.
    """

    rows_in: int = 0
    rows_out: int = 0
    rows_rejected: int = 0
    mismatches: int | None = None
    write: DeltaWriteResult | None = None
    codecs: Mapping[str, MLTCodec] = field(default_factory=dict)
    layouts: Mapping[str, Layout] = field(default_factory=dict)
    seconds: Mapping[str, float] = field(default_factory=dict)
    dry_run: bool = False
    source_version: int | None = None
    rows_deleted: int = 0
    erased: Mapping[str, int] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    spark_jobs: Mapping[str, int] = field(default_factory=dict)

    def plus(self, later: JobReport) -> JobReport:
        """This report and that of a later part of the same run (a sync's next window): their
        row and job counts, erased keys and phase timings added up; the later one's codecs,
        layouts, write and source version in place of these (where it has them); its warnings
        after these.

        Example::

            total = JobReport().plus(JobReport(rows_in=2, rows_out=2, source_version=8))  # total.rows_out == 2
        """
        mismatches = self.mismatches
        if later.mismatches is not None:
            mismatches = (mismatches or 0) + later.mismatches
        return dataclasses.replace(
            self,
            rows_in=self.rows_in + later.rows_in,
            rows_out=self.rows_out + later.rows_out,
            rows_rejected=self.rows_rejected + later.rows_rejected,
            rows_deleted=self.rows_deleted + later.rows_deleted,
            mismatches=mismatches,
            erased=added_counts(self.erased, later.erased),
            spark_jobs=added_counts(self.spark_jobs, later.spark_jobs),
            seconds=added_counts(self.seconds, later.seconds),
            codecs=later.codecs or self.codecs,
            layouts=later.layouts or self.layouts,
            write=later.write if later.write is not None else self.write,
            source_version=later.source_version if later.source_version is not None else self.source_version,
            warnings=self.warnings + tuple(text for text in later.warnings if text not in self.warnings),
        )

    def logged(self, run_log: RunLog) -> JobReport:
        """This report with what ``run_log`` recorded added: its phases' seconds, its Spark jobs,
        its warnings after these."""
        logged = JobReport(seconds=run_log.seconds, spark_jobs=run_log.spark_jobs, warnings=tuple(run_log.warnings))
        return self.plus(logged)

    def summary(self) -> str:
        """One line: rows in, out and rejected, mismatches, the table and version written."""
        if self.dry_run:
            return "dry run: codecs and layouts sized, nothing written"
        parts = [f"rows in {self.rows_in}", f"out {self.rows_out}", f"rejected {self.rows_rejected}"]
        if self.mismatches is not None:
            parts.append(f"mismatches {self.mismatches}")
        if self.source_version is not None:
            parts.append(f"deleted {self.rows_deleted}")
            parts += [f"erased {count} {column} key(s)" for column, count in sorted(self.erased.items()) if count]
            parts.append(f"source version {self.source_version}")
        if self.write is not None:
            parts.append(f"table {self.write.path} version {self.write.version}")
            if self.write.skipped:
                parts.append("run id already committed: nothing written")
        parts += [f"warning: {text}" for text in self.warnings]
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready dict: what ``spark-mlt tokenize --json`` prints.

        Keys: ``rows_in``, ``rows_out``, ``rows_rejected``, ``mismatches`` (null unless a
        verification), ``dry_run``, ``columns`` (per id column, its codec as ``inspect``
        shows it: ``p``, ``n``, ``seed``, ``capacity``, ``fingerprint``, ``layout``,
        ``packed_bits``), ``write`` (``path``, ``version``, ``rows``,
        ``files``, ``backend``, ``skipped``; null when nothing was written), ``seconds`` per
        phase, ``spark_jobs`` where counted, ``warnings``, and for a sync ``source_version``,
        ``rows_deleted`` and ``erased``.

        Example::

            json.dumps(tokenize_table(spark, "in/orders", "out/orders_mlt", ["user_id"]).to_dict())
        """
        document: dict[str, Any] = {
            "rows_in": self.rows_in,
            "rows_out": self.rows_out,
            "rows_rejected": self.rows_rejected,
            "mismatches": self.mismatches,
            "dry_run": self.dry_run,
            "columns": {name: codec_summary(codec, self.layouts.get(name)) for name, codec in self.codecs.items()},
            "write": None,
            "seconds": {name: round(seconds, 3) for name, seconds in self.seconds.items()},
            "spark_jobs": dict(self.spark_jobs),
            "warnings": list(self.warnings),
        }
        if self.write is not None:
            write = self.write
            document["write"] = {
                "path": write.path,
                "version": write.version,
                "rows": write.rows,
                "files": write.files,
                "backend": write.backend,
                "skipped": write.skipped,
            }
        if self.source_version is not None:
            document |= {"source_version": self.source_version, "rows_deleted": self.rows_deleted}
            document["erased"] = dict(self.erased)
        return document


def codec_summary(codec: MLTCodec, layout: Layout | None) -> dict[str, Any]:
    """What a report or ``inspect`` shows of an id column's codec: ``p``, ``n``, ``seed``,
    ``capacity``, ``fingerprint``, the token column's ``layout`` and, when packed, its
    ``packed_bits``."""
    return {
        "p": codec.p,
        "n": codec.n,
        "seed": codec.seed,
        "capacity": codec.capacity,
        "fingerprint": codec.fingerprint,
        "layout": layout,
        "packed_bits": codec.packed_bits if layout == "packed" else None,
    }


@contextmanager
def phase(seconds: dict[str, float], name: str) -> Iterator[None]:
    """Log a job phase with its duration and add the duration to ``seconds`` (a report's, or a
    step's own; a phase entered twice, as a sync window's per column, counts both times).

    Example::

        with phase(report.seconds, "read"):
            df = spark.read.parquet(input)
    """
    log.info("%s ...", name)
    start = time.perf_counter()
    try:
        yield
    finally:
        took = time.perf_counter() - start
        seconds[name] = seconds.get(name, 0.0) + took
        log.info("%s done in %.2f s", name, took)


#: How long the count of a block's Spark jobs waits for Spark's listener to catch up.
_LISTENER_WAIT = 2.0


@contextmanager
def counted_jobs(spark: SparkSession, run_log: RunLog, name: str) -> Iterator[None]:
    """Count the Spark jobs this thread starts in the block (Spark's job tags and status
    tracker) into ``run_log.spark_jobs[name]``: a job's fixed cost (tens of milliseconds each,
    more with many tasks) is what a small sync window pays, so reports show it. Nothing is
    counted over Spark Connect (no status tracker in the client).

    Example::

        with counted_jobs(spark, run_log, "window"):
            ...
    """
    if not is_classic(spark):
        yield
        return
    context = spark.sparkContext
    tag = f"spark-mlt-{uuid.uuid4().hex[:12]}"
    context.addJobTag(tag)
    try:
        yield
    finally:
        context.removeJobTag(tag)
        # the listener records a job's start asynchronously: wait until two reads agree
        deadline = time.monotonic() + _LISTENER_WAIT
        seen = tagged_jobs(spark, tag) or 0
        while time.monotonic() < deadline:
            time.sleep(0.05)
            now = tagged_jobs(spark, tag) or 0
            if now == seen:
                break
            seen = now
        run_log.spark_jobs[name] = run_log.spark_jobs.get(name, 0) + seen
