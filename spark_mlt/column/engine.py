"""The one interface both engines implement, and the choice between them.

* ``"native"``: Spark SQL expressions (:mod:`spark_mlt.column.native`); no Python worker.
* ``"udf"``: vectorised UDFs over the NumPy codec (:mod:`spark_mlt.column.udf`).
* ``"auto"``: per codec, layout and input, the engine ``make bench-functions`` measures
  faster (:func:`auto_engine`): native, except for a composed input on PySpark >= 4.1.

Both give bit-identical tokens, the same nulls and the same errors. A vector column reaches
an engine's ``decode`` as an array of tokens (:func:`spark_mlt.column.layouts.vector_tokens`),
so both decode vectors with the same code.
"""

from __future__ import annotations

from typing import Literal, Protocol

from pyspark.sql import Column

from spark_mlt.codec import MLTCodec
from spark_mlt.codec.tables import decode_tables, encode_tables
from spark_mlt.column.inputs import Input
from spark_mlt.column.layouts import Layout
from spark_mlt.column.native import NativeEngine
from spark_mlt.column.udf import UdfEngine
from spark_mlt.column.versions import has_arrow_udfs
from spark_mlt.options import ENGINES, check_choice

__all__ = ["ColumnEngine", "auto_engine", "engine_for"]


class ColumnEngine(Protocol):
    """Builds the Column that encodes or decodes one input, checked and named."""

    name: str

    def encode(self, source: Input, codec: MLTCodec, layout: Layout, handle_invalid: str) -> Column:
        """Tokens of the ids in ``source``, in ``layout`` (array, struct, vector or packed)."""
        ...

    def decode(self, source: Input, codec: MLTCodec, layout: Layout, handle_invalid: str) -> Column:
        """Bigint ids of the tokens in ``source``, held in ``layout`` (array, struct or packed)."""
        ...


_ENGINES: dict[str, ColumnEngine] = {"native": NativeEngine(), "udf": UdfEngine()}


#: a packed codec with at most this many tokens runs a composed input natively (auto_engine)
SMALL_LAMBDA_TOKENS = 6


def auto_engine(codec: MLTCodec, layout: Layout, *, composed: bool) -> Literal["native", "udf"]:
    """The engine ``"auto"`` runs for ``codec`` in ``layout`` (encode and decode alike).

    The rule, from ``make bench-functions`` (PySpark 4.3, ``local[2]``):

    * an input that is a column, by name or a small expression of one: ``"native"``, faster
      than the UDF for every codec family and layout measured, and it needs no Python on
      the executors;
    * a composed input (``composed``: a larger expression, such as another spark-mlt
      function in ``mlt_decode(mlt_encode(id))``), which the native engine binds once to a
      lambda variable: ``"udf"`` (one UDF argument, evaluated once), as Spark runs such a
      lambda's body 5-50x slower than the same expression in a query of its own; except in
      the packed layout of a codec whose lambda is small: lookup tables on both sides
      (p <= 32), p = 2, or at most :data:`SMALL_LAMBDA_TOKENS` tokens (2M rows, PySpark 4.3:
      packed round trips of (13, 6), (1009, 5), (65521, 4) and (2, 40) ran natively at
      0.21-0.57x ``xxhash64`` against 0.08-0.14x through the UDF; (251, 8) at 0.01x against
      0.14x). Before PySpark 4.1 the UDF engine's pandas UDFs pay a conversion per batch
      and cannot take every packed value (nulls turn a bigint batch into float64), so there
      packed input stays native and arrays, structs and vectors go to ``"udf"`` unless p = 2
      (2M rows, PySpark 3.5: array round trips at 0.03-0.06x ``xxhash64`` through the UDF
      against 0.01-0.02x natively, (2, 40) 0.01x both; (3, 39) natively under 5,000 rows/s).

    Example::

        >>> auto_engine(MLTCodec.from_seed(13, 6), "array", composed=False)
        'native'
    """
    if not composed:
        return "native"
    if not has_arrow_udfs():
        return "native" if layout == "packed" or codec.p == 2 else "udf"
    if layout != "packed":
        return "udf"
    tables = encode_tables(codec) is not None and decode_tables(codec) is not None
    return "native" if tables or codec.p == 2 or codec.n <= SMALL_LAMBDA_TOKENS else "udf"


def engine_for(name: object, codec: MLTCodec, layout: Layout, source: Input) -> ColumnEngine:
    """The engine called ``name``; for ``"auto"``, the one :func:`auto_engine` picks."""
    chosen = check_choice("engine", name, ENGINES)
    if chosen == "auto":
        chosen = auto_engine(codec, layout, composed=not source.simple)
    return _ENGINES[chosen]
