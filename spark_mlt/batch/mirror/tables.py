"""A mirror as one value: its table, its quarantine, its string columns' vocabularies and value
counts, and the application ids and commit markers its runs record.

[`Mirror`][spark_mlt.batch.mirror.tables.Mirror] is the only place that knows those names: the
sync writes by them, ``erase``, ``find`` and ``inspect`` read by them.

Example::

    >>> mirror = Mirror.at("/lake/customers_mlt", source_id="8f2c")
    >>> mirror.quarantine, mirror.app, mirror.counts_app
    ('/lake/customers_mlt_quarantine', 'spark-mlt-sync:8f2c', 'spark-mlt-sync:8f2c:counts')
    >>> mirror.counts("email")
    '/lake/customers_mlt_counts/email'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from spark_mlt.batch.job.options import InvalidRowOptions, quarantine_path
from spark_mlt.batch.write.frames import vocabulary_path
from spark_mlt.batch.write.pipeline import QUARANTINE_APP_SUFFIX
from spark_mlt.storage import TableSnapshot, vocabulary_paths
from spark_mlt.storage.counts import counts_path

__all__ = ["COUNTS_SUFFIX", "FULL_REFRESH_MARK", "KEY_PROPERTY", "SYNC_APP_PREFIX", "Mirror"]

#: Application transaction ids of a mirror's syncs: this prefix and the source table's id.
SYNC_APP_PREFIX = "spark-mlt-sync:"
#: The suffix of the application id a mirror's value counts record (after the sync's own).
COUNTS_SUFFIX = ":counts"
#: The commit info value (``spark_mlt.sync``) of a sync's full refresh.
FULL_REFRESH_MARK = "full refresh"
#: The mirror's table property that records its source's primary key (``customer_id`` or
#: ``a,b``), checked on every later run.
KEY_PROPERTY = "mlt.sync.key"


@dataclasses.dataclass(frozen=True)
class Mirror:
    """A mirror's tables and the names its runs record.

    Attributes:
        path: the mirror table (a path or a catalog table's name).
        quarantine: its quarantine table, where its rejected rows are kept.
        source_id: the table id (``metaData.id``) of the source it follows, when known.
    """

    path: str
    quarantine: str
    source_id: str | None = None

    @classmethod
    def at(cls, output: str, quarantine: str | None = None, *, source_id: str | None = None) -> Mirror:
        """The mirror at ``output``, its quarantine ``quarantine`` (by default beside it)."""
        return cls(output, quarantine_path(output, quarantine), source_id)

    def following(self, source: TableSnapshot) -> Mirror:
        """This mirror as a mirror of ``source``: one application id per source table, so a
        source replaced by another table is never taken for the old one."""
        return dataclasses.replace(self, source_id=str(source.table_id))

    @property
    def app(self) -> str:
        """The application id of its syncs (``spark-mlt-sync:<source table id>``)."""
        if self.source_id is None:
            raise ValueError(f"the mirror {self.path} has no source yet: take Mirror.following(source)")
        return SYNC_APP_PREFIX + self.source_id

    @property
    def quarantine_app(self) -> str:
        """The application id its quarantine's commits record."""
        return self.app + QUARANTINE_APP_SUFFIX

    @property
    def counts_app(self) -> str:
        """The application id its value counts' commits record."""
        return self.app + COUNTS_SUFFIX

    def counts(self, column: str) -> str:
        """Where the value counts of its string key column ``column`` live."""
        return counts_path(self.path, column)

    def vocabulary(self, column: str, options: InvalidRowOptions) -> str:
        """Where the vocabulary of its string key column ``column`` lives, under ``options``."""
        return vocabulary_path(self.path, column, options)

    def vocabularies(self, snapshot: TableSnapshot) -> dict[str, str]:
        """Its string key columns' vocabularies, as its table properties name them (``snapshot``:
        the mirror's)."""
        return vocabulary_paths(snapshot.properties, location=snapshot.path)

    @staticmethod
    def sync_apps(transactions: Iterable[str]) -> set[str]:
        """The application ids among ``transactions`` that are a sync's own (not its quarantine's
        or value counts')."""
        return {
            app
            for app in transactions
            if app.startswith(SYNC_APP_PREFIX) and not app.endswith((QUARANTINE_APP_SUFFIX, COUNTS_SUFFIX))
        }

    @staticmethod
    def source_of(app: str) -> str:
        """The source table id in a sync's application id."""
        return app.removeprefix(SYNC_APP_PREFIX)

    @staticmethod
    def is_full_refresh(metadata: Mapping[str, object]) -> bool:
        """Whether a commit's info is a sync's full refresh."""
        return metadata.get("spark_mlt.job") == "sync" and metadata.get("spark_mlt.sync") == FULL_REFRESH_MARK
