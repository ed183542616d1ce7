"""Benchmark: a mirror's sync of a change (0.1%, 1%, 10%) against a full re-tokenize of its source.

A CDF-enabled source Delta table of ``--rows`` orders (``order_id`` bigint, the key, ascending
as an append-only warehouse table holds it; ``customer_id`` bigint, tokenized; ``amount``
double; ``status`` string) is written by Spark in ``--files`` files, each a contiguous range of
keys (delta-rs commit, local[2]). A mirror is created by a first ``sync_table`` (a full
refresh) for each mirror file size (``--file-rows``, ``SyncOptions.file_rows``): its files are
key ranges of at most that many rows, so a window rewrites the ranges its keys fall into.

Then a change of each of ``--shares`` of the rows (0.1%, 1% and 10% by default) is committed to
the source in three versions: updates of 80% of it (status, amount and customer_id) and deletes
of 10% (delta-rs ``update`` and ``delete``, which write the change data files), and inserts of
10% new orders (ids above the latest, Spark + delta-rs append). The updated and deleted keys are
either ``clustered`` (among the most recent orders, twice the change's share of them, where a
real table's changes fall) or ``uniform`` (spread over every key by a hash); the new orders are
new ids in both (``--scenarios``).

Timed on that version: (a) ``sync_table`` of the window (jar-free: the mirror's files whose
statistics admit a changed key are rewritten) and (b) a full re-tokenize of the source
(``tokenize_table`` into another table); printed are both, the ratio full/sync, the sync's
phases (``JobReport.seconds``, plus the candidate search and the rewrite, timed around
``key_rows`` and ``replace_keys``), its Spark jobs (``JobReport.spark_jobs``), the rows of the
files it read per changed row, and the driver's memory before and during each: resident
memory of the Python process and of the JVM (``VmRSS``, and ``VmHWM`` after a reset through
``/proc/<pid>/clear_refs``; on local[2] the JVM is the driver and the executors) and the
JVM's old generation (its peak usage, reset first). After the sync the mirror's row count must
equal the source's, and a sample of keys (changed and unchanged) must hold the same rows and
tokens.

Each (scenario, share, file size) syncs its own copy of the source and of the mirror, so every
sync applies the same window; after it, a one-row update is synced into the same mirror (the
session warm), timed with its Spark jobs.

With ``--string-column`` the source also holds ``customer_key`` (``c`` and the customer id:
2M values), tokenized through its vocabulary, which the updates change with the customer: the
window then changes its value counts and erases the values no row holds any more.

With ``--merge-anchor`` (a line's venv with Delta's jars, after ``make jars``), every sync goes
through delta-spark's ``MERGE``, and each change is also synced, and merged by a hand-written
job (``hand_merge``: the change feed, each key's last change, ``mlt_encode``, one ``MERGE``),
into copies of the mirror with deletion vectors off and on: a second table of both times.

Run: ``make bench-sync`` or ``python benchmarks/benchmark_sync.py --quick``;
``python benchmarks/benchmark_sync.py --rows 10000000 --scenarios clustered --file-rows 250000 1000000``;
``.compat/pyspark-4.0.0/bin/python benchmarks/benchmark_sync.py --merge-anchor --shares 0.001 0.01``.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

import spark_mlt.batch.mirror.sync as sync_module
from spark_mlt.batch import SyncOptions, TokenizeOptions, local_session, sync_table, tokenize_dataframe, tokenize_table
from spark_mlt.capabilities import Capabilities
from spark_mlt.column import mlt_encode
from spark_mlt.column.layouts import token_layouts
from spark_mlt.jars import delta_session_conf
from spark_mlt.options import TOKEN_SUFFIX
from spark_mlt.storage import WriteOptions, read_delta, read_snapshot, write_delta

COLUMNS = ["customer_id"]
#: The string key column ``--string-column`` adds and tokenizes (through a vocabulary).
STRING = "customer_key"
KEY = "order_id"
P, N = 13, 6  # the same codec for every run (13^6 > 2M customers): no sizing pass
CUSTOMERS = 2_000_000
CDF = {"delta.enableChangeDataFeed": "true"}
SCENARIOS = ("clustered", "uniform")
SEARCH = "candidate search (key_rows)"
REWRITE = "rewrite + commit (replace_keys)"


def _orders(spark: SparkSession, start: int, end: int, parts: int, *, strings: bool = False) -> DataFrame:
    """Orders ``start .. end - 1``: ``parts`` contiguous ranges of ids (spark.range's partitions);
    with ``strings``, the customer's string key too (``c`` and the id: 2M values)."""
    ids = F.col("id")
    customer = F.abs(F.xxhash64(ids) % CUSTOMERS)
    orders = spark.range(start, end, 1, parts).select(
        ids.alias(KEY),
        customer.alias("customer_id"),
        (F.abs(F.xxhash64(ids, F.lit(1))) % 100_000 / 100.0).alias("amount"),
        F.lit("placed").alias("status"),
    )
    return orders.withColumn(STRING, F.concat(F.lit("c"), F.col("customer_id").cast("string"))) if strings else orders


@dataclass(frozen=True)
class Change:
    """The predicates of a change of ``share`` of the keys ``0 .. rows - 1`` (1%: ``0.01``):
    updates (80% of it), deletes (10%, disjoint from the updates) and inserts (10%, new ids from
    ``rows``)."""

    rows: int
    scenario: str
    share: float = 0.01

    @property
    def recent(self) -> int:
        """The first of the most recent orders, twice the change's share of them."""
        return self.rows - int(self.rows * 2 * self.share)

    @property
    def _cut(self) -> tuple[int, int]:
        """Of a key's hash bucket (0 .. 9999): below the first it is updated, at or above the second deleted."""
        return round(8000 * self.share), 10_000 - round(1000 * self.share)

    def updated(self) -> str:
        if self.scenario == "clustered":
            return f"{KEY} >= {self.recent} AND {KEY} % 5 < 2"  # 40% of the recent ones
        return f"({KEY} * 7919) % 10000 < {self._cut[0]}"

    def deleted(self) -> str:
        if self.scenario == "clustered":
            return f"{KEY} >= {self.recent} AND {KEY} % 20 = 2"  # 5% of the recent ones
        return f"({KEY} * 7919) % 10000 >= {self._cut[1]}"

    @property
    def inserted(self) -> tuple[int, int]:
        return self.rows, self.rows + max(1, int(self.rows * self.share / 10))

    def sample(self, size: int, seed: int = 5) -> list[int]:
        """Keys to compare after the sync: updated, deleted, inserted and unchanged ones."""
        rng = np.random.default_rng(seed)
        keys = rng.integers(0, self.rows, size * 200)
        if self.scenario == "clustered":
            keys = np.concatenate((keys, rng.integers(self.recent, self.rows, size * 20)))
        updated = keys[self._mask(keys, "updated")][:size]
        deleted = keys[self._mask(keys, "deleted")][:size]
        low, high = self.inserted
        inserted = rng.integers(low, high, size)
        unchanged = rng.integers(0, self.rows, size)
        return sorted({int(k) for k in np.concatenate((updated, deleted, inserted, unchanged))})

    def _mask(self, keys: np.ndarray, which: str) -> np.ndarray:
        """Which of ``keys`` the ``updated`` (or deleted) predicate takes."""
        if self.scenario == "clustered":
            residue = keys % 5 < 2 if which == "updated" else keys % 20 == 2
            mask: np.ndarray = (keys >= self.recent) & residue
        else:
            bucket = (keys * 7919) % 10_000
            mask = bucket < self._cut[0] if which == "updated" else bucket >= self._cut[1]
        return mask


def apply_change(spark: SparkSession, source: str, change: Change, *, strings: bool = False) -> dict[str, Any]:
    """Commit ``change`` to the source in three versions (update, delete, insert), with a
    correct change data feed: delta-rs writes the change files of its update and delete, and an
    append's added files are its inserts."""
    table = DeltaTable(source)
    started = time.perf_counter()
    updates = {
        "status": "'shipped'",
        "amount": "amount + 1.0",
        "customer_id": f"(customer_id + 1) % {CUSTOMERS}",
    }
    if strings:  # the customer's key follows its id
        updates[STRING] = f"concat('c', cast((customer_id + 1) % {CUSTOMERS} as string))"
    updated = table.update(updates=updates, predicate=change.updated())
    deleted = table.delete(change.deleted())
    low, high = change.inserted
    inserts = _orders(spark, low, high, 1, strings=strings).withColumn("status", F.lit("new"))
    write_delta(inserts, source, mode="append")
    return {
        "updated": int(updated["num_updated_rows"]),
        "deleted": int(deleted["num_deleted_rows"]),
        "inserted": high - low,
        "seconds": time.perf_counter() - started,
    }


def hand_merge(spark: SparkSession, source: str, target: str, after: int) -> tuple[float, int]:
    """The anchor with Delta's jars: a hand-written job that reads the source's changes after
    version ``after`` (``table_changes``' reader), keeps each key's last one, tokenizes it with
    ``mlt_encode`` (the codec and layout of the mirror at ``target``) and runs one ``MERGE``;
    its seconds and the target's rows after it."""
    mirror = read_snapshot(target)
    codec = mirror.codecs[COLUMNS[0]]
    token = f"{COLUMNS[0]}{TOKEN_SUFFIX}"
    layout = token_layouts(from_arrow_schema(mirror.schema), {COLUMNS[0]: codec})[COLUMNS[0]]
    columns = list(mirror.schema.names)
    started = time.perf_counter()
    changes = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", after + 1)
        .load(source)
        .where("_change_type != 'update_preimage'")
    )
    newest = Window.partitionBy(KEY).orderBy(F.col("_commit_version").desc())
    last = changes.withColumn("__n", F.row_number().over(newest)).where("__n = 1")
    last = last.withColumn(token, mlt_encode(COLUMNS[0], codec, layout=layout))
    view = "spark_mlt_bench_hand_changes"
    last.select(*columns, "_change_type").createOrReplaceTempView(view)
    sets = ", ".join(f"t.{c} = s.{c}" for c in columns)
    spark.sql(
        f"MERGE INTO delta.`{target}` t USING {view} s ON t.{KEY} = s.{KEY} "
        "WHEN MATCHED AND s._change_type = 'delete' THEN DELETE "
        f"WHEN MATCHED THEN UPDATE SET {sets} "
        f"WHEN NOT MATCHED AND s._change_type != 'delete' THEN INSERT ({', '.join(columns)}) "
        f"VALUES ({', '.join(f's.{c}' for c in columns)})"
    ).collect()
    seconds = time.perf_counter() - started
    return seconds, spark.read.format("delta").load(target).count()


