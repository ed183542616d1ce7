"""The MLT codec: pure NumPy, no Spark.

``codec`` holds [`MLTCodec`][spark_mlt.codec.codec.MLTCodec] (validation, JSON document, checked packing), ``_kernels``
the vectorised encode/decode kernels, ``packing`` the packed layout's bit arithmetic,
``tables`` the lookup tables the native Spark engine embeds, ``modmath`` exact arithmetic over
Z_p, and ``light_mlt`` the import of light-mlt's parameter files. Nothing in this package
imports Spark.
"""

from __future__ import annotations

from spark_mlt.codec.codec import (
    DEFAULT_P,
    DEFAULT_SEED,
    FORMAT_NAME,
    FORMAT_VERSION,
    MAX_ID,
    MAX_N,
    MAX_P,
    MLTCodec,
)
from spark_mlt.codec.light_mlt import load_light_mlt_params
from spark_mlt.codec.packing import pack_bits, unpack_bits

__all__ = [
    "DEFAULT_P",
    "DEFAULT_SEED",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "MAX_ID",
    "MAX_N",
    "MAX_P",
    "MLTCodec",
    "load_light_mlt_params",
    "pack_bits",
    "unpack_bits",
]
