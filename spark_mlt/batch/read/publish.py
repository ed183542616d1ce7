"""Decode from any SQL session: a tokenized table's codecs as persistent catalog objects.

[`publish_table`][spark_mlt.batch.read.publish.publish_table] puts into the session's catalog, in one
schema, SQL that needs nothing of spark-mlt to run:

* per token column ``c_mlt``, ``<prefix>_decode_<c>(tokens)`` (BIGINT) and
  ``<prefix>_encode_<c>(id STRING)`` (the column's type): SQL-bodied functions of the column's codec,
  the native engine's expressions (`spark_mlt.column.native`), on the Spark lines that have
  them (4.0 and later);
* ``<prefix>_decoded``: a view of the table with each token column's decoded value in its
  place and the tokens beside it, a string key read back through its vocabulary. The decode is
  written into the view itself, so it needs no function and runs on every line.

``<prefix>`` is the table's name unless given; names are lower case, ``[a-z0-9_]``.

Each object says where it came from: a function's ``COMMENT`` and a view's ``TBLPROPERTIES``
hold the table's location and id, the column, the codec's fingerprint, the table version it was
made for, and a digest of its definition. A run compares digests: an object whose definition is
current is kept (re-running after an append changes nothing), one spark-mlt made for the same
table and column is replaced (a re-sized codec, a changed schema), and anything else of that name
(made by hand, or by spark-mlt for another table) stops the run before it creates anything.
Nothing is ever dropped.

The view reads the table through Delta (``delta.`<location>``` or the table's catalog name), so
the session that creates it, and every session that reads it, needs a Delta reader (a SQL
warehouse has one; here, delta-spark's jars). ``print_only`` returns the statements instead, for
a catalog the user runs them in (Unity Catalog, a metastore shared by clusters): the same text
a run executes.

Example::

    report = publish_table(spark, "out/orders_mlt", PublishOptions(schema="analytics"))
    spark.sql("SELECT analytics.orders_mlt_decode_customer_id(customer_id_mlt) FROM ...")
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from spark_mlt import __version__
from spark_mlt.batch.read.options import PublishOptions
from spark_mlt.capabilities import Capabilities
from spark_mlt.codec import MLTCodec
from spark_mlt.column import sqltext as sql
from spark_mlt.column.builders import decode_expr
from spark_mlt.column.layouts import LAYOUT, SQL_LAYOUTS, Layout, layout_of
from spark_mlt.column.native import ENCODE_PARAMETER, function_bodies
from spark_mlt.delta.fs import spark_uri
from spark_mlt.errors import CatalogObjectError, MissingCodecError, MLTError, OptionError
from spark_mlt.options import TOKEN_SUFFIX
from spark_mlt.storage import read_snapshot, vocabulary_paths
from spark_mlt.storage.catalog import is_table_name
from spark_mlt.storage.table import TableSnapshot

__all__ = [
    "CatalogObject",
    "CatalogObjectError",
    "PublishReport",
    "catalog_objects",
    "function_parts",
    "publish_statements",
    "publish_table",
]

#: What a function's comment starts with; the rest is its record (JSON).
COMMENT_MARK = "spark-mlt "
#: The view property of each entry of its record.
VIEW_PROPERTY = "spark_mlt."

#: What Spark's catalog stores of a SQL function: its definition as JSON, split into at most
#: 1000 properties of 4000 characters; more fails with ROUTINE_PROPERTY_TOO_LARGE ("routine
#: properties are too large"), measured on Spark 4.3: a body of 3,996,401 characters fits.
ROUTINE_CHARS = 1000 * 4000
#: What the definition holds beside the body and comment (names, types, the session's SQL
#: configs): about 3,600 characters measured; more is kept free.
_ROUTINE_OTHER = 16_000

Kind = Literal["function", "view"]
Role = Literal["decode", "encode", "view"]
Outcome = Literal["created", "replaced", "kept", "printed"]


@dataclass(frozen=True)
class CatalogObject:
    """One function or view, as its statement creates it.

    Attributes:
        kind: ``function`` or ``view``.
        name: its name, qualified by the schema.
        role: ``decode``, ``encode`` or ``view``.
        column: the id column of a function (None for the view).
        ddl: the statement that creates (or replaces) it.
        body: its definition as the catalog stores it (the text after ``RETURN`` or ``AS``).
        record: what it records of its origin (``table``, ``table_id``, ``column``, ``codec``
            or ``codecs``, ``version``, ``schema``, ``prefix``, ``digest``, ``spark_mlt``).
    """

    kind: Kind
    name: str
    role: Role
    column: str | None
    ddl: str
    body: str
    record: dict[str, Any]


@dataclass(frozen=True)
class PublishReport:
    """What a run did: each object's name and outcome, and the statements it ran (or printed)."""

    table: str
    version: int
    objects: Mapping[str, Outcome] = field(default_factory=dict)
    statements: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "version": self.version,
            "objects": dict(self.objects),
        }


