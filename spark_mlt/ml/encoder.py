"""``MLTEncoder`` (an Estimator) and ``MLTEncoderModel``: id columns to MLT token columns.

Design decisions:

* ``fit`` only sizes the codecs, with `spark_mlt.column.fit_codecs` (one aggregation
  for all the columns that need it), and ``transform`` only calls
  [`spark_mlt.column.mlt_encode`][spark_mlt.column.mlt_encode]: the stages add Spark ML's Params, persistence and
  ``handleInvalid="skip"`` (a column function cannot drop rows) and nothing else.
* The default layout is ``vector`` (tokens / (p - 1) in a dense ML vector), which
  ``VectorAssembler`` and the estimators of ``pyspark.ml`` take as it is.
* The model keeps the encoder's column Params in the form they were given (``inputCol`` or
  ``inputCols``), with the output names resolved (``<input>_mlt`` when not set).
"""

from __future__ import annotations

from pyspark import keyword_only
from pyspark.ml import Estimator, Model
from pyspark.ml.util import DefaultParamsReadable, DefaultParamsWritable
from pyspark.sql import DataFrame

from spark_mlt.capabilities import Capabilities
from spark_mlt.codec import DEFAULT_SEED, MLTCodec
from spark_mlt.column import fit_codecs, mlt_encode
from spark_mlt.ml.params import HasCodecSizing, HasLayout, MLTCodecStageParams, MLTStageParams

__all__ = ["MLTEncoder", "MLTEncoderModel"]


class MLTEncoder(
    Estimator["MLTEncoderModel"],
    MLTStageParams,
    HasLayout,
    HasCodecSizing,
    DefaultParamsReadable["MLTEncoder"],
    DefaultParamsWritable,
):
    """Fits one MLT codec per input column and returns an
    [`MLTEncoderModel`][spark_mlt.ml.encoder.MLTEncoderModel], which adds each column's MLT tokens.

    Where p or n is not set, ``fit`` measures each column's largest id and sizes its codec
    by the paper's rule ``p**n > max id`` (`spark_mlt.column.fit_codecs`).

    Params (each with a ``set<Name>`` and ``get<Name>``):

    * ``inputCol`` / ``outputCol``, or ``inputCols`` / ``outputCols``: id columns (integral,
      or decimal holding whole numbers) and their token columns (default ``<input>_mlt``).
    * ``p``, ``n``: codec parameters shared by every column (unset: sized from the data).
    * ``seed``: seed of the codec matrix draw (default 42).
    * ``layout``: ``"vector"`` (default: dense vectors of tokens / (p - 1), ready for
      ``VectorAssembler``), ``"array"``, ``"struct"`` or ``"packed"``.
    * ``handleInvalid``: ``"error"`` (default: fail the query naming the id), ``"null"``
      (null tokens, row kept) or ``"skip"`` (drop rows with an invalid id).
    * ``engine``: ``"auto"`` (default), ``"native"`` or ``"udf"``.

    Example::

        encoder = MLTEncoder(inputCols=["userId", "movieId"], p=7).setLayout("array")
        model = encoder.fit(ratings)            # sizes n from each column's largest id
        tokens = model.transform(ratings)       # adds userId_mlt and movieId_mlt
        model.write().overwrite().save(path)    # MLTEncoderModel.load(path)
    """

    @keyword_only
    def __init__(
        self,
        *,
        inputCol: str | None = None,  # noqa: N803 - Spark ML naming
        outputCol: str | None = None,  # noqa: N803
        inputCols: list[str] | None = None,  # noqa: N803
        outputCols: list[str] | None = None,  # noqa: N803
        p: int | None = None,
        n: int | None = None,
        seed: int = DEFAULT_SEED,
        layout: str = "vector",
        handleInvalid: str = "error",  # noqa: N803
        engine: str = "auto",
    ) -> None:
        super().__init__()
        self._setDefault(seed=DEFAULT_SEED, layout="vector", handleInvalid="error", engine="auto")
        self.setParams(**self._input_kwargs)  # type: ignore[attr-defined]  # set by @keyword_only

    @keyword_only
    def setParams(  # noqa: N802 - Spark ML naming
        self,
        *,
        inputCol: str | None = None,  # noqa: N803
        outputCol: str | None = None,  # noqa: N803
        inputCols: list[str] | None = None,  # noqa: N803
        outputCols: list[str] | None = None,  # noqa: N803
        p: int | None = None,
        n: int | None = None,
        seed: int = DEFAULT_SEED,
        layout: str = "vector",
        handleInvalid: str = "error",  # noqa: N803
        engine: str = "auto",
    ) -> MLTEncoder:
        """Sets the Params given."""
        kwargs = self._input_kwargs  # type: ignore[attr-defined]  # set by @keyword_only
        return self._set(**{name: value for name, value in kwargs.items() if value is not None})

    def _fit(self, dataset: DataFrame) -> MLTEncoderModel:
        pairs = self._columns()
        layout, handle, engine = self.getLayout(), self.getHandleInvalid(), self.getEngine()
        inputs = [source for source, _ in pairs]
        sized = fit_codecs(dataset, inputs, p=self.getP(), n=self.getN(), seed=self.getSeed())
        codecs: list[MLTCodec | str] = [sized[source] for source in inputs]
        model = MLTEncoderModel(codecs=codecs, layout=layout, handleInvalid=handle, engine=engine)
        if self.isSet(self.inputCol):
            return model.setInputCol(pairs[0][0]).setOutputCol(pairs[0][1])
        return model.setInputCols(inputs).setOutputCols([target for _, target in pairs])


