"""Names a package exports but imports on first use (PEP 562's module ``__getattr__``)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports each name of ``modules`` from its module.

    Example::

        >>> getattr_ = lazy_attributes("pkg", {"sqrt": "math"})
        >>> getattr_("sqrt")(4.0)
        2.0
    """

    def getattr_(name: str) -> Any:
        if name in modules:
            return getattr(importlib.import_module(modules[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return getattr_