def _plain(name: str) -> str:
    """``name`` as a catalog name part: lower case (a Hive metastore folds case), ``[a-z0-9_]``."""
    return re.sub(r"[^a-z0-9_]", "_", name.lower())


def _table_name(input: str, location: str) -> str:
    """The objects' default prefix: the table's name in its catalog, else its folder's name."""
    last = input.rsplit(".", 1)[-1].strip("`") if is_table_name(input) else location.rstrip("/").rsplit("/", 1)[-1]
    name = _plain(last) or "table"
    return name if re.match(r"[a-z_]", name) else f"t_{name}"


def _table_reference(input: str, location: str) -> str:
    """How SQL names the table: its catalog name, else Delta's path form."""
    if is_table_name(input):
        return input
    return f"delta.{sql.identifier(spark_uri(location))}"


def _qualified(schema: str, name: str) -> str:
    return ".".join(sql.identifier(part) for part in [*schema.split("."), name])


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _layouts(schema: pa.Schema, codecs: Mapping[str, MLTCodec]) -> dict[str, Layout]:
    """Each codec column's token layout, from the table's Arrow schema (no session needed)."""
    spark_schema: StructType = from_arrow_schema(schema)
    found: dict[str, Layout] = {}
    for column in codecs:
        name = f"{column}{TOKEN_SUFFIX}"
        if name not in spark_schema.names:
            raise MissingCodecError(f"the table has a codec for {column!r} but no {name} column")
        layout = layout_of(spark_schema[name].dataType)
        if layout not in SQL_LAYOUTS:
            raise MLTError(
                f"column {name!r} holds {spark_schema[name].dataType.simpleString()} tokens; catalog functions "
                f"take the layouts the jobs store: {', '.join(SQL_LAYOUTS)}"
            )
        found[column] = layout
    return found


def publish_statements(
    input: str, options: PublishOptions, *, snapshot: TableSnapshot | None = None
) -> list[CatalogObject]:
    """The functions and view of the tokenized table at ``input``: what
    [`publish_table`][spark_mlt.batch.read.publish.publish_table] creates, without a session.

    Raises:
        MissingTableError: no Delta table at ``input``.
        MissingCodecError: the table stores no codec, or no token column for one.
        CatalogObjectError: two columns' objects would have one name.

    Example::

        for item in publish_statements("out/orders_mlt", PublishOptions(schema="analytics")):
            print(item.ddl + ";")
    """
    snap = snapshot or read_snapshot(input, storage_options=options.storage_options)
    if not snap.codecs:
        raise MissingCodecError(f"table {input} stores no codec (no mlt.codec.* property): nothing to publish")
    layouts = _layouts(snap.schema, snap.codecs)
    prefix = _plain(options.prefix) if options.prefix else _table_name(input, snap.path)
    origin = {
        "table": spark_uri(snap.path),
        "table_id": snap.table_id,
        "version": snap.version,
        "schema": options.schema,
        "prefix": prefix,
        "spark_mlt": __version__,
    }
    items: list[CatalogObject] = []
    if options.functions:
        for column, codec in snap.codecs.items():
            layout = LAYOUT[layouts[column]]
            items.extend(_functions(options.schema, prefix, column=column, codec=codec, layout=layout, origin=origin))
    if options.view:
        vocabularies = vocabulary_paths(snap.properties, location=snap.path)
        decoders = {item.column: item.name for item in items if item.role == "decode" and item.column}
        body = _view_body(input, snap, layouts=layouts, vocabularies=vocabularies, decoders=decoders)
        items.append(_view(_qualified(options.schema, f"{prefix}_decoded"), snap, body, bool(decoders), origin))
    names = [item.name for item in items]
    clashes = sorted({name for name in names if names.count(name) > 1})
    if clashes:
        raise CatalogObjectError(
            f"the columns of {input} give two objects one name ({', '.join(clashes)}): names are lower case "
            "[a-z0-9_]; publish the columns under different prefixes"
        )
    return items