def _deletion_vectors(spark: SparkSession, path: str) -> None:
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")


class Memory:
    """The driver's memory: the Python process's and the JVM's resident set (current and the
    high-water mark since the last ``reset``) and the JVM's old generation (peak since ``reset``)."""

    def __init__(self, spark: SparkSession) -> None:
        jvm = spark._jvm
        assert jvm is not None, "a classic session (the JVM in this process's reach)"
        self.jvm = jvm
        self.jvm_pid = int(self.jvm.java.lang.ProcessHandle.current().pid())
        self.pools = [
            pool
            for pool in self.jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans()
            if str(pool.getType().toString()) == "Heap memory"
        ]
        self.old = [p for p in self.pools if any(w in str(p.getName()) for w in ("Old", "Tenured"))]
        self.hwm_reset = True

    def _status(self, pid: int, field_name: str) -> float:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def _old_used(self) -> float:
        return sum(int(p.getUsage().getUsed()) for p in self.old) / 2**20

    def reset(self) -> dict[str, float]:
        """The current figures; then the high-water marks start again from them."""
        self.jvm.java.lang.System.gc()
        for pid in (os.getpid(), self.jvm_pid):
            try:
                with open(f"/proc/{pid}/clear_refs", "w") as refs:
                    refs.write("5")  # resets VmHWM to the current resident set
            except OSError:
                self.hwm_reset = False
        now = {
            "python_rss": self._status(os.getpid(), "VmRSS"),
            "jvm_rss": self._status(self.jvm_pid, "VmRSS"),
            "jvm_old": self._old_used(),
        }
        for pool in self.pools:
            pool.resetPeakUsage()
        return now

    def peaks(self) -> dict[str, float]:
        return {
            "python_rss": self._status(os.getpid(), "VmHWM"),
            "jvm_rss": self._status(self.jvm_pid, "VmHWM"),
            "jvm_old": sum(int(p.getPeakUsage().getUsed()) for p in self.old) / 2**20,
        }


