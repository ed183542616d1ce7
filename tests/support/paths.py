"""Where the repository's parts are, for tests in any folder of ``tests/``.

Example::

    notebooks = ROOT / "notebooks"
"""

from __future__ import annotations

from pathlib import Path

#: The repository's root.
ROOT = Path(__file__).resolve().parents[2]
#: The test helpers (this folder): scripts the tests run in processes of their own.
SUPPORT = ROOT / "tests" / "support"
#: The committed test data (the table zoos).
DATA = ROOT / "tests" / "data"