def _functions(
    schema: str, prefix: str, *, column: str, codec: MLTCodec, layout: Any, origin: Mapping[str, Any]
) -> list[CatalogObject]:
    names = f"{prefix}_encode_{_plain(column)}", f"{prefix}_decode_{_plain(column)}"
    encode_body, decode_body = function_bodies(codec, names, layout, "error")
    tokens = layout.spark_type(codec).upper()
    items = []
    roles: tuple[tuple[Role, str, str, str, str], ...] = (
        ("decode", names[1], f"tokens {tokens}", "BIGINT", decode_body),
        ("encode", names[0], ENCODE_PARAMETER, tokens, encode_body),
    )
    for role, name, signature, returns, body in roles:
        qualified = _qualified(schema, name)
        definition = f"{qualified}({signature}) RETURNS {returns}"
        record = {
            **origin,
            "column": column,
            "role": role,
            "codec": codec.fingerprint,
            "digest": _digest(f"{definition} RETURN {body}"),
        }
        comment = COMMENT_MARK + json.dumps(record, sort_keys=True)
        ddl = f"CREATE OR REPLACE FUNCTION {definition} COMMENT {sql.string(comment)} RETURN {body}"
        items.append(CatalogObject("function", qualified, role, column, ddl, body, record))
    return items


def _view_body(
    input: str,
    snap: TableSnapshot,
    *,
    layouts: Mapping[str, Layout],
    vocabularies: Mapping[str, str],
    decoders: Mapping[str, str],
) -> str:
    """The view's query: each token column decoded by the decode function published with it (a
    short text), or by its expression written in (where no function is: Spark 3.5), and joined
    to its vocabulary where it has one."""
    names = list(snap.schema.names)
    taken = {name.lower() for name in names}  # Spark's names are case-insensitive

    def unique(wanted: str) -> str:
        name, count = wanted, 1
        while name.lower() in taken:
            count += 1
            name = f"{wanted}_{count}"
        taken.add(name.lower())
        return name

    tokens_of = {f"{column}{TOKEN_SUFFIX}": column for column in snap.codecs}
    ids: list[str] = []  # the inner select: every column, and each token column's id
    shown: list[str] = []
    joins: list[str] = []
    for name in names:
        column = tokens_of.get(name)
        if column is None:
            shown.append(f"t.{sql.identifier(name)}")
            continue
        if column in decoders:
            decoded = f"{decoders[column]}({sql.identifier(name)})"
        else:
            layout = LAYOUT[layouts[column]]
            decoded = decode_expr(
                sql.identifier(name), snap.codecs[column], layout=layout, handle_invalid="error", sql_name=column
            )
        alias = unique(column if column.lower() not in taken else f"{column}_decoded")
        id_column = unique(f"__mlt_id_{len(ids)}")
        ids.append(f"{decoded} AS {sql.identifier(id_column)}")
        vocabulary = vocabularies.get(column)
        if vocabulary is None:
            shown.append(f"t.{sql.identifier(id_column)} AS {sql.identifier(alias)}")
        else:
            v = f"v{len(joins)}"
            reference = vocabulary if is_table_name(vocabulary) else f"delta.{sql.identifier(spark_uri(vocabulary))}"
            joins.append(f"LEFT JOIN {reference} {v} ON {v}.`id` = t.{sql.identifier(id_column)}")
            shown.append(f"{v}.`key` AS {sql.identifier(alias)}")
        shown.append(f"t.{sql.identifier(name)}")
    inner = ", ".join(["*", *ids])
    body = f"SELECT {', '.join(shown)} FROM (SELECT {inner} FROM {_table_reference(input, snap.path)}) t"
    return " ".join([body, *joins])


