"""Counting the delta-rs table handles a piece of code opens."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable


def count_delta_opens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A list that receives the table URI of every ``DeltaTable`` opened from now on (until
    ``monkeypatch`` undoes the patch, at the end of the test). A failed open counts too."""
    opened: list[str] = []
    original = DeltaTable.__init__

    def counting(self: DeltaTable, table_uri: str, *args: object, **kwargs: object) -> None:
        opened.append(str(table_uri))
        original(self, table_uri, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(DeltaTable, "__init__", counting)
    return opened
