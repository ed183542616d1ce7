"""A tokenized table's codecs as catalog functions and a view (spark_mlt.batch.read.publish).

The session's own catalog (in memory) holds what the tests in one session publish; the test of a
separate process publishes through a metastore on disk and reads it back from a venv with
another line's PySpark alone, with Delta's jars and nothing of spark-mlt.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from spark_mlt.batch import PublishOptions, TokenizeOptions, catalog_objects, publish_table, tokenize_table
from spark_mlt.batch.cli import main, run
from spark_mlt.batch.read.publish import CatalogObjectError, function_parts, publish_statements
from spark_mlt.capabilities import Capabilities
from spark_mlt.column import mlt_decode
from spark_mlt.errors import OptionError
from spark_mlt.jars import spark_jars
from spark_mlt.storage import read_delta, read_snapshot
from tests.support.paths import ROOT
from tests.support.settings import session_settings
from tests.support.spark_lines import QUERY_ERRORS

#: orders: a customer id (tokenized as an id) and an e-mail (a string key, through a vocabulary)
ORDERS = [(0, "ana@example.com", 1.5), (7, "bo@example.org", 2.0), (99_999, "ana@example.com", 3.0), (42, None, 4.0)]


def _orders(spark: SparkSession, folder: Path, rows: list[tuple[int, str | None, float]] = ORDERS) -> str:
    frame = spark.createDataFrame(rows, "customer_id long, email string, amount double")
    source = folder / f"orders-{uuid.uuid4().hex[:6]}.parquet"
    frame.write.parquet(str(source))
    return str(source)


@pytest.fixture
def schema(spark: SparkSession) -> Iterator[str]:
    name = f"analytics_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE SCHEMA {name}")
    yield name
    spark.sql(f"DROP SCHEMA {name} CASCADE")


@pytest.fixture
def table(spark: SparkSession, tmp_path: Path) -> str:
    output = str(tmp_path / "orders_mlt")
    tokenize_table(spark, _orders(spark, tmp_path), output, ["customer_id", "email"], TokenizeOptions(p=1009, n=3))
    return output


@pytest.fixture
def sql_functions(spark: SparkSession) -> None:
    """Skips a test of the functions on a line without SQL functions (Spark 3.5)."""
    if not Capabilities.of(spark).sql_functions:
        pytest.skip("Spark 3.5 has no SQL functions")


def _functions_only(schema: str, **kwargs: object) -> PublishOptions:
    return PublishOptions(schema=schema, view=False, **kwargs)  # type: ignore[arg-type]


@pytest.mark.compat
def test_published_functions_decode_and_encode_every_row_as_the_engines_do(
    spark: SparkSession, table: str, schema: str
) -> None:
    if not Capabilities.of(spark).sql_functions:
        with pytest.raises(OptionError, match="no SQL functions"):
            publish_table(spark, table, _functions_only(schema))
        return
    report = publish_table(spark, table, _functions_only(schema))
    assert set(report.objects.values()) == {"created"}
    assert len(report.objects) == 4
    codecs = read_snapshot(table).codecs
    rows = read_delta(spark, table).select(
        "customer_id",
        "customer_id_mlt",
        "email_mlt",
        F.expr(f"{schema}.orders_mlt_decode_customer_id(customer_id_mlt)").alias("decoded"),
        F.expr(f"{schema}.orders_mlt_encode_customer_id(customer_id)").alias("encoded"),
        F.expr(f"{schema}.orders_mlt_decode_email(email_mlt)").alias("email_id"),
        mlt_decode("email_mlt", codecs["email"], layout="packed").alias("email_engine"),
    )
    got = rows.collect()
    assert len(got) == len(ORDERS)
    for row in got:
        assert row["decoded"] == row["customer_id"]
        assert row["encoded"] == row["customer_id_mlt"]
        assert row["email_id"] == row["email_engine"]
    # a token out of range: an SQL error in the engines' words, naming the function
    with pytest.raises(Exception, match="orders_mlt_decode_customer_id") as failed:
        spark.sql(f"SELECT {schema}.orders_mlt_decode_customer_id(-1)").collect()
    with pytest.raises(Exception, match="is not a valid MLT code") as engine:
        spark.range(1).select(mlt_decode(F.lit(-1), codecs["customer_id"], layout="packed", engine="native")).collect()
    words = str(engine.value).split(": packed tokens", 1)[1].split("(p=")[0]
    assert words in str(failed.value)


@pytest.mark.usefixtures("sql_functions")
def test_the_published_encoder_refuses_a_fractional_id_and_encodes_a_whole_decimal(
    spark: SparkSession, table: str, schema: str
) -> None:
    """Regression (issue 71): the encoder's ``id BIGINT`` parameter cast 2.5 and 2.9D to 2
    before the body's checks."""
    publish_table(spark, table, _functions_only(schema))
    encode = f"{schema}.orders_mlt_encode_customer_id"
    codec = read_snapshot(table).codecs["customer_id"]
    packed = int(codec.pack(codec.encode([7]))[0])
    assert tuple(spark.sql(f"SELECT {encode}(7), {encode}(CAST('7.00' AS DECIMAL(10,2)))").collect()[0]) == (
        packed,
        packed,
    )
    for argument in ["2.5", "2.9D"]:
        with pytest.raises(QUERY_ERRORS, match=rf"orders_mlt_encode_customer_id: id {argument[:3]} is outside"):
            spark.sql(f"SELECT {encode}({argument})").collect()


