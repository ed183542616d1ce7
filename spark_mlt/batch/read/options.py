"""The options of the read-back commands: decode, inspect, find, vacuum and publish.

Built from the job framework's helpers ([`spark_mlt.batch.job.options`][spark_mlt.batch.job.options]);
``spark-mlt`` derives the commands' flags from them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

from spark_mlt.batch.job.options import (
    ENGINE_HELP,
    RetentionOptions,
    WriteMode,
    check_flag,
    column_names,
    hint,
    quarantine_field,
    storage_field,
)
from spark_mlt.errors import OptionError
from spark_mlt.options import ENGINES, Engine, check_choice
from spark_mlt.storage import StorageOptions, check_mode

__all__ = [
    "DECODE_FORMATS",
    "DecodeFormat",
    "DecodeOptions",
    "FindOptions",
    "InspectOptions",
    "PublishOptions",
    "VacuumOptions",
]

DecodeFormat = Literal["delta", "parquet"]
DECODE_FORMATS: tuple[DecodeFormat, ...] = get_args(DecodeFormat)


@dataclass(frozen=True, kw_only=True)
class DecodeOptions:
    """Options of [`decode_table`][spark_mlt.batch.read.decode.decode_table].

    Example::

        DecodeOptions(verify=True)
    """

    output: str | None = field(default=None, metadata=hint("where to write the decoded table (needed unless verify)"))
    output_format: DecodeFormat = field(default="delta", metadata=hint("the decoded table's format"))
    mode: WriteMode = field(default="error", metadata=hint("error (output must not exist), append or overwrite"))
    verify: bool = field(
        default=False,
        metadata=hint("compare the decoded ids with the table's kept id columns instead of writing; 0 mismatches"),
    )
    engine: Engine = field(default="auto", metadata=hint(ENGINE_HELP))
    storage_options: Mapping[str, str] = storage_field()

    def __post_init__(self) -> None:
        object.__setattr__(self, "storage_options", StorageOptions(self.storage_options))
        check_choice("output_format", self.output_format, DECODE_FORMATS)
        check_mode(self.mode)
        check_choice("engine", self.engine, ENGINES)
        check_flag("verify", self.verify)


@dataclass(frozen=True, kw_only=True)
class InspectOptions:
    """Options of ``spark-mlt inspect`` ([`inspect_table`][spark_mlt.batch.read.inspect.inspect_table],
    and [`catalog_objects`][spark_mlt.batch.read.publish.catalog_objects] per schema).

    Example::

        InspectOptions(schema=("analytics",))
    """

    quarantine: str | None = quarantine_field()
    schema: tuple[str, ...] = field(
        default=(),
        metadata=hint(
            "also list the functions and views spark-mlt published for the table in these catalog schemas "
            "(a b, or a,b; starts Spark: the session's catalog, --conf for its settings)"
        ),
    )
    storage_options: Mapping[str, str] = storage_field()

    def __post_init__(self) -> None:
        object.__setattr__(self, "storage_options", StorageOptions(self.storage_options))
        object.__setattr__(self, "schema", column_names("schema", self.schema))


@dataclass(frozen=True, kw_only=True)
class FindOptions:
    """Options of ``spark-mlt find`` ([`find_value`][spark_mlt.batch.read.find.find_value]).

    Example::

        FindOptions(quarantine="lake/customers_rejected")
    """

    quarantine: str | None = quarantine_field()
    storage_options: Mapping[str, str] = storage_field()

    def __post_init__(self) -> None:
        object.__setattr__(self, "storage_options", StorageOptions(self.storage_options))


@dataclass(frozen=True, kw_only=True)
class VacuumOptions(RetentionOptions):
    """Options of ``spark-mlt vacuum`` ([`vacuum`][spark_mlt.storage.vacuum], or
    [`orphan_files`][spark_mlt.storage.orphan_files] with ``orphans``).

    Example::

        VacuumOptions(retention_hours=24, apply=True)
    """

    orphans: bool = field(default=False, metadata=hint("list the files no table version references, now"))
    storage_options: Mapping[str, str] = storage_field()

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "storage_options", StorageOptions(self.storage_options))
        check_flag("orphans", self.orphans)


#: a catalog schema's or object name's part
_CATALOG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class PublishOptions:
    """What [`publish_table`][spark_mlt.batch.read.publish.publish_table] creates, and where.

    Attributes:
        schema: the catalog schema (``analytics``, or ``catalog.analytics``) the objects go in;
            it must exist.
        prefix: the objects' names start with it (default: the table's name).
        functions: create the SQL functions (Spark 4.0 and later).
        view: create the view.
        print_only: return the statements, run nothing.
        storage_options: the table's store's settings.
    """

    schema: str = field(metadata=hint("the catalog schema the functions and view go in (it must exist)"))
    prefix: str | None = field(
        default=None, metadata=hint("the start of the objects' names (default: the table's name)")
    )
    functions: bool = field(
        default=True, metadata=hint("create the decode and encode SQL functions (Spark 3.5 has none: --no-functions)")
    )
    view: bool = field(default=True, metadata=hint("create the decoded view"))
    print_only: bool = field(
        default=False,
        metadata=hint(
            "print the DDL (the statements a run executes) instead of running it (no Spark for a table at a path)"
        ),
    )
    storage_options: Mapping[str, str] = storage_field()

    def __post_init__(self) -> None:
        object.__setattr__(self, "storage_options", StorageOptions(self.storage_options))
        for name in ("functions", "view", "print_only"):
            check_flag(name, getattr(self, name))
        parts = self.schema.split(".") if isinstance(self.schema, str) else []
        if not 1 <= len(parts) <= 2 or not all(_CATALOG_NAME.fullmatch(part) for part in parts):
            raise OptionError(
                f"schema must be a schema's name (analytics, or catalog.analytics: letters, digits, _), "
                f"got {self.schema!r}",
                parameter="schema",
            )
        if self.prefix is not None and not _CATALOG_NAME.fullmatch(self.prefix):
            raise OptionError(
                f"prefix must be a plain name (letters, digits, _; not starting with a digit), got {self.prefix!r}",
                parameter="prefix",
            )
        if not (self.functions or self.view):
            raise OptionError("nothing to create: functions and view are both off", parameter="functions")
