"""The jar folders of ``make jars`` (spark_mlt.jars): found per line, or a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_mlt.errors import MissingJarsError
from spark_mlt.jars import jar_paths, spark_jars


def test_jar_folders_are_found_per_line_or_name_the_make_command(tmp_path: Path) -> None:
    """A line's group resolves to its jars once `make jars` marked the folder complete;
    otherwise the error says which command fills it, or why the line has no such jars."""
    folder = tmp_path / "spark-3.5" / "delta"
    folder.mkdir(parents=True)
    for name in ("delta-storage-3.2.0.jar", "delta-spark_2.12-3.2.0.jar"):
        (folder / name).touch()
    with pytest.raises(MissingJarsError, match=r"make jars JARS_LINE=3\.5"):
        jar_paths("delta", spark_version="3.5.0", jars_dir=tmp_path)  # copied, not yet complete

    (folder / ".complete").touch()
    expected = [str(folder / "delta-spark_2.12-3.2.0.jar"), str(folder / "delta-storage-3.2.0.jar")]
    assert jar_paths("delta", spark_version="3.5.6", jars_dir=tmp_path) == expected
    assert spark_jars("delta", spark_version="3.5.0", jars_dir=tmp_path) == ",".join(expected)
    with pytest.raises(MissingJarsError, match=r"make jars JARS_LINE=3\.5"):
        spark_jars("delta", "s3", spark_version="3.5.0", jars_dir=tmp_path)
    with pytest.raises(MissingJarsError, match="Delta publishes no delta-spark"):
        jar_paths("delta", spark_version="4.3.0", jars_dir=tmp_path)
    with pytest.raises(MissingJarsError, match="ships the Spark Connect server"):
        jar_paths("connect", spark_version="4.0.0", jars_dir=tmp_path)
