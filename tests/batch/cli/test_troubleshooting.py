"""Each message docs/troubleshooting.md quotes is the one the code gives.

Every entry of the page (a ``##`` heading with an id, ``{#no-java}``) quotes its messages in
```text blocks; the test of the entry triggers each error for real (the ``spark-mlt`` command
through its ``main``, a column function on the test session, ``make check-java`` with a PATH
that lacks Java) and compares, block by block:

- ``…`` in a block stands for text left out (a long Spark expression);
- the ``spark-mlt`` command's error prefix is left out of the comparison (the page quotes
  ``spark-mlt: error: ``), so the test checks what the code says, not how the line starts;
- the folder a test runs in reads as ``/home/me``, the page's working folder.
"""

from __future__ import annotations

import inspect
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyspark
import pytest
from deltalake import DeltaTable, Field, write_deltalake
from markdown_it import MarkdownIt
from pyspark.sql import DataFrame, SparkSession

import spark_mlt
from spark_mlt import MLTCodec
from spark_mlt.batch.cli import main
from spark_mlt.batch.write.options import TokenizeOptions
from spark_mlt.batch.write.stream import check_checkpoint
from spark_mlt.capabilities import Capabilities
from spark_mlt.column import mlt_decode, mlt_encode
from spark_mlt.errors import MissingJarsError
from spark_mlt.jars import LINE_GROUPS, delta_session_conf, jar_line, jvm_jar
from spark_mlt.options import EngineName
from spark_mlt.storage import write_delta
from tests.support.paths import ROOT

PAGE = ROOT / "docs" / "troubleshooting.md"
#: the page's working folder: where its commands run
HOME = "/home/me"
ELLIPSIS = "…"
#: the error prefix of a ``spark-mlt`` line, today's and that of older builds
_PREFIX = re.compile(r"^spark-mlt(?: [\w-]+)?: error: ", flags=re.M)
#: the codec of the page's column-function entries, as on the getting-started page
CODEC = MLTCodec.from_seed(p=13, n=6, seed=42)


def _entries() -> dict[str, list[str]]:
    """The ```text blocks of each ``## ... {#id}`` entry of the page, by id."""
    entries: dict[str, list[str]] = {}
    current: list[str] | None = None
    tokens = MarkdownIt("commonmark").parse(PAGE.read_text())
    for index, token in enumerate(tokens):
        if token.type == "heading_open":
            title = tokens[index + 1].content
            found = re.search(r"\{#([\w-]+)\}\s*$", title)
            current = entries.setdefault(found[1], []) if token.tag == "h2" and found else current
            if token.tag == "h2" and not found:
                current = None
        elif token.type == "fence" and token.info.strip() == "text" and current is not None:
            current.append(token.content.rstrip("\n"))
    return entries


def _matches(block: str, actual: str) -> bool:
    """Whether ``actual`` is the quoted ``block``, ``…`` standing for any text, each side's
    ``spark-mlt`` error prefix left out."""
    quoted, said = _PREFIX.sub("", block.strip()), _PREFIX.sub("", actual.strip())
    pattern = ".*?".join(re.escape(part) for part in quoted.split(ELLIPSIS))
    return re.fullmatch(pattern, said, flags=re.S) is not None


def _raised(error: BaseException) -> str:
    """The last line of a Python traceback: the class's full name and the message's first line."""
    kind = type(error)
    return f"{kind.__module__}.{kind.__qualname__}: {str(error).strip().splitlines()[0]}"


def _failure(run: Callable[[], object]) -> str:
    try:
        run()
    except Exception as error:  # noqa: BLE001 - whichever the code raises is the message quoted
        return _raised(error)
    pytest.fail("no error was raised")


