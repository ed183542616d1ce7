"""Exception classes of spark-mlt.

Every error derives from :class:`MLTError`, itself a :class:`ValueError`, so callers can
catch the whole family or one kind. Messages name the offending value (and its row, for
data) and what was expected.
"""

from __future__ import annotations

__all__ = [
    "CodecFormatError",
    "CodecParameterError",
    "InvalidIdError",
    "InvalidTokenError",
    "MLTError",
    "MLTTypeError",
]


class MLTError(ValueError):
    """Base class of every spark-mlt error."""


class CodecParameterError(MLTError):
    """The codec parameters (p, n, M, seed, cardinality) are not usable."""


class InvalidIdError(MLTError):
    """An id is outside the codec's domain [0, min(p^n, 2^63))."""


class InvalidTokenError(MLTError):
    """A token vector has the wrong width, a value outside [0, p), or no valid id."""


class MLTTypeError(MLTError, TypeError):
    """Input of the wrong type or dtype (for example floats where ids are expected)."""


class CodecFormatError(MLTError):
    """A serialised codec (JSON, table property, light-mlt pickle) is malformed or tampered."""
