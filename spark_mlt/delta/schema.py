"""A Delta table's schema as Spark sees it: logical and physical columns, and the rules a
write must keep.

A Delta schema is Spark's own JSON schema format (``StructType.fromJson`` reads it), with
Delta's entries in the fields' metadata:

* column mapping (``delta.columnMapping.mode`` = ``name`` or ``id``): each field, nested ones
  too, has a ``delta.columnMapping.physicalName`` (and an ``id``). The data files store the
  physical names, so renaming or dropping a column only changes the log. A reader reads the
  physical names and renames them back; a writer writes physical names (and, in ``id`` mode,
  Parquet field ids). Partition values in the log are keyed by physical names too (delta-rs
  maps them back to logical names when it lists the files).
* ``delta.generationExpression``: a generated column's SQL expression.
* ``delta.invariants``: a legacy column invariant (``{"expression": {"expression": "x > 0"}}``).
* ``delta.identity.*``: an identity column (only Delta's own writer allocates its values: the
  protocol gate refuses jar-free writes to such tables).

Besides the schema, the table's properties hold CHECK constraints (``delta.constraints.<name>``);
a non-nullable field is a NOT NULL constraint. Delta rejects a row for
which a CHECK constraint is false *or null* (measured with delta-spark 4.4: ``CHECK (y > 0)``
refuses ``y = NULL``), so the checks here do too.

Everything here is read from a snapshot's ``metaData`` once
([`Snapshot.layout`][spark_mlt.delta.snapshot.Snapshot.layout]) and used by the jar-free scan
(`spark_mlt.delta.read.scan`), the statistics (`spark_mlt.delta.stats`) and the writer
(`spark_mlt.storage.backends.delta_rs`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType

from spark_mlt.column.sqltext import identifier
from spark_mlt.delta.config import ColumnMapping, TableConfig

__all__ = [
    "RULE_MARKER",
    "ColumnMapping",
    "SchemaField",
    "TableLayout",
    "TableRule",
    "enforce_rules",
    "layout_of",
    "logical_columns",
    "physical_columns",
    "schema_fields",
    "unenforceable_rules",
]


_PHYSICAL = "delta.columnMapping.physicalName"
_ID = "delta.columnMapping.id"
_GENERATED = "delta.generationExpression"
_INVARIANTS = "delta.invariants"
_CONSTRAINT = "delta.constraints."
#: Spark's key for a Parquet field id in a field's metadata (written when
#: ``spark.sql.parquet.fieldId.write.enabled``, Spark's default).
_FIELD_ID = "parquet.field.id"
#: Starts the message of a broken rule, so the writer tells it from other failures of the job.
RULE_MARKER = "[spark-mlt rule]"


@dataclass(frozen=True)
class TableRule:
    """One rule of a Delta table that a row must keep to be written: a CHECK constraint, a NOT
    NULL column, a legacy invariant, or a generated column's expression (the column must equal
    it). Not a "constraint": Delta's protocol keeps that word for CHECK, and calls NOT NULL and
    invariants column invariants. (`spark_mlt.column.engine.EngineRule` is another concept: a
    rule of the engine policy.)

    Attributes:
        kind: ``"CHECK constraint"``, ``"NOT NULL constraint"``, ``"invariant"`` or
            ``"generated column"``.
        name: the constraint's or column's name.
        expression: a Spark SQL boolean expression over the table's logical columns that must
            be true for the row.
        columns: the columns whose values the error shows.
    """

    kind: str
    name: str
    expression: str
    columns: tuple[str, ...]


@dataclass(frozen=True)
class TableLayout:
    """What a Delta table's metadata says about its columns, in Spark's terms.

    Attributes:
        logical: the table's columns as readers see them (Delta's metadata entries removed).
        physical: the data files' columns: physical names under column mapping (Parquet field
            ids in ``id`` mode); the same as ``logical`` without column mapping. Partition
            columns are in both (they are not stored in the files).
        mapping: the column mapping mode.
        partition_columns: the partition columns (logical names).
        generated: each generated column's SQL expression.
        rules: the rules each written row must keep.
    """

    logical: StructType
    physical: StructType
    mapping: ColumnMapping
    partition_columns: tuple[str, ...]
    generated: Mapping[str, str] = field(default_factory=dict)
    rules: tuple[TableRule, ...] = ()

    @property
    def physical_names(self) -> dict[str, str]:
        """The physical name of each top-level column, by logical name."""
        return {f.name: p.name for f, p in zip(self.logical.fields, self.physical.fields, strict=True)}

    @property
    def data_columns(self) -> list[str]:
        """The logical names of the columns stored in the data files (all but partitions)."""
        return [f.name for f in self.logical.fields if f.name not in self.partition_columns]


def layout_of(
    document: Mapping[str, Any], configuration: Mapping[str, str | None], partition_columns: Sequence[str]
) -> TableLayout:
    """The layout of a table with this schema (Delta's JSON document), configuration (table
    properties) and partition columns."""
    properties = {k: v for k, v in configuration.items() if v is not None}
    mapping = TableConfig.of(properties).column_mapping
    logical = StructType.fromJson(_without_delta_metadata(document))
    physical = StructType.fromJson(_physical_document(document, mapping)) if mapping != "none" else logical
    fields = document.get("fields", [])
    generated = {f["name"]: str(f["metadata"][_GENERATED]) for f in fields if _GENERATED in f.get("metadata", {})}
    names = [f.name for f in logical.fields]
    rules = [  # in delta-spark's order: NOT NULL and invariants, then CHECK constraints
        *_field_rules(document, names),
        *(
            TableRule("CHECK constraint", key[len(_CONSTRAINT) :], expression, _referenced(expression, names))
            for key, expression in sorted(properties.items())
            if key.startswith(_CONSTRAINT)
        ),
        *(
            TableRule(
                "generated column",
                name,
                f"{identifier(name)} <=> ({expression})",
                (name, *_referenced(expression, names)),
            )
            for name, expression in generated.items()
        ),
    ]
    return TableLayout(
        logical=logical,
        physical=physical,
        mapping=mapping,
        partition_columns=tuple(partition_columns),
        generated=generated,
        rules=tuple(rules),
    )


def _without_delta_metadata(node: Any) -> Any:
    """A schema document without Delta's ``delta.*`` field metadata (kept: comments and the like)."""
    if isinstance(node, dict):
        out = {key: _without_delta_metadata(value) for key, value in node.items() if key != "metadata"}
        if "metadata" in node:
            out["metadata"] = {k: v for k, v in node["metadata"].items() if not k.startswith("delta.")}
        return out
    if isinstance(node, list):
        return [_without_delta_metadata(item) for item in node]
    return node


