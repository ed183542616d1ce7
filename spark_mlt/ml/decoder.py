"""``MLTDecoder``: token columns back to bigint ids.

Design decisions:

* ``layout="auto"`` (the default) reads each column's layout from its Spark type with
  [`spark_mlt.column.column_layout`][spark_mlt.column.column_layout], the one place that maps types to layouts; a layout
  set explicitly must match the type, else an [`MLTTypeError`][spark_mlt.errors.MLTTypeError] names
  the column, its type and the layout to set. The check runs in ``transform``, before Spark
  analyses anything, so the message speaks of Params rather than SQL expressions.
* Every layout decodes through the engine the policy picks, as
  [`spark_mlt.column.mlt_decode`][spark_mlt.column.mlt_decode] does; a vector (what
  [`MLTEncoderModel`][spark_mlt.ml.MLTEncoderModel] writes by default) has its values put in a
  column of their own first, a DataFrame-level step, so that both engines read them by name.
"""

from __future__ import annotations

from pyspark import keyword_only
from pyspark.ml import Transformer
from pyspark.ml.param import Param, Params
from pyspark.ml.util import DefaultParamsReadable, DefaultParamsWritable
from pyspark.sql import Column, DataFrame

from spark_mlt.capabilities import Capabilities
from spark_mlt.codec import MLTCodec
from spark_mlt.column import column_layout
from spark_mlt.column.functions import decode_input
from spark_mlt.column.inputs import as_input, column_input
from spark_mlt.column.layouts import DECODE_LAYOUTS, LAYOUT, VECTOR, DecodeLayout
from spark_mlt.ml.params import MLTCodecStageParams, to_choice
from spark_mlt.options import RowHandling

__all__ = ["MLTDecoder"]


class MLTDecoder(
    Transformer,
    MLTCodecStageParams,
    DefaultParamsReadable["MLTDecoder"],
    DefaultParamsWritable,
):
    """Turns token columns back into bigint ids: whatever `MLTEncoderModel` writes
    (vectors by default, arrays, structs, packed bigints) or `mlt_encode` writes.

    Params (each with a ``set<Name>`` and ``get<Name>``):

    * ``codecs``: the codecs the tokens were made with, one per input column
      (``getCodecs()`` returns [`MLTCodec`][spark_mlt.codec.codec.MLTCodec] objects; ``setCodecs`` takes them or their
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
    layout: Param[DecodeLayout] = Param(
        Params._dummy(),
        "layout",
        "token layout: 'auto' (read from the column's type), 'vector', 'array', 'struct' or 'packed'",
        typeConverter=to_choice("layout", DECODE_LAYOUTS),
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

    def getLayout(self) -> DecodeLayout:  # noqa: N802 - Spark ML naming
        """Gets the value of layout or its default value."""
        value: DecodeLayout = self.getOrDefault(self.layout)  # checked by the Param's converter
        return value

    def setLayout(self, value: DecodeLayout) -> MLTDecoder:  # noqa: N802 - Spark ML naming
        """Sets the value of :py`layout`."""
        return self._set(layout=value)

    def _transform(self, dataset: DataFrame) -> DataFrame:
        wanted, engine = self.getLayout(), self.getEngine()
        capabilities = Capabilities.of(dataset.sparkSession)
        columns = self._column_codecs()
        layouts = {source: LAYOUT[column_layout(dataset.schema, source, wanted)] for source, _, _ in columns}
        # A vector's values go into a column of their own first (dropped at the end), which
        # both engines read by name: Spark keeps that column, read n times, in a projection
        # of its own, and no lambda binds it.
        taken = {*dataset.columns, *(target for _, target, _ in columns)}
        staged = {source: _free_name(taken, i) for i, (source, _, _) in enumerate(columns) if layouts[source] is VECTOR}
        prepared = dataset.withColumns(
            {
                staged[source]: VECTOR.values(as_input(source).column, codec, as_input(source).name)
                for source, _, codec in columns
                if source in staged
            }
        )

        def decode(source: str, codec: MLTCodec, handle: RowHandling) -> Column:
            shown = as_input(source)
            tokens = column_input(staged[source], shown.name) if source in staged else shown
            return decode_input(tokens, codec, layouts[source], handle, engine=engine, capabilities=capabilities)

        return self._add_columns(prepared, decode).drop(*staged.values())


def _free_name(taken: set[str], index: int) -> str:
    """A column name not in ``taken`` for the values of the vector input ``index``."""
    name = f"__spark_mlt_values_{index}"
    while name in taken:
        name += "_"
    return name
