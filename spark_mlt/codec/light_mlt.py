"""Interoperability with light-mlt, the reference implementation.

light-mlt stores its parameters as a pickle (``mlt_params.pkl``: column -> ``{"p", "n",
"M", "Minv"}``). Unpickling runs whatever the file names, so we read it through an
unpickler that resolves only NumPy's array-reconstruction functions and refuses every other
global: a crafted file fails before any of its code runs. We never write pickles.
"""

from __future__ import annotations

import io
import os
import pickle
from collections.abc import Mapping
from typing import Any

from spark_mlt.codec.codec import MLTCodec
from spark_mlt.errors import CodecFormatError

__all__ = ["load_light_mlt_params"]

# The only globals a pickled dict of ints and integer NumPy arrays refers to.
_ALLOWED_GLOBALS = frozenset(
    {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy.core.numeric", "_frombuffer"),
        ("numpy._core.numeric", "_frombuffer"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
    }
)


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED_GLOBALS:
            raise CodecFormatError(
                f"refusing to unpickle {module}.{name}: a light-mlt params file holds only "
                "dicts, ints and NumPy integer arrays"
            )
        # NumPy 2 renamed numpy.core to numpy._core; old pickles name the former.
        return super().find_class(module.replace("numpy.core.", "numpy._core."), name)


def load_light_mlt_params(source: str | os.PathLike[str] | bytes) -> dict[str, MLTCodec]:
    """Codecs from a light-mlt ``mlt_params.pkl`` (a path, or the file's bytes), by column.

    The pickle is read with a restricted unpickler (see the module docstring) and every
    column's parameters are validated (p prime, M invertible, Minv its inverse).

    Raises:
        CodecFormatError: the file is not a light-mlt params pickle, names a disallowed
            global, or holds invalid parameters.

    Example::

        codecs = load_light_mlt_params("light_mlt_artifacts/mlt_params.pkl")
        tokens = codecs["user_id"].encode(user_ids)
    """
    if isinstance(source, bytes):
        payload, origin = source, "<bytes>"
    else:
        with open(source, "rb") as handle:
            payload, origin = handle.read(), os.fspath(source)
    try:
        params = _RestrictedUnpickler(io.BytesIO(payload)).load()
    except CodecFormatError:
        raise
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means "not our format"
        raise CodecFormatError(f"{origin} is not a readable light-mlt params pickle: {exc}") from None
    if not isinstance(params, Mapping) or not all(isinstance(v, Mapping) for v in params.values()):
        raise CodecFormatError(f"{origin} must hold a dict of column -> {{p, n, M, Minv}}, got {type(params).__name__}")
    codecs = {}
    for column, column_params in params.items():
        try:
            codecs[str(column)] = MLTCodec.from_light_mlt_params(column_params)
        except CodecFormatError as exc:
            raise CodecFormatError(f"{origin}, column {column!r}: {exc}") from None
    return codecs
