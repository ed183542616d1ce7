"""The Params of the spark-mlt ML stages, and the rules they apply when a Param is set.

Design decisions:

* Columns and invalid rows use Spark's own shared mixins (``HasInputCol``, ``HasInputCols``,
  ``HasOutputCol``, ``HasOutputCols``, ``HasHandleInvalid``), so the stages read like those of
  ``pyspark.ml.feature``; ``layout``, ``engine``, ``codecs`` and the codec sizing (``p``,
  ``n``, ``seed``) are mixins of their own, named with the words of [`spark_mlt.options`][spark_mlt.options].
* The setters live in the mixins, typed to return the stage they are called on, so every
  stage has a ``set<Name>`` and ``get<Name>`` for each of its Params without a copy per class.
* ``handleInvalid`` takes ``error``, ``null`` and ``skip``. Spark's ``keep`` puts invalid
  values in an extra bucket, which MLT does not have, so it is refused.
* Option values are checked by each Param's type converter, which pyspark runs whenever a
  Param is set (constructor, setters, ``Params.set``, loading a saved stage), so a typo fails
  where it is written, with an [`OptionError`][spark_mlt.errors.OptionError] naming the Param.
* ``codecs`` holds the codecs' JSON documents (a list of strings), so Spark ML's default
  persistence saves them as JSON; they are validated when set and again when loaded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from pyspark.ml.param import Param, Params, TypeConverters
from pyspark.ml.param.shared import HasHandleInvalid, HasInputCol, HasInputCols, HasOutputCol, HasOutputCols
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_mlt.codec import DEFAULT_SEED, MLTCodec
from spark_mlt.column.layouts import LAYOUTS, Layout
from spark_mlt.errors import OptionError
from spark_mlt.options import ENGINES, STAGE_HANDLING, TOKEN_SUFFIX, Engine, RowHandling, StageHandling, check_choice

__all__ = [
    "HasCodecSizing",
    "HasCodecs",
    "HasEngine",
    "HasLayout",
    "MLTCodecStageParams",
    "MLTStageParams",
    "to_choice",
]

P = TypeVar("P", bound=Params)
C = TypeVar("C", bound=str)


def to_choice(name: str, choices: Sequence[C]) -> Callable[[Any], C]:
    """A Param type converter that accepts only ``choices`` (pyspark runs it on every set), so
    a getter returns one of them without checking again."""

    def convert(value: Any) -> C:
        return check_choice(name, TypeConverters.toString(value), choices)

    return convert


def _to_codec_documents(value: Any) -> list[str]:
    """The canonical JSON documents of codecs given as [`MLTCodec`][spark_mlt.codec.codec.MLTCodec] objects or JSON."""
    documents = []
    for item in TypeConverters.toList(value):
        if isinstance(item, MLTCodec):
            documents.append(item.to_json())
        elif isinstance(item, str):
            documents.append(MLTCodec.from_json(item).to_json())  # CodecFormatError if corrupt
        else:
            raise TypeError(f"codecs must be MLTCodec objects or their JSON documents, got {type(item).__name__}")
    return documents


class HasLayout(Params):
    """Mixin for Param layout: the token layout."""

    layout: Param[Layout] = Param(
        Params._dummy(),
        "layout",
        "token layout: 'vector' (dense ML vector of token / (p - 1)), 'array' (array<int>), 'struct' "
        "(fields t0..t{n-1}) or 'packed' (one bigint)",
        typeConverter=to_choice("layout", LAYOUTS),
    )

    def getLayout(self) -> Layout:  # noqa: N802 - Spark ML naming
        """Gets the value of layout or its default value."""
        value: Layout = self.getOrDefault(self.layout)  # checked by the Param's converter
        return value

    def setLayout(self: P, value: str) -> P:  # noqa: N802
        """Sets the value of :py`layout`."""
        return self._set(layout=value)


class HasEngine(Params):
    """Mixin for Param engine: which implementation computes the tokens."""

    engine: Param[Engine] = Param(
        Params._dummy(),
        "engine",
        "'native' (Spark SQL expressions), 'udf' (vectorised UDF over the NumPy codec) or 'auto' (native)",
        typeConverter=to_choice("engine", ENGINES),
    )

    def getEngine(self) -> Engine:  # noqa: N802 - Spark ML naming
        """Gets the value of engine or its default value."""
        value: Engine = self.getOrDefault(self.engine)  # checked by the Param's converter
        return value

    def setEngine(self: P, value: str) -> P:  # noqa: N802
        """Sets the value of :py`engine`."""
        return self._set(engine=value)


class HasCodecs(Params):
    """Mixin for Param codecs: one codec per input column, stored as its JSON document."""

    codecs: Param[list[str]] = Param(
        Params._dummy(),
        "codecs",
        "codec JSON documents (MLTCodec.to_json()), one per input column",
        typeConverter=_to_codec_documents,
    )

    def getCodecs(self) -> list[MLTCodec]:  # noqa: N802 - Spark ML naming
        """The codecs, one per input column, validated from their JSON documents."""
        if not self.isDefined(self.codecs):
            raise OptionError("codecs must be set (one codec per input column)", parameter="codecs")
        return [MLTCodec.from_json(document) for document in self.getOrDefault(self.codecs)]

    def setCodecs(self: P, value: Sequence[MLTCodec | str]) -> P:  # noqa: N802
        """Sets :py`codecs` from [`MLTCodec`][spark_mlt.codec.codec.MLTCodec] objects or their JSON documents."""
        return self._set(codecs=list(value))


class HasCodecSizing(Params):
    """Mixin for Params p, n and seed: the codec parameters, shared by every input column."""

    p: Param[int] = Param(
        Params._dummy(), "p", "prime modulus (unset: sized from the data)", typeConverter=TypeConverters.toInt
    )
    n: Param[int] = Param(
        Params._dummy(), "n", "tokens per id (unset: sized from the data)", typeConverter=TypeConverters.toInt
    )
    seed: Param[int] = Param(
        Params._dummy(), "seed", f"seed of the matrix draw (default {DEFAULT_SEED})", typeConverter=TypeConverters.toInt
    )

    def getP(self) -> int | None:  # noqa: N802 - Spark ML naming
        """Gets the value of p, or None when it is sized from the data."""
        return int(self.getOrDefault(self.p)) if self.isSet(self.p) else None

    def setP(self: P, value: int) -> P:  # noqa: N802
        """Sets the value of :py`p`."""
        return self._set(p=value)

    def getN(self) -> int | None:  # noqa: N802
        """Gets the value of n, or None when it is sized from the data."""
        return int(self.getOrDefault(self.n)) if self.isSet(self.n) else None

    def setN(self: P, value: int) -> P:  # noqa: N802
        """Sets the value of :py`n`."""
        return self._set(n=value)

    def getSeed(self) -> int:  # noqa: N802
        """Gets the value of seed or its default value."""
        return int(self.getOrDefault(self.seed))

    def setSeed(self: P, value: int) -> P:  # noqa: N802
        """Sets the value of :py`seed`."""
        return self._set(seed=value)


class MLTStageParams(HasInputCol, HasInputCols, HasOutputCol, HasOutputCols, HasHandleInvalid, HasEngine):
    """The Params of every spark-mlt stage: columns, ``handleInvalid``, ``engine`` (and each
    stage's own ``layout``)."""

    handleInvalid: Param[str] = Param(  # noqa: N815 - Spark ML naming
        Params._dummy(),
        "handleInvalid",
        "how to handle invalid ids or token vectors: 'error' (fail the query), 'null' (null output, "
        "row kept) or 'skip' (drop rows whose output is null while their input is not)",
        typeConverter=to_choice("handleInvalid", STAGE_HANDLING),
    )

    def getHandleInvalid(self) -> StageHandling:  # noqa: N802 - Spark ML naming
        """Gets the value of handleInvalid or its default value."""
        return cast("StageHandling", self.getOrDefault(self.handleInvalid))  # checked by the Param's converter

    #: an output column not set is named input + this
    _output_suffix: str = TOKEN_SUFFIX

    def setInputCol(self: P, value: str) -> P:  # noqa: N802 - Spark ML naming
        """Sets the value of :py`inputCol`."""
        return self._set(inputCol=value)

    def setInputCols(self: P, value: list[str]) -> P:  # noqa: N802
        """Sets the value of :py`inputCols`."""
        return self._set(inputCols=value)

    def setOutputCol(self: P, value: str) -> P:  # noqa: N802
        """Sets the value of :py`outputCol`."""
        return self._set(outputCol=value)

    def setOutputCols(self: P, value: list[str]) -> P:  # noqa: N802
        """Sets the value of :py`outputCols`."""
        return self._set(outputCols=value)

    def setHandleInvalid(self: P, value: str) -> P:  # noqa: N802
        """Sets the value of :py`handleInvalid`."""
        return self._set(handleInvalid=value)

    def _columns(self) -> list[tuple[str, str]]:
        """(input, output) column pairs from inputCol/outputCol or inputCols/outputCols;
        an output not set is named ``<input>_mlt`` (encoder) or ``<input>_id`` (decoder)."""
        if self.isSet(self.inputCol) and self.isSet(self.inputCols):
            raise OptionError("inputCols: set either inputCol or inputCols, not both", parameter="inputCols")
        if self.isSet(self.inputCols):
            if self.isSet(self.outputCol):
                raise OptionError("outputCol goes with inputCol; with inputCols set outputCols", parameter="outputCol")
            inputs = self.getInputCols()
            outputs = self.getOutputCols() if self.isSet(self.outputCols) else [c + self._output_suffix for c in inputs]
        elif self.isSet(self.inputCol):
            if self.isSet(self.outputCols):
                raise OptionError("outputCols goes with inputCols; with inputCol set outputCol", parameter="outputCols")
            inputs = [self.getInputCol()]
            outputs = [self.getOutputCol() if self.isSet(self.outputCol) else inputs[0] + self._output_suffix]
        else:
            raise OptionError("inputCol: inputCol or inputCols must be set", parameter="inputCol")
        if len(inputs) != len(outputs):
            raise OptionError(
                f"inputCols has {len(inputs)} columns but outputCols has {len(outputs)}", parameter="inputCols"
            )
        return list(zip(inputs, outputs, strict=True))


class MLTCodecStageParams(MLTStageParams, HasCodecs):
    """The Params of the stages that apply codecs (the encoder model, the decoder), and the
    loop that adds one output column per input column."""

    def _add_columns(self, dataset: DataFrame, make: Callable[[str, MLTCodec, RowHandling], Column]) -> DataFrame:
        """``dataset`` with ``make(input, codec, "error" | "null")`` as each output column;
        ``handleInvalid="skip"`` then drops the rows where an output is null but its input is not."""
        columns = self._column_codecs()
        handle = self.getHandleInvalid()
        column_handle: RowHandling = "error" if handle == "error" else "null"
        out = dataset.withColumns({target: make(source, codec, column_handle) for source, target, codec in columns})
        if handle == "skip":
            for source, target, _ in columns:
                out = out.where(F.col(source).isNull() | F.col(target).isNotNull())
        return out

    def _column_codecs(self) -> list[tuple[str, str, MLTCodec]]:
        """(input, output, codec) for each input column; the codecs must be one per input."""
        pairs = self._columns()
        codecs = self.getCodecs()
        if len(codecs) != len(pairs):
            raise OptionError(f"codecs has {len(codecs)} codecs for {len(pairs)} input columns", parameter="codecs")
        return [(source, target, codec) for (source, target), codec in zip(pairs, codecs, strict=True)]