@pytest.mark.usefixtures("sql_functions")
def test_a_function_larger_than_the_catalog_stores_stops_the_run_before_it_creates_anything(
    spark: SparkSession, tmp_path: Path, schema: str
) -> None:
    """Regression (issue 71): (2, 100) array tokens decode through 17 MB of SQL, which Spark's
    catalog refuses (ROUTINE_PROPERTY_TOO_LARGE) after the run created what came before."""
    output = str(tmp_path / "wide_mlt")
    tokenize_table(
        spark, _orders(spark, tmp_path), output, ["customer_id"], TokenizeOptions(p=2, n=100, layout="array")
    )
    listed = f"SHOW USER FUNCTIONS IN {schema}"  # the schema's, and the session's temporary ones
    before = spark.sql(listed).collect()
    with pytest.raises(
        CatalogObjectError,
        match=r"the decode function of column 'customer_id' \(codec p=2, n=100, .* at most 4,000,000 characters",
    ):
        publish_table(spark, output, _functions_only(schema))
    assert spark.sql(listed).collect() == before


def test_a_functions_record_and_body_are_read_from_either_form_spark_describes_them_in() -> None:
    """DESCRIBE FUNCTION EXTENDED's lines as Spark 4.3 and 4.0 print them (measured)."""
    comment = 'spark-mlt {"a": 1}'
    described = ["Function:      spark_catalog.a.f", f"Comment:       {comment}", "Body:          x * 2"]
    assert function_parts(described) == (comment, "x * 2")
    usage = json.dumps({"sqlFunction.comment": comment, "sqlFunction.expression": "x * 2"})
    assert function_parts(["Function: spark_catalog.a.f", "Class: sqlFunction.", f"Usage: {usage}"]) == (
        comment,
        "x * 2",
    )
    assert function_parts(["Function: f", "Usage: N/A."]) == (None, None)


