"""The hashing trick of the paper's baseline: scikit-learn's ``FeatureHasher``.

Each rating is the two strings ``user_<id>`` and ``movie_<id>``; a string's feature index is
``|h| mod width`` and its value ``+1`` where ``h >= 0``, else ``-1`` (``alternate_sign``), with
``h`` the signed 32-bit MurmurHash3 (x86, seed 0) of its UTF-8 bytes
(``sklearn.utils.murmurhash3_32(s, positive=False)``). Only the distinct ids are hashed (an
array lookup per row after that), so the cost is in the number of ids.

scikit-learn is part of the ``paper`` extra, so it is imported where it is used: spark-mlt
imports without it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["hashed_features"]


def hashed_features(
    prefix: str, ids: npt.NDArray[np.int64], width: int
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float32]]:
    """The feature index and sign of ``f"{prefix}{id}"`` for every id, as ``FeatureHasher``
    hashes the one-string sample ``[f"{prefix}{id}"]`` into ``width`` features.

    Example::

        >>> index, sign = hashed_features("user_", np.array([1, 2, 1]), 512)
        >>> index.tolist(), sign.tolist()
        ([315, 212, 315], [-1.0, 1.0, -1.0])
    """
    from sklearn.feature_extraction import FeatureHasher

    distinct, inverse = np.unique(ids, return_inverse=True)
    if not len(distinct):  # FeatureHasher refuses an empty batch
        return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32)
    hasher = FeatureHasher(n_features=width, input_type="string", alternate_sign=True)
    matrix = hasher.transform([f"{prefix}{value}"] for value in distinct.tolist())
    # One string per sample, value +-1: exactly one stored entry per row, so the CSR's column
    # indices and data are the rows' index and sign in row order. (For h = -2^31, |h| overflows
    # int32; FeatureHasher then takes (2^31 - width) mod width, which is 0 = 2^31 mod width for a
    # power-of-two width such as the paper's 512.)
    index = matrix.indices.astype(np.int32)
    sign = matrix.data.astype(np.float32)
    return index[inverse], sign[inverse]
