"""What a job checks before it writes anything: the columns it names are in its input, and the
table it writes to, as the job found it, can take its options and its ids' types.

Example::

    check_output(read_snapshot("out/orders_mlt"), df.columns, ["customer_id"], TokenizeOptions(mode="append"))
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import from_arrow_schema

from spark_mlt.batch.job.options import JobOptions, sizing_of
from spark_mlt.codec import DEFAULT_SEED
from spark_mlt.column.layouts import token_layouts
from spark_mlt.errors import TableOptionError, TableSchemaError, UnknownColumnError
from spark_mlt.storage import TableSnapshot
from spark_mlt.storage.properties import id_types

__all__ = ["check_id_types", "check_names", "check_output"]


def check_names(names: Sequence[str], available: Sequence[str], parameter: str, where: str = "the input") -> None:
    """Refuses names that are not among ``available``, suggesting the nearest ones.

    Raises:
        UnknownColumnError: naming ``parameter``, the unknown names and the near ones.
    """
    unknown = [name for name in names if name not in available]
    if not unknown:
        return
    near = {name: difflib.get_close_matches(name, list(available), n=1, cutoff=0.6) for name in unknown}
    hints = "; ".join(f"did you mean {near[name][0]!r} for {name!r}?" for name in unknown if near[name])
    raise UnknownColumnError(
        f"{parameter} names column(s) {unknown} not in {where}, which has {list(available)}"
        + (f"; {hints}" if hints else ""),
        parameter=parameter,
    )


def check_output(
    snapshot: TableSnapshot | None,
    names: Sequence[str],
    columns: Sequence[str],
    options: JobOptions,
    *,
    kept_ids: Sequence[str] = (),
) -> None:
    """Refuses, before anything is written, options that the existing table ``snapshot`` cannot
    take with input columns ``names``: other id columns than it tokenizes, a codec (``p``, ``n``,
    ``seed``) or token layout other than it holds (unless the options ``resize``), or raw ids
    kept where it leaves them out (``drop_ids``) or the other way round.

    Raises:
        UnknownColumnError: a column is not among ``names``.
        TableOptionError: naming the option, what the table holds and the way forward.
    """
    check_names(columns, names, "columns")
    if snapshot is None or not snapshot.codecs:
        return
    where = f"the table {snapshot.path}"
    held = sorted(snapshot.codecs)
    if sorted(columns) != held:
        raise TableOptionError(
            f"columns: {where} tokenizes {held}; got {sorted(columns)}: a table keeps its id columns (write the "
            "others to a new table)",
            parameter="columns",
        )
    resize = sizing_of(options).resize
    for column, codec in snapshot.codecs.items():
        wanted = {"p": options.p, "n": options.n, "seed": options.seed if options.seed != DEFAULT_SEED else None}
        for name, value in wanted.items():
            if not resize and value is not None and value != getattr(codec, name):
                raise TableOptionError(
                    f"{name}={value}: {where} holds the codec p={codec.p}, n={codec.n}, seed={codec.seed} for column "
                    f"{column!r} (capacity {codec.capacity}); a table's rows hold one codec: give none, or "
                    "re-size every row with resize=True (docs: Columns, Room to grow)",
                    parameter=name,
                )
    layouts = token_layouts(from_arrow_schema(snapshot.schema), snapshot.codecs)
    for column, layout in layouts.items():
        if not resize and options.layout not in ("auto", layout):
            raise TableOptionError(
                f"layout={options.layout!r}: {where} stores the tokens of {column!r} as {layout!r}; pass "
                f"layout='auto' or layout={layout!r}",
                parameter="layout",
            )
    stored = set(snapshot.schema.names)
    columns = [c for c in columns if c not in kept_ids]
    kept = [c for c in columns if c in stored]
    if options.drop_ids and kept and not resize:
        raise TableOptionError(
            f"drop_ids: {where} keeps the raw id column(s) {kept} beside their tokens; a table keeps one shape: "
            "leave drop_ids out, or rewrite it with mode='overwrite' and resize=True",
            parameter="drop_ids",
        )
    dropped = [c for c in columns if c not in stored]
    if not options.drop_ids and dropped and not resize:
        raise TableOptionError(
            f"drop_ids: {where} leaves the raw id column(s) {dropped} out; pass drop_ids=True",
            parameter="drop_ids",
        )


def check_id_types(snapshot: TableSnapshot | None, df: DataFrame, columns: Sequence[str], options: JobOptions) -> None:
    """Refuses id columns of ``df`` of another type than the existing table ``snapshot`` records
    for them (``mlt.type.<column>``), before anything is written: decoding gives the table's ids
    back in the recorded type, which an id of a wider one may not fit (a re-size records anew).

    Raises:
        TableSchemaError: naming the column, both types and the way forward.
    """
    recorded = id_types(snapshot.properties) if snapshot is not None else {}
    if snapshot is None or not recorded or sizing_of(options).resize:
        return
    given = dict(df.dtypes)
    for column in columns:
        if column in recorded and column in given and given[column] != recorded[column]:
            raise TableSchemaError(
                f"columns: the table {snapshot.path} holds the ids of {column!r} as {recorded[column]} "
                f"(mlt.type.{column}), the type decoding gives them back in; this input's {column!r} is "
                f"{given[column]}: cast it to {recorded[column]}, or write a new table",
                parameter="columns",
            )
