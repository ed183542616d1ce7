"""Where a table lives: one location, seen by delta-rs, pyarrow's filesystem and Spark.

A table location is a plain path (``/data/ratings_mlt``) or a URI (``file:///data/ratings_mlt``,
``s3://bucket/ratings_mlt``, ``abfss://container@account.dfs.core.windows.net/ratings_mlt``,
``gs://bucket/ratings_mlt``). Three readers need it, each in its own form:

* delta-rs (``deltalake``) gets the location exactly as given; for object stores it takes its
  credentials from the environment (``AWS_*``, ``AZURE_STORAGE_*``,
  ``GOOGLE_APPLICATION_CREDENTIALS``).
* Spark gets a plain path made absolute (its JVM does not follow Python's ``os.chdir``), a
  ``file:`` URI stays a ``file:`` URI. For object stores Spark needs the matching Hadoop
  filesystem on its classpath (``hadoop-aws`` for ``s3a://``, ``hadoop-azure`` for
  ``abfss://``, the GCS connector for ``gs://``) and must understand the same scheme
  delta-rs does.
* the driver's own file work (listing the files Spark committed, reading their Parquet footers,
  removing a staging folder, vacuum's cleanup) goes through ``pyarrow.fs``
  (``FileSystem.from_uri``), never ``os`` or ``shutil``, so it works wherever the table lives.

Object stores have no real folders: an "empty folder" may not exist at all, and folders carry
no modification time, so callers treat a missing folder as empty and fall back to the files'
times.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import pyarrow.fs as pafs

__all__ = ["Location", "locate"]


@dataclass(frozen=True)
class Location:
    """A table's location.

    Attributes:
        uri: the location as the caller gave it; what delta-rs and Spark are given.
        filesystem: the pyarrow filesystem that holds the table.
        root: the table folder's path inside ``filesystem``, without a trailing slash.
    """

    uri: str
    filesystem: pafs.FileSystem
    root: str

    def path(self, relative: str) -> str:
        """The ``filesystem`` path of ``relative`` (``/``-separated, relative to the table)."""
        return f"{self.root}/{relative}" if relative else self.root

    def relative(self, path: str) -> str:
        """``path`` (a ``filesystem`` path under the table) relative to the table, ``/``-separated."""
        return path[len(self.root) :].lstrip("/")

    def spark_path(self, relative: str = "") -> str:
        """What Spark is given for ``relative``: an absolute path for a plain location (Spark's
        JVM keeps the working directory it started in, which Python may since have left),
        else a URI."""
        if "://" in self.uri:
            return f"{self.uri.rstrip('/')}/{relative}" if relative else self.uri
        return os.path.join(self.root, *relative.split("/")) if relative else self.root

    def exists(self, relative: str) -> bool:
        """Whether a file or folder ``relative`` to the table exists."""
        return bool(self.filesystem.get_file_info(self.path(relative)).type != pafs.FileType.NotFound)

    def files(self, relative: str = "") -> list[pafs.FileInfo]:
        """Every file under ``relative`` (recursively), sorted by path; none if it does not exist."""
        selector = pafs.FileSelector(self.path(relative), recursive=True, allow_not_found=True)
        found = self.filesystem.get_file_info(selector)
        return sorted((info for info in found if info.type == pafs.FileType.File), key=lambda info: info.path)

    def folders(self) -> list[pafs.FileInfo]:
        """The table folder's direct subfolders."""
        selector = pafs.FileSelector(self.root, recursive=False, allow_not_found=True)
        return [info for info in self.filesystem.get_file_info(selector) if info.type == pafs.FileType.Directory]

    def remove_folder(self, relative: str) -> None:
        """Removes the folder ``relative`` and everything in it; nothing if it does not exist."""
        with contextlib.suppress(FileNotFoundError):
            self.filesystem.delete_dir(self.path(relative))

    def remove_file(self, path: str) -> None:
        """Removes the file at the ``filesystem`` path ``path``."""
        self.filesystem.delete_file(path)


def locate(path: str | os.PathLike[str]) -> Location:
    """The :class:`Location` of a plain path or a URI.

    Example::

        locate("file:///data/ratings_mlt").root  # "/data/ratings_mlt"
    """
    uri = os.fspath(path)
    if "://" in uri:
        filesystem, root = pafs.FileSystem.from_uri(uri)
    else:  # pyarrow's local filesystem wants absolute paths; Spark and delta-rs keep the one given
        filesystem, root = pafs.LocalFileSystem(), os.path.abspath(uri)
    return Location(uri=uri, filesystem=filesystem, root=root.rstrip("/") or "/")
