"""Spark ML stages: ``MLTEncoder`` (an Estimator), ``MLTEncoderModel`` and ``MLTDecoder``.

``params`` holds the Params the stages share (Spark's ``HasInputCol(s)``,
``HasOutputCol(s)`` and ``HasHandleInvalid``, and spark-mlt's ``layout``, ``engine``,
``codecs``, ``p``/``n``/``seed``), ``encoder`` the encoder and its model, ``decoder`` the
decoder. The stages compute nothing themselves: they size codecs with
`spark_mlt.column.fit_codecs` and transform with the column functions.

Example::

    from spark_mlt.ml import MLTDecoder, MLTEncoder
    model = MLTEncoder(inputCols=["userId", "movieId"], p=7).fit(ratings)
    tokens = model.transform(ratings)
"""

from __future__ import annotations

from spark_mlt.ml.decoder import MLTDecoder
from spark_mlt.ml.encoder import MLTEncoder, MLTEncoderModel

__all__ = ["MLTDecoder", "MLTEncoder", "MLTEncoderModel"]
