"""The two ways spark-mlt reads and commits a Delta table, behind one interface
([`DeltaBackend`][spark_mlt.storage.backends.base.DeltaBackend]): ``delta_rs``, jar-free (Spark
writes the Parquet files, spark-mlt's Delta core and delta-rs commit them), and ``delta_spark``,
through the session's Delta jars. [`resolve_backend`][spark_mlt.storage.backends.resolve_backend]
picks one for a session, once per run; nothing else knows which one it holds.

Example::

    backend = resolve_backend(spark)  # delta-spark where the session has Delta's jars
    rows = backend.read(spark, read_snapshot("/data/ratings_mlt"))
"""

from __future__ import annotations

from typing import Literal, get_args

from pyspark.sql import SparkSession

from spark_mlt.capabilities import Capabilities
from spark_mlt.options import check_choice
from spark_mlt.storage.backends.base import BackendName, DeltaBackend
from spark_mlt.storage.backends.delta_rs import DELTA_RS
from spark_mlt.storage.backends.delta_spark import DELTA_SPARK

__all__ = ["BACKENDS", "Backend", "BackendName", "DeltaBackend", "resolve_backend"]

#: Which Delta implementation reads and writes a table: ``auto`` (delta-spark when the session
#: has Delta's jars, else the jar-free path: delta-rs with Spark's Parquet reader and writer),
#: or one of them.
Backend = Literal["auto", "delta-rs", "delta-spark"]
BACKENDS: tuple[Backend, ...] = get_args(Backend)

_BY_NAME: dict[str, DeltaBackend] = {DELTA_RS.name: DELTA_RS, DELTA_SPARK.name: DELTA_SPARK}


def resolve_backend(
    session: SparkSession | Capabilities | None, backend: Backend | DeltaBackend = "auto"
) -> DeltaBackend:
    """The backend ``backend`` means for a session: ``auto``, delta-spark when its
    [`Capabilities`][spark_mlt.capabilities.Capabilities] have Delta's jars (asked once), else
    (and without a session) the jar-free one; a resolved backend is returned as it is.

    Raises:
        OptionError: ``backend`` is none of `BACKENDS`.

    Example::

        resolve_backend(spark).name             # 'delta-spark' on a session with Delta's jars
        resolve_backend(None, "delta-rs").name  # 'delta-rs'
    """
    if not isinstance(backend, str):
        return backend
    check_choice("backend", backend, BACKENDS)
    if backend != "auto":
        return _BY_NAME[backend]
    if session is None:
        return DELTA_RS
    capabilities = session if isinstance(session, Capabilities) else Capabilities.of(session)
    return DELTA_SPARK if capabilities.delta_jars else DELTA_RS
