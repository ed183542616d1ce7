"""spark-mlt: Modular Linear Tokenization for Apache Spark and Delta Lake.

Example::

    >>> from spark_mlt import MLTCodec
    >>> codec = MLTCodec.from_seed(p=13, n=6, seed=42)
    >>> codec.decode(codec.encode([42])).tolist()
    [42]
"""

from __future__ import annotations

from spark_mlt.codec import MLTCodec
from spark_mlt.compat import load_light_mlt_params
from spark_mlt.errors import (
    CodecFormatError,
    CodecParameterError,
    InvalidIdError,
    InvalidTokenError,
    MLTError,
    MLTTypeError,
)

__version__ = "0.1.0"

__all__ = [
    "CodecFormatError",
    "CodecParameterError",
    "InvalidIdError",
    "InvalidTokenError",
    "MLTCodec",
    "MLTError",
    "MLTTypeError",
    "__version__",
    "load_light_mlt_params",
]
