"""The exception classes of spark-mlt, one hierarchy for every layer.

Every error derives from [`MLTError`][spark_mlt.errors.MLTError], itself a `ValueError`, so callers can
catch the whole family or one kind::

    MLTError (ValueError)
    ├── MLTTypeError (also TypeError)   an argument of the wrong Python type
    ├── OptionError                     an option value that is not allowed (unknown choice, conflicting Params,
    │   │                               an option the existing tables cannot take)
    │   └── TableOptionError            an option the job's existing tables cannot take: nothing was written
    ├── CodecParameterError             p, n, M, seed or cardinality not usable
    ├── CodecFormatError                a codec document, table property or light-mlt pickle is corrupt
    ├── InvalidIdError                  an id outside the codec's domain (NumPy codec)
    ├── InvalidTokenError               a token vector that is no valid code (NumPy codec)
    ├── SourceError                     a job's input cannot be read as asked (missing file or column)
    │   ├── ChangeFeedError             a source's change data feed cannot cover a sync's next versions
    │   ├── UnknownColumnError          an option names a column the input lacks (also an OptionError)
    │   └── InputFormatError            the input is a Delta table, or inside one, and would be read as
    │                                   files (also an OptionError)
    ├── RejectedRowsError               a run rejected more rows than ``max_rejected`` allows (its rows
    │                                   and quarantine are committed)
    ├── MissingExtraError (ImportError) an optional extra is not installed (the message says which)
    ├── MissingJarsError (FileNotFoundError) a checkout's jar cache lacks a line's jars (``make jars``)
    ├── JarVersionError                 the session's spark-mlt jar is of another version than the package
    │   └── JarLineError                a jar of another Spark line, which Spark could not load
    └── TableError                      a Delta table's state forbids the operation
        ├── MissingTableError          no Delta table at the path (also a FileNotFoundError)
        ├── TableExistsError            mode="error" and the table exists
        ├── CodecMismatchError          the table stores a different codec for the column
        ├── MissingCodecError           the table stores no codec for a token column
        ├── TableSchemaError            the rows' schema differs from the table's
        ├── VocabularyError             a key vocabulary is inconsistent
        ├── CodecCapacityError          a column's ids outgrew its codec (the way forward: a re-size)
        ├── ConcurrentWriteError        another write committed first and this one could not be
        │                               retried safely: it committed nothing
        ├── IncompleteWriteError        a two-commit write (a jar-free re-size) landed its first
        │                               commit only: the message says how to complete it
        ├── TableFeatureError           the table uses a Delta feature the jar-free path cannot
        │                               read or write exactly (the message says the way forward)
        ├── ConstraintViolationError    rows break a table's CHECK constraint, NOT NULL column
        │                               or generated column: nothing was committed
        ├── StorageError                the table's store refused a request (endpoint, bucket,
        │                               credentials); the message never holds a secret
        └── CatalogObjectError          a catalog object of a name ``publish`` would create is not
                                        one spark-mlt made for the table: nothing was created

Errors in the rows of a Spark query surface as Spark's own exceptions (the query fails with
the message ``raise_error`` or the UDF gave), naming the offending value.

Messages name the offending value and what was expected. An error about one argument carries
its Python name in `MLTError.parameter` (and starts with it), so the ``spark-mlt``
command can name its own flag instead (``layout`` -> ``--layout``).
"""

from __future__ import annotations

__all__ = [
    "CatalogObjectError",
    "ChangeFeedError",
    "CodecCapacityError",
    "CodecFormatError",
    "CodecMismatchError",
    "CodecParameterError",
    "ConcurrentWriteError",
    "ConstraintViolationError",
    "IncompleteWriteError",
    "InputFormatError",
    "InvalidIdError",
    "InvalidTokenError",
    "JarLineError",
    "JarVersionError",
    "MLTError",
    "MLTTypeError",
    "MissingCodecError",
    "MissingExtraError",
    "MissingJarsError",
    "MissingTableError",
    "OptionError",
    "RejectedRowsError",
    "SourceError",
    "StorageError",
    "TableError",
    "TableExistsError",
    "TableFeatureError",
    "TableOptionError",
    "TableSchemaError",
    "UnknownColumnError",
    "VocabularyError",
]


class MLTError(ValueError):
    """Base class of every spark-mlt error.

    Args:
        message: what went wrong, naming the value and what was expected.
        parameter: the Python name of the argument at fault, when there is one; the message
            then starts with it.
    """

    def __init__(self, message: str, *, parameter: str | None = None) -> None:
        super().__init__(message)
        self.parameter = parameter


class MLTTypeError(MLTError, TypeError):
    """An argument of the wrong Python type (a codec that is no MLTCodec, a column that is no
    name or Column)."""


class OptionError(MLTError):
    """An option value that is not allowed: not one of the choices, or Params that conflict.

    Not a TypeError, on purpose: pyspark rewraps TypeErrors raised while setting a Param into
    plain TypeErrors, which would lose the class and the parameter name.
    """


class TableOptionError(OptionError):
    """An option that the job's existing tables cannot take (other columns or key than the table
    was written with, a codec or layout it does not hold, ``handle_invalid`` against its
    quarantine), found before anything was written; the message names what the table holds and
    the way forward."""


class CodecParameterError(MLTError):
    """The codec parameters (p, n, M, seed, cardinality) are not usable."""