def _physical_document(node: Any, mapping: ColumnMapping) -> Any:
    """The schema document with each field named as the files store it (recursively: structs in
    arrays and maps too); in ``id`` mode each field carries its Parquet field id."""
    if isinstance(node, list):
        return [_physical_document(item, mapping) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _physical_document(value, mapping) for key, value in node.items() if key != "metadata"}
    if "metadata" in node:  # a struct field
        metadata = node["metadata"]
        out["name"] = metadata.get(_PHYSICAL, node["name"])
        out["metadata"] = {_FIELD_ID: int(metadata[_ID])} if mapping == "id" and _ID in metadata else {}
    return out


def _referenced(expression: str, names: Sequence[str]) -> tuple[str, ...]:
    """The columns an expression names (for the error's values; a best effort on the text)."""
    return tuple(n for n in names if re.search(rf"(?<![\w`]){re.escape(n)}(?![\w`])|`{re.escape(n)}`", expression))


@dataclass(frozen=True)
class SchemaField:
    """One field of a Delta schema at any depth, as [`schema_fields`][spark_mlt.delta.schema.schema_fields]
    walks it: a struct's field, or an array's element, a map's key or value.

    Attributes:
        path: logical names from the top-level column down; ``element``, ``key`` and ``value``
            name the steps into an array or a map.
        kind: the field's type (Delta's JSON: a type name, or a struct, array or map document).
        nullable: whether the field may be null (an element: ``containsNull``; a value:
            ``valueContainsNull``; a key never is).
        metadata: the field's metadata (none for elements, keys and values).
        ref: a Spark SQL expression of the field's value where its condition is evaluated: the
            column's path outside arrays and maps, a lambda variable's path inside them.
        parent: the SQL expression of the struct that holds the field inside an array or a map
            (a null struct there leaves its fields unchecked, as Spark's nullability reads), else None.
        within: wraps a condition on ``ref`` into a condition on the row (``forall`` over the
            arrays and maps around the field).
        in_collection: whether an array or a map is around the field.
        step: how the field is reached: ``"field"`` of a struct, or an array's ``"element"``, a
            map's ``"key"`` or ``"value"``.
    """

    path: tuple[str, ...]
    kind: Any
    nullable: bool
    metadata: Mapping[str, Any]
    ref: str
    parent: str | None
    within: Callable[[str], str]
    in_collection: bool
    step: Literal["field", "element", "key", "value"] = "field"


