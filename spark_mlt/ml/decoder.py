"""``MLTDecoder``: token columns back to bigint ids.

Design decisions:

* ``layout="auto"`` (the default) reads each column's layout from its Spark type with
  :func:`spark_mlt.column.layout_of`, the one place that maps types to layouts; a layout set
  explicitly must match the type, else an :class:`~spark_mlt.errors.MLTTypeError` names the
  column, its type and the layout to set. The check runs in ``transform``, before Spark
  analyses anything, so the message speaks of Params rather than SQL expressions.
* Array, struct and packed columns decode with :func:`spark_mlt.column.mlt_decode`. Vector
  columns (what :class:`~spark_mlt.ml.MLTEncoderModel` writes by default) hold tokens /
  (p - 1) as doubles: they are scaled back and rounded to int tokens, then decoded as arrays.
"""

from __future__ import annotations

from typing import Literal

from pyspark import keyword_only
from pyspark.ml import Transformer
from pyspark.ml.functions import vector_to_array
from pyspark.ml.param import Param, Params
from pyspark.ml.util import DefaultParamsReadable, DefaultParamsWritable
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_mlt.codec import MLTCodec
from spark_mlt.column import layout_of, mlt_decode
from spark_mlt.errors import MLTTypeError
from spark_mlt.ml.params import DECODER_LAYOUTS, MLTCodecStageParams, to_choice
from spark_mlt.options import Engine, HandleInvalid, Layout, check_choice

__all__ = ["MLTDecoder", "column_layout"]

TOKEN_COLUMN = "a token column (vector, array<int>, struct t0..t{n-1} or packed bigint)"


def column_layout(dataset: DataFrame, column: str, wanted: Layout | Literal["auto"] = "auto") -> Layout:
    """The token layout of ``column``: ``wanted`` if its type holds that layout, or
    (``"auto"``) the layout its type shows.

    Raises:
        MLTTypeError: the column's type is no token layout, or not the one wanted; the
            message names the column, its type and the layout to set.

    Example::

        column_layout(tokens, "userId_mlt")  # "vector"
    """
    data_type = dataset.schema[column].dataType
    found = layout_of(data_type)
    if found is not None and wanted in ("auto", found):
        return found
    expected = TOKEN_COLUMN if wanted == "auto" else f"the {wanted} layout"
    hint = f"set layout='{found}' (or 'auto')" if found else "decode a column MLTEncoderModel or mlt_encode wrote"
    message = f"column {column!r} has type {data_type.simpleString()}, which is not {expected}; {hint}"
    raise MLTTypeError(f"layout: {message}" if wanted != "auto" else message, parameter="layout")


def decode_vector(vector: Column, codec: MLTCodec, handle: HandleInvalid, engine: Engine) -> Column:
    """The ids of a vector column of tokens / (p - 1)."""
    scale = float(max(codec.p - 1, 1))
    # round, not truncate: 5 / 12 * 12 is 4.999... in floating point
    tokens = F.transform(vector_to_array(vector), lambda v: F.round(v * scale).cast("int"))
    return mlt_decode(F.when(vector.isNotNull(), tokens), codec, layout="array", handle_invalid=handle, engine=engine)


class MLTDecoder(
    Transformer,
    MLTCodecStageParams,
    DefaultParamsReadable["MLTDecoder"],
    DefaultParamsWritable,
):
    """Turns token columns back into bigint ids: whatever :class:`MLTEncoderModel` writes
    (vectors by default, arrays, structs, packed bigints) or :func:`mlt_encode` writes.

    Params (each with a ``set<Name>`` and ``get<Name>``):

    * ``codecs``: the codecs the tokens were made with, one per input column
      (``getCodecs()`` returns :class:`MLTCodec` objects; ``setCodecs`` takes them or their
      JSON documents).
    * ``inputCol`` / ``outputCol``, or ``inputCols`` / ``outputCols``: token columns and their
      id columns (default ``<input>_id``).
    * ``layout``: ``"auto"`` (default: read from each column's type), ``"vector"``,
      ``"array"``, ``"struct"`` or ``"packed"`` (then the column's type must match).
    * ``handleInvalid``: ``"error"`` (default), ``"null"`` or ``"skip"`` for token vectors that
      are no valid code.
    * ``engine``: ``"auto"`` (default), ``"native"`` or ``"udf"``.

    Example::

        decoder = MLTDecoder.from_codecs(model.getCodecs(), inputCols=["u", "m"], outputCols=["userId", "movieId"])
        ids = decoder.transform(tokens)
    """

    _output_suffix = "_id"
    layout: Param[str] = Param(
        Params._dummy(),
        "layout",
        "token layout: 'auto' (read from the column's type), 'vector', 'array', 'struct' or 'packed'",
        typeConverter=to_choice("layout", DECODER_LAYOUTS),
    )

    @keyword_only
    def __init__(
        self,
        *,
        codecs: list[MLTCodec | str] | None = None,
        inputCol: str | None = None,  # noqa: N803 - Spark ML naming
        outputCol: str | None = None,  # noqa: N803
        inputCols: list[str] | None = None,  # noqa: N803
        outputCols: list[str] | None = None,  # noqa: N803
        layout: str = "auto",
        handleInvalid: str = "error",  # noqa: N803
        engine: str = "auto",
    ) -> None:
        super().__init__()
        self._setDefault(layout="auto", handleInvalid="error", engine="auto")
        self.setParams(**self._input_kwargs)  # type: ignore[attr-defined]  # set by @keyword_only

    @keyword_only
    def setParams(  # noqa: N802 - Spark ML naming
        self,
        *,
        codecs: list[MLTCodec | str] | None = None,
        inputCol: str | None = None,  # noqa: N803
        outputCol: str | None = None,  # noqa: N803
        inputCols: list[str] | None = None,  # noqa: N803
        outputCols: list[str] | None = None,  # noqa: N803
        layout: str = "auto",
        handleInvalid: str = "error",  # noqa: N803
        engine: str = "auto",
    ) -> MLTDecoder:
        """Sets the Params given."""
        kwargs = self._input_kwargs  # type: ignore[attr-defined]  # set by @keyword_only
        return self._set(**{name: value for name, value in kwargs.items() if value is not None})

    @classmethod
    def from_codecs(cls, codecs: list[MLTCodec], **params: str | list[str]) -> MLTDecoder:
        """A decoder for the given codecs (one per input column) and other Params.

        Example::

            decoder = MLTDecoder.from_codecs(model.getCodecs(), inputCol="userId_mlt", outputCol="userId")
        """
        return cls(codecs=list(codecs), **params)  # type: ignore[arg-type]  # Params checked by _set

    def _transform(self, dataset: DataFrame) -> DataFrame:
        wanted = check_choice("layout", self.getLayout(), DECODER_LAYOUTS)
        engine = self._engine()

        def decode(source: str, codec: MLTCodec, handle: HandleInvalid) -> Column:
            layout = column_layout(dataset, source, wanted)
            if layout == "vector":
                return decode_vector(F.col(source), codec, handle, engine)
            return mlt_decode(source, codec, layout=layout, handle_invalid=handle, engine=engine)

        return self._add_columns(dataset, decode)