class CodecFormatError(MLTError):
    """A serialised codec (JSON, table property, light-mlt pickle) is malformed or tampered."""


class InvalidIdError(MLTError):
    """An id is outside the codec's domain [0, min(p^n, 2^63))."""


class InvalidTokenError(MLTError):
    """A token vector has the wrong width, a value outside [0, p), or no valid id."""


class SourceError(MLTError):
    """A job's input cannot be read as asked: no ratings file, a missing column."""


class ChangeFeedError(SourceError):
    """The change data feed of a sync's source cannot cover the versions it needs next (a log
    entry or file cleaned up, the feed off, a schema change): the message names the version and
    the way forward (a full refresh), and ``version`` is that version."""

    def __init__(self, message: str, *, version: int) -> None:
        super().__init__(message, parameter="input")
        self.version = version


class UnknownColumnError(SourceError, OptionError):
    """An option (``columns``, ``key``, ``partition_by``) names a column the input does not have;
    the message names the nearest columns it has."""


class InputFormatError(SourceError, OptionError):
    """A job's input is a Delta table's folder and ``input_format`` names a file format, or the
    input is a folder or file inside a Delta table (a partition folder, one of its data files):
    a file reader would read the files the table's commits removed too. Found before Spark
    reads anything; the message names the table and the way forward."""


class RejectedRowsError(MLTError):
    """A run with ``handle_invalid`` ``skip`` or ``quarantine`` rejected more rows than its
    ``max_rejected`` allows. Its rows and quarantine are committed (a data-quality failure, not a
    crash): ``report`` is the run's report.

    Attributes:
        report: the run's report (a ``JobReport``).
    """

    def __init__(self, message: str, *, report: object) -> None:
        super().__init__(message, parameter="max_rejected")
        self.report = report


class MissingExtraError(MLTError, ImportError):
    """An optional extra is not installed; the message names the pip command."""


class MissingJarsError(MLTError, FileNotFoundError):
    """The jar cache of a source checkout lacks a Spark line's jars, or none are published
    for that line; the message names the ``make jars`` command when it would help."""


class JarVersionError(MLTError):
    """The session's spark-mlt jar is of another version than this package: the message names
    both and how to load the right one."""


class JarLineError(JarVersionError):
    """The session's settings name a spark-mlt jar built for another Spark line (the 3.5 jar on
    Spark 4, or the other way round), whose functions Spark could not load: the message names the
    jar and the one to load."""


class TableError(MLTError):
    """A Delta table's state forbids the operation."""


class MissingTableError(TableError, FileNotFoundError):
    """There is no Delta table at the path."""


class TableExistsError(TableError):
    """``mode="error"`` and a table already exists at the path."""


class CodecMismatchError(TableError):
    """The table already stores a different codec for a column."""


class MissingCodecError(TableError):
    """The table stores no codec for a token column that was asked for."""


class TableSchemaError(TableError):
    """The rows to write do not have the table's schema."""


class VocabularyError(TableError):
    """A vocabulary table is inconsistent (an id used twice, or a key with two ids)."""


class CodecCapacityError(TableError):
    """A column's ids outgrew the codec its table holds (a vocabulary that would hold more ids
    than the codec's capacity); found before anything was written. The message names the column
    and the way forward: a re-size (``resize=True``), which re-tokenizes every row.

    Attributes:
        column: the user's column.
        capacity: the codec's capacity.
    """

    def __init__(self, message: str, *, column: str, capacity: int) -> None:
        super().__init__(message)
        self.column = column
        self.capacity = capacity


class ConcurrentWriteError(TableError):
    """Another write committed to the table while this one ran, and retrying this one was not
    safe (the winner changed the table's codecs or schema) or kept losing: nothing of it was
    committed."""


class IncompleteWriteError(TableError):
    """A write of two commits stopped after its first one landed (a jar-free re-size: the table
    anew with its new codecs and no rows, which records no version of its writer): the message
    says what landed and how to complete it; a mirror's windows refuse the table until then."""


class TableFeatureError(TableError):
    """The table uses a Delta table feature (or protocol version) that spark-mlt's jar-free
    path (delta-rs lists the files, Spark reads and writes them) cannot read or write exactly.
    Raised before any data moves; the message names the table, the feature and the way
    forward (a session with Delta's jars, or the table property that turns the feature off).

    Attributes:
        feature: the Delta feature's name as the protocol spells it (``identityColumns``).
    """

    def __init__(self, message: str, *, feature: str, parameter: str | None = None) -> None:
        super().__init__(message, parameter=parameter)
        self.feature = feature


class ConstraintViolationError(TableError):
    """Rows of a write break one of the table's rules (a CHECK constraint, a NOT NULL column,
    a column invariant, a generated column's expression); the message names the rule and the
    offending values. The write committed nothing."""


class StorageError(TableError):
    """The table's store refused a request (endpoint, bucket, credentials). The message names
    the location and the store's reason, with every secret of the storage options hidden."""


class CatalogObjectError(TableError):
    """A catalog object of the name a run would create is not one spark-mlt made for this table
    and column, or one it would create is larger than Spark's catalog stores: nothing was
    created, nothing dropped. The message names the object, what it is, and the way forward
    (another ``prefix`` or ``schema``, or the view alone)."""
