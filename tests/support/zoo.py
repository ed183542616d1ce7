"""The table zoo: Delta tables as delta-spark writes them, one per feature, for the jar-free tests.

The zoo is committed test data (``tests/data/zoo``, as delta-rs keeps its Delta test tables in
its repository): ``make test`` reads it and needs neither Delta's jars nor a second PySpark.
``make zoo`` rebuilds it with the newest line that Delta publishes jars for (its venv, with
Delta's jars); ``tests/compat/run-line.sh`` builds a fresh one per Delta release into
``.zoo/pyspark-<line>`` (git-ignored), checks that delta-spark read its tables as it read the
committed ones (``tests/compat/test_zoo.py``), and runs the line's jar-free tests on it::

    python -m tests.support.zoo .zoo/pyspark-4.2.1

It writes, under that folder:

* ``tables/<name>``: each table, built with delta-spark SQL as users build them (``DELETE``
  with deletion vectors, ``ALTER TABLE ... RENAME COLUMN`` under column mapping, ``ADD
  CONSTRAINT``, ...). ``ours_*`` tables are spark-mlt's own output (the ``tokenize`` job, run
  jar-free in a subprocess) that delta-spark then changed.
* ``expected/<name>@<version>``: what ``spark.read.format("delta")`` returns for that version,
  as Parquet: the jar-free reader must return exactly these rows.
* ``stats/stats_<seed>``: generated tables (`tests.support.stats_cases`, one seed each)
  that delta-spark wrote with its file statistics: the jar-free writer's statistics of the same
  files must be the ones recorded there, or absent.
* ``manifest.json``: the line and Delta that built it, each table's versions and protocol, and
  the tables this line's Delta cannot build (with the reason).

Small, as committed data should be: a few thousand rows where a test needs several files or
row groups, one file per expected version, and no checksum files (Hadoop's ``.crc`` and
Delta's version checksums are optional for every reader). Nothing in it names the machine
that built it: delta-rs records a new table's absolute location in its commit, which the
builder takes out, and the build fails if an absolute path is left anywhere.

The tests never change these tables in place: a test that writes copies its table first.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pyspark
from deltalake import DeltaTable

from spark_mlt.batch import local_session
from spark_mlt.column.sqltext import identifier, string
from spark_mlt.jars import delta_session_conf
from tests.support.stats_cases import generate
from tests.support.stats_checks import parquet_options

#: The manifest's name inside a zoo folder.
MANIFEST = "manifest.json"
#: Rows of the deletion-vector and column-mapping tables (several files per table).
ROWS = 2_000
#: Rows of spark-mlt's own tables before delta-spark changes them (a third deleted in one).
OURS_ROWS = 3_000
#: The committed zoo, which the tests read unless ``$SPARK_MLT_TEST_ZOO`` names another.
COMMITTED = Path(__file__).resolve().parents[1] / "data" / "zoo"
#: The committed zoo of each older Delta release, ``zoo-delta-<release>`` beside it.
COMMITTED_RELEASES = COMMITTED.parent / "zoo-delta-"
#: What the zoo is built from: a zoo whose manifest names another digest is stale.
BUILDER_FILES = (Path(__file__), Path(__file__).with_name("stats_cases.py"))

Build = Callable[[Any, str], list[int]]


def _sql(spark: Any, *statements: str) -> None:
    for statement in statements:
        spark.sql(statement)


def _target(path: str) -> str:
    return "delta.`" + path.replace("`", "``") + "`"


def _version(path: str) -> int:
    return int(DeltaTable(path).version())


# --- sources: tables other engines wrote ---------------------------------------------------


def build_dv(spark: Any, path: str) -> list[int]:
    """On-disk deletion vectors, partitioned, in files of several row groups: deletes, a second
    delete of a file that has a vector already, a purge, a new delete, then OPTIMIZE. Every
    version is checked."""
    t = _target(path)
    _sql(
        spark,
        f"CREATE TABLE {t} (id BIGINT, p INT, name STRING) USING delta PARTITIONED BY (p) "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')",
    )
    # small row groups, so that a reader that splits the files must count rows across splits
    # (Parquet checks a row group's size every 100 rows at first: every 10 here)
    small = {
        "parquet.block.size": "1024",
        "parquet.page.size.row.check.min": "10",
        "parquet.page.size.row.check.max": "10",
    }
    for key, value in small.items():
        spark.conf.set(key, value)
    try:
        spark.range(ROWS).selectExpr("id", "CAST(id % 3 AS INT) AS p", "CONCAT('n', id) AS name").repartition(
            2
        ).write.format("delta").mode("append").save(path)
    finally:
        for key in small:
            spark.conf.unset(key)
    few = [f for f in glob.glob(os.path.join(path, "p=*", "*.parquet")) if pq.ParquetFile(f).num_row_groups < 3]
    if few:
        raise RuntimeError(f"files with fewer than 3 row groups: {few}")
    _sql(
        spark,
        f"DELETE FROM {t} WHERE id % 10 = 0",
        f"DELETE FROM {t} WHERE id = 7 OR id = {ROWS - 1}",
        f"REORG TABLE {t} APPLY (PURGE)",
        f"DELETE FROM {t} WHERE id % 7 = 0",
        f"OPTIMIZE {t}",
    )
    return list(range(1, _version(path) + 1))


def build_dv_special(spark: Any, path: str) -> list[int]:
    """Deletion vectors in files whose partition values need escaping (space, %, =, #, /,
    non-ASCII, null) and a TIMESTAMP partition column."""
    t = _target(path)
    _sql(
        spark,
        f"CREATE TABLE {t} (id BIGINT, p STRING, ts TIMESTAMP) USING delta PARTITIONED BY (p, ts) "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')",
        f"INSERT INTO {t} SELECT id, CASE id % 5 WHEN 0 THEN 'a b' WHEN 1 THEN 'x%y=z#1' WHEN 2 THEN 'é/ü+' "
        "WHEN 3 THEN '' ELSE NULL END, CASE WHEN id % 2 = 0 THEN TIMESTAMP'2024-05-06 07:08:09.123456' END "
        "FROM range(500)",
        f"DELETE FROM {t} WHERE id % 3 = 0",
    )
    return [1, 2]


def build_dv_inline(spark: Any, path: str) -> list[int]:
    """Inline deletion vectors (in the log itself). delta-spark writes them only in its own
    tests, so the vector of a DELETE is moved inline by a hand-written commit (what other
    writers, Delta Kernel among them, may commit); delta-spark then reads that version."""
    t = _target(path)
    _sql(
        spark,
        f"CREATE TABLE {t} (id BIGINT) USING delta TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')",
    )
    spark.range(1000).repartition(2).write.format("delta").mode("append").save(path)
    _sql(spark, f"DELETE FROM {t} WHERE id % 9 = 4")
    _inline_deletion_vectors(path)
    return [1, 2, 3]


_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def _z85(data: bytes) -> str:
    """Z85 (Delta's inline encoding), the input zero-padded to whole 4-byte words."""
    data += b"\0" * (-len(data) % 4)
    out = []
    for i in range(0, len(data), 4):
        value = int.from_bytes(data[i : i + 4], "big")
        chars = []
        for _ in range(5):
            value, digit = divmod(value, 85)
            chars.append(_Z85[digit])
        out.append("".join(reversed(chars)))
    return "".join(out)


def _inline_deletion_vectors(path: str) -> None:
    """Commits the next version: each file of the last commit that has an on-disk vector gets it
    inline (remove and add of the same file, dataChange false, as a REORG would commit)."""
    log = Path(path) / "_delta_log"
    version = _version(path)
    actions = [json.loads(line) for line in (log / f"{version:020d}.json").read_text().splitlines()]
    moved = []
    for action in actions:
        add = action.get("add")
        if not add or not add.get("deletionVector"):
            continue
        dv = add["deletionVector"]
        uuid_part = dv["pathOrInlineDv"][-20:]
        prefix = dv["pathOrInlineDv"][:-20]
        raw = _z85_decode(uuid_part)
        uuid = f"{raw[0:4].hex()}-{raw[4:6].hex()}-{raw[6:8].hex()}-{raw[8:10].hex()}-{raw[10:16].hex()}"
        file = Path(path) / prefix / f"deletion_vector_{uuid}.bin"
        blob = file.read_bytes()
        size = int.from_bytes(blob[dv["offset"] : dv["offset"] + 4], "big")
        data = blob[dv["offset"] + 4 : dv["offset"] + 4 + size]
        inline = {
            "storageType": "i",
            "pathOrInlineDv": _z85(data),
            "sizeInBytes": size,
            "cardinality": dv["cardinality"],
        }
        stamp = int(time.time() * 1000)
        moved.append({"remove": {**_remove_of(add), "deletionTimestamp": stamp}})
        moved.append({"add": {**add, "deletionVector": inline, "dataChange": False}})
    if not moved:
        raise RuntimeError(f"no on-disk deletion vector in version {version} of {path}")
    info = {
        "commitInfo": {
            "timestamp": int(time.time() * 1000),
            "operation": "INLINE DELETION VECTORS",
            "engineInfo": "spark-mlt-tests",
            "isBlindAppend": False,
        }
    }
    with open(log / f"{version + 1:020d}.json", "x") as out:
        for action in (info, *moved):
            out.write(json.dumps(action) + "\n")


def _remove_of(add: dict[str, Any]) -> dict[str, Any]:
    keep = ("path", "partitionValues", "size", "deletionVector", "baseRowId", "defaultRowCommitVersion", "tags")
    return {**{k: add[k] for k in keep if k in add}, "dataChange": False, "extendedFileMetadata": True}


def _z85_decode(text: str) -> bytes:
    out = bytearray()
    for i in range(0, len(text), 5):
        value = 0
        for char in text[i : i + 5]:
            value = value * 85 + _Z85.index(char)
        out += value.to_bytes(4, "big")
    return bytes(out)


def _column_mapping(spark: Any, path: str, mode: str) -> list[int]:
    t = _target(path)
    _sql(
        spark,
        f"CREATE TABLE {t} (old_id BIGINT, x INT, gone STRING, info STRUCT<a: INT, b: STRING>, part STRING) "
        f"USING delta PARTITIONED BY (part) TBLPROPERTIES ('delta.columnMapping.mode' = '{mode}', "
        "'delta.enableDeletionVectors' = 'true')",
    )
    spark.range(ROWS).selectExpr(
        "id AS old_id",
        "CAST(id % 7 AS INT) AS x",
        "'g' AS gone",
        "named_struct('a', CAST(id % 5 AS INT), 'b', CONCAT('b', id)) AS info",
        "CASE WHEN id % 3 = 0 THEN NULL ELSE CONCAT('r ', id % 3) END AS part",
    ).repartition(2).write.format("delta").mode("append").save(path)
    _sql(
        spark,
        f"ALTER TABLE {t} RENAME COLUMN old_id TO id",
        f"ALTER TABLE {t} DROP COLUMN gone",
        f"ALTER TABLE {t} RENAME COLUMN info.a TO aa",
        f"ALTER TABLE {t} RENAME COLUMN part TO region",
        f"ALTER TABLE {t} ADD COLUMNS (gone STRING)",
        f"INSERT INTO {t} (id, x, info, region, gone) SELECT id, 1, named_struct('aa', 1, 'b', 'new'), 'r 1', "
        "'back' FROM range(100000, 100010)",
        f"DELETE FROM {t} WHERE id % 11 = 0",
    )
    return [1, _version(path)]


def build_cm_name(spark: Any, path: str) -> list[int]:
    """Column mapping, name mode: renamed, dropped and re-added columns, a renamed struct field
    and a renamed partition column, then rows deleted with deletion vectors."""
    return _column_mapping(spark, path, "name")


def build_cm_id(spark: Any, path: str) -> list[int]:
    """Column mapping, id mode (Parquet field ids), the same changes as ``cm_name``."""
    return _column_mapping(spark, path, "id")


def build_v2_checkpoint(spark: Any, path: str) -> list[int]:
    """v2 checkpoints (a checkpoint every 2 commits) with sidecar files."""
    t = _target(path)
    _sql(
        spark,
        f"CREATE TABLE {t} (id BIGINT) USING delta TBLPROPERTIES ('delta.checkpointPolicy' = 'v2', "
        "'delta.checkpointInterval' = '2')",
        *(f"INSERT INTO {t} SELECT id FROM range({i * 10}, {i * 10 + 10})" for i in range(5)),
        f"DELETE FROM {t} WHERE id < 5",
    )
    if not glob.glob(os.path.join(path, "_delta_log", "_sidecars", "*.parquet")):
        raise RuntimeError("no sidecar files were written")
    return [_version(path)]


def build_generated(spark: Any, path: str) -> list[int]:
    """A generated column (on Spark 3.5, whose SQL has none, through Delta's table builder)."""
    t = _target(path)
    if pyspark.__version__ >= "4":
        _sql(spark, f"CREATE TABLE {t} (id BIGINT, twice BIGINT GENERATED ALWAYS AS (id * 2)) USING delta")
    else:
        session, tables = spark._jsparkSession, spark._jvm.io.delta.tables.DeltaTable
        twice = tables.columnBuilder(session, "twice").dataType("BIGINT").generatedAlwaysAs("id * 2").build()
        tables.create(session).location(path).addColumn("id", "BIGINT").addColumn(twice).execute()
    _sql(spark, f"INSERT INTO {t} (id) VALUES (1), (2)")
    return [_version(path)]


def _statements(*statements: str) -> Build:
    """A table built by SQL statements (``{t}``: the table), checked at its last version."""

    def build(spark: Any, path: str) -> list[int]:
        _sql(spark, *(statement.format(t=_target(path)) for statement in statements))
        return [_version(path)]

    return build


# --- ours: spark-mlt's output, then changed by delta-spark ----------------------------------


def _tokenize(path: str, work: str) -> subprocess.Popen[bytes]:
    """Starts spark-mlt's tokenize job writing ``path`` jar-free (a subprocess without Delta's jars)."""
    source = os.path.join(work, "ids.parquet")
    if not os.path.exists(source):
        ids = pa.array(range(OURS_ROWS), pa.int64())
        score = pa.array([i % 997 for i in range(OURS_ROWS)], pa.int32())
        pq.write_table(pa.table({"id": ids, "score": score}), source)
    command = [
        sys.executable,
        "-c",
        "import sys; from spark_mlt.batch.cli import main; sys.exit(main(sys.argv[1:]))",
        "tokenize",
        "--input",
        source,
        "--output",
        path,
        "--columns",
        "id",
        "--p",
        "13",
        "--n",
        "5",
    ]
    environment = {k: v for k, v in os.environ.items() if k != "SPARK_MLT_DELTA"}
    log = open(os.path.join(work, "tokenize.log"), "wb")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(command, env=environment, stdout=log, stderr=subprocess.STDOUT)


def build_ours_deleted(spark: Any, path: str) -> list[int]:
    """spark-mlt's table, then deletion vectors turned on and a third of the rows deleted."""
    t = _target(path)
    _sql(
        spark,
        f"ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')",
        f"DELETE FROM {t} WHERE id % 3 = 0",
    )
    return [1, _version(path)]


def build_ours_optimized(spark: Any, path: str) -> list[int]:
    """spark-mlt's table, then OPTIMIZE ... ZORDER BY (its files replaced)."""
    _sql(spark, f"OPTIMIZE {_target(path)} ZORDER BY (score)")
    return [_version(path)]


def build_ours_renamed(spark: Any, path: str) -> list[int]:
    """spark-mlt's table, then column mapping turned on and a column renamed."""
    t = _target(path)
    _sql(
        spark,
        f"ALTER TABLE {t} SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
        "'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5')",
        f"ALTER TABLE {t} RENAME COLUMN score TO points",
    )
    return [_version(path)]


def build_ours_constrained(spark: Any, path: str) -> list[int]:
    """spark-mlt's table, then a CHECK constraint."""
    _sql(spark, f"ALTER TABLE {_target(path)} ADD CONSTRAINT score_small CHECK (score < 1000)")
    return [_version(path)]


SOURCES: dict[str, Build] = {
    "dv": build_dv,
    "dv_special": build_dv_special,
    "dv_inline": build_dv_inline,
    "cm_name": build_cm_name,
    "cm_id": build_cm_id,
    # TIMESTAMP_NTZ columns, also as partition columns with a DATE one
    "ntz": _statements(
        "CREATE TABLE {t} (id BIGINT, ts TIMESTAMP_NTZ, d DATE, pts TIMESTAMP_NTZ) USING delta PARTITIONED BY (d, pts)",
        "INSERT INTO {t} VALUES (1, TIMESTAMP_NTZ'2024-01-02 03:04:05.678901', DATE'2024-01-02', "
        "TIMESTAMP_NTZ'2024-01-02 00:00:00'), (2, NULL, NULL, NULL), "
        "(3, TIMESTAMP_NTZ'1969-12-31 23:59:59', DATE'1969-12-31', TIMESTAMP_NTZ'1969-12-31 23:59:59.5')",
    ),
    "v2_checkpoint": build_v2_checkpoint,
    # type widening: INT to BIGINT and SMALLINT to INT, with files of both widths
    "widen": _statements(
        "CREATE TABLE {t} (id INT, s SMALLINT) USING delta TBLPROPERTIES ('delta.enableTypeWidening' = 'true')",
        "INSERT INTO {t} VALUES (1, 2), (-3, -4)",
        "ALTER TABLE {t} CHANGE COLUMN id TYPE BIGINT",
        "ALTER TABLE {t} CHANGE COLUMN s TYPE INT",
        "INSERT INTO {t} VALUES (3000000000, 70000)",
    ),
    "constraints": _statements(
        "CREATE TABLE {t} (x INT NOT NULL, y INT, note STRING) USING delta",
        "INSERT INTO {t} VALUES (1, 2, 'a'), (3, 4, 'b')",
        "ALTER TABLE {t} ADD CONSTRAINT x_small CHECK (x < 1000)",
        "ALTER TABLE {t} ADD CONSTRAINT y_positive CHECK (y > 0)",
    ),
    "generated": build_generated,
    "append_only": _statements(
        "CREATE TABLE {t} (id BIGINT) USING delta TBLPROPERTIES ('delta.appendOnly' = 'true')",
        "INSERT INTO {t} VALUES (1), (2)",
    ),
    # change data feed with deletion vectors (the DELETE writes change data files)
    "cdf": _statements(
        "CREATE TABLE {t} (id BIGINT) USING delta TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true', "
        "'delta.enableDeletionVectors' = 'true')",
        "INSERT INTO {t} SELECT id FROM range(100)",
        "DELETE FROM {t} WHERE id % 4 = 0",
    ),
    "identity": _statements(
        "CREATE TABLE {t} (k BIGINT GENERATED ALWAYS AS IDENTITY, id BIGINT) USING delta",
        "INSERT INTO {t} (id) VALUES (1), (2)",
    ),
    "row_tracking": _statements(
        "CREATE TABLE {t} (id BIGINT) USING delta TBLPROPERTIES ('delta.enableRowTracking' = 'true')",
        "INSERT INTO {t} VALUES (1), (2)",
    ),
    "clustering": _statements("CREATE TABLE {t} (id BIGINT) USING delta CLUSTER BY (id)", "INSERT INTO {t} VALUES (1)"),
    "in_commit_timestamps": _statements(
        "CREATE TABLE {t} (id BIGINT) USING delta TBLPROPERTIES ('delta.enableInCommitTimestamps' = 'true')",
        "INSERT INTO {t} VALUES (1)",
    ),
    "variant": _statements(
        "CREATE TABLE {t} (id BIGINT, v VARIANT) USING delta",
        "INSERT INTO {t} SELECT 1, parse_json('{{\"a\": 1}}')",
    ),
}
OURS: dict[str, Build] = {
    "ours_deleted": build_ours_deleted,
    "ours_optimized": build_ours_optimized,
    "ours_renamed": build_ours_renamed,
    "ours_constrained": build_ours_constrained,
}
#: Tables that are only refused: no rows to compare.
REFUSED_ONLY = ("identity", "row_tracking", "clustering", "in_commit_timestamps", "variant")


# --- statistics: generated tables delta-spark writes --------------------------------------------

#: The seeds of the generated statistics tables (``stats/stats_<seed>``).
STATS_SEEDS = range(12)
#: At most this many rows each (enough for several files and row groups, few enough to commit).
STATS_ROWS = 80


def build_stats(spark: Any, path: str, seed: int) -> dict[str, Any]:
    """A generated table (schema, rows, files, row groups, table properties) created by SQL and
    filled by delta-spark's writer, which records each file's statistics; what it was built from."""
    rng = random.Random(seed)
    case = generate(rng, max_rows=STATS_ROWS)
    properties = dict(case.properties)
    if rng.random() < 0.3:
        properties["delta.enableDeletionVectors"] = "true"
    columns = ", ".join(f"{identifier(f.name)} {f.dataType.simpleString()}" for f in case.schema.fields)
    partitioned = f" PARTITIONED BY ({', '.join(map(identifier, case.partition_by))})" if case.partition_by else ""
    for attempt in (properties, {k: v for k, v in properties.items() if "StringPrefixLength" not in k}):
        pairs = ", ".join(f"{string(k)} = {string(v)}" for k, v in sorted(attempt.items()))
        try:
            spark.sql(
                f"CREATE TABLE {_target(path)} ({columns}) USING delta{partitioned}"
                + (f" TBLPROPERTIES ({pairs})" if pairs else "")
            )
        except Exception:  # an older Delta lacks the string prefix property: once more without it
            if attempt is not properties:
                raise
            continue
        properties = attempt
        break
    conf = {"spark.sql.parquet.outputTimestampType": case.timestamps, **parquet_options(case)}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        spark.createDataFrame(case.rows, case.schema).repartition(case.files).write.format("delta").mode("append").save(
            path
        )
    finally:
        for key in conf:
            spark.conf.unset(key)
    return {"seed": seed, "case": case.describe(), "properties": properties}


def _protocol(path: str) -> dict[str, Any]:
    protocol = DeltaTable(path).protocol()
    return {
        "reader_version": protocol.min_reader_version,
        "writer_version": protocol.min_writer_version,
        "reader_features": sorted(protocol.reader_features or []),
        "writer_features": sorted(protocol.writer_features or []),
    }


def build(out: str) -> dict[str, Any]:
    """Builds the zoo into ``out`` (replacing what was there) and returns its manifest."""
    started = time.perf_counter()
    out = os.path.abspath(out)  # Delta reads a relative path in delta.`...` as a table name
    shutil.rmtree(out, ignore_errors=True)
    tables, expected, work = (os.path.join(out, part) for part in ("tables", "expected", "work"))
    for folder in (tables, expected, work):
        os.makedirs(folder)
    # spark-mlt's own table, jar-free, in a subprocess that runs while delta-spark builds the rest
    ours = os.path.join(work, "ours")
    tokenizing = _tokenize(ours, work)
    conf = delta_session_conf()
    delta_version = next(
        (
            os.path.basename(j).split("-")[-1].removesuffix(".jar")
            for j in conf["spark.jars"].split(",")
            if "delta-spark" in j
        ),
        "?",
    )
    spark = local_session(
        "spark-mlt-zoo",
        extra_conf={
            **conf,
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.databricks.delta.snapshotPartitions": "2",
        },
    )
    manifest: dict[str, Any] = {
        "pyspark": pyspark.__version__,
        "delta": delta_version,
        "builder": builder_digest(),
        "ours_rows": OURS_ROWS,
        "tables": {},
        "skipped": {},
    }
    for name, build_table in {**SOURCES, **OURS}.items():
        path = os.path.join(tables, name)
        if name in OURS:
            if tokenizing.wait() != 0:
                log = Path(work, "tokenize.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"spark-mlt tokenize failed (exit {tokenizing.returncode}):\n{log}")
            shutil.copytree(ours, path)
        try:
            versions = build_table(spark, path)
        except Exception as error:  # noqa: BLE001 - a feature this line's Delta lacks is skipped
            manifest["skipped"][name] = str(error).strip().splitlines()[0][:300]
            shutil.rmtree(path, ignore_errors=True)
            continue
        entry: dict[str, Any] = {"versions": versions, "protocol": _protocol(path), "expected": {}}
        if name not in REFUSED_ONLY:
            for version in versions:
                target = os.path.join(expected, f"{name}@{version}")
                rows = spark.read.format("delta").option("versionAsOf", version).load(path)
                rows.coalesce(1).write.parquet(target)
                entry["expected"][str(version)] = os.path.relpath(target, out)
        manifest["tables"][name] = entry
    manifest["stats"] = {}
    for seed in STATS_SEEDS:
        name = f"stats_{seed:02d}"
        try:
            manifest["stats"][name] = build_stats(spark, os.path.join(out, "stats", name), seed)
        except Exception as error:  # noqa: BLE001 - recorded; the test names it
            manifest["skipped"][name] = str(error).strip().splitlines()[0][:300]
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)
    _tidy(out)
    manifest["seconds"] = round(time.perf_counter() - started, 1)
    with open(os.path.join(out, MANIFEST), "w") as handle:
        json.dump(manifest, handle, indent=1, sort_keys=True)
        handle.write("\n")
    return manifest


def _tidy(out: str) -> None:
    """Makes the zoo fit to commit: no checksum or marker files, no commit that names the
    folder it was built in (delta-rs records a new table's location, spark-mlt its input
    path: kept relative to the zoo), and no absolute path left."""
    for file in Path(out).rglob("*"):
        if file.is_file() and (file.suffix == ".crc" or file.name == "_SUCCESS"):
            file.unlink()
    for commit in Path(out).glob("**/_delta_log/*.json"):
        text = commit.read_text()
        if out not in text:
            continue
        actions = [json.loads(line) for line in text.splitlines()]
        for action in actions:
            if "commitInfo" in action:
                action["commitInfo"].get("operationParameters", {}).pop("location", None)
                action["commitInfo"] = _relative_to(action["commitInfo"], out)
        commit.write_text("".join(json.dumps(a, separators=(",", ":"), ensure_ascii=False) + "\n" for a in actions))
    roots = {out, os.path.realpath(out), os.getcwd(), os.path.expanduser("~")} - {"/"}
    named = [
        str(file)
        for file in Path(out).rglob("*")
        if file.is_file() and any(root.encode() in file.read_bytes() for root in roots)
    ]
    if named:
        raise RuntimeError(f"files that name the machine's folders ({sorted(roots)}): {named}")


def _relative_to(value: Any, folder: str) -> Any:
    """``value`` with every path under ``folder`` in its strings made relative to it."""
    if isinstance(value, dict):
        return {key: _relative_to(item, folder) for key, item in value.items()}
    if isinstance(value, str):
        return value.replace("file://" + folder + "/", "").replace(folder + "/", "")
    return value


def main() -> None:
    if sys.argv[1] == "--committed-for":
        # tests/compat/run-line.sh: the committed zoo of a Delta release, if one is current
        print(committed_for(sys.argv[2]) or "")
        return
    out = sys.argv[1]
    manifest = build(out)
    print(
        f"== zoo: {len(manifest['tables'])} tables and {len(manifest['stats'])} statistics tables in {out} "
        f"(pyspark {manifest['pyspark']}, "
        f"Delta {manifest['delta']}, {manifest['seconds']} s)"
    )
    for name, reason in manifest["skipped"].items():
        print(f"   skipped {name}: {reason}")


# --- for the tests ---------------------------------------------------------------------------

#: Where the tests find a zoo other than the committed one (``tests/compat/run-line.sh`` sets it
#: to the zoo its line's Delta built).
ZOO_ENV = "SPARK_MLT_TEST_ZOO"
#: Where this module's part for the tests begins (not hashed by :func:`builder_digest`).
_TESTS_PART = "# --- for the tests ---"


def builder_digest() -> str:
    """A digest of what builds the zoo (:data:`BUILDER_FILES`, this module up to its part for
    the tests), recorded in each manifest: a committed zoo of another digest is stale."""
    digest = hashlib.sha256()
    for source in BUILDER_FILES:
        text = source.read_text()
        digest.update(text.split(_TESTS_PART)[0].encode())
    return digest.hexdigest()[:16]


def committed_zoos() -> list[Path]:
    """The committed zoos: the newest Delta release's and one per older release."""
    return [COMMITTED, *sorted(COMMITTED.parent.glob(COMMITTED_RELEASES.name + "*"))]


def committed_for(delta: str) -> Path | None:
    """The committed zoo that Delta ``delta`` built from the current builder, or None."""
    for folder in committed_zoos():
        manifest = folder / MANIFEST
        if manifest.is_file():
            recorded = json.loads(manifest.read_text())
            if recorded["delta"] == delta and recorded.get("builder") == builder_digest():
                return folder
    return None


class Zoo:
    """A built zoo, as the tests use it: tables to read in place, copies to write to."""

    def __init__(self, folder: str) -> None:
        self.folder = os.path.abspath(folder)
        with open(os.path.join(self.folder, MANIFEST)) as handle:
            self.manifest: dict[str, Any] = json.load(handle)

    @property
    def built_by(self) -> str:
        return f"pyspark {self.manifest['pyspark']} with Delta {self.manifest['delta']}"

    def missing(self, name: str) -> str | None:
        """Why the zoo has no table ``name`` (its line's Delta could not build it), or None."""
        if name in self.manifest["tables"]:
            return None
        reason = self.manifest["skipped"].get(name, "not in the manifest")
        return f"{self.built_by} did not build {name}: {reason}"

    def path(self, name: str) -> str:
        return os.path.join(self.folder, "tables", name)

    def versions(self, name: str) -> list[int]:
        return [int(v) for v in self.manifest["tables"][name]["versions"]]

    def expected(self, name: str, version: int) -> str:
        return os.path.join(self.folder, self.manifest["tables"][name]["expected"][str(version)])

    def copy(self, name: str, into: str | os.PathLike[str]) -> str:
        """A copy of table ``name`` under ``into`` (to write to), at the same relative layout."""
        target = os.path.join(os.fspath(into), name)
        shutil.copytree(self.path(name), target)
        return target

    def stats_tables(self) -> dict[str, str]:
        """The generated statistics tables (see ``build_stats``), each with its folder."""
        return {name: os.path.join(self.folder, "stats", name) for name in self.manifest.get("stats", {})}

    @property
    def ours_rows(self) -> int:
        """Rows of spark-mlt's own tables before delta-spark changed them."""
        return int(self.manifest["ours_rows"])

    def cases(self) -> list[tuple[str, int]]:
        """Every (table, version) with expected rows."""
        return [(name, int(v)) for name, entry in sorted(self.manifest["tables"].items()) for v in entry["expected"]]


def find_zoo() -> Zoo | str:
    """The zoo named by ``$SPARK_MLT_TEST_ZOO``, else the committed one; or why there is none
    (a skip reason)."""
    folder = os.environ.get(ZOO_ENV) or str(COMMITTED)
    if not os.path.isfile(os.path.join(folder, MANIFEST)):
        return f"no table zoo in {folder}: run `make zoo` (it builds one with a PySpark line that has Delta)"
    return Zoo(folder)


if __name__ == "__main__":
    main()
