"""A mirror's first run or full refresh: the source at its latest version tokenized into the
mirror in one commit (its quarantine's first), each planned from the version its table held;
then the value counts anew and the erasure of what no row holds.

Example::

    report = refresh_mirror(run, source=read_snapshot("lake/customers"), mirror=None)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from pyspark.sql import DataFrame

from spark_mlt.batch.job.options import TokenizingOptions, part_values
from spark_mlt.batch.job.report import JobReport, added_counts, phase
from spark_mlt.batch.mirror.counting import counted_version, finish_erasure, recount, string_columns
from spark_mlt.batch.mirror.options import SyncOptions
from spark_mlt.batch.mirror.run import KEEP_LEVEL, SyncRun, held_version, quarantine_table
from spark_mlt.batch.mirror.tables import FULL_REFRESH_MARK, KEY_PROPERTY
from spark_mlt.batch.write.options import TokenizeOptions
from spark_mlt.batch.write.pipeline import QuarantineWrite, TableSink, tokenize_frame
from spark_mlt.column.sqltext import identifier
from spark_mlt.errors import MLTError, SourceError
from spark_mlt.options import TOKEN_SUFFIX
from spark_mlt.steps import reached
from spark_mlt.storage import (
    AppTransaction,
    TableSnapshot,
    WriteMode,
    WriteOptions,
    nullable_type,
    read_delta,
    read_snapshot,
    snapshot_for_write,
    table_exists,
)
from spark_mlt.storage.properties import NEVER
from spark_mlt.storage.reader import read_snapshot_rows


def refresh_mirror(run: SyncRun, *, source: TableSnapshot, mirror: TableSnapshot | None) -> JobReport:
    """The mirror rebuilt from the source at its version, in one commit (and its quarantine's),
    each planned from the version its table held (a refresh commits nothing onto a mirror another
    run moved meanwhile, and never takes a mirror that holds its source version for one that
    holds its rows); then the value counts anew and the erasure of the values no row holds.
    Returns what it did."""
    spark, options = run.spark, run.options
    version = source.version
    held = NEVER if mirror is None else held_version(mirror, run.tables.app)
    if mirror is not None:
        _check_columns(mirror, source, run.columns)
    strings = string_columns(source, run.columns)
    counted = {column: counted_version(run, column) for column in strings}  # what the counts' commits plan from
    side = quarantine_table(run)
    q_held = NEVER if side is None else held_version(side, run.tables.quarantine_app)
    rows = read_delta(spark, source.path, version=version, storage_options=options.storage_options, backend=run.backend)
    rows = rows.persist(KEEP_LEVEL)
    try:
        erased: dict[str, int] = {}
        with phase(run.run_log.seconds, "check the key"):
            _check_unique(rows, options.key, f"version {version} of {source.path}")
            deleted = _deleted_by_refresh(run, rows, mirror) if mirror is not None else 0
        if held != NEVER:  # what a stopped run left, erased before this one reads a vocabulary
            erased = finish_erasure(run, source, held=held)
        mode: WriteMode = "overwrite" if mirror is not None else "error"
        snapshot = snapshot_for_write(
            run.output, mode, storage_options=options.storage_options, spark=spark, backend=run.backend
        )
        info = {
            "spark_mlt.job": "sync",
            "spark_mlt.input": run.input,
            "spark_mlt.sync": FULL_REFRESH_MARK,
            "spark_mlt.source_version": str(version),
        }
        sink = TableSink(
            run.output,
            snapshot,
            _tokenize_options(options, mode),
            dataclasses.replace(_mirror_files(options), commit_info=info, backend=run.backend),
            # a refresh sets the mirror anew: not skippable (a mirror that holds its source version
            # may be damaged, or want a re-size), and planned from the version the mirror held
            transaction=AppTransaction(run.tables.app, version, after=held, skippable=False),
            quarantine=QuarantineWrite(
                "overwrite" if mirror is not None else "append",
                AppTransaction(run.tables.quarantine_app, version, after=q_held, skippable=False),
            ),
            kept_ids=options.key,
        )
        done = tokenize_frame(rows, run.columns, sink, capabilities=run.capabilities)
        reached("mirror committed")
        recount(run, rows, counted, version=version)
    finally:
        rows.unpersist()
    erased = added_counts(erased, finish_erasure(run, source, held=version))
    return dataclasses.replace(
        done.report(),  # (its rows_in: rows out and rejected)
        source_version=version,
        rows_deleted=0 if done.write.skipped else deleted,
        erased=erased,
    )


def _deleted_by_refresh(run: SyncRun, rows: DataFrame, mirror: TableSnapshot) -> int:
    """How many keys the mirror (and its quarantine) hold that no row of the source holds: the
    keys a full refresh deletes."""
    options = run.options
    key = [identifier(c) for c in options.key]
    held = read_snapshot_rows(run.spark, mirror, backend=run.backend).select(*key)
    quarantine = run.tables.quarantine
    if options.handle_invalid == "quarantine" and table_exists(quarantine, storage_options=options.storage_options):
        side = read_snapshot(quarantine, storage_options=options.storage_options)
        held = held.unionByName(read_snapshot_rows(run.spark, side, backend=run.backend).select(*key))
    return held.distinct().join(rows.select(*key), list(options.key), "left_anti").count()


def _mirror_files(options: SyncOptions) -> WriteOptions:
    """The mirror's files: key ranges of at most ``file_rows`` rows each, so that a window's
    changed keys fall into few small files; a new mirror records its key."""
    return WriteOptions(
        cluster_by=options.key, max_file_rows=options.file_rows, properties={KEY_PROPERTY: ",".join(options.key)}
    )


def _check_columns(mirror: TableSnapshot, source: TableSnapshot, columns: Sequence[str]) -> None:
    """Refuses a full refresh whose source's columns (names, types) are no longer the mirror's:
    its overwrite keeps the mirror's schema, and would fail only after the vocabularies were
    changed. Checked before anything is written."""
    tokens = {f"{c}{TOKEN_SUFFIX}" for c in columns}
    held = [(f.name, nullable_type(f.type)) for f in mirror.schema if f.name not in tokens]
    left_out = {c for c in columns if c not in mirror.schema.names}  # drop_ids
    now = [(f.name, nullable_type(f.type)) for f in source.schema if f.name not in left_out]
    if dict(held) != dict(now):  # the order aside: a partitioned mirror may hold its partition columns last
        raise MLTError(
            f"output: the source {source.path}'s columns changed since the mirror {mirror.path} was written "
            f"({', '.join(f'{n} {t}' for n, t in held)} -> {', '.join(f'{n} {t}' for n, t in now)}); a full refresh "
            "rewrites the mirror's rows, not its schema: sync into a new output path (the vocabularies carry "
            "over with --vocabulary-dir), or remove the mirror and its quarantine first",
            parameter="output",
        )


def _tokenize_options(options: SyncOptions, mode: WriteMode) -> TokenizeOptions:
    """The batch job's options of a sync's full refresh: the tokenizing ones the sync has, writing
    with ``mode``."""
    return TokenizeOptions(**part_values(options, TokenizingOptions), mode=mode, input_format=options.input_format)


def _check_unique(rows: DataFrame, key: Sequence[str], where: str) -> None:
    """Refuses a null key or a key with two rows."""
    k = [identifier(c) for c in key]
    null = rows.where(" OR ".join(f"{c} IS NULL" for c in k)).limit(1).collect()
    if null:
        raise SourceError(
            f"key: {where} has a row whose key {list(key)} is null; a mirror needs a key for every row",
            parameter="key",
        )
    twice = rows.groupBy(*k).count().where("count > 1").limit(1).collect()
    if twice:
        raise SourceError(
            f"key: {where} has {twice[0]['count']} rows with the key {_key_text(twice[0], key)}; "
            f"{list(key)} must be unique (the source's primary key)",
            parameter="key",
        )


def _key_text(row: object, key: Sequence[str]) -> str:
    return ", ".join(f"{c}={row[c]!r}" for c in key)  # type: ignore[index]