@dataclass
class Probe:
    """Times of the steps of a sync that no ``JobReport`` phase holds whole, and the candidates
    (the files of the mirror at ``mirror`` that can hold a changed key)."""

    mirror: str
    seconds: dict[str, float] = field(default_factory=dict)
    candidates: int = 0
    candidate_rows: int = 0

    @contextmanager
    def installed(self) -> Iterator[None]:
        """The sync module's ``key_rows`` and ``replace_keys``, timed while the context lasts."""
        labels = {"key_rows": SEARCH, "replace_keys": REWRITE}
        originals = {name: getattr(sync_module, name) for name in labels}
        for name, label in labels.items():
            setattr(sync_module, name, self._timed(label, originals[name]))
        try:
            yield
        finally:
            for name, function in originals.items():
                setattr(sync_module, name, function)

    def _timed(self, label: str, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                result = function(*args, **kwargs)
            finally:
                self.seconds[label] = self.seconds.get(label, 0.0) + time.perf_counter() - started
            if label == SEARCH and _same_path(result.snapshot.path, self.mirror):
                self.candidates += len(result.candidates)
                self.candidate_rows += result.candidate_rows or 0
            return result

        return run


def _same_path(location: str, path: str) -> bool:
    return os.path.realpath(location.removeprefix("file://")) == os.path.realpath(path)


def _files(path: str) -> tuple[int, float]:
    """A table's files and the mean share of the key range a file's statistics span."""
    actions = pa.table(DeltaTable(path).get_add_actions(flatten=True)).to_pydict()
    lows, highs = actions[f"min.{KEY}"], actions[f"max.{KEY}"]
    span = max(highs) - min(lows) + 1
    return len(lows), float(np.mean([(h - lo + 1) / span for lo, h in zip(lows, highs, strict=True)]))


def _verify(spark: SparkSession, source: str, mirror: str, keys: list[int], report: Any) -> tuple[int, int, int]:
    """Rows in the source and the mirror (from their logs), and the sample's mismatches (rows
    and tokens: the source's rows tokenized as the sync tokenized them; a string key's tokens,
    whose ids depend on its vocabulary's history, left out)."""
    wanted = F.broadcast(spark.createDataFrame([(k,) for k in keys], f"{KEY} bigint"))
    picked = read_delta(spark, source).join(wanted, KEY)
    codecs = {c: codec for c, codec in report.codecs.items() if c != STRING}
    source_rows = tokenize_dataframe(picked, codecs, layouts={c: report.layouts[c] for c in codecs})
    mirror_rows = read_delta(spark, mirror).join(wanted, KEY).select(*source_rows.columns)
    mismatches = source_rows.exceptAll(mirror_rows).count() + mirror_rows.exceptAll(source_rows).count()
    return read_snapshot(source).rows, read_snapshot(mirror).rows, mismatches


def _timed(run: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = run()
    return time.perf_counter() - started, result


def _mib(before: dict[str, float], peak: dict[str, float]) -> str:
    return (
        f"Python RSS {before['python_rss']:.0f} -> peak {peak['python_rss']:.0f} MiB, "
        f"JVM RSS {before['jvm_rss']:.0f} -> peak {peak['jvm_rss']:.0f} MiB, "
        f"JVM old gen {before['jvm_old']:.0f} -> peak {peak['jvm_old']:.0f} MiB"
    )


def _warm_up(spark: SparkSession, work: Path) -> None:
    """The JVM's first queries of each kind (class loading, code generation) are timed by nobody."""
    source, mirror = str(work / "warm_src"), str(work / "warm_mirror")
    write_delta(_orders(spark, 0, 20_000, 2), source, options=WriteOptions(properties=CDF))
    options = SyncOptions(key=(KEY,), p=P, n=N)
    sync_table(spark, source, mirror, COLUMNS, options)
    apply_change(spark, source, Change(20_000, "clustered"))
    sync_table(spark, source, mirror, COLUMNS, options)
    tokenize_table(spark, source, str(work / "warm_full"), COLUMNS, TokenizeOptions(input_format="delta", p=P, n=N))


@dataclass
class Bench:
    """One benchmark run: its session, folder, source and mirrors."""

    spark: SparkSession
    work: Path
    rows: int
    sample: int
    memory: Memory
    mirrors: dict[int, str] = field(default_factory=dict)
    anchor: bool = False
    anchors: list[str] = field(default_factory=list)
    strings: bool = False

    @property
    def columns(self) -> list[str]:
        return [*COLUMNS, STRING] if self.strings else COLUMNS

    def options(self, file_rows: int) -> SyncOptions:
        return SyncOptions(key=(KEY,), p=P, n=N, file_rows=file_rows)

    @property
    def base(self) -> str:
        return str(self.work / "source")

    def build(self, files: int, sizes: list[int]) -> None:
        """The source, and its mirror of each file size (a first sync: a full refresh)."""
        spark = self.spark
        seconds, _ = _timed(
            lambda: write_delta(
                _orders(spark, 0, self.rows, files, strings=self.strings),
                self.base,
                options=WriteOptions(properties=CDF),
            )
        )
        print(f"source: {self.rows:,} rows in {_files(self.base)[0]} files (CDF on), written in {seconds:.1f} s")
        for size in sizes:
            mirror = self.mirrors[size] = str(self.work / f"mirror_{size}")
            options = self.options(size)
            seconds, _ = _timed(functools.partial(sync_table, spark, self.base, mirror, self.columns, options))
            count, span = _files(mirror)
            print(
                f"mirror (files of at most {size:,} rows): first sync (full refresh) {seconds:.1f} s; {count} files, "
                f"each spanning {span:.0%} of the key range on average",
                flush=True,
            )

    def run(self, scenario: str, size: int, share: float) -> tuple[str, str, bool]:
        """The change of ``share`` of ``scenario`` synced into a copy of the mirror of ``size``-row
        files, and the same source version tokenized again; then a one-row window into the
        same mirror (the session warm): a table row, the details, and whether it checked."""
        spark, memory = self.spark, self.memory
        name = f"{scenario}_{size}_{share}"
        source, mirror, full = (str(self.work / f"{kind}_{name}") for kind in ("source", "mirror", "full"))
        shutil.copytree(self.base, source)
        shutil.copytree(self.mirrors[size], mirror)
        for beside in ("_vocab", "_counts"):  # a string column's vocabulary and value counts
            if Path(self.mirrors[size] + beside).exists():
                shutil.copytree(self.mirrors[size] + beside, mirror + beside)
        try:
            change = Change(self.rows, scenario, share)
            after = DeltaTable(source).version()
            applied = apply_change(spark, source, change, strings=self.strings)
            if self.anchor:
                self._anchors(change, source, size, after, applied)
            probe = Probe(mirror)
            before = memory.reset()
            with probe.installed():
                sync_s, report = _timed(lambda: sync_table(spark, source, mirror, self.columns, self.options(size)))
            sync_peak = memory.peaks()
            source_rows, mirror_rows, mismatches = _verify(spark, source, mirror, change.sample(self.sample), report)
            full_before = memory.reset()
            refresh = TokenizeOptions(input_format="delta", mode="overwrite", p=P, n=N)
            full_s, _ = _timed(lambda: tokenize_table(spark, source, full, self.columns, refresh))
            full_peak = memory.peaks()
            DeltaTable(source).update(updates={"status": "'one'"}, predicate=f"{KEY} = {self.rows // 3}")
            one_s, one = _timed(lambda: sync_table(spark, source, mirror, self.columns, self.options(size)))
        finally:
            for path in (source, mirror, full):
                shutil.rmtree(path, ignore_errors=True)
                shutil.rmtree(f"{path}_vocab", ignore_errors=True)
                shutil.rmtree(f"{path}_counts", ignore_errors=True)
        expected = self.rows - applied["deleted"] + applied["inserted"]
        good = mismatches == 0 and source_rows == mirror_rows == expected and one.rows_out == 1
        total_files = _files(self.mirrors[size])[0]
        changed = applied["updated"] + applied["deleted"] + applied["inserted"]
        row = (
            f"| {self.rows:,} | {share:.1%} {scenario} | {size:,} | {probe.candidates} of {total_files} | "
            f"{probe.candidate_rows / max(changed, 1):.1f} | {report.spark_jobs.get('window', 0)} | {sync_s:.1f} | "
            f"{full_s:.1f} | {full_s / sync_s:.1f}x | {one_s:.1f} ({one.spark_jobs.get('window', 0)}) |"
        )
        phases = {**report.seconds, **probe.seconds}
        outside = sync_s - sum(report.seconds.values()) - probe.seconds.get(SEARCH, 0.0)
        detail = (
            f"{share:.1%} {scenario}, files of {size:,} rows: change applied in {applied['seconds']:.1f} s "
            f"({applied['updated']:,} updated, {applied['deleted']:,} deleted, {applied['inserted']:,} inserted)\n"
            "    sync phases: "
            + ", ".join(f"{k} {v:.1f} s" for k, v in phases.items())
            + f"; outside them (counts, snapshots) {outside:.1f} s\n"
            f"    verify: source {source_rows:,} rows, mirror {mirror_rows:,} (expected {expected:,}), "
            f"sample mismatches {mismatches}: {'ok' if good else 'FAILED'}\n"
            f"    memory during the sync: {_mib(before, sync_peak)}\n"
            f"    memory during the full re-tokenize: {_mib(full_before, full_peak)}"
        )
        return row, detail, good

    def _anchors(self, change: Change, source: str, size: int, after: int, applied: dict[str, Any]) -> None:
        """With Delta's jars: the sync (its ``MERGE``) against the hand-written job
        (`hand_merge`), each into its own copy of the mirror, deletion vectors off and on."""
        spark = self.spark
        expected = self.rows - applied["deleted"] + applied["inserted"]
        cells = []
        for vectors in (False, True):
            synced, hand = (str(self.work / f"{kind}_{vectors}") for kind in ("anchor_sync", "anchor_hand"))
            for path in (synced, hand):
                shutil.copytree(self.mirrors[size], path)
                if vectors:
                    _deletion_vectors(spark, path)
            try:
                sync_s, _ = _timed(functools.partial(sync_table, spark, source, synced, COLUMNS, self.options(size)))
                synced_rows = spark.read.format("delta").load(synced).count()
                hand_s, hand_rows = hand_merge(spark, source, hand, after)
            finally:
                for path in (synced, hand):
                    shutil.rmtree(path, ignore_errors=True)
            ok = synced_rows == hand_rows == expected
            cells.append(f"{sync_s:.1f} | {hand_s:.1f} | {hand_s / sync_s:.2f}x{'' if ok else ' (ROWS DIFFER)'}")
        label = f"{change.share:.1%} {change.scenario}"
        self.anchors.append(f"| {self.rows:,} | {label} | " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="source rows (default 10M)")
    parser.add_argument("--quick", action="store_true", help="1M rows")
    parser.add_argument("--files", type=int, default=64, help="the source's files (default 64)")
    parser.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    parser.add_argument(
        "--shares", type=float, nargs="+", default=[0.001, 0.01, 0.1], help="changes, as shares of the rows"
    )
    parser.add_argument(
        "--file-rows",
        type=int,
        nargs="+",
        default=[SyncOptions.file_rows],
        help="the mirrors' most rows per file (SyncOptions.file_rows; default: its default), one mirror each",
    )
    parser.add_argument(
        "--string-column",
        action="store_true",
        help=f"also tokenize a string key column ({STRING}: 2M values, through a vocabulary)",
    )
    parser.add_argument("--sample", type=int, default=500, help="keys of each kind compared after the sync")
    parser.add_argument("--driver-memory", default="4g", help="JVM heap of the local driver (default: 4g)")
    parser.add_argument("--work", help="a folder for the tables (default: a temporary one, removed)")
    parser.add_argument(
        "--merge-anchor",
        action="store_true",
        help="with Delta's jars (a line's venv after make jars): every sync goes through delta-spark's MERGE, "
        "and each change is also synced, and merged by a hand-written job, into copies of the mirror with "
        "deletion vectors off and on",
    )
    args = parser.parse_args(argv)
    conf = {"spark.ui.showConsoleProgress": "false", "spark.driver.memory": args.driver_memory}
    if args.merge_anchor:
        conf.update(delta_session_conf())
    spark = local_session("spark-mlt-bench-sync", extra_conf=conf, log_level="ERROR")
    if args.merge_anchor and args.string_column:
        parser.error("--merge-anchor times the id column alone: leave out --string-column")
    if args.merge_anchor and not Capabilities.of(spark).delta_jars:
        parser.error("--merge-anchor needs Delta's jars: run it with a line's venv after make jars")
    work = Path(args.work or tempfile.mkdtemp(prefix="mlt-sync-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = 1_000_000 if args.quick else args.rows
    bench = Bench(spark, work, rows, args.sample, Memory(spark), anchor=args.merge_anchor, strings=args.string_column)
    results = []
    try:
        _warm_up(spark, work)
        print(
            f"PySpark {spark.version}, local[2], driver memory {args.driver_memory}",
            flush=True,
        )
        bench.build(args.files, args.file_rows)
        print(
            "\n| rows | change | mirror file rows | files rewritten | rows read per changed row | Spark jobs | "
            "sync s | full re-tokenize s | full/sync | one-row window s (jobs) |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|", flush=True)
        for scenario in args.scenarios:
            for share in args.shares:
                for size in args.file_rows:
                    results.append(bench.run(scenario, size, share))
                    print(results[-1][0], flush=True)
        print()
        if bench.anchors:
            print(
                "| rows | change | sync s (no vectors) | hand-written MERGE s | hand/sync | "
                "sync s (deletion vectors) | hand-written MERGE s | hand/sync |"
            )
            print("|---|---|---|---|---|---|---|---|")
            print("\n".join(bench.anchors))
            print()
        for _, detail, _ in results:
            print(detail)
        if not bench.memory.hwm_reset:
            print("(could not reset VmHWM through /proc/<pid>/clear_refs: the RSS peaks are the processes' own)")
    finally:
        spark.stop()
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    return 0 if all(good for _, _, good in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