def _view(qualified: str, snap: TableSnapshot, body: str, functions: bool, origin: Mapping[str, Any]) -> CatalogObject:
    """The view ``qualified`` of ``body`` (`_view_body`), recording ``origin``, whether it calls
    published ``functions``, and the codecs it decodes."""
    codecs = json.dumps({column: codec.fingerprint for column, codec in sorted(snap.codecs.items())})
    record = {
        **origin,
        "role": "view",
        "functions": functions,
        "codecs": codecs,
        "digest": _digest(f"{qualified} {codecs} AS {body}"),  # the codecs: a re-size renews its record
    }
    properties = ", ".join(
        f"{sql.string(VIEW_PROPERTY + key)} = {sql.string(str(value))}" for key, value in sorted(record.items())
    )
    comment = f"spark-mlt: {snap.path} decoded (version {snap.version})"
    ddl = f"CREATE OR REPLACE VIEW {qualified} COMMENT {sql.string(comment)} TBLPROPERTIES ({properties}) AS {body}"
    return CatalogObject("view", qualified, "view", None, ddl, body, record)


@dataclass(frozen=True)
class _Found:
    """An existing object of a name: what it records (``{}``: nothing of spark-mlt's) and its
    definition as the catalog stores it."""

    record: dict[str, Any]
    body: str | None


def _function_found(spark: SparkSession, name: str) -> _Found | None:
    if not _function_exists(spark, name):
        return None
    comment, body = function_parts(str(row[0]) for row in spark.sql(f"DESCRIBE FUNCTION EXTENDED {name}").collect())
    return _Found(_parse_record(comment), body)


def _parse_record(comment: str | None) -> dict[str, Any]:
    if comment is None or not comment.startswith(COMMENT_MARK):
        return {}
    try:
        record = json.loads(comment[len(COMMENT_MARK) :])
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def function_parts(described: Iterable[str]) -> tuple[str | None, str | None]:
    """A SQL function's comment and body in ``DESCRIBE FUNCTION EXTENDED``'s lines: its
    ``Comment:`` and ``Body:`` lines (Spark 4.2 and later), or the ``sqlFunction.comment`` and
    ``sqlFunction.expression`` of the JSON after ``Usage:`` (4.0, 4.1).

    Example::

        >>> function_parts(["Function: a.f", "Comment:       spark-mlt {}", "Body:          x * 2"])
        ('spark-mlt {}', 'x * 2')
    """
    comment = body = None
    for text in described:
        if text.startswith("Comment:"):
            comment = text.split(":", 1)[1].strip()
        elif text.startswith("Body:"):
            body = text.split(":", 1)[1].strip()
        elif text.startswith("Usage:"):
            try:
                usage = json.loads(text.split(":", 1)[1])
            except ValueError:
                continue
            if isinstance(usage, dict):
                comment = usage.get("sqlFunction.comment", comment)
                body = usage.get("sqlFunction.expression", body)
    return comment, body


def _function_exists(spark: SparkSession, name: str) -> bool:
    return bool(spark.catalog.functionExists(name.replace("`", "")))


def _view_found(spark: SparkSession, name: str) -> _Found | None:
    """The table or view ``name``: None where there is none; a table, or a view spark-mlt did
    not make, records nothing."""
    if not spark.catalog.tableExists(name.replace("`", "")):
        return None
    described = {str(row[0]).strip(): str(row[1]) for row in spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()}
    if described.get("Type", "").strip().upper() != "VIEW":
        return _Found({}, None)
    body = described.get("View Original Text") or described.get("View Text")
    properties = {str(row[0]): str(row[1]) for row in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()}
    record: dict[str, Any] = {
        key[len(VIEW_PROPERTY) :]: value for key, value in properties.items() if key.startswith(VIEW_PROPERTY)
    }
    return _Found(record if "digest" in record else {}, body)


def _existing(spark: SparkSession, item: CatalogObject) -> _Found | None:
    return _function_found(spark, item.name) if item.kind == "function" else _view_found(spark, item.name)