class Workspace:
    """A folder with the page's inputs (``warehouse/orders.parquet``), where Python and the
    test session's Spark both resolve relative paths, and the command run there."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.capsys: pytest.CaptureFixture[str] | None = None

    def cli(self, *argv: str) -> tuple[int, str]:
        """Run ``spark-mlt argv``: its exit code and its error lines (log lines left out)."""
        assert self.capsys is not None
        self.capsys.readouterr()
        code = main(list(argv))
        lines = [line for line in self.capsys.readouterr().err.splitlines() if _PREFIX.match(line)]
        return code, self.home("\n".join(lines))

    def home(self, text: str) -> str:
        return text.replace(str(self.root), HOME)


#: the page's first run, and the start of its others (the output is last)
_TOKENIZE = (
    "tokenize", "--input", "warehouse/orders.parquet", "--columns", "customer_id", "product_id", "--output",
    "out/orders_mlt",
)  # fmt: skip


@pytest.fixture(scope="module")
def workspace(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    """The page's folder after its first run, ``spark-mlt tokenize`` of the orders into
    ``out/orders_mlt``; the test session's local file system works in it meanwhile (as in
    test_docs' walk-through)."""
    root = tmp_path_factory.mktemp("home")
    jvm = spark._jvm
    assert jvm is not None
    local = jvm.org.apache.hadoop.fs.FileSystem.getLocal(spark._jsc.hadoopConfiguration())
    before = local.getWorkingDirectory()
    local.setWorkingDirectory(jvm.org.apache.hadoop.fs.Path(root.as_uri()))
    cwd = Path.cwd()
    os.chdir(root)
    try:
        schema = "customer_id bigint, product_id bigint, amount double"
        orders = spark.createDataFrame([(1, 100, 2.5), (2, 101, 3.0), (3, 100, 9.9), (40_000, 7, 1.0)], schema)
        orders.write.parquet(str(root / "warehouse" / "orders.parquet"))
        later = spark.createDataFrame([(1_000_000_000, 100, 4.0)], schema)
        later.write.parquet(str(root / "warehouse" / "orders_later.parquet"))
        assert main(list(_TOKENIZE)) == 0
        yield Workspace(root)
    finally:
        os.chdir(cwd)
        local.setWorkingDirectory(before)


@pytest.fixture
def here(workspace: Workspace, capsys: pytest.CaptureFixture[str]) -> Workspace:
    workspace.capsys = capsys
    return workspace


# --- Java ---------------------------------------------------------------------------------


def _path_without_java(folder: Path) -> str:
    """A PATH folder with every tool of this PATH but those of the JDK."""
    java = shutil.which("java")
    jdk = {tool.name for tool in Path(os.path.realpath(java)).parent.iterdir()} if java else set()
    folder.mkdir()
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for tool in os.listdir(directory):
            if tool not in jdk and not os.path.lexists(folder / tool):
                (folder / tool).symlink_to(Path(directory) / tool)
    return str(folder)


