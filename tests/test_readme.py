"""The README's Python examples run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from spark_mlt.storage.features import FEATURES

README = Path(__file__).resolve().parents[1] / "README.md"
TEXT = README.read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, flags=re.S)


def test_every_python_example_of_the_readme_is_run() -> None:
    """Each Python block is one case of test_readme_example_runs: a block the pattern misses
    (another fence spelling such as ```py, no newline after the fence) would go untested, and
    no block at all would leave that test with nothing to run. Update the count with the README."""
    python_fences = re.findall(r"^```(?:py|python|python3|pycon)\b", TEXT, flags=re.M)
    assert len(BLOCKS) == len(python_fences) == 5


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index: int) -> None:
    exec(compile(BLOCKS[index], f"README.md[python block {index}]", "exec"), {})


def test_the_readme_feature_table_says_what_the_gate_does() -> None:
    """Guarantees' table of Delta features: one row per feature the gate knows, and its read and
    write cells say what spark_mlt.storage.features.FEATURES says."""
    said = {}
    for cells in re.findall(r"^\| (`\w+`[^|]*) \| ([^|]+) \| ([^|]+) \|", TEXT, flags=re.M):
        for name in re.findall(r"`(\w+)`", cells[0]):
            said[name] = (cells[1].strip(), cells[2].strip())
    words = {True: "yes", False: "refused", "4.0": "Spark 4: yes"}
    for name, feature in FEATURES.items():
        if name.endswith("-preview"):
            continue
        read, write = said[name]
        assert read.startswith(words[feature.read]), name
        assert write.startswith(words[feature.write]), name
