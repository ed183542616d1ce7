"""spark-mlt: Modular Linear Tokenization for Apache Spark and Delta Lake.

The package reads as its data flow, each layer importing only the ones before it:

* [`spark_mlt.codec`][spark_mlt.codec]: the pure NumPy codec (no Spark);
* `spark_mlt.column`: PySpark column functions, two engines (native SQL, vectorised UDF);
* [`spark_mlt.ml`][spark_mlt.ml]: Spark ML stages over the column functions;
* [`spark_mlt.storage`][spark_mlt.storage]: Delta Lake tables with their codecs in the table properties;
* [`spark_mlt.batch`][spark_mlt.batch]: the batch jobs and the ``spark-mlt`` command.

[`spark_mlt.options`][spark_mlt.options] names the options every layer shares,
[`spark_mlt.errors`][spark_mlt.errors] holds the one exception hierarchy. The codec and the errors
import without PySpark; the Spark names below (``mlt_encode``, ``MLTEncoder``, ``write_delta``, ...)
load PySpark when first used.

Example::

    >>> from spark_mlt import MLTCodec
    >>> codec = MLTCodec.from_seed(p=13, n=6, seed=42)
    >>> codec.decode(codec.encode([42])).tolist()
    [42]
"""

from __future__ import annotations

from importlib import metadata as _metadata

from spark_mlt._lazy import lazy_attributes
from spark_mlt.codec import MLTCodec, load_light_mlt_params
from spark_mlt.errors import (
    CodecFormatError,
    CodecMismatchError,
    CodecParameterError,
    ConstraintViolationError,
    InvalidIdError,
    InvalidTokenError,
    MissingCodecError,
    MissingTableError,
    MLTError,
    MLTTypeError,
    OptionError,
    SourceError,
    TableError,
    TableExistsError,
    TableFeatureError,
    TableSchemaError,
    VocabularyError,
)

try:  # the one version source: the package metadata (pyproject.toml; the --py-files zip carries it too)
    __version__ = _metadata.version("spark-mlt")
except _metadata.PackageNotFoundError:  # sources on sys.path without an install
    __version__ = "0+unknown"

#: Spark-layer names, imported on first use so that the codec works without PySpark.
_LAZY = {
    "mlt_encode": "spark_mlt.column",
    "mlt_decode": "spark_mlt.column",
    "mlt_unpack": "spark_mlt.column",
    "register_mlt_functions": "spark_mlt.column",
    "MLTEncoder": "spark_mlt.ml",
    "MLTEncoderModel": "spark_mlt.ml",
    "MLTDecoder": "spark_mlt.ml",
    "read_codecs": "spark_mlt.storage",
    "read_delta": "spark_mlt.storage",
    "write_delta": "spark_mlt.storage",
}


__getattr__ = lazy_attributes(__name__, _LAZY)


__all__ = [
    "CodecFormatError",
    "CodecMismatchError",
    "CodecParameterError",
    "ConstraintViolationError",
    "InvalidIdError",
    "InvalidTokenError",
    "MLTCodec",
    "MLTDecoder",
    "MLTEncoder",
    "MLTEncoderModel",
    "MLTError",
    "MLTTypeError",
    "MissingCodecError",
    "MissingTableError",
    "OptionError",
    "SourceError",
    "TableError",
    "TableExistsError",
    "TableFeatureError",
    "TableSchemaError",
    "VocabularyError",
    "__version__",
    "load_light_mlt_params",
    "mlt_decode",
    "mlt_encode",
    "mlt_unpack",
    "read_codecs",
    "read_delta",
    "register_mlt_functions",
    "write_delta",
]
