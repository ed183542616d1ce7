"""How a job reads its input path: a Delta table as a Delta table, never as its folder's files.

A Delta table's folder holds more Parquet files than the table: those of the versions its
commits replaced (an overwrite's, a delete's, a compaction's) until a vacuum deletes them, and
those of writes that never committed. Spark's file readers (batch and streaming alike) read
every file under a folder: a table of 1,000 rows overwritten twice reads as 3,000 rows, and
nothing fails. Only the table's log says which files hold its rows. So before Spark reads a
path, [`input_format_of`][spark_mlt.batch.job.inputs.input_format_of] looks for a ``_delta_log``
folder in it and in the folders above it (through the path's pyarrow filesystem: local disk,
``s3://``, ``s3a://`` and the other stores; no Spark, so the CLI refuses before it starts one):

| the input | ``auto`` (the default) | ``delta`` | ``parquet``, ``csv``, ``json``, ``orc`` |
|---|---|---|---|
| a Delta table's folder | read as Delta | read as Delta | refused, naming ``delta`` |
| inside a Delta table (a partition folder, a data file) | refused, naming the table | refused | refused |
| anything else | read as Parquet | no Delta table: refused when read | read as given |

Why each: ``auto`` is what a caller who named no format gets, and a folder with a log is a
Delta table, so it is read as one. A caller who named a file format asked for files; reading
the table instead would answer another question than the one asked, and reading the files gives
rows the table does not hold, so the run is refused and the message names ``delta``. A path
inside a table cannot be read right either way: its files include removed ones, a partition's
rows lack their partition column, and a Delta reader takes a table whole; the message names the
table to read and filter. A glob (``lake/orders/*.parquet``) is checked from the folder before
its first wildcard and, on local disk, at every path it matches. A catalog table's name
(``input_format="table"``) is the catalog's to resolve, and is not looked at. A store that no
filesystem here opens (``hdfs://`` without libhdfs, a scheme pyarrow does not know) cannot be
looked at: a format given is taken as given, and ``auto`` is refused, naming ``delta`` and the
file formats.
"""

from __future__ import annotations

import glob
import os
import posixpath
from collections.abc import Iterable, Mapping

import pyarrow as pa

from spark_mlt.batch.job.options import InputFormat
from spark_mlt.delta.fs import Location, locate, redact, storage_options_of
from spark_mlt.delta.log import LOG_FOLDER, holds_log
from spark_mlt.errors import InputFormatError, StorageError
from spark_mlt.storage.catalog import is_table_name

__all__ = ["GLOB_CHARACTERS", "delta_table_of", "input_format_of"]

#: The characters that make a path a pattern for Spark's (Hadoop's) file listing.
GLOB_CHARACTERS = "*?[{"


def _ancestors(path: str) -> Iterable[str]:
    """``path`` and each folder above it, up to the filesystem's root (a bucket, on S3)."""
    while True:
        yield path
        parent = posixpath.dirname(path.rstrip("/")) if path != "/" else ""
        if not parent or parent == path:
            return
        path = parent


def _literal_prefix(path: str) -> str:
    """The part of ``path`` before the folder that holds its first wildcard."""
    first = min((path.find(c) for c in GLOB_CHARACTERS if c in path), default=-1)
    return path if first < 0 else posixpath.dirname(path[:first])


def _spelled(given: str, levels: int, folder: str) -> str:
    """The folder ``levels`` above the path ``given``, spelled as the caller spelled ``given``
    (relative, or a URI with its scheme and authority); the filesystem's ``folder`` where
    ``given`` has too few parts to say it."""
    parts = given.rstrip("/").split("/")
    head = "/".join(parts[: len(parts) - levels])
    if levels >= len(parts) or head.endswith(":") or head in ("", "."):
        return folder
    return head