def _current(item: CatalogObject, found: _Found) -> bool:
    """Whether ``found`` is ``item`` as a run would create it: the same recorded digest, and the
    same definition in the catalog (an ``ALTER VIEW`` keeps the properties)."""
    return found.record.get("digest") == item.record["digest"] and found.body == item.body


def _check_owner(item: CatalogObject, found: Mapping[str, Any]) -> None:
    """Refuses to replace an object that records ``found`` unless spark-mlt made it for the
    same table (its location, as Spark is given it) and column."""
    if not found:
        raise CatalogObjectError(
            f"{item.kind} {item.name} exists and was not made by spark-mlt: nothing was created; "
            "pass another prefix or schema (spark-mlt replaces only what it made)"
        )
    same = found.get("table") == item.record["table"] and found.get("role") == item.role
    if item.kind == "function":
        same = same and found.get("column") == item.column
    if not same:
        raise CatalogObjectError(
            f"{item.kind} {item.name} was made by spark-mlt for {found.get('table')!r} "
            f"({found.get('role')} of column {found.get('column')!r}), not for this table's {item.role}"
            f"{f' of column {item.column!r}' if item.column else ''}: nothing was created; pass another prefix"
        )


def _check_sizes(items: Sequence[CatalogObject], codecs: Mapping[str, MLTCodec]) -> None:
    """Refuses, before anything is created, a function whose definition Spark's catalog cannot
    store (`ROUTINE_CHARS`): long codecs' lookup tables make bodies of megabytes."""
    for item in items:
        if item.kind != "function" or item.column is None:
            continue
        comment = COMMENT_MARK + json.dumps(item.record, sort_keys=True)
        size = len(json.dumps(item.body)) + len(json.dumps(comment)) + _ROUTINE_OTHER
        if size > ROUTINE_CHARS:
            codec = codecs[item.column]
            raise CatalogObjectError(
                f"the {item.role} function of column {item.column!r} (codec p={codec.p}, n={codec.n}, "
                f"{codec.fingerprint[:12]}) has a body of {len(item.body):,} characters; Spark's catalog stores a "
                f"SQL function's definition in at most {ROUTINE_CHARS:,} characters (ROUTINE_PROPERTY_TOO_LARGE): "
                "nothing was created; publish the view alone (functions=False), or tokenize the column with "
                "fewer tokens (a smaller n)"
            )


def publish_table(spark: SparkSession | None, input: str, options: PublishOptions) -> PublishReport:
    """Create, in the session's catalog, the decode and encode functions of each token column of
    the tokenized table at ``input`` and a view of it with the ids decoded (the module's doc).

    Every name and size is checked before anything is created: an object spark-mlt did not make
    for this table, or a function larger than Spark's catalog stores, stops the run. With
    ``options.print_only`` nothing runs (``spark`` may be None) and the report's statements are
    the DDL.

    Raises:
        OptionError: the functions on a Spark line without SQL functions (before 4.0), or the
            view in a session without a Delta reader.
        CatalogObjectError: an object of one of the names is not one spark-mlt made for this
            table and column, or a function is larger than Spark's catalog stores.
        MissingTableError: no Delta table at ``input``.

    Example::

        report = publish_table(spark, "out/orders_mlt", PublishOptions(schema="analytics"))
        report.objects  # {"`analytics`.`orders_mlt_decode_customer_id`": "created", ...}
    """
    snap = read_snapshot(input, storage_options=options.storage_options)
    if options.print_only:
        items = publish_statements(input, options, snapshot=snap)
        printed: dict[str, Outcome] = {item.name: "printed" for item in items}
        return PublishReport(snap.path, snap.version, printed, tuple(item.ddl for item in items))
    if spark is None:
        raise MLTError("a session is needed to create the catalog objects (or print_only=True)", parameter="spark")
    caps = Capabilities.of(spark)
    if options.functions and not caps.sql_functions:
        raise OptionError(
            f"Spark {caps.spark_version} has no SQL functions (they need Spark 4.0): publish the view alone "
            "(functions=False), or print the DDL (print_only=True) for a catalog that has them",
            parameter="functions",
        )
    if options.view and not caps.delta_jars:
        raise OptionError(
            "the view reads the table through Delta, and this session has no Delta reader (delta-spark's "
            "jars): run with them, publish the functions alone (view=False), or print the DDL "
            "(print_only=True) and run it where Delta is",
            parameter="view",
        )
    if str(spark.conf.get("spark.sql.parser.escapedStringLiterals", "false")).lower() == "true":
        raise OptionError(
            "the session reads string literals raw (spark.sql.parser.escapedStringLiterals=true), so the objects' "
            "records would not read back: run with it off",
            parameter="spark",
        )
    namespace = options.schema
    if not spark.catalog.databaseExists(namespace):
        raise OptionError(
            f"schema {namespace!r} does not exist in the session's catalog: create it (CREATE SCHEMA {namespace}) "
            "or pass another schema",
            parameter="schema",
        )
    items = publish_statements(input, options, snapshot=snap)
    _check_sizes(items, snap.codecs)
    plan: list[tuple[CatalogObject, Outcome]] = []
    for item in items:  # every name checked before anything is created
        found = _existing(spark, item)
        if found is None:
            plan.append((item, "created"))
            continue
        _check_owner(item, found.record)
        plan.append((item, "kept" if _current(item, found) else "replaced"))
    ran = []
    for item, outcome in plan:
        if outcome != "kept":
            spark.sql(item.ddl)
            ran.append(item.ddl)
    return PublishReport(snap.path, snap.version, {item.name: outcome for item, outcome in plan}, tuple(ran))