@pytest.mark.compat
def test_a_rerun_after_an_append_keeps_every_object_made_for_the_version_it_was_made_for(
    spark: SparkSession,
    table: str,
    schema: str,
    tmp_path: Path,
    *,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not Capabilities.of(spark).sql_functions:
        pytest.skip(
            "Spark 3.5 has no SQL functions (a view kept on a rerun: test_the_printed_ddl_is_what_a_run_creates)"
        )
    monkeypatch.chdir(tmp_path)
    publish_table(spark, "orders_mlt", _functions_only(schema))  # a relative path: the same table
    made_for = read_snapshot(table).version
    more = _orders(spark, tmp_path, [(5, "new@example.com", 9.0)])
    tokenize_table(spark, more, table, ["customer_id", "email"], TokenizeOptions(mode="append"))
    assert read_snapshot(table).version > made_for
    again = publish_table(spark, f"{table}/", _functions_only(schema))
    assert set(again.objects.values()) == {"kept"}
    assert again.statements == ()
    found = catalog_objects(spark, table, schema)
    assert {entry["role"] for entry in found} == {"decode", "encode"}
    assert len(found) == 4
    assert all(entry["current"] and entry["version"] == made_for for entry in found)
    # the command says the same
    assert main(["inspect", "--input", table, "--schema", schema]) == 0
    inspected = json.loads(capsys.readouterr().out)
    assert inspected["catalog"] == {schema: found}


@pytest.mark.compat
@pytest.mark.usefixtures("sql_functions")
def test_a_resized_codec_replaces_the_objects_spark_mlt_made_for_the_table(
    spark: SparkSession, table: str, schema: str, tmp_path: Path
) -> None:
    publish_table(spark, table, _functions_only(schema))
    rows = _orders(spark, tmp_path, [*ORDERS, (10**9, "big@example.com", 1.0)])
    resize = TokenizeOptions(mode="overwrite", resize=True, p=65521, n=3)
    tokenize_table(spark, rows, table, ["customer_id", "email"], resize)
    assert not any(entry["current"] for entry in catalog_objects(spark, table, schema))
    report = publish_table(spark, table, _functions_only(schema))
    assert set(report.objects.values()) == {"replaced"}
    decoded = spark.sql(
        f"SELECT {schema}.orders_mlt_decode_customer_id({schema}.orders_mlt_encode_customer_id({10**9})) AS v"
    ).first()
    assert decoded is not None
    assert decoded["v"] == 10**9
    assert all(entry["current"] for entry in catalog_objects(spark, table, schema))


@pytest.mark.compat
@pytest.mark.usefixtures("sql_functions")
def test_a_name_taken_by_an_object_spark_mlt_did_not_make_for_the_table_stops_the_run_before_it_creates_anything(
    spark: SparkSession, table: str, schema: str, tmp_path: Path
) -> None:
    spark.sql(f"CREATE FUNCTION {schema}.orders_mlt_encode_email(x BIGINT) RETURNS BIGINT RETURN x + 1")
    with pytest.raises(CatalogObjectError, match=rf"{schema}`?\.`?orders_mlt_encode_email.* not made by spark-mlt"):
        publish_table(spark, table, _functions_only(schema))
    assert not spark.catalog.functionExists(f"{schema}.orders_mlt_decode_customer_id")  # nothing created
    assert spark.sql(f"SELECT {schema}.orders_mlt_encode_email(1) AS v").first()["v"] == 2  # nothing replaced
    # another table published under the same names
    publish_table(spark, table, _functions_only(schema, prefix="Shop"))  # names are lower case
    shop = catalog_objects(spark, table, schema)
    assert {entry["name"].rsplit(".", 1)[1] for entry in shop} >= {"shop_decode_email", "shop_encode_email"}
    assert all(entry["current"] for entry in shop if entry["name"].rsplit(".", 1)[1].startswith("shop_"))
    other = str(tmp_path / "returns_mlt")
    tokenize_table(spark, _orders(spark, tmp_path), other, ["customer_id", "email"], TokenizeOptions(p=1009, n=3))
    with pytest.raises(CatalogObjectError, match=rf"made by spark-mlt for '{tmp_path}/orders_mlt'.* another prefix"):
        publish_table(spark, other, _functions_only(schema, prefix="shop"))


@pytest.mark.compat
def test_the_printed_ddl_is_what_a_run_creates(
    spark: SparkSession, table: str, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    functions = Capabilities.of(spark).sql_functions
    view = Capabilities.of(spark).delta_jars
    if not (functions or view):
        pytest.skip("this session can create neither the functions (Spark 3.5) nor the view (no Delta)")
    flags = [*([] if functions else ["--no-functions"]), *([] if view else ["--no-view"])]
    assert run(["publish", "--input", table, "--schema", schema, "--print-only", *flags]) == 0
    printed = capsys.readouterr().out
    statements = [
        item.ddl for item in publish_statements(table, PublishOptions(schema, functions=functions, view=view))
    ]
    assert printed == "".join(f"{statement};\n" for statement in statements)
    for statement in statements:  # run by hand, as a user does in their own catalog
        spark.sql(statement)
    report = publish_table(spark, table, PublishOptions(schema, functions=functions, view=view))
    assert set(report.objects.values()) == {"kept"}
    assert len(report.objects) == len(statements)


def test_what_a_session_cannot_create_is_refused_before_anything_is_created(
    spark: SparkSession, table: str, schema: str
) -> None:
    caps = Capabilities.of(spark)
    if caps.delta_jars:
        pytest.skip("the session reads Delta")
    with pytest.raises(OptionError, match="no Delta reader") as refused:
        publish_table(spark, table, PublishOptions(schema))
    assert refused.value.parameter == "view"
    with pytest.raises(OptionError, match="schema 'nowhere' does not exist"):
        publish_table(spark, table, PublishOptions("nowhere", view=False))
    with (
        session_settings(spark, {"spark.sql.parser.escapedStringLiterals": "true"}),
        pytest.raises(OptionError, match="escapedStringLiterals=true"),
    ):
        publish_table(spark, table, PublishOptions(schema, view=False))
    assert not spark.catalog.functionExists(f"{schema}.orders_mlt_decode_customer_id")
    with pytest.raises(OptionError, match="schema must be"):
        PublishOptions("a.b.c")
    with pytest.raises(OptionError, match="prefix must be"):
        PublishOptions("analytics", prefix="orders-mlt")


def test_the_command_refuses_an_in_memory_catalog(table: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["publish", "--input", table, "--schema", "analytics", "--no-view"]) == 2
    assert "catalog is in memory" in capsys.readouterr().err


@pytest.mark.delta_spark
def test_the_view_shows_every_id_and_string_key_decoded_beside_its_tokens(
    spark: SparkSession, table: str, schema: str
) -> None:
    functions = Capabilities.of(spark).sql_functions
    publish_table(spark, table, PublishOptions(schema, functions=functions))
    view = spark.table(f"{schema}.orders_mlt_decoded")
    assert view.columns == [
        "customer_id",
        "email",
        "amount",
        "customer_id_decoded",
        "customer_id_mlt",
        "email_decoded",
        "email_mlt",
    ]
    rows = view.collect()
    assert sorted((r["customer_id_decoded"], r["email_decoded"] or "") for r in rows) == sorted(
        (customer, email or "") for customer, email, _ in ORDERS
    )
    assert all(r["customer_id_decoded"] == r["customer_id"] and r["email_decoded"] == r["email"] for r in rows)
    # a view whose definition was changed in place (its properties kept) is not current: replaced
    spark.sql(f"ALTER VIEW {schema}.orders_mlt_decoded AS SELECT 1 AS hijacked")
    assert not next(e for e in catalog_objects(spark, table, schema) if e["kind"] == "view")["current"]
    again = publish_table(spark, table, PublishOptions(schema, functions=functions))
    assert again.objects[f"`{schema}`.`orders_mlt_decoded`"] == "replaced"
    assert spark.table(f"{schema}.orders_mlt_decoded").columns == view.columns
    assert all(entry["current"] for entry in catalog_objects(spark, table, schema))


@pytest.mark.delta_spark
def test_a_view_alone_writes_the_decode_in_and_names_clear_of_the_tables_columns(
    spark: SparkSession, schema: str, tmp_path: Path
) -> None:
    rows = spark.createDataFrame(
        [(3, 30, "x"), (4, 40, "y")], "customer_id long, customer_id_decoded long, Note string"
    )
    source = str(tmp_path / "clash.parquet")
    rows.write.parquet(source)
    table = str(tmp_path / "clash_mlt")
    tokenize_table(spark, source, table, ["customer_id"], TokenizeOptions(p=1009, n=3))
    report = publish_table(spark, table, PublishOptions(schema, functions=False))
    assert set(report.objects.values()) == {"created"}
    view = spark.table(f"{schema}.clash_mlt_decoded")
    assert view.columns == ["customer_id", "customer_id_decoded", "Note", "customer_id_decoded_2", "customer_id_mlt"]
    assert sorted(tuple(r) for r in view.select("customer_id", "customer_id_decoded_2").collect()) == [(3, 3), (4, 4)]
    assert [entry["current"] for entry in catalog_objects(spark, table, schema)] == [True]
    # a view spark-mlt did not make, of the name a run would create, stops the run
    spark.sql(f"CREATE VIEW {schema}.other_mlt_decoded AS SELECT 1 AS one")
    with pytest.raises(CatalogObjectError, match=r"other_mlt_decoded.* not made by spark-mlt"):
        publish_table(spark, table, PublishOptions(schema, functions=False, prefix="other_mlt"))
    assert spark.table(f"{schema}.other_mlt_decoded").columns == ["one"]


def _partner(line: str) -> str | None:
    """Another supported line whose Delta jars are here: the reader's."""
    for version in ("4.1.0", "4.0.0", "4.2.1", "3.5.0"):
        if (
            not line.startswith(version.rsplit(".", 1)[0])
            and (ROOT / ".jars" / f"spark-{version[:3]}" / "delta" / ".complete").exists()
        ):
            return version
    return None


@pytest.mark.delta_spark
def test_a_plain_pyspark_of_another_line_reads_the_view_and_functions_from_the_metastore(
    spark: SparkSession, table: str, tmp_path: Path
) -> None:
    line = spark.version
    partner = _partner(line)
    if partner is None:
        pytest.skip("no other line's Delta jars here (make jars)")
    plain = (
        subprocess.run(["tests/compat/plain-venv.sh", partner], cwd=ROOT, check=True, capture_output=True, text=True)
        .stdout.strip()
        .splitlines()[-1]
    )
    # a view that calls SQL functions needs a reader that has them: not Spark 3.5
    functions = Capabilities.of(spark).sql_functions and not partner.startswith("3.")
    folder = str(tmp_path / "metastore")
    script = str(ROOT / "tests" / "support" / "catalog_session.py")
    spec = {"folder": folder, "jars": spark_jars("delta"), "table": table, "schema": "analytics"}
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    created = subprocess.run(
        [sys.executable, script, "create", json.dumps({**spec, "functions": functions, "view": True})],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert set(json.loads(created.stdout.splitlines()[-1])["objects"].values()) == {"created"}
    queries = ["SELECT customer_id_decoded, email_decoded FROM analytics.orders_mlt_decoded"]
    if functions:
        queries += [
            "SELECT analytics.orders_mlt_decode_customer_id(customer_id_mlt) AS id, customer_id "
            "FROM analytics.orders_mlt_decoded",
            "SELECT analytics.orders_mlt_decode_customer_id(-1) AS id",
        ]
    # the partner's session in-process, and a Spark Connect server (a SQL endpoint in a process of
    # its own) queried over its protocol
    reader = {**spec, "jars": spark_jars("delta", spark_version=partner), "queries": queries, "connect": True}
    python = str(ROOT / plain / "bin" / "python")
    read = subprocess.run(
        [python, script, "query", json.dumps(reader)],
        check=True,
        capture_output=True,
        text=True,
        env={**env, "PYSPARK_PYTHON": python},
        cwd=tmp_path,
    )
    out = json.loads(read.stdout.splitlines()[-1])
    assert set(out) == {"classic", "connect"}
    for mode in out.values():
        assert mode["spark"] == partner
        view_rows = mode["results"][0]["rows"]
        assert sorted((r["customer_id_decoded"], r["email_decoded"] or "") for r in view_rows) == sorted(
            (customer, email or "") for customer, email, _ in ORDERS
        )
        if functions:
            assert all(r["id"] == r["customer_id"] for r in mode["results"][1]["rows"])
            assert "is not a valid MLT code" in mode["results"][2]["error"]
