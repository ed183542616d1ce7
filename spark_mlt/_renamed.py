"""Module names of spark-mlt 0.1 that moved, kept importable with a DeprecationWarning.

``import spark_mlt.functions`` (say) finds no file any more; this finder, last on
``sys.meta_path``, answers for the old names with the module that now holds their contents.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

#: old module -> the module that now holds its public names
RENAMED_MODULES = {
    "spark_mlt.functions": "spark_mlt.column",
    "spark_mlt.delta": "spark_mlt.storage",
    "spark_mlt.vocab": "spark_mlt.storage.vocabulary",
    "spark_mlt.pipeline": "spark_mlt.batch",
    "spark_mlt.movielens": "spark_mlt.batch.movielens",
    "spark_mlt.session": "spark_mlt.batch.session",
    "spark_mlt.cli": "spark_mlt.batch.cli",
    "spark_mlt.compat": "spark_mlt.codec.light_mlt",
    "spark_mlt.modmath": "spark_mlt.codec.modmath",
}


class RenamedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old module name as its new module, warning once per import."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in RENAMED_MODULES:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = RENAMED_MODULES[spec.name]
        warnings.warn(f"{spec.name} is deprecated; import {new} instead", DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """The module is the new one, already executed."""


def install() -> None:
    """Put the finder last on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, RenamedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(RenamedModuleFinder())
