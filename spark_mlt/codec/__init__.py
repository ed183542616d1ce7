"""The MLT codec: pure NumPy, no Spark.

``codec`` holds :class:`MLTCodec` (validation, JSON document, packing), ``_kernels`` the
vectorised encode/decode kernels, ``modmath`` exact arithmetic over Z_p, and ``light_mlt``
the import of light-mlt's parameter files. Nothing in this package imports Spark.
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
    pack_bits,
)
from spark_mlt.codec.light_mlt import load_light_mlt_params

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
]