def schema_fields(document: Mapping[str, Any]) -> Iterator[SchemaField]:
    """Every field of a Delta schema document, depth first: struct fields, array elements, map
    keys and values. The one walk of a schema that the protocol gate (`features`) and the rules a
    write keeps both read.

    Example::

        [".".join(f.path) for f in schema_fields({"type": "struct", "fields": [...]})]
    """
    yield from _struct_fields(document, None, 0)


def _struct_fields(struct: Mapping[str, Any], outer: SchemaField | None, depth: int) -> Iterator[SchemaField]:
    """The fields of a struct: a top-level one (``outer`` None) or ``outer``'s type."""
    for f in struct.get("fields", []):
        name = str(f["name"])
        nullable, metadata = bool(f.get("nullable", True)), f.get("metadata", {})
        if outer is None:
            node = SchemaField((name,), f["type"], nullable, metadata, identifier(name), None, _top, False)
        else:
            parent = outer.ref if outer.in_collection else None
            ref = f"{outer.ref}.{identifier(name)}"
            node = SchemaField(
                (*outer.path, name), f["type"], nullable, metadata, ref, parent, outer.within, outer.in_collection
            )
        yield node
        yield from _inner_fields(node, depth)


def _top(condition: str) -> str:
    return condition


def _inner_fields(field: SchemaField, depth: int) -> Iterator[SchemaField]:
    """The fields inside ``field``'s type: a struct's fields, an array's element, a map's key and value."""
    kind = field.kind
    if not isinstance(kind, Mapping):
        return
    if kind.get("type") == "struct":
        yield from _struct_fields(kind, field, depth)
        return
    variable = f"__mlt_x{depth}"
    steps: list[tuple[Literal["element", "key", "value"], Any, bool, str]] = []
    if kind.get("type") == "array":
        steps.append(("element", kind["elementType"], bool(kind.get("containsNull", True)), field.ref))
    elif kind.get("type") == "map":
        steps.append(("key", kind["keyType"], False, f"map_keys({field.ref})"))
        steps.append(
            ("value", kind["valueType"], bool(kind.get("valueContainsNull", True)), f"map_values({field.ref})")
        )
    for step, inner, nullable, values in steps:
        outer, ref = field.within, field.ref

        def within(condition: str, outer: Callable[[str], str] = outer, ref: str = ref, values: str = values) -> str:
            return outer(f"({ref} IS NULL OR forall({values}, {variable} -> {condition}))")

        element = SchemaField((*field.path, step), inner, nullable, {}, variable, None, within, True, step)
        yield element
        yield from _inner_fields(element, depth + 1)


def _field_rules(document: Mapping[str, Any], names: Sequence[str]) -> list[TableRule]:
    """NOT NULL of every non-nullable field at any depth and the invariants of struct fields, as
    delta-spark enforces them: outside arrays and maps a nested field is checked whatever its
    parents are (delta-spark refuses a null struct whose field is NOT NULL, and an invariant that
    a null struct makes null); inside them, the schema's nullability holds (a null element, key or
    value only where the schema allows one, a non-null struct's NOT NULL fields set). Invariants
    inside arrays and maps cannot be checked: the protocol gate refuses such tables
    ([`unenforceable_rules`][spark_mlt.delta.schema.unenforceable_rules])."""
    rules = []
    for node in schema_fields(document):
        shown = (node.path[0],)
        if not node.nullable and node.step != "key":  # Spark never holds a null map key
            condition = f"{node.ref} IS NOT NULL"
            if node.parent is not None:
                condition = f"({node.parent} IS NULL OR {condition})"
            rules.append(TableRule("NOT NULL constraint", ".".join(node.path), node.within(condition), shown))
        text = node.metadata.get(_INVARIANTS)
        if text is not None and not node.in_collection:
            invariant = json.loads(text) if isinstance(text, str) else text
            expression = str(invariant["expression"]["expression"])
            rules.append(TableRule("invariant", ".".join(node.path), expression, _referenced(expression, names)))
    return rules


