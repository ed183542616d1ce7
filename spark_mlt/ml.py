"""Spark ML stages: ``MLTEncoder`` (Estimator), ``MLTEncoderModel`` and ``MLTDecoder``.

They follow ``pyspark.ml.feature.StringIndexer`` / ``FeatureHasher``: ``inputCol``/``outputCol``
or ``inputCols``/``outputCols``, and ``handleInvalid`` = ``"error"`` (fail), ``"skip"``
(drop the row) or ``"keep"`` (null tokens). Codecs are stored as their JSON documents in an
ordinary Param, so ``model.write().save(path)`` / ``MLTEncoderModel.load(path)`` (Spark ML's
default params persistence) keep them as JSON, validated again on load.

Example::

    encoder = MLTEncoder(inputCols=["userId", "movieId"], outputCols=["user_mlt", "movie_mlt"], p=7)
    model = encoder.fit(ratings)            # sizes n from each column's max id
    features = model.transform(ratings)     # dense vectors of tokens / (p - 1)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark import keyword_only
from pyspark.ml import Estimator, Model, Transformer
from pyspark.ml.functions import vector_to_array
from pyspark.ml.param import Param, Params, TypeConverters
from pyspark.ml.param.shared import HasInputCol, HasInputCols, HasOutputCol, HasOutputCols
from pyspark.ml.util import DefaultParamsReadable, DefaultParamsWritable
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_mlt.codec import DEFAULT_SEED, MLTCodec
from spark_mlt.errors import MLTTypeError
from spark_mlt.functions import mlt_decode, mlt_encode

__all__ = ["MLTDecoder", "MLTEncoder", "MLTEncoderModel"]


class _MLTParams(HasInputCol, HasOutputCol, HasInputCols, HasOutputCols):
    handleInvalid: Param[str] = Param(  # noqa: N815 - Spark ML naming
        Params._dummy(),
        "handleInvalid",
        "how to handle invalid ids or tokens: 'error' (fail), 'skip' (drop the row) or 'keep' (null)",
        typeConverter=TypeConverters.toString,
    )
    engine: Param[str] = Param(
        Params._dummy(), "engine", "'auto', 'native' or 'udf'", typeConverter=TypeConverters.toString
    )

    def _columns(self) -> list[tuple[str, str]]:
        """(input, output) column pairs from inputCol/outputCol or inputCols/outputCols."""
        if self.isSet(self.inputCol) and self.isSet(self.inputCols):
            raise MLTTypeError("set either inputCol or inputCols, not both")
        if self.isSet(self.inputCols):
            inputs = self.getInputCols()
            outputs = self.getOutputCols() if self.isSet(self.outputCols) else [f"{c}_mlt" for c in inputs]
        elif self.isSet(self.inputCol):
            inputs = [self.getInputCol()]
            outputs = [self.getOutputCol() if self.isSet(self.outputCol) else f"{inputs[0]}_mlt"]
        else:
            raise MLTTypeError("inputCol or inputCols must be set")
        if len(inputs) != len(outputs):
            raise MLTTypeError(f"inputCols has {len(inputs)} columns but outputCols has {len(outputs)}")
        return list(zip(inputs, outputs, strict=True))

    def _check_handle_invalid(self) -> str:
        value = self.getOrDefault(self.handleInvalid)
        if value not in ("error", "skip", "keep"):
            raise MLTTypeError(f"handleInvalid must be 'error', 'skip' or 'keep', got {value!r}")
        return value


class _CodecParams(Params):
    codecs: Param[list[str]] = Param(
        Params._dummy(),
        "codecs",
        "codec JSON documents, one per input column",
        typeConverter=TypeConverters.toListString,
    )

    def getCodecs(self) -> list[MLTCodec]:  # noqa: N802 - Spark ML naming
        """The codecs, one per input column (validated from their JSON documents)."""
        return [MLTCodec.from_json(document) for document in self.getOrDefault(self.codecs)]

    def _apply(self, dataset: DataFrame, make: Callable[[str, MLTCodec, Any], Column]) -> DataFrame:
        """Add ``make(input column, codec, handle_invalid)`` as each output column;
        ``handleInvalid="skip"`` then drops the rows where it came out null."""
        if not isinstance(self, _MLTParams):  # pragma: no cover - every stage mixes both in
            raise TypeError("codec stages need input/output column params")
        pairs = self._columns()
        codecs = self.getCodecs()
        if len(codecs) != len(pairs):
            raise MLTTypeError(f"{len(pairs)} input columns but {len(codecs)} codecs")
        handle = self._check_handle_invalid()
        out = dataset
        for (source, target), codec in zip(pairs, codecs, strict=True):
            out = out.withColumn(target, make(source, codec, "error" if handle == "error" else "null"))
            if handle == "skip":
                out = out.where(F.col(source).isNull() | F.col(target).isNotNull())
        return out


class MLTEncoder(Estimator["MLTEncoderModel"], _MLTParams, DefaultParamsReadable["MLTEncoder"], DefaultParamsWritable):
    """Fits one MLT codec per input column and returns an :class:`MLTEncoderModel`.

    Where p or n is not given, ``fit`` measures each column's largest id and sizes the codec
    by the paper's rule ``p**n > max id`` (see :meth:`MLTCodec.for_cardinality`).

    Args:
        p, n, seed: codec parameters shared by every column (seed defaults to 42).
        outputFormat: ``"vector"`` (default: dense vectors of tokens / (p - 1), ready for
            VectorAssembler), ``"array"`` or ``"struct"``.
    """

    p: Param[int] = Param(Params._dummy(), "p", "prime modulus (None: sized from the data)", TypeConverters.toInt)
    n: Param[int] = Param(Params._dummy(), "n", "tokens per id (None: sized from the data)", TypeConverters.toInt)
    seed: Param[int] = Param(Params._dummy(), "seed", "seed of the matrix draw", TypeConverters.toInt)
    outputFormat: Param[str] = Param(  # noqa: N815 - Spark ML naming
        Params._dummy(), "outputFormat", "'vector', 'array' or 'struct'", TypeConverters.toString
    )

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
        handleInvalid: str = "error",  # noqa: N803
        outputFormat: str = "vector",  # noqa: N803
        engine: str = "auto",
    ) -> None:
        super().__init__()
        self._setDefault(seed=DEFAULT_SEED, handleInvalid="error", outputFormat="vector", engine="auto")
        kwargs = self._input_kwargs  # type: ignore[attr-defined]  # set by @keyword_only
        self._set(**{k: v for k, v in kwargs.items() if v is not None})

    def _fit(self, dataset: DataFrame) -> MLTEncoderModel:
        pairs = self._columns()
        p = self.getOrDefault(self.p) if self.isSet(self.p) else None
        n = self.getOrDefault(self.n) if self.isSet(self.n) else None
        seed = self.getOrDefault(self.seed)
        self._check_handle_invalid()
        if p is not None and n is not None:
            codecs = [MLTCodec.from_seed(p, n, seed) for _ in pairs]
        else:
            maxima = dataset.agg(
                *[F.max(F.col(c)).cast("decimal(38,0)").alias(f"m{i}") for i, (c, _) in enumerate(pairs)]
            )
            row = maxima.first()
            largest = [0 if row is None or row[i] is None else max(0, int(row[i])) for i in range(len(pairs))]
            codecs = [MLTCodec.for_cardinality(v, p=p, n=n, seed=seed) for v in largest]
        model = MLTEncoderModel(
            codecs=[c.to_json() for c in codecs],
            inputCols=[c for c, _ in pairs],
            outputCols=[o for _, o in pairs],
            handleInvalid=self.getOrDefault(self.handleInvalid),
            outputFormat=self.getOrDefault(self.outputFormat),
            engine=self.getOrDefault(self.engine),
        )
        return model


class MLTEncoderModel(Model, _MLTParams, _CodecParams, DefaultParamsReadable["MLTEncoderModel"], DefaultParamsWritable):
    """Adds the MLT tokens of each input column (a fitted :class:`MLTEncoder`)."""

    outputFormat: Param[str] = Param(  # noqa: N815 - Spark ML naming
        Params._dummy(), "outputFormat", "'vector', 'array' or 'struct'", TypeConverters.toString
    )

    @keyword_only
    def __init__(
        self,
        *,
        codecs: list[str] | None = None,
        inputCols: list[str] | None = None,  # noqa: N803 - Spark ML naming
        outputCols: list[str] | None = None,  # noqa: N803
        handleInvalid: str = "error",  # noqa: N803
        outputFormat: str = "vector",  # noqa: N803
        engine: str = "auto",
    ) -> None:
        super().__init__()
        self._setDefault(handleInvalid="error", outputFormat="vector", engine="auto")
        kwargs = self._input_kwargs  # type: ignore[attr-defined]  # set by @keyword_only
        self._set(**{k: v for k, v in kwargs.items() if v is not None})

    def _transform(self, dataset: DataFrame) -> DataFrame:
        output: Any = self.getOrDefault(self.outputFormat)  # checked by mlt_encode
        engine: Any = self.getOrDefault(self.engine)
        return self._apply(
            dataset,
            lambda source, codec, handle: mlt_encode(
                source, codec, output=output, handle_invalid=handle, engine=engine
            ),
        )


class MLTDecoder(Transformer, _MLTParams, _CodecParams, DefaultParamsReadable["MLTDecoder"], DefaultParamsWritable):
    """Turns token columns back into bigint ids: whatever :class:`MLTEncoderModel` writes
    (its default vector, arrays, structs) and packed bigints; ``inputFormat="auto"`` (the
    default) reads the layout from each column's type.

    Example::

        decoder = MLTDecoder.from_codecs(model.getCodecs(), inputCols=["user_mlt"], outputCols=["userId_back"])
    """

    inputFormat: Param[str] = Param(  # noqa: N815 - Spark ML naming
        Params._dummy(),
        "inputFormat",
        "'auto' (from the column's type), 'vector', 'array', 'struct' or 'packed'",
        TypeConverters.toString,
    )

    @keyword_only
    def __init__(
        self,
        *,
        codecs: list[str] | None = None,
        inputCol: str | None = None,  # noqa: N803 - Spark ML naming
        outputCol: str | None = None,  # noqa: N803
        inputCols: list[str] | None = None,  # noqa: N803
        outputCols: list[str] | None = None,  # noqa: N803
        handleInvalid: str = "error",  # noqa: N803
        inputFormat: str = "auto",  # noqa: N803
        engine: str = "auto",
    ) -> None:
        super().__init__()
        self._setDefault(handleInvalid="error", inputFormat="auto", engine="auto")
        kwargs = self._input_kwargs  # type: ignore[attr-defined]  # set by @keyword_only
        self._set(**{k: v for k, v in kwargs.items() if v is not None})

    @classmethod
    def from_codecs(cls, codecs: list[MLTCodec], **params: Any) -> MLTDecoder:
        """A decoder for the given codecs (one per input column)."""
        return cls(codecs=[c.to_json() for c in codecs], **params)

    def _transform(self, dataset: DataFrame) -> DataFrame:
        wanted = self.getOrDefault(self.inputFormat)
        engine: Any = self.getOrDefault(self.engine)

        def decode(source: str, codec: MLTCodec, handle: Any) -> Column:
            form: Any = token_form_of(dataset, source, wanted)
            if form != "vector":
                return mlt_decode(source, codec, form=form, handle_invalid=handle, engine=engine)
            scale = float(max(codec.p - 1, 1))  # the encoder wrote token / (p - 1)
            vector = F.col(source)
            scaled = F.transform(vector_to_array(vector), lambda v: F.round(v * scale).cast("int"))
            tokens = F.when(vector.isNull(), F.lit(None)).otherwise(scaled)
            return mlt_decode(tokens, codec, form="array", handle_invalid=handle, engine=engine)

        return self._apply(dataset, decode)


TOKEN_FORMS = {"array": "ArrayType", "struct": "StructType", "packed": "LongType", "vector": "VectorUDT"}


def token_form_of(dataset: DataFrame, column: str, wanted: str = "auto") -> str:
    """The token layout of ``column``: ``wanted`` if its type matches, or (``"auto"``) the
    one its type shows: a vector (what :class:`MLTEncoderModel` writes by default), an
    array, a struct or a packed bigint.

    Raises:
        MLTTypeError: the column's type is no token layout, or not the one wanted; the
            message names the column, its type and how to fix it.
    """
    if wanted not in ("auto", *TOKEN_FORMS):
        raise MLTTypeError(f"inputFormat must be 'auto' or one of {', '.join(TOKEN_FORMS)}; got {wanted!r}")
    data_type = dataset.schema[column].dataType
    found = next((form for form, name in TOKEN_FORMS.items() if type(data_type).__name__ == name), None)
    if found is not None and wanted in ("auto", found):
        return found
    expected = "a token column (vector, array<int>, struct t0..t{n-1} or packed bigint)" if wanted == "auto" else wanted
    hint = f"set inputFormat='{found}' (or 'auto')" if found else "decode the column the encoder wrote"
    raise MLTTypeError(f"column {column!r} has type {data_type.simpleString()}, which is not {expected}; {hint}")
