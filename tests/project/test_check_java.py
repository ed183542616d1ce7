"""`make demo` stops first, with one line, when Java 17+ is missing, and `make jvm` when a JDK or
Maven is (jobs/check_java.sh)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.paths import ROOT

SCRIPT = ROOT / "jobs" / "check_java.sh"


def _run(tmp_path: Path, java_home: Path | None = None, *args: str) -> subprocess.CompletedProcess[str]:
    tools = tmp_path / "bin"  # a PATH with the script's own tools and no java
    tools.mkdir(exist_ok=True)
    for tool in ("sed", "cut", "head", "dirname"):
        found = shutil.which(tool)
        assert found is not None
        if not (tools / tool).exists():
            os.symlink(found, tools / tool)
    env = {"PATH": str(tools)}
    if java_home is not None:
        env["JAVA_HOME"] = str(java_home)
    return subprocess.run(["/bin/sh", str(SCRIPT), *args], env=env, capture_output=True, text=True, check=False)


def _fake_jdk(tmp_path: Path, version_line: str) -> Path:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(0o755)
    return home


def test_no_java_at_all_stops_with_one_line_saying_how_to_install_it(tmp_path: Path) -> None:
    result = _run(tmp_path)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "Java 17 or newer" in lines[0]
    assert "apt-get install" in lines[0]
    assert "brew install" in lines[0]
    assert "JAVA_HOME" in lines[0]


@pytest.mark.parametrize(
    ("version_line", "ok"),
    [
        ('java version "1.8.0_392"', False),
        ('openjdk version "11.0.21" 2023-10-17', False),
        ('openjdk version "17.0.15" 2025-04-15', True),
        ('openjdk version "21" 2023-09-19', True),
    ],
)
def test_java_home_is_checked_for_version_17_or_newer(tmp_path: Path, version_line: str, ok: bool) -> None:
    result = _run(tmp_path, _fake_jdk(tmp_path, version_line))
    assert (result.returncode == 0) is ok, result.stderr
    if not ok:
        assert "Java 17 or newer" in result.stderr


def _java_home(tmp_path: Path, *, javac: bool) -> Path:
    home = _fake_jdk(tmp_path / ("jdk" if javac else "jre"), 'openjdk version "17.0.15" 2025-04-15')
    if javac:
        (home / "bin" / "javac").write_text("#!/bin/sh\n")
        (home / "bin" / "javac").chmod(0o755)
    return home


def test_building_the_jars_needs_a_jdk_and_names_the_package_that_has_javac(tmp_path: Path) -> None:
    """``make jvm`` (``check_java.sh --jdk``) refuses a JRE, naming the JDK package to install,
    then asks for Maven; a JRE is enough for running Spark (no ``--jdk``)."""
    jre = _java_home(tmp_path, javac=False)
    assert _run(tmp_path, jre).returncode == 0
    result = _run(tmp_path, jre, "--jdk")
    assert result.returncode == 1
    assert "JRE without javac" in result.stderr
    assert "openjdk-17-jdk-headless" in result.stderr
    jdk = _java_home(tmp_path, javac=True)
    result = _run(tmp_path, jdk, "--jdk")  # the test's PATH has no mvn
    assert result.returncode == 1
    assert "Maven (mvn)" in result.stderr
    (tmp_path / "bin" / "mvn").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "mvn").chmod(0o755)
    assert _run(tmp_path, jdk, "--jdk").returncode == 0