def _no_java(tmp_path: Path) -> list[str]:
    path = _path_without_java(tmp_path / "bin")
    env = {"PATH": path, "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    (tmp_path / "warehouse" / "orders.parquet").mkdir(parents=True)
    command = [sys.executable, "-m", "spark_mlt.batch.cli", *_TOKENIZE]
    run = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=120)
    assert run.returncode == 1, run.stderr
    logged = re.compile(r"^\d{4}-\d\d-\d\d ")  # spark-mlt's own log lines, if any
    said = "\n".join(line for line in run.stderr.splitlines() if line and not logged.match(line))

    def make(target: str, java_home: Path | None = None) -> str:
        extra = {"JAVA_HOME": str(java_home)} if java_home else {}
        done = subprocess.run(
            ["make", "--no-print-directory", "-s", "-C", str(ROOT), target],
            env={**env, **extra},
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode != 0, done.stderr
        return next(line for line in done.stderr.splitlines() if line.startswith("spark-mlt"))

    jre = tmp_path / "jvm" / "java-17-openjdk-amd64"  # a JRE: java, no javac
    (jre / "bin").mkdir(parents=True)
    (jre / "bin" / "java").write_text("#!/bin/sh\necho 'openjdk version \"17.0.15\" 2025-04-15' >&2\n")
    (jre / "bin" / "java").chmod(0o755)
    without_javac = make("check-jdk", jre).replace(str(tmp_path / "jvm"), "/usr/lib/jvm")
    return [said, make("check-java"), without_javac]


# --- spark-mlt's jar ----------------------------------------------------------------------


def _jar_version(spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The package upgraded, the session's jar not: the package says 0.2.0, the jar its own."""
    jar = Capabilities.of(spark).jar_version
    if jar is None:
        pytest.skip("the test session has no spark-mlt jar (make jvm)")
    assert jar != "0.2.0"
    monkeypatch.setattr(spark_mlt, "__version__", "0.2.0")
    said = _failure(lambda: spark.range(1).select(mlt_encode("id", CODEC)))
    monkeypatch.setattr(spark_mlt, "__version__", jar)
    return [said.replace(f"version {jar},", "version 0.1.0,"), _jar_of_another_line(jar)]


#: a session whose spark.jars names the jar of the other Spark line, as a user's would
_OTHER_LINE = """
import sys
from pyspark.sql import SparkSession
from spark_mlt import MLTCodec
from spark_mlt.column import mlt_encode
spark = (SparkSession.builder.master("local[1]").config("spark.jars", sys.argv[1])
    .config("spark.sql.extensions", "io.sparkmlt.MltExtensions").config("spark.ui.enabled", "false").getOrCreate())
try:
    spark.range(2).select(mlt_encode("id", MLTCodec.from_seed(13, 3))).collect()
except Exception as exc:
    print(f"spark_mlt.errors.{type(exc).__name__}: {exc}")
"""


def _jar_of_another_line(version: str) -> str:
    """A new process (the test session's jars are fixed) whose spark.jars names the other line's jar."""
    own = jvm_jar(pyspark.__version__)
    other = jvm_jar("3.5.0" if pyspark.__version__ >= "4" else "4.0.0")
    assert other.exists()
    assert other != own
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    done = subprocess.run(
        [sys.executable, "-c", _OTHER_LINE, str(other)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    said = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-2000:]
    return said.replace(version, "0.1.0").replace(f"Spark {pyspark.__version__},", "Spark 4.3.0,")


# --- column functions ---------------------------------------------------------------------


def _engines(spark: SparkSession, run: Callable[[EngineName], object]) -> list[str | None]:
    """The message of ``run(engine)`` with the jar (None without it) and without it."""
    jvm = _failure(lambda: run("jvm")) if Capabilities.of(spark).jvm_engine else None
    return [jvm, _failure(lambda: run("native"))]


def _layout(spark: SparkSession) -> list[str | None]:
    ratings = spark.createDataFrame([(1, 10), (2, 20)], "userId bigint, movieId bigint")
    tokens = ratings.select("userId", mlt_encode("userId", CODEC, layout="packed").alias("user_mlt"))
    return _engines(spark, lambda engine: tokens.select(mlt_decode("user_mlt", CODEC, engine=engine)))


def _id_type(spark: SparkSession) -> list[str | None]:
    users = spark.createDataFrame([("u-17", "Ada")], "userId string, name string")
    return _engines(spark, lambda engine: users.select(mlt_encode("userId", CODEC, engine=engine)))


# --- the command's runs -------------------------------------------------------------------


def _capacity(here: Workspace) -> list[str]:
    code, said = here.cli(*_TOKENIZE[:2], "warehouse/orders_later.parquet", *_TOKENIZE[3:], "--mode", "append")
    assert code == 1
    return [said]


def _rejected(here: Workspace) -> list[str]:
    later = ("warehouse/orders_later.parquet", *_TOKENIZE[3:], "--mode", "append", "--handle-invalid", "quarantine")
    code, said = here.cli(*_TOKENIZE[:2], *later, "--quarantine", "out/orders_rejected", "--max-rejected", "0")
    assert code == 4
    return [said]


def _table_exists(here: Workspace) -> list[str]:
    code, said = here.cli(*_TOKENIZE)
    assert code == 1
    return [said]


def _delta_input(here: Workspace, tmp_path: Path) -> list[str]:
    """Issue 71 item 9: a Delta table read as Parquet files, and a partition folder of it, are
    refused by a ``spark-mlt`` that cannot start Spark (no Java on its PATH): before Spark."""
    orders = here.root / "lake" / "orders"
    if not orders.exists():
        rows = pa.table({"customer_id": [1, 2], "product_id": [100, 101], "day": ["2026-11-26", "2026-11-27"]})
        write_deltalake(str(orders), rows, partition_by=["day"])
    env = {"PATH": _path_without_java(tmp_path / "bin"), "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    said = []
    for given in (["lake/orders", "--input-format", "parquet"], ["lake/orders/day=2026-11-26"]):
        argv = ["tokenize", "--input", *given, "--columns", "customer_id", "--output", "out/refused_mlt"]
        command = [sys.executable, "-m", "spark_mlt.batch.cli", *argv]
        run = subprocess.run(command, cwd=here.root, env=env, capture_output=True, text=True, check=False, timeout=120)
        assert run.returncode == 2, run.stderr
        said.append(here.home("\n".join(line for line in run.stderr.splitlines() if _PREFIX.match(line))))
    assert not (here.root / "out" / "refused_mlt").exists()
    return said


def _codec_mismatch(here: Workspace, spark: SparkSession) -> list[str]:
    fresh = MLTCodec.from_seed(p=13, n=5, seed=7)
    new = spark.createDataFrame([(5, 100, 1.0)], "customer_id bigint, product_id bigint, amount double")
    rows: DataFrame = new.withColumn("customer_id_mlt", mlt_encode("customer_id", fresh))
    said = _failure(
        lambda: write_delta(rows, str(here.root / "out" / "orders_mlt"), {"customer_id": fresh}, mode="append")
    )
    return [here.home(said)]


def _table_feature(here: Workspace) -> list[str]:
    events = here.root / "lake" / "events"
    if not events.exists():  # a table delta-spark wrote with row tracking on (the table zoo's)
        shutil.copytree(ROOT / "tests" / "data" / "zoo" / "tables" / "row_tracking", events)
    code, said = here.cli(*_TOKENIZE[:-1], "lake/events", "--mode", "append")
    assert code == 1
    return [said]


def _checkpoint(here: Workspace) -> list[str]:
    # what the stream's first run (into out/orders_stream) leaves in its checkpoint
    check_checkpoint("chk/orders", "out/orders_stream", ["customer_id"], TokenizeOptions(), loop="spark")
    stream = ("--stream", "--checkpoint", "chk/orders", "--columns", "customer_id", "--output", "out/returns_mlt")
    code, said = here.cli("tokenize", "--input", "warehouse/orders.parquet", *stream)
    assert code == 1
    return [said]


def _delta_jars(here: Workspace, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Both messages: the installed line's through the command (no jars fetched), the other's
    from the same function for the page's PySpark version."""
    jars = here.root / "spark-mlt" / ".jars"
    monkeypatch.setenv("SPARK_MLT_DELTA", "spark")
    monkeypatch.setenv("SPARK_MLT_JARS_DIR", str(jars))
    code, said = here.cli(*_TOKENIZE[:-1], "out/orders_delta")
    assert code == 1
    has_delta = "delta" in LINE_GROUPS[jar_line()]
    page_version = "4.2.1" if has_delta else "4.3.0"
    said = said.replace(f"pyspark {pyspark.__version__})", f"pyspark {page_version})")
    said = re.sub(rf"\b{re.escape(jar_line())}\b", jar_line(page_version), said)
    other = "4.3.0" if has_delta else "4.2.1"
    try:
        delta_session_conf(spark_version=other, jars_dir=jars)
    except MissingJarsError as error:
        other_said = here.home(f"spark-mlt: error: {type(error).__name__}: {error}")
    else:
        pytest.fail("no MissingJarsError")
    return [other_said, said] if has_delta else [said, other_said]


# --- spark-mlt sync -----------------------------------------------------------------------

#: the sync entries' run: the source lake/customers into its mirror out/customers_mlt
_SYNC = (
    "sync", "--input", "lake/customers", "--output", "out/customers_mlt", "--columns", "customer_id", "--key",
    "customer_id",
)  # fmt: skip


def _customers(
    here: Workspace, rows: Sequence[tuple[int | None, str]], mode: str = "append", *, feed: bool = True
) -> None:
    """Rows of ``(customer_id, country)`` written to the source (``mode="error"``: a new table,
    its change data feed on unless not ``feed``)."""
    ids, countries = zip(*rows, strict=True)
    table = pa.table({"customer_id": pa.array(ids, pa.int64()), "country": pa.array(countries, pa.string())})
    configuration = {"delta.enableChangeDataFeed": "true"} if mode == "error" and feed else None
    write_deltalake(str(here.root / "lake" / "customers"), table, mode=mode, configuration=configuration)  # type: ignore[call-overload]


def _synced(
    here: Workspace, rows: Sequence[tuple[int | None, str]] = ((1, "FR"), (2, "DE")), *, feed: bool = True
) -> None:
    """A new source of ``rows`` and its mirror, synced once (none when ``rows`` break the key or
    the source has no change data feed)."""
    for folder in ("lake/customers", "out/customers_mlt", "out/customers_mlt_quarantine"):
        shutil.rmtree(here.root / folder, ignore_errors=True)
    _customers(here, rows, "error", feed=feed)
    if feed and len({customer for customer, _ in rows}) == len(rows):
        assert here.cli(*_SYNC)[0] == 0


def _refused(here: Workspace, *argv: str) -> str:
    code, said = here.cli(*_SYNC, *argv)
    assert code == 1
    return said


def _sync_feed(here: Workspace) -> list[str]:
    """A source without its change data feed; a file of the window vacuumed; a column added."""
    _synced(here, feed=False)
    off = _refused(here)
    _synced(here)
    _customers(here, [(3, "IT")])  # version 1's file, which version 2 removes and a vacuum deletes
    _customers(here, [(1, "FR")], "overwrite")
    DeltaTable(str(here.root / "lake" / "customers")).vacuum(
        retention_hours=0, enforce_retention_duration=False, dry_run=False
    )
    vacuumed = _refused(here)
    _synced(here)
    DeltaTable(str(here.root / "lake" / "customers")).alter.add_columns([Field("city", "string", nullable=True)])
    return [off, vacuumed, _refused(here)]


def _sync_columns(here: Workspace) -> list[str]:
    _synced(here)
    DeltaTable(str(here.root / "lake" / "customers")).alter.add_columns([Field("city", "string", nullable=True)])
    return [_refused(here, "--full-refresh")]


def _sync_source(here: Workspace) -> list[str]:
    """The source dropped and created again at its path: a new table id."""
    _synced(here)
    shutil.rmtree(here.root / "lake" / "customers")
    _customers(here, [(1, "FR"), (2, "DE")], "error")
    return [_refused(here)]


def _sync_key(here: Workspace) -> list[str]:
    """Two rows of a key in a full refresh; then, in a window, a null key and an insert of a held key."""
    _synced(here, [(1, "FR"), (1, "DE")])
    twice = _refused(here)
    _synced(here)
    _customers(here, [(None, "IT")])
    null = _refused(here)
    _synced(here)
    _customers(here, [(1, "ES")])
    return [twice, null, _refused(here)]


def _short_retention(here: Workspace) -> list[str]:
    """Issue 71 item 10: ``erase --apply`` with a retention below the tables' own is refused."""
    _synced(here)
    code, said = here.cli("erase", "--input", "out/customers_mlt", "--retention-hours", "0", "--apply")
    assert code == 2
    return [said]


#: each entry's trigger, in the page's order: its arguments are fixtures, it returns the
#: messages the code gave, one per block the entry quotes
TRIGGERS: dict[str, Callable[..., Sequence[str | None]]] = {
    "no-java": _no_java,
    "jar-version": _jar_version,
    "layout": _layout,
    "id-type": _id_type,
    "capacity": _capacity,
    "rejected": _rejected,
    "codec-mismatch": _codec_mismatch,
    "table-feature": _table_feature,
    "checkpoint": _checkpoint,
    "delta-jars": _delta_jars,
    "table-exists": _table_exists,
    "delta-input": _delta_input,
    "sync-feed": _sync_feed,
    "sync-columns": _sync_columns,
    "sync-source": _sync_source,
    "sync-key": _sync_key,
    "short-retention": _short_retention,
}


def test_the_page_has_an_entry_per_trigger_each_quoting_a_message() -> None:
    entries = _entries()
    assert list(entries) == list(TRIGGERS)
    assert all(entries.values())


@pytest.mark.parametrize("entry", list(TRIGGERS))
def test_each_quoted_message_is_the_one_the_code_gives(entry: str, request: pytest.FixtureRequest) -> None:
    trigger = TRIGGERS[entry]
    said = trigger(**{name: request.getfixturevalue(name) for name in inspect.signature(trigger).parameters})
    blocks = _entries()[entry]
    assert len(blocks) == len(said), f"{entry}: the page quotes {len(blocks)} messages, the test makes {len(said)}"
    for block, actual in zip(blocks, said, strict=True):
        if actual is None:  # the JVM engine's message, and the session has no jar
            continue
        assert _matches(block, actual), f"{entry}: the page quotes\n{block}\nthe code says\n{actual}"
