"""Tables as other engines write them, on the jar-free path: read exactly, or refused.

The tables come from the zoo (:mod:`tests.support.zoo`): built by delta-spark on a line that
has Delta, with what ``spark.read.format("delta")`` returned for each version. Every test here
runs without Delta's jars, on every supported line: ``make test`` reads the committed zoo
(``tests/data/zoo``, built by the newest line with Delta, ``make zoo``); ``tests/compat/run-line.sh``
builds one with each Delta release and runs the line's tests on it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder, Schema
from deltalake.transaction import CommitProperties
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from spark_mlt.batch import DecodeOptions, TokenizeOptions, decode_table, tokenize_table
from spark_mlt.batch.read.inspect import inspect_table
from spark_mlt.column import mlt_encode
from spark_mlt.delta import locate
from spark_mlt.delta import read_snapshot as read_delta_snapshot
from spark_mlt.delta.features import FEATURES
from spark_mlt.delta.read.scan import exact_files, file_key
from spark_mlt.errors import ConstraintViolationError, TableExistsError, TableFeatureError, TableSchemaError
from spark_mlt.storage import WriteOptions, orphan_files, read_delta, vacuum, write_delta
from spark_mlt.storage.backends.plan import spark_arrow_schema
from spark_mlt.storage.properties import codec_properties
from spark_mlt.storage.spark_sql import session_conf
from spark_mlt.storage.table import CREATE_MARKER
from tests.support import s3 as local_s3
from tests.support.codecs import CODEC
from tests.support.frames import assert_same_rows
from tests.support.plans import plan_operators
from tests.support.spark_lines import VERSION
from tests.support.stats_cases import delta_rs_creates_column_mapping
from tests.support.zoo import MANIFEST, Zoo, builder_digest, committed_zoos, find_zoo

pytestmark = pytest.mark.compat


def _cases() -> list[tuple[str, int]]:
    found = find_zoo()
    return found.cases() if isinstance(found, Zoo) else []


def test_each_committed_zoo_was_built_by_the_current_builder() -> None:
    """A change to the zoo's builder needs ``make zoo``: a compat line reads its release's
    committed zoo instead of building one, so a stale zoo would test yesterday's tables."""
    zoos = {folder.name: json.loads((folder / MANIFEST).read_text()) for folder in committed_zoos()}
    assert len(zoos) >= 2, f"a committed zoo per Delta release (the newest and 3.x): {sorted(zoos)}"
    stale = {
        name: manifest.get("builder") for name, manifest in zoos.items() if manifest.get("builder") != builder_digest()
    }
    assert not stale, (
        f"built by another builder than tests/support/zoo.py's {builder_digest()}: {stale}; run `make zoo`"
    )
    releases = [manifest["delta"] for manifest in zoos.values()]
    assert len(set(releases)) == len(releases), f"one committed zoo per Delta release: {releases}"


@pytest.mark.parametrize(("name", "version"), _cases() or [pytest.param("-", 0, marks=pytest.mark.skip("no zoo"))])
def test_jar_free_reads_return_exactly_the_rows_delta_returns(
    spark: SparkSession, zoo: Zoo, name: str, version: int
) -> None:
    """Deletion vectors (on disk, inline, after a purge, in escaped partition folders), column
    mapping (name and id modes, renamed, dropped and re-added columns, renamed struct fields
    and partition columns), timestampNtz, v2 checkpoints with sidecars, constraints, generated
    columns, change data feed and spark-mlt's own tables after delta-spark changed them: each
    version as delta-spark read it (time travel before and after each delete)."""
    if name == "widen" and VERSION < (4, 0):
        pytest.skip("Spark 3.5 cannot read widened files: the gate refuses it (test_the_gate_refuses_...)")
    expected = spark.read.parquet(zoo.expected(name, version))
    # files split across tasks (the dv table's files have several row groups): row indexes count on
    with session_conf(spark, {"spark.sql.files.maxPartitionBytes": "2048", "spark.sql.files.openCostInBytes": "0"}):
        assert_same_rows(read_delta(spark, zoo.path(name), version=version), expected)


def test_partition_and_deletion_reads_plan_the_same_for_one_file_or_many(spark: SparkSession, tmp_path: Path) -> None:
    """The plan does not grow with the number of files or partitions (no union per partition)."""
    sizes = []
    for parts in (1, 40):
        path = str(tmp_path / f"t{parts}")
        df = spark.range(400).select(F.col("id").alias("userId"), (F.col("id") % parts).cast("int").alias("part"))
        write_delta(
            df.withColumn("userId_mlt", mlt_encode("userId", CODEC)),
            path,
            {"userId": CODEC},
            options=WriteOptions(partition_by=["part"]),
        )
        read = read_delta(spark, path)
        assert read.count() == 400
        sizes.append(plan_operators(read))
    assert sizes[0] == sizes[1]