def unenforceable_rules(document: Mapping[str, Any]) -> list[str]:
    """The rules of a schema a jar-free write cannot keep, described (empty: none): an invariant
    or a generated column inside an array or a map, and a generated nested field."""
    found = []
    for node in schema_fields(document):
        where = ".".join(node.path)
        if _INVARIANTS in node.metadata and node.in_collection:
            found.append(f"an invariant on {where}, inside an array or a map")
        if _GENERATED in node.metadata and len(node.path) > 1:
            found.append(f"a generated nested field {where}")
    return found


def _cast_target(kind: DataType, *, metadata: bool = False) -> DataType:
    """``kind`` as a cast target: every nested field, element and value nullable (Spark does not
    cast a nullable field into a NOT NULL one; the table's rules check those rows), and without
    field metadata unless ``metadata`` (the Parquet field ids of ``id`` column mapping)."""
    if isinstance(kind, StructType):
        return StructType(
            [
                StructField(f.name, _cast_target(f.dataType, metadata=metadata), True, f.metadata if metadata else None)
                for f in kind.fields
            ]
        )
    if isinstance(kind, ArrayType):
        return ArrayType(_cast_target(kind.elementType, metadata=metadata), True)
    if isinstance(kind, MapType):
        return MapType(
            _cast_target(kind.keyType, metadata=metadata), _cast_target(kind.valueType, metadata=metadata), True
        )
    return kind


def _nested_names_differ(a: DataType, b: DataType) -> bool:
    return _cast_target(a) != _cast_target(b)


def logical_columns(layout: TableLayout, names: Sequence[str]) -> list[Column]:
    """Columns that turn the physical columns ``names`` (logical names) of a DataFrame read with
    ``layout.physical`` into the logical ones: renamed, and nested fields renamed by a cast
    (Spark casts structs field by position)."""
    physical = {f.name: p for f, p in zip(layout.logical.fields, layout.physical.fields, strict=True)}
    columns = []
    for name in names:
        source = physical[name]
        logical = layout.logical[name].dataType
        column = F.col(identifier(source.name))
        if _nested_names_differ(source.dataType, logical):
            column = column.cast(_cast_target(logical))
        columns.append(column.alias(name))
    return columns


def physical_columns(layout: TableLayout, df: DataFrame) -> DataFrame:
    """``df`` (the table's logical columns) with its columns as the files store them: physical
    names (and field ids in ``id`` mode) under column mapping; ``df`` itself otherwise."""
    if layout.mapping == "none":
        return df
    columns = []
    for logical, f in zip(layout.logical.fields, layout.physical.fields, strict=True):
        column = F.col(identifier(logical.name))
        if _nested_names_differ(f.dataType, logical.dataType):
            column = column.cast(_cast_target(f.dataType, metadata=True))
        columns.append(column.alias(f.name, metadata=f.metadata) if f.metadata else column.alias(f.name))
    return df.select(*columns)


def enforce_rules(df: DataFrame, layout: TableLayout) -> DataFrame:
    """``df`` with the table's generated columns it lacks computed, in the table's column order, and
    every rule checked row by row: the first row that breaks one fails the query with
    `RULE_MARKER`, the rule and the row's values (so a write
    job fails before it commits).

    Example::

        rows = enforce_rules(rows, snapshot.layout)
    """
    for name, expression in layout.generated.items():
        if name not in df.columns:
            df = df.withColumn(name, F.expr(expression).cast(layout.logical[name].dataType))
    if set(df.columns) == set(layout.logical.names):
        df = df.select(*(identifier(name) for name in layout.logical.names))
    if not layout.rules:
        return df
    keep = F.lit(True)
    for rule in layout.rules:
        values = [
            F.concat(F.lit(f"{name}="), F.coalesce(F.col(identifier(name)).cast("string"), F.lit("null")))
            for name in rule.columns
        ]
        message = F.concat(
            F.lit(f"{RULE_MARKER} {rule.kind} {rule.name} ({rule.expression}) violated by row with values: "),
            F.concat_ws(", ", *values) if values else F.lit("(none)"),
        )
        broken = ~F.coalesce(F.expr(rule.expression), F.lit(False))
        keep = keep & F.when(broken, F.raise_error(message)).otherwise(F.lit(True))
    return df.where(keep)
