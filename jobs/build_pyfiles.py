"""Build the zip of the ``spark_mlt`` package for ``spark-submit --py-files`` (``make dist``).

Executors without spark-mlt installed import it from this zip: ``spark_mlt/`` sits at the
zip's root, with the package's ``.py`` files and ``py.typed`` only (no ``__pycache__``).
The build is deterministic: sorted entries, fixed timestamps and permissions, so the same
sources give the same bytes. The version comes from ``pyproject.toml``; the zip carries it as
package metadata (``spark_mlt-<version>.dist-info/METADATA``), which ``spark_mlt.__version__`` reads.

Example::

    python jobs/build_pyfiles.py --out-dir dist     # prints dist/spark_mlt-<version>.zip
    spark-submit --py-files dist/spark_mlt-0.1.0.zip jobs/tokenize_movielens.py ...
"""

from __future__ import annotations

import argparse
import re
import zipfile
from pathlib import Path
from types import ModuleType

tomllib: ModuleType | None
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = None

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "spark_mlt"
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can hold


def project_version(pyproject: Path) -> str:
    """``[project] version`` of a pyproject.toml."""
    text = pyproject.read_text(encoding="utf-8")
    if tomllib is not None:
        return str(tomllib.loads(text)["project"]["version"])
    project = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.MULTILINE | re.DOTALL)  # Python 3.10
    version = re.search(r'^version\s*=\s*"([^"]+)"', project.group(1) if project else "", re.MULTILINE)
    if version is None:
        raise SystemExit(f"no [project] version in {pyproject}")
    return version.group(1)


def package_files(root: Path) -> list[Path]:
    """The package's sources and marker files, relative to ``root``, sorted."""
    files = [
        path.relative_to(root)
        for path in (root / PACKAGE).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and (path.suffix == ".py" or path.name == "py.typed")
    ]
    return sorted(files, key=lambda p: p.as_posix())


def build_zip(out_dir: Path, root: Path = ROOT) -> Path:
    """Write ``<out_dir>/spark_mlt-<version>.zip`` and return its path."""
    version = project_version(root / "pyproject.toml")
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{PACKAGE}-{version}.zip"
    partial = target.with_name(target.name + ".partial")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for relative in package_files(root):
            entry = zipfile.ZipInfo(relative.as_posix(), date_time=_EPOCH)
            entry.external_attr = 0o100644 << 16  # a regular file, rw-r--r--
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, (root / relative).read_bytes())
        # the package metadata, so that spark_mlt.__version__ (importlib.metadata) works from the zip
        metadata = f"Metadata-Version: 2.1\nName: spark-mlt\nVersion: {version}\n"
        entry = zipfile.ZipInfo(f"{PACKAGE}-{version}.dist-info/METADATA", date_time=_EPOCH)
        entry.external_attr = 0o100644 << 16
        entry.compress_type = zipfile.ZIP_DEFLATED
        archive.writestr(entry, metadata)
    partial.replace(target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", default=str(ROOT / "dist"), help="where to write the zip (default: dist/)")
    args = parser.parse_args(argv)
    print(build_zip(Path(args.out_dir)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
