"""Counting how often a piece of code reads a table's log: each listing of its ``_delta_log``
(the Delta core's one read of a table's state) and each delta-rs handle it opens (the committer)."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from spark_mlt.delta.log import DeltaLog, LogListing


def count_delta_opens(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """A list that receives ``("log", uri)`` for every listing of a table's log and
    ``("delta-rs", uri)`` for every ``DeltaTable`` opened from now on (until ``monkeypatch``
    undoes the patches, at the end of the test). A failed open counts too."""
    opened: list[tuple[str, str]] = []
    original_init, original_listing = DeltaTable.__init__, DeltaLog.listing

    def counting_init(self: DeltaTable, table_uri: str, *args: object, **kwargs: object) -> None:
        opened.append(("delta-rs", str(table_uri)))
        original_init(self, table_uri, *args, **kwargs)  # type: ignore[arg-type]

    def counting_listing(self: DeltaLog) -> LogListing:
        opened.append(("log", self.location.uri))
        return original_listing(self)

    monkeypatch.setattr(DeltaTable, "__init__", counting_init)
    monkeypatch.setattr(DeltaLog, "listing", counting_listing)
    return opened
