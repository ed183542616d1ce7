"""The one interface both engines implement, and the choice between them.

* ``"native"``: Spark SQL expressions (:mod:`spark_mlt.column.native`); no Python worker.
* ``"udf"``: vectorised UDFs over the NumPy codec (:mod:`spark_mlt.column.udf`).
* ``"auto"``: native. It needs no Python on the executors, and the benchmark
  (``make bench-functions``) measures it faster than the UDF for encoding on every line.

Both give bit-identical tokens, the same nulls and the same errors. A vector column reaches
an engine's ``decode`` as an array of tokens (:func:`spark_mlt.column.layouts.vector_tokens`),
so both decode vectors with the same code.
"""

from __future__ import annotations

from typing import Protocol

from pyspark.sql import Column

from spark_mlt.codec import MLTCodec
from spark_mlt.column.inputs import Input
from spark_mlt.column.layouts import Layout
from spark_mlt.column.native import NativeEngine
from spark_mlt.column.udf import UdfEngine
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


def auto_engine(codec: MLTCodec, layout: Layout, operation: str) -> str:
    """The engine ``"auto"`` runs for ``operation`` ("encode" or "decode") in ``layout``."""
    return "native"


def engine_for(name: object) -> ColumnEngine:
    """The engine called ``name`` ("auto" is the native one)."""
    chosen = check_choice("engine", name, ENGINES)
    return _ENGINES["native" if chosen == "auto" else chosen]