def delta_table_of(input: str, location: Location) -> tuple[str, bool] | None:
    """The Delta table that ``input`` (at ``location``) is or is inside of, as ``(its location,
    whether input is the table's own folder)``, or None: the nearest folder at or above
    ``input`` that holds a ``_delta_log``. A glob is looked at from the folder before its first
    wildcard, and on local disk at each path it matches too (it is never a table's own folder).

    Raises:
        StorageError: the store refused a request (the message hides the options' secrets).

    Example::

        delta_table_of("/lake/orders/day=2026-11-26", locate("/lake/orders/day=2026-11-26"))  # ("/lake/orders", False)
    """
    pattern = any(c in input for c in GLOB_CHARACTERS)
    given = _literal_prefix(input) if pattern else input
    starts = [(given, _literal_prefix(location.root) if pattern else location.root)]
    if pattern and not location.scheme:
        starts += [(match, match) for match in sorted({os.path.abspath(m) for m in glob.glob(input)})]
    seen: dict[str, bool] = {}
    for spelled, root in starts:
        for levels, folder in enumerate(_ancestors(root)):
            if folder not in seen:
                try:
                    seen[folder] = holds_log(location.filesystem, folder)
                except OSError as error:
                    reason = redact(str(error), location.storage_options)
                    raise StorageError(f"cannot look at the input {input}: {reason}") from None
            if seen[folder]:
                absolute = f"{location.scheme}://{folder}" if location.scheme else folder
                return _spelled(spelled, levels, absolute), not pattern and levels == 0
    return None


def input_format_of(
    input: str, input_format: InputFormat, *, storage_options: Mapping[str, str] | None = None
) -> InputFormat:
    """The format a job reads ``input`` with (the module's table): ``input_format``, or for
    ``"auto"`` ``"delta"`` where ``input`` is a Delta table's folder, else ``"parquet"``.

    A store no filesystem here can open (``hdfs://`` without libhdfs, a scheme pyarrow does not
    know) cannot be looked at: a format given is taken as given there, and ``"auto"`` is refused.

    Raises:
        InputFormatError: ``input`` is a Delta table and ``input_format`` a file format
            (naming ``input_format``), ``input`` is inside a Delta table (naming ``input``
            and the table), or ``"auto"`` for a store that cannot be looked at.
        StorageError: the input's store refused a request.

    Example::

        input_format_of("/lake/orders", "auto")  # "delta": /lake/orders/_delta_log exists
    """
    if input_format == "table" or (input_format == "delta" and is_table_name(input)):
        return input_format
    try:
        location = locate(input, storage_options)
    except (OSError, pa.ArrowInvalid) as error:  # no filesystem here for its scheme (hdfs:// without libhdfs, ...)
        if input_format != "auto":
            return input_format  # nothing here can look at its files: the caller's word stands
        reason = redact(str(error).splitlines()[0], storage_options_of(storage_options))
        raise InputFormatError(
            f"input_format='auto': nothing here can look at the store of the input {input} ({reason}) to tell "
            "whether it is a Delta table; pass input_format='delta' for a Delta table, else the files' format",
            parameter="input_format",
        ) from None
    found = delta_table_of(input, location)
    if found is None:
        return "parquet" if input_format == "auto" else input_format
    table, own = found
    if not own:
        fix = f"pass input='{table}'" + ("" if input_format in ("auto", "delta") else " and set input_format='delta'")
        raise InputFormatError(
            f"input {input!r} is inside the Delta table {table} (a partition folder, a data file, or a pattern "
            "matching them): its files include the ones the table's commits removed, and a Delta table is read "
            f"whole; read the table and filter its rows: {fix}",
            parameter="input",
        )
    if input_format in ("auto", "delta"):
        return "delta"
    raise InputFormatError(
        f"input_format={input_format!r}: the input {input} is a Delta table (it has a {LOG_FOLDER}), and a "
        f"{input_format} reader would read every file in its folder, the Parquet files its commits removed "
        "included; pass input_format='delta' (or 'auto', the default, which reads a Delta table as one)",
        parameter="input_format",
    )