class MLTEncoderModel(
    Model,
    MLTCodecStageParams,
    HasLayout,
    DefaultParamsReadable["MLTEncoderModel"],
    DefaultParamsWritable,
):
    """Adds the MLT tokens of each input column: a fitted [`MLTEncoder`][spark_mlt.ml.encoder.MLTEncoder], or one built
    from known codecs.

    Params (each with a ``set<Name>`` and ``get<Name>``): ``codecs`` (one per input column;
    ``getCodecs()`` returns [`MLTCodec`][spark_mlt.codec.codec.MLTCodec] objects, ``setCodecs`` takes them or their JSON
    documents), ``inputCol``/``outputCol`` or ``inputCols``/``outputCols``, ``layout``
    (default ``"vector"``), ``handleInvalid`` and ``engine``, as in [`MLTEncoder`][spark_mlt.ml.encoder.MLTEncoder].

    Example::

        model = MLTEncoderModel(codecs=[MLTCodec.from_seed(13, 3)], inputCol="userId", layout="packed")
        model.transform(ratings).select("userId", "userId_mlt")
    """

    @keyword_only
    def __init__(
        self,
        *,
        codecs: list[MLTCodec | str] | None = None,
        inputCol: str | None = None,  # noqa: N803 - Spark ML naming
        outputCol: str | None = None,  # noqa: N803
        inputCols: list[str] | None = None,  # noqa: N803
        outputCols: list[str] | None = None,  # noqa: N803
        layout: str = "vector",
        handleInvalid: str = "error",  # noqa: N803
        engine: str = "auto",
    ) -> None:
        super().__init__()
        self._setDefault(layout="vector", handleInvalid="error", engine="auto")
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
        layout: str = "vector",
        handleInvalid: str = "error",  # noqa: N803
        engine: str = "auto",
    ) -> MLTEncoderModel:
        """Sets the Params given."""
        kwargs = self._input_kwargs  # type: ignore[attr-defined]  # set by @keyword_only
        return self._set(**{name: value for name, value in kwargs.items() if value is not None})

    def _transform(self, dataset: DataFrame) -> DataFrame:
        layout, engine = self.getLayout(), self.getEngine()
        capabilities = Capabilities.of(dataset.sparkSession)
        return self._add_columns(
            dataset,
            lambda source, codec, handle: mlt_encode(
                source, codec, layout=layout, handle_invalid=handle, engine=engine, capabilities=capabilities
            ),
        )