def test_s3_tables_with_deletion_vectors_and_column_mapping_read_and_write_exactly(
    spark: SparkSession, zoo: Zoo, s3: local_s3.MotoServer
) -> None:
    """The same tables on the local S3 server (copied there as they are), read through s3a, and
    appended to there (physical names on S3 too)."""
    options = local_s3.storage_options()
    for name in ("dv", "cm_name"):
        if zoo.missing(name):
            pytest.skip(str(zoo.missing(name)))
        uri = s3.upload(zoo.path(name), f"zoo-{name.replace('_', '-')}")
        expected = spark.read.parquet(zoo.expected(name, zoo.versions(name)[-1]))
        assert_same_rows(read_delta(spark, uri, storage_options=options), expected)
        new = spark.createDataFrame(expected.limit(3).collect(), expected.schema).withColumn("id", F.col("id") + 10**7)
        write_delta(new, uri, mode="append", storage_options=options)
        assert_same_rows(read_delta(spark, uri, storage_options=options), expected.unionByName(new))


def _with_protocol(zoo: Zoo, into: Path, reader: list[str], writer: list[str]) -> str:
    """A copy of a plain table whose next commit upgrades the protocol to these features (what
    a newer writer would commit); delta-rs still opens it."""
    path = zoo.copy("append_only", into)
    log = Path(path) / "_delta_log"
    version = DeltaTable(path).version() + 1
    protocol = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": reader, "writerFeatures": writer}
    (log / f"{version:020d}.json").write_text(
        json.dumps({"commitInfo": {"timestamp": 0, "operation": "UPGRADE PROTOCOL"}})
        + "\n"
        + json.dumps({"protocol": protocol})
        + "\n"
    )
    return path


REFUSED_WRITES = {
    "identity": "identityColumns",
    "row_tracking": "rowTracking",
    "clustering": "clustering",
    "in_commit_timestamps": "inCommitTimestamp",
    "widen": "typeWidening",
    "variant": "variantType",
}


@pytest.mark.parametrize(("name", "feature"), sorted(REFUSED_WRITES.items()))
def test_the_gate_refuses_writes_it_cannot_keep_naming_the_feature_and_the_way_forward(
    spark: SparkSession, zoo: Zoo, tmp_path: Path, name: str, feature: str
) -> None:
    if zoo.missing(name):
        pytest.skip(str(zoo.missing(name)))
    path = zoo.copy(name, tmp_path)
    before = DeltaTable(path).version()
    rows = read_delta(spark, path, backend="delta-rs") if name != "variant" else None
    with pytest.raises(TableFeatureError, match=rf"{path}.*'{feature}'.*Delta's jars") as raised:
        write_delta(rows if rows is not None else spark.range(1), path, mode="append")
    assert raised.value.feature == feature
    assert DeltaTable(path).version() == before


@pytest.mark.parametrize(
    ("reader", "feature"),
    [
        (["variantType"], "variantType"),
        (["catalogManaged"], "catalogManaged"),
        (["someFutureFeature"], "someFutureFeature"),
    ],
)
def test_the_gate_refuses_reads_it_cannot_do_exactly(
    spark: SparkSession, zoo: Zoo, tmp_path: Path, reader: list[str], feature: str
) -> None:
    """A feature the jar-free reader does not implement, one it never will (a catalog owns the
    commits: the log in storage may be stale) and one it does not know are all refused."""
    path = _with_protocol(zoo, tmp_path, reader, reader)
    with pytest.raises(TableFeatureError, match=rf"{path} uses the reader feature '{feature}'") as raised:
        read_delta(spark, path)
    assert raised.value.feature == feature


def test_type_widening_reads_on_spark_4_and_is_refused_on_3_5(spark: SparkSession, zoo: Zoo) -> None:
    if zoo.missing("widen"):
        pytest.skip(str(zoo.missing("widen")))
    if VERSION >= (4, 0):
        assert read_delta(spark, zoo.path("widen")).where("id = 3000000000 AND s = 70000").count() == 1
    else:
        with pytest.raises(TableFeatureError, match=r"'typeWidening'.*Spark 3\.5"):
            read_delta(spark, zoo.path("widen"))


#: Widenings the protocol allows: ``(column, type written, table type, type changes, a value)``;
#: a change of a struct's field, an array's element or a map's key or value is recorded on its
#: column with the path to it, as delta-spark records it.
_WIDENINGS: tuple[tuple[str, str, str, list[tuple[str, ...]], str], ...] = (
    ("b", "tinyint", "bigint", [("byte", "short"), ("short", "integer"), ("integer", "long")], "-128"),
    ("f", "float", "double", [("float", "double")], "1.1"),
    ("i", "int", "double", [("integer", "double")], "2147483647"),
    ("d", "date", "timestamp_ntz", [("date", "timestamp_ntz")], "DATE'0001-01-01'"),
    ("m", "decimal(5,2)", "decimal(12,4)", [("decimal(5,2)", "decimal(12,4)")], "-999.99"),
    ("w", "decimal(10,2)", "decimal(38,30)", [("decimal(10,2)", "decimal(38,30)")], "99999999.99"),
    ("l", "bigint", "decimal(20,0)", [("long", "decimal(20,0)")], "9223372036854775807"),
    ("s", "struct<x: smallint>", "struct<x: int>", [("short", "integer", "x")], "named_struct('x', -32768)"),
    ("a", "array<int>", "array<bigint>", [("integer", "long", "element")], "array(-2147483648, NULL)"),
    (
        "k",
        "map<float, int>",
        "map<double, bigint>",
        [("float", "double", "key"), ("integer", "long", "value")],
        "map(-0.5, 7)",
    ),
)
_Widening = tuple[str, str, str, list[tuple[str, ...]], str]


