"""``MLTDecoder``: token columns back to bigint ids.

Design decisions:

* ``layout="auto"`` (the default) reads each column's layout from its Spark type with
  :func:`spark_mlt.column.column_layout`, the one place that maps types to layouts; a layout
  set explicitly must match the type, else an :class:`~spark_mlt.errors.MLTTypeError` names
  the column, its type and the layout to set. The check runs in ``transform``, before Spark
  analyses anything, so the message speaks of Params rather than SQL expressions.
* Every layout decodes with :func:`spark_mlt.column.mlt_decode`, vectors (what
  :class:`~spark_mlt.ml.MLTEncoderModel` writes by default) included.
"""

from __future__ import annotations

from pyspark import keyword_only
from pyspark.ml import Transformer
from pyspark.ml.param import Param, Params
from pyspark.ml.util import DefaultParamsReadable, DefaultParamsWritable
from pyspark.sql import Column, DataFrame

from spark_mlt.codec import MLTCodec
from spark_mlt.column import column_layout, mlt_decode
from spark_mlt.column.engine import engine_for
from spark_mlt.column.functions import decode_vector_values_column, vector_values_column
from spark_mlt.column.inputs import as_input
from spark_mlt.column.layouts import DECODER_LAYOUTS
from spark_mlt.ml.params import MLTCodecStageParams, to_choice
from spark_mlt.options import HandleInvalid, check_choice

__all__ = ["MLTDecoder"]


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
        columns = self._column_codecs()
        layouts = {source: column_layout(dataset.schema, source, wanted) for source, _, _ in columns}
        # The native engine decodes a vector from SQL text after its values are read into an
        # array column of their own (see vector_values_column), dropped at the end.
        taken = {*dataset.columns, *(target for _, target, _ in columns)}
        staged = {
            source: _free_name(taken, i)
            for i, (source, _, codec) in enumerate(columns)
            if layouts[source] == "vector" and engine_for(engine, codec, "vector", as_input(source)).name == "native"
        }
        prepared = dataset.withColumns(
            {staged[source]: vector_values_column(source, codec) for source, _, codec in columns if source in staged}
        )

        def decode(source: str, codec: MLTCodec, handle: HandleInvalid) -> Column:
            if source in staged:
                return decode_vector_values_column(staged[source], source, codec, handle_invalid=handle)
            return mlt_decode(source, codec, layout=layouts[source], handle_invalid=handle, engine=engine)

        return self._add_columns(prepared, decode).drop(*staged.values())


def _free_name(taken: set[str], index: int) -> str:
    """A column name not in ``taken`` for the values of the vector input ``index``."""
    name = f"__spark_mlt_values_{index}"
    while name in taken:
        name += "_"
    return name