def catalog_objects(
    spark: SparkSession, input: str, schema: str, *, storage_options: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """The functions and views in ``schema`` that spark-mlt made for the table at ``input``:
    each one's name, kind, role, column, the table version it was made for, and whether it is
    current (its definition is the one a run would create now: False after a re-size until the
    next run).

    Raises:
        OptionError: no such schema.

    Example::

        catalog_objects(spark, "out/orders_mlt", "analytics")
        # [{"name": "analytics.orders_mlt_decode_customer_id", "kind": "function", "current": True, ...}]
    """
    if not spark.catalog.databaseExists(schema):
        raise OptionError(f"schema {schema!r} does not exist in the session's catalog", parameter="schema")
    snap = read_snapshot(input, storage_options=storage_options)
    table = spark_uri(snap.path)
    found: list[dict[str, Any]] = []
    parts = schema.split(".")
    candidates: list[tuple[str, str, _Found | None]] = []
    for row in spark.sql(f"SHOW USER FUNCTIONS IN {_qualified_schema(parts)}").collect():
        name = str(row[0])
        candidates.append((name, "function", _function_found(spark, _quote(name))))
    for row in spark.sql(f"SHOW VIEWS IN {_qualified_schema(parts)}").collect():
        if not row["isTemporary"]:
            name = f"{schema}.{row['viewName']}"
            candidates.append((name, "view", _view_found(spark, _quote(name))))
    for name, kind, existing in candidates:
        if existing is None or existing.record.get("table") != table:
            continue
        record = existing.record
        found.append(
            {
                "name": name,
                "kind": kind,
                "role": record.get("role"),
                "column": record.get("column"),
                "version": int(record["version"]) if str(record.get("version", "")).isdigit() else None,
                "current": _is_current(input, snap, existing),
            }
        )
    return sorted(found, key=lambda entry: entry["name"])


def _is_current(input: str, snap: TableSnapshot, existing: _Found) -> bool:
    """Whether an object is what a run with the options it records would create now."""
    record = existing.record
    view_calls = str(record.get("functions", "True")) == "True"
    try:
        options = PublishOptions(
            schema=str(record.get("schema")),
            prefix=str(record.get("prefix")),
            functions=record.get("role") != "view" or view_calls,
            view=record.get("role") == "view",
        )
        items = publish_statements(input, options, snapshot=snap)
    except MLTError:
        return False
    for item in items:
        if item.role == record.get("role") and item.column == record.get("column"):
            return _current(item, existing)
    return False


def _qualified_schema(parts: Sequence[str]) -> str:
    return ".".join(sql.identifier(part) for part in parts)


def _quote(name: str) -> str:
    return ".".join(sql.identifier(part) for part in name.split("."))