def _widened_table(spark: SparkSession, path: Path, feature: str, widenings: tuple[_Widening, ...]) -> DataFrame:
    """A table (``feature`` in its protocol) with a file written before its columns were widened
    (a row of values, a row of nulls) and one after; returns its rows as Delta reads them."""
    values = ", ".join(f"CAST({value} AS {written}) AS {name}" for name, written, _, _, value in widenings)
    nulls = ", ".join(f"CAST(NULL AS {written}) AS {name}" for name, written, _, _, _ in widenings)
    before = spark.sql(f"SELECT {values} UNION ALL SELECT {nulls}")
    widened = before.select(*(F.col(name).cast(table).alias(name) for name, _, table, _, _ in widenings))
    # dates before 1582 as they are (Spark 3.5 refuses them without a rebase mode; 4.0 on CORRECTED)
    with session_conf(spark, {"spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED"}):
        before.coalesce(1).write.parquet(str(path / "before"))
        widened.where(F.col(widenings[0][0]).isNotNull()).coalesce(1).write.parquet(str(path / "after"))
    schema = json.loads(widened.schema.json())
    for column, (_, _, _, changes, _) in zip(schema["fields"], widenings, strict=True):
        recorded = [{"fromType": c[0], "toType": c[1], **({"fieldPath": c[2]} if c[2:] else {})} for c in changes]
        if feature.endswith("-preview"):  # the preview's form: each change's table version too
            recorded = [{**change, "tableVersion": 1} for change in recorded]
        nested = isinstance(column["type"], dict) and column["type"]["type"] == "struct"
        (column["type"]["fields"][0] if nested else column)["metadata"] = {"delta.typeChanges": recorded}
    files = sorted(path.glob("*/*.parquet"))
    adds = [_add_of(path, file) for file in files]
    protocol = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": [feature], "writerFeatures": [feature]}
    metadata = {
        "id": "widened",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(schema),
        "partitionColumns": [],
        "configuration": {"delta.enableTypeWidening": "true"},
    }
    (path / "_delta_log").mkdir()
    actions = [{"protocol": protocol}, {"metaData": metadata}, *adds]
    (path / "_delta_log" / f"{0:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    return widened.union(widened.where(F.col(widenings[0][0]).isNotNull()))


def _add_of(table: Path, file: Path) -> dict[str, Any]:
    relative = str(file.relative_to(table))
    return {
        "add": {
            "path": relative,
            "partitionValues": {},
            "size": file.stat().st_size,
            "modificationTime": 0,
            "dataChange": True,
        }
    }


@pytest.mark.parametrize("feature", ["typeWidening", "typeWidening-preview"])
def test_every_widening_the_protocol_allows_reads_exactly_file_by_file_on_spark_4(
    spark: SparkSession, tmp_path: Path, feature: str
) -> None:
    """Pins the gate of type widening under both of its names: a file written before its columns
    were widened reads as the wider types (integers, floats, dates, decimals, integers into
    decimals, at the top level and in structs, arrays and maps, a chain of changes), as delta-spark
    reads it; Spark 3.5 cannot and is refused."""
    path = tmp_path / "t"
    path.mkdir()
    expected = _widened_table(spark, path, feature, _WIDENINGS)
    if VERSION < (4, 0):
        with pytest.raises(TableFeatureError, match=rf"'{feature}'.*Spark 3\.5"):
            read_delta(spark, str(path))
        return
    assert sorted(map(repr, read_delta(spark, str(path)).collect())) == sorted(map(repr, expected.collect()))


@pytest.mark.parametrize(
    "change",
    [("bigint", "double", "long", "9007199254740993"), ("date", "timestamp", "date", "DATE'2024-01-02'")],
)
@pytest.mark.parametrize("feature", ["typeWidening", "typeWidening-preview"])
def test_a_type_change_widening_does_not_allow_is_refused_before_spark_reads(
    spark: SparkSession, tmp_path: Path, feature: str, change: tuple[str, str, str, str]
) -> None:
    """Pins the gate's check of the recorded type changes: one the protocol does not allow (a long
    into a double loses digits; a date is no instant) is refused naming the column, the change
    and the feature, as delta-spark refuses it. Before, the gate let the table through and Spark's
    reader failed in the middle of the query (PARQUET_COLUMN_DATA_TYPE_MISMATCH)."""
    written, table, source, value = change
    path = tmp_path / "t"
    path.mkdir()
    _widened_table(spark, path, feature, (*_WIDENINGS[:2], ("i", written, table, [(source, table)], value)))
    said = rf"records a change of column 'i' from {source} to {table} \(table feature '{feature}'\)"
    with pytest.raises(TableFeatureError, match=said if VERSION >= (4, 0) else rf"'{feature}'"):
        read_delta(spark, str(path))


def test_every_feature_delta_spark_writes_in_the_zoo_is_known_to_the_gate(zoo: Zoo) -> None:
    features = {
        name
        for entry in zoo.manifest["tables"].values()
        for name in entry["protocol"]["reader_features"] + entry["protocol"]["writer_features"]
    }
    assert features <= set(FEATURES)


# --- jar-free writes keep the table's rules --------------------------------------------------


def _need(zoo: Zoo, *names: str) -> None:
    for name in names:
        if zoo.missing(name):
            pytest.skip(str(zoo.missing(name)))


def _staging_folders(path: str) -> list[str]:
    return sorted(p.name for p in Path(path).iterdir() if p.name.startswith("mlt-"))


@pytest.mark.parametrize("name", ["cm_name", "cm_id"])
def test_appends_to_a_column_mapped_table_write_physical_names(
    spark: SparkSession, zoo: Zoo, tmp_path: Path, name: str
) -> None:
    """Files under the physical names (and field ids in id mode), partition values keyed by
    them: delta-rs, and the jar-free reader, see the logical columns with the new rows."""
    _need(zoo, name)
    path = zoo.copy(name, tmp_path)
    before = read_delta(spark, path)
    new = before.where("id < 50").withColumn("id", F.col("id") + 1_000_000)
    write_delta(new, path, mode="append")
    assert_same_rows(read_delta(spark, path), before.unionByName(new))
    layout = json.loads(DeltaTable(path).schema().to_json())
    physical = {f["name"]: f["metadata"]["delta.columnMapping.physicalName"] for f in layout["fields"]}
    added = list(Path(path).glob("mlt-*/**/*.parquet"))  # the write's own folder
    assert added
    assert all(f.parent.name.startswith(physical["region"] + "=") for f in added)  # partition folders too
    stored = pq.read_schema(added[0])
    assert set(stored.names) == {physical[c] for c in ("id", "x", "info", "gone")}
    if name == "cm_id":
        assert stored.field(physical["id"]).metadata[b"PARQUET:field_id"] == b"1"
    partitions = pa.table(DeltaTable(path).get_add_actions(flatten=True)).column("partition.region").to_pylist()
    assert "r 1" in partitions  # delta-rs maps the physical keys back


def test_check_constraints_and_not_null_fail_the_write_naming_the_rule_and_the_values(
    spark: SparkSession, zoo: Zoo, tmp_path: Path
) -> None:
    """A CHECK constraint that is false or null, and a null in a NOT NULL column, fail the
    write before its commit (as delta-spark refuses them); valid rows are appended."""
    _need(zoo, "constraints")
    path = zoo.copy("constraints", tmp_path)
    version = DeltaTable(path).version()
    schema = "x int, y int, note string"
    cases = {
        "CHECK constraint x_small (x < 1000) violated by row with values: x=5000": [(5000, 1, "big")],
        "CHECK constraint y_positive (y > 0) violated by row with values: y=null": [(1, None, "null y")],
        "NOT NULL constraint x (`x` IS NOT NULL) violated by row with values: x=null": [(None, 1, "null x")],
    }
    for message, rows in cases.items():
        with pytest.raises(ConstraintViolationError, match=re.escape(message)):
            write_delta(spark.createDataFrame([(1, 1, "ok"), *rows], schema), path, mode="append")
        assert DeltaTable(path).version() == version
        assert _staging_folders(path) == []
    write_delta(spark.createDataFrame([(999, 5, "ok")], schema), path, mode="append")
    assert read_delta(spark, path).count() == 3


def _field(name: str, kind: object, nullable: bool = True, invariant: str | None = None) -> dict[str, object]:
    metadata = {} if invariant is None else {"delta.invariants": json.dumps({"expression": {"expression": invariant}})}
    return {"name": name, "type": kind, "nullable": nullable, "metadata": metadata}


def _table(path: str, *fields: dict[str, object]) -> str:
    """An empty Delta table with this schema (Delta's JSON), as another writer may create it."""
    DeltaTable.create(path, Schema.from_json(json.dumps({"type": "struct", "fields": list(fields)})))
    return path


_NESTED_RULES = (
    _field("id", "long"),
    _field("s", {"type": "struct", "fields": [_field("a", "integer", False), _field("b", "integer", True, "s.b > 0")]}),
    _field("arr", {"type": "array", "elementType": "integer", "containsNull": False}),
    _field(
        "m",
        {
            "type": "map",
            "keyType": "string",
            "valueType": {"type": "struct", "fields": [_field("x", "integer", False)]},
            "valueContainsNull": False,
        },
    ),
)


#: Rows that break one nested rule each, and the message that names it.
_BROKEN: list[tuple[tuple[object, ...], str]] = [
    # outside arrays and maps, as delta-spark checks them: a null struct breaks its NOT NULL field
    ((2, None, None, None), r"NOT NULL constraint s.a \(`s`.`a` IS NOT NULL\) violated by row with values: s=null"),
    ((3, (None, 1), None, None), r"NOT NULL constraint s.a .* s=\{null, 1\}"),
    ((4, (1, 0), None, None), r"invariant s.b \(s.b > 0\) violated by row with values: s=\{1, 0\}"),
    ((5, (1, None), None, None), r"invariant s.b .* s=\{1, null\}"),  # null is not true
    # inside them, the schema's nullability: no null element or value, a value's NOT NULL field set
    ((6, (1, 1), [1, None], None), r"NOT NULL constraint arr.element .* arr=\[1, null\]"),
    ((7, (1, 1), None, {"k": None}), r"NOT NULL constraint m.value .* m=\{k -> null\}"),
    ((8, (1, 1), None, {"k": (None,)}), r"NOT NULL constraint m.value.x .* m=\{k -> \{null\}\}"),
]


def test_nested_not_null_and_invariants_fail_the_write_at_every_depth(spark: SparkSession, tmp_path: Path) -> None:
    """NOT NULL of struct fields, array elements and map values, and invariants of struct fields,
    are checked before the commit, each row that breaks one failing the write and naming it;
    nullable DataFrame columns go into the NOT NULL ones (their rows are what is checked), and
    rows that keep the rules are appended."""
    path = _table(str(tmp_path / "t"), *_NESTED_RULES)
    schema = "id long, s struct<a: int, b: int>, arr array<int>, m map<string, struct<x: int>>"
    for row, message in _BROKEN:
        with pytest.raises(ConstraintViolationError, match=message):
            write_delta(spark.createDataFrame([(1, (1, 1), [1], {"k": (1,)}), row], schema), path, mode="append")
    assert DeltaTable(path).version() == 0
    assert _staging_folders(path) == []
    fine = [(1, (1, 1), [1], {"k": (1,)}), (9, (1, 2), None, None), (10, (5, 5), [], {})]
    write_delta(spark.createDataFrame(fine, schema), path, mode="append")
    assert read_delta(spark, path).count() == 3


def test_a_rule_the_writer_cannot_check_refuses_the_write_before_any_data_moves(
    spark: SparkSession, tmp_path: Path
) -> None:
    """An invariant inside an array (no expression can name an element) is refused by the gate;
    a nested invariant alone turns on the invariants feature of a legacy protocol."""
    element = {"type": "struct", "fields": [_field("v", "integer", True, "v > 0")]}
    path = _table(
        str(tmp_path / "t"),
        _field("id", "long"),
        _field("arr", {"type": "array", "elementType": element, "containsNull": True}),
    )
    rows = spark.createDataFrame([(1, [(1,)])], "id long, arr array<struct<v: int>>")
    with pytest.raises(TableFeatureError, match=r"an invariant on arr.element.v, inside an array or a map") as raised:
        write_delta(rows, path, mode="append")
    assert raised.value.feature == "invariants"
    assert _staging_folders(path) == []
    nested = _table(
        str(tmp_path / "n"), _field("s", {"type": "struct", "fields": [_field("v", "integer", True, "s.v > 0")]})
    )
    assert "invariants" in read_delta_snapshot(locate(nested)).features.writer


def test_a_new_table_delta_rs_would_create_wrongly_is_refused_before_any_data_moves(
    spark: SparkSession, tmp_path: Path
) -> None:
    """deltalake 1.6 commits a broken version 0 for a TIMESTAMP_NTZ inside a map, and leaves
    column mapping out of a table-features protocol: both are refused up front, nothing written."""
    ntz = spark.sql("SELECT map('k', TIMESTAMP_NTZ'2024-01-01 00:00:00') AS m")
    with pytest.raises(TableFeatureError, match=r"column 'm' holds a TIMESTAMP_NTZ inside a map") as raised:
        write_delta(ntz, str(tmp_path / "a"))
    assert raised.value.feature == "timestampNtz"
    mapped = spark.sql("SELECT 1 AS id, TIMESTAMP_NTZ'2024-01-01 00:00:00' AS t")
    options = WriteOptions(properties={"delta.columnMapping.mode": "name"}, partition_by=["part"])
    with pytest.raises(TableFeatureError, match=r"column mapping and other table features") as raised:
        write_delta(mapped, str(tmp_path / "b"), options=options)
    assert raised.value.feature == "columnMapping"
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_new_column_mapped_table_gets_its_files_and_statistics_under_physical_names(
    spark: SparkSession, tmp_path: Path
) -> None:
    """delta-rs names the columns of a new column-mapped table when it creates it: the table is
    created first, and the files, partition folders and statistics use those names."""
    path = str(tmp_path / "t")
    df = spark.range(6).select(
        F.col("id"), (F.col("id") % 2).cast("int").alias("part"), F.struct(F.col("id").alias("v")).alias("s")
    )
    options = WriteOptions(properties={"delta.columnMapping.mode": "name"}, partition_by=["part"])
    if not delta_rs_creates_column_mapping():  # deltalake 1.6.3
        with pytest.raises(TableFeatureError, match="cannot create a table with column mapping"):
            write_delta(df, path, options=options)
        assert list(Path(path).glob("**/*")) == []  # deltalake leaves its empty folder, nothing in it
        return
    write_delta(df, path, options=options)
    assert sorted(read_delta(spark, path).collect()) == sorted(df.collect())
    layout = json.loads(DeltaTable(path).schema().to_json())
    physical = {f["name"]: f["metadata"]["delta.columnMapping.physicalName"] for f in layout["fields"]}
    inner = layout["fields"][2]["type"]["fields"][0]["metadata"]["delta.columnMapping.physicalName"]
    files = list(Path(path).glob("mlt-*/*/*.parquet"))
    assert files
    assert all(f.parent.name.startswith(physical["part"] + "=") for f in files)
    assert set(pq.read_schema(files[0]).names) == {physical["id"], physical["s"]}
    log = (Path(path) / "_delta_log" / "00000000000000000001.json").read_text().splitlines()
    stats = [json.loads(json.loads(line)["add"]["stats"]) for line in log if '"add"' in line]
    assert all(set(st["maxValues"]) == {physical["id"], physical["s"]} for st in stats)
    assert all(set(st["maxValues"][physical["s"]]) == {inner} for st in stats)


def test_generated_columns_are_computed_when_missing_and_checked_when_given(
    spark: SparkSession, zoo: Zoo, tmp_path: Path
) -> None:
    _need(zoo, "generated")
    path = zoo.copy("generated", tmp_path)
    write_delta(spark.createDataFrame([(10,), (None,)], "id bigint"), path, mode="append")
    assert sorted(map(tuple, read_delta(spark, path).collect()), key=str) == sorted(
        [(1, 2), (2, 4), (10, 20), (None, None)], key=str
    )
    with pytest.raises(ConstraintViolationError, match=r"generated column twice .* twice=7"):
        write_delta(spark.createDataFrame([(3, 7)], "id bigint, twice bigint"), path, mode="append")


def test_an_append_only_table_takes_appends_and_refuses_an_overwrite(
    spark: SparkSession, zoo: Zoo, tmp_path: Path
) -> None:
    _need(zoo, "append_only")
    path = zoo.copy("append_only", tmp_path)
    rows = spark.createDataFrame([(3,)], "id bigint")
    with pytest.raises(TableFeatureError, match=r"append-only .*delta.appendOnly") as raised:
        write_delta(rows, path, mode="overwrite")
    assert (raised.value.feature, raised.value.parameter) == ("appendOnly", "mode")
    write_delta(rows, path, mode="append")
    assert read_delta(spark, path).count() == 3


def test_writes_to_a_table_with_deletion_vectors_keep_its_deleted_rows_deleted(
    spark: SparkSession, zoo: Zoo, tmp_path: Path
) -> None:
    """An append leaves the vectors alone; an overwrite removes each file with its vector
    (delta-rs carries it in the remove action), so time travel to older versions stays exact."""
    _need(zoo, "dv")
    path = zoo.copy("dv", tmp_path)
    last = zoo.versions("dv")[-1]
    before = read_delta(spark, path)
    new = spark.createDataFrame([(1_000_000, 1, "new")], "id bigint, p int, name string")
    write_delta(new, path, mode="append")
    assert_same_rows(read_delta(spark, path), before.unionByName(new))
    write_delta(new, path, mode="overwrite")
    assert_same_rows(read_delta(spark, path), new)
    assert_same_rows(read_delta(spark, path, version=last), spark.read.parquet(zoo.expected("dv", last)))


def test_an_append_to_a_change_data_feed_table_reads_as_inserts_in_the_feed(
    spark: SparkSession, zoo: Zoo, tmp_path: Path
) -> None:
    """An append commits add actions only, which the change feed reads as inserts (delta-rs'
    reader here; an overwrite's deletes are checked with delta-spark's, in
    test_delta_spark.py: delta-rs 1.6's feed gets deleted rows of files with vectors wrong)."""
    _need(zoo, "cdf")
    if int(pa.__version__.split(".")[0]) < 16:
        pytest.skip(f"pyarrow {pa.__version__} cannot import delta-rs' change feed (string views)")
    path = zoo.copy("cdf", tmp_path)
    start = DeltaTable(path).version() + 1
    write_delta(spark.createDataFrame([(500,), (501,)], "id bigint"), path, mode="append")
    feed = pa.table(DeltaTable(path).load_cdf(starting_version=start)).to_pylist()
    assert sorted((row["_change_type"], row["id"], row["_commit_version"]) for row in feed) == [
        ("insert", 500, start),
        ("insert", 501, start),
    ]


def test_appends_to_a_table_with_v2_checkpoints_write_no_classic_checkpoint(
    spark: SparkSession, zoo: Zoo, tmp_path: Path
) -> None:
    _need(zoo, "v2_checkpoint")
    path = zoo.copy("v2_checkpoint", tmp_path)
    log = Path(path) / "_delta_log"
    checkpoints = sorted(p.name for p in log.glob("*.checkpoint*"))
    for i in range(3):  # the table asks for a checkpoint every 2 commits
        write_delta(spark.createDataFrame([(1000 + i,)], "id bigint"), path, mode="append")
    assert sorted(p.name for p in log.glob("*.checkpoint*")) == checkpoints
    assert read_delta(spark, path).count() == 48


def test_a_first_write_that_died_after_creating_its_table_is_taken_over_by_the_rerun(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A write creates its table (version 0: codecs, no rows) and then commits its rows; a
    driver that dies in between leaves version 0 alone. A rerun with mode='error' takes it
    over instead of refusing an existing table; a table with rows is still refused."""
    path = str(tmp_path / "ratings")
    rows = spark.range(20).select(F.col("id").alias("userId")).withColumn("userId_mlt", mlt_encode("userId", CODEC))
    DeltaTable.create(  # what spark-mlt's first commit leaves (see _delta_rs._create_table)
        path,
        spark_arrow_schema(rows),
        configuration=codec_properties({"userId": CODEC}),
        raise_if_key_not_exists=False,
        commit_properties=CommitProperties(custom_metadata=dict([CREATE_MARKER])),
    )
    result = write_delta(rows, path, {"userId": CODEC})
    assert (result.version, read_delta(spark, path).count()) == (1, 20)
    with pytest.raises(TableExistsError):
        write_delta(rows, path, {"userId": CODEC})
    other = str(tmp_path / "other")
    DeltaTable.create(other, spark_arrow_schema(rows))  # empty, but not spark-mlt's
    with pytest.raises(TableExistsError):
        write_delta(rows, other, {"userId": CODEC})


# --- spark-mlt's own tables after delta-spark changed them -------------------------------------


def _ids(
    spark: SparkSession, tmp_path: Path, start: int, rows: int, *, column: str = "score", big: bool = False
) -> str:
    source = str(tmp_path / f"ids-{start}-{column}.parquet")
    score = F.lit(5000) if big else (F.col("id") % 997).cast("int")
    spark.range(start, start + rows).select("id", score.alias(column)).write.parquet(source)
    return source


def test_decode_verify_and_inspect_see_exactly_the_rows_left_after_delta_spark_changed_the_table(
    spark: SparkSession, zoo: Zoo
) -> None:
    """After DELETE with deletion vectors (a third of the rows), OPTIMIZE ZORDER BY and a
    column rename under column mapping: every kept id decodes, no deleted row comes back."""
    _need(zoo, "ours_deleted", "ours_optimized", "ours_renamed")
    n = zoo.ours_rows
    kept = n - len(range(0, n, 3))  # DELETE ... WHERE id % 3 = 0
    for name, rows in (("ours_deleted", kept), ("ours_optimized", n), ("ours_renamed", n)):
        report = decode_table(spark, zoo.path(name), DecodeOptions(verify=True))
        assert (report.rows_out, report.mismatches) == (rows, 0), name
        assert inspect_table(zoo.path(name))["rows"] == rows


def test_vacuum_keeps_every_deletion_vector_a_version_needs(spark: SparkSession, zoo: Zoo, tmp_path: Path) -> None:
    """delta-rs' vacuum does not see deletion vector files: spark-mlt's never lists or deletes
    them, even with no retention, and the table reads the same after."""
    _need(zoo, "dv", "ours_deleted")
    for name in ("dv", "ours_deleted"):
        path = zoo.copy(name, tmp_path)
        vectors = sorted(p.name for p in Path(path).rglob("deletion_vector_*.bin"))
        assert vectors
        assert not [f for f in orphan_files(path) if "deletion_vector" in f]
        removed = vacuum(path, retention_hours=0, dry_run=False, allow_short_retention=True)
        assert not [f for f in removed if "deletion_vector" in f]
        assert sorted(p.name for p in Path(path).rglob("deletion_vector_*.bin")) == vectors
        last = zoo.versions(name)[-1]
        assert_same_rows(read_delta(spark, path), spark.read.parquet(zoo.expected(name, last)))


def test_tokenize_appends_to_our_table_after_a_delete_once_per_run_id(
    spark: SparkSession, zoo: Zoo, tmp_path: Path
) -> None:
    _need(zoo, "ours_deleted")
    path = zoo.copy("ours_deleted", tmp_path)
    before = read_delta(spark, path).count()
    source = _ids(spark, tmp_path, zoo.ours_rows, 100)
    options = TokenizeOptions(mode="append", run_id="2026-11-26", input_format="parquet")
    assert tokenize_table(spark, source, path, ["id"], options).rows_out == 100
    assert tokenize_table(spark, source, path, ["id"], options).write.skipped  # type: ignore[union-attr]
    report = decode_table(spark, path, DecodeOptions(verify=True))
    assert (report.rows_out, report.mismatches) == (before + 100, 0)


def test_a_renamed_column_is_refused_by_name_and_appended_under_its_new_one(
    spark: SparkSession, zoo: Zoo, tmp_path: Path
) -> None:
    """delta-spark renamed score to points (column mapping): input with the old name is
    refused as a schema mismatch; input with the new one is written under the physical name."""
    _need(zoo, "ours_renamed")
    path = zoo.copy("ours_renamed", tmp_path)
    options = TokenizeOptions(mode="append", input_format="parquet")
    n = zoo.ours_rows
    with pytest.raises(TableSchemaError, match=r"schema does not match"):
        tokenize_table(spark, _ids(spark, tmp_path, n, 10), path, ["id"], options)
    tokenize_table(spark, _ids(spark, tmp_path, n, 10, column="points"), path, ["id"], options)
    report = decode_table(spark, path, DecodeOptions(verify=True))
    assert (report.rows_out, report.mismatches) == (n + 10, 0)
    assert read_delta(spark, path).where(F.col("id") >= n).agg(F.sum("points")).first()[0] == sum(
        i % 997 for i in range(n, n + 10)
    )


def test_an_append_that_breaks_a_constraint_delta_spark_added_is_refused_and_changes_nothing(
    spark: SparkSession, zoo: Zoo, tmp_path: Path
) -> None:
    _need(zoo, "ours_constrained")
    path = zoo.copy("ours_constrained", tmp_path)
    version, folders = DeltaTable(path).version(), _staging_folders(path)
    options = TokenizeOptions(mode="append", input_format="parquet")
    with pytest.raises(ConstraintViolationError, match=r"score_small \(score < 1000\) .* score=5000"):
        tokenize_table(spark, _ids(spark, tmp_path, zoo.ours_rows, 100, big=True), path, ["id"], options)
    assert DeltaTable(path).version() == version
    assert _staging_folders(path) == folders


def test_tokenize_reads_a_delta_source_with_deleted_rows_and_renamed_columns_exactly(
    spark: SparkSession, zoo: Zoo, tmp_path: Path
) -> None:
    """The tokenize job's input, as a warehouse hands it over: rows deleted with deletion
    vectors stay deleted, a column renamed under column mapping has its values."""
    _need(zoo, "dv", "cm_name")
    for name in ("dv", "cm_name"):
        expected = spark.read.parquet(zoo.expected(name, zoo.versions(name)[-1]))
        output = str(tmp_path / f"{name}_mlt")
        report = tokenize_table(spark, zoo.path(name), output, ["id"], TokenizeOptions(input_format="delta"))
        assert report.rows_out == expected.count()
        assert_same_rows(read_delta(spark, output).select(*expected.columns), expected)


def test_the_reader_names_files_exactly_as_spark_does(spark: SparkSession, tmp_path: Path) -> None:
    """Each row's file (``_metadata.file_path``) is joined to the table of files by the URI
    spark-mlt computes for it: the two must agree for every character a path may hold, and a
    path that looks like a glob pattern is read as the file it names."""
    folder = tmp_path / "p=a b %41 é ü\u00a0"
    folder.mkdir()
    names = ["plain", " !\"#$%&'()*+,-.;<=>?@[]^_`{|}~", "%2520", "日本", "tab\tline"]
    paths = []
    for i, name in enumerate(names):
        path = str(folder / f"{name}-{i}.parquet")
        pq.write_table(pa.table({"i": [i]}), path)
        paths.append(path)
    read = exact_files(spark, StructType([StructField("i", LongType())]), paths)
    got = dict(read.select("i", "_metadata.file_path").collect())  # type: ignore[arg-type]
    assert {i: file_key(path) for i, path in enumerate(paths)} == got


def test_the_zoo_has_every_table_its_delta_can_build(zoo: Zoo) -> None:
    """A table the builder could not build is skipped by the tests that need it, so a mistake in
    the builder would quietly test less: only what the line's Delta lacks may be missing."""
    lacking = {"3": {"widen", "identity", "in_commit_timestamps", "variant"}}.get(zoo.manifest["delta"][0], set())
    assert set(zoo.manifest["skipped"]) == lacking


def test_a_timestamp_partition_is_logged_in_utc_whatever_the_writing_sessions_time_zone(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Spark names a timestamp partition's folder in its session's time zone, which no reader
    elsewhere knows: the log holds the protocol's UTC form (as delta-spark writes it), and
    delta-rs and the jar-free reader read the same instants back."""
    path = str(tmp_path / "t")
    rows = spark.createDataFrame([(1, "2024-01-01 00:00:00"), (2, "2024-06-01 12:30:00.5")], "id long, ts string")
    rows = rows.select("id", F.to_utc_timestamp("ts", "UTC").alias("ts"))  # instants, whatever the session
    with session_conf(spark, {"spark.sql.session.timeZone": "America/New_York"}):
        write_delta(rows, path, options=WriteOptions(partition_by=["ts"], backend="delta-rs"))
    logged = sorted(add.partition_values["ts"] for add in read_delta_snapshot(locate(path)).files.values())
    assert logged == ["2024-01-01T00:00:00.000000Z", "2024-06-01T12:30:00.500000Z"]
    ours = sorted((r.id, r.ts) for r in read_delta(spark, path, backend="delta-rs").collect())
    assert ours == sorted((r.id, r.ts) for r in rows.collect())
    # delta-rs' own engine (its pyarrow dataset fails on a partitioned table under pyarrow 14)
    read = QueryBuilder().register("t", DeltaTable(path)).execute("SELECT ts FROM t ORDER BY id").read_all()
    theirs = pa.table(read).column("ts").to_pylist()
    assert [t.isoformat() for t in theirs] == ["2024-01-01T00:00:00+00:00", "2024-06-01T12:30:00.500000+00:00"]


def test_two_instants_of_the_repeated_hour_of_a_fall_back_stay_two_timestamp_partitions(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Pins the staging write's folder names: in New York 05:30Z and 06:30Z on 2024-11-03 are
    both 01:30 local time, so a folder named in the session's time zone stands for either; the
    staged folders name the instants (epoch microseconds), and each row keeps its own. Before,
    both read back as 05:30Z (or the write failed, when one task wrote both). The folders hold
    the UTC wall clock, which Polars (it takes partition values from the folders) reads as the
    instants: before, it read New York's wall clock as UTC."""
    polars = pytest.importorskip("polars")
    path = str(tmp_path / "t")
    rows = spark.createDataFrame([(1, "2024-11-03 05:30:00"), (2, "2024-11-03 06:30:00.25")], "id long, ts string")
    rows = rows.select("id", F.to_utc_timestamp("ts", "UTC").alias("ts"))
    with session_conf(spark, {"spark.sql.session.timeZone": "America/New_York"}):
        write_delta(rows.coalesce(1), path, options=WriteOptions(partition_by=["ts"], backend="delta-rs"))
    logged = sorted(add.partition_values["ts"] for add in read_delta_snapshot(locate(path)).files.values())
    assert logged == ["2024-11-03T05:30:00.000000Z", "2024-11-03T06:30:00.250000Z"]
    ours = sorted((r.id, r.ts) for r in read_delta(spark, path, backend="delta-rs").collect())
    assert ours == sorted((r.id, r.ts) for r in rows.collect())
    theirs = polars.read_delta(path).sort("id")["ts"].to_list()
    assert [t.isoformat() for t in theirs] == ["2024-11-03T05:30:00+00:00", "2024-11-03T06:30:00.250000+00:00"]
