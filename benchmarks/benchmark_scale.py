"""Benchmark: tokenize and decode-verify 5M .. 50M rows on local[2]; the driver's memory must not grow with them.

Each size runs in a fresh process (its own JVM): ids with a skewed key (one id in 30% of the
rows) are tokenized into a Delta table (delta-rs commit), then the table is decoded and
checked against the kept ids (``decode_table(..., DecodeOptions(verify=True))``, 0 mismatches expected). The
driver's peak resident memory is read at the end: the Python process (``ru_maxrss``) and the
JVM (``VmHWM``; on local[2] the JVM is the driver and the executors, its heap capped by
``--driver-memory``, 1g by default, so 50M rows pass through a 1 GiB heap). Nothing is
collected to the driver, so the peaks stay flat between sizes; a collect of the data would
make them grow by about 8 bytes per row and per column.

With ``--codecs 13,6 65521,4`` each size runs once per codec (both columns take it) instead of
the codecs sized from the data, to compare the decode job's time across codec families; ids
then stay below ``--users`` (default: the number of rows) so the smallest codec holds them.

Run: ``make bench-scale`` or ``python benchmarks/benchmark_scale.py --rows 5000000 50000000``;
``python benchmarks/benchmark_scale.py --rows 20000000 --users 4000000 --codecs 13,6 65521,4``.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from pyspark.sql import functions as F

from spark_mlt.batch import DecodeOptions, decode_table, local_session, tokenize_dataframe
from spark_mlt.column import fit_codecs
from spark_mlt.storage import write_delta


def _peak_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def run_one(rows: int, driver_memory: str, codec: tuple[int, int] | None, users: int) -> dict[str, float]:
    """Tokenize + decode-verify ``rows`` rows in this process, with ``codec`` (p, n) for both
    id columns or codecs sized from the data (None); returns timings and peaks."""
    conf = {"spark.ui.showConsoleProgress": "false", "spark.driver.memory": driver_memory}
    spark = local_session("spark-mlt-bench-scale", extra_conf=conf)
    jvm_pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[union-attr]
    folder = tempfile.mkdtemp(prefix="mlt-scale-")
    try:
        ids = spark.range(rows).select(
            F.when(F.col("id") % 10 < 3, F.lit(4_242)).otherwise(F.col("id") % users).alias("userId"),
            (F.col("id") % 27_278).alias("movieId"),
        )
        started = time.perf_counter()
        p, n = codec or (None, None)
        codecs = fit_codecs(ids, ["userId", "movieId"], p=p, n=n)
        tokens = tokenize_dataframe(ids, codecs)
        written = write_delta(tokens, f"{folder}/t", codecs)
        tokenize_s = time.perf_counter() - started
        started = time.perf_counter()
        report = decode_table(spark, f"{folder}/t", DecodeOptions(verify=True))
        decode_s = time.perf_counter() - started
        return {
            "rows": rows,
            "committed": written.rows,
            "mismatches": report.mismatches or 0,
            "tokenize_s": tokenize_s,
            "decode_s": decode_s,
            "python_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "jvm_peak_mib": _peak_kib(jvm_pid) / 1024,
        }
    finally:
        spark.stop()
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[5_000_000, 50_000_000])
    parser.add_argument("--driver-memory", default="1g", help="JVM heap of the local driver (default: 1g)")
    parser.add_argument(
        "--codecs", nargs="+", default=[], help="P,N codecs to compare, each for both columns (default: sized)"
    )
    parser.add_argument("--users", type=int, help="userId values stay below this (default: the number of rows)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # internal: run one size, print JSON
    args = parser.parse_args(argv)
    codecs: list[tuple[int, int] | None] = [_codec(text) for text in args.codecs] or [None]
    if args.one:
        result = run_one(args.one, args.driver_memory, codecs[0], args.users or args.one)
        print("RESULT " + json.dumps(result), flush=True)
        return 0
    results = []
    for rows, codec in ((rows, codec) for rows in args.rows for codec in codecs):
        extra = ["--codecs", ",".join(map(str, codec))] if codec else []
        extra += ["--users", str(args.users)] if args.users else []
        done = subprocess.run(
            [sys.executable, __file__, "--one", str(rows), "--driver-memory", args.driver_memory, *extra],
            capture_output=True,
            text=True,
            check=False,
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        if done.returncode != 0 or not lines:
            print(done.stderr[-3000:], file=sys.stderr)
            return 1
        result = json.loads(lines[-1].removeprefix("RESULT "))
        results.append(result)
        label = f"codec {codec}" if codec else "sized codecs"
        print(
            f"{rows:>12,} rows, {label}: tokenize {result['tokenize_s']:6.1f} s, "
            f"decode+verify {result['decode_s']:6.1f} s, "
            f"committed {result['committed']:,}, mismatches {result['mismatches']}, "
            f"driver peak RSS: python {result['python_peak_mib']:.0f} MiB, JVM {result['jvm_peak_mib']:.0f} MiB",
            flush=True,
        )
    if len(args.rows) > 1 and len(codecs) == 1:
        small, large = results[0], results[-1]
        python_growth = large["python_peak_mib"] / small["python_peak_mib"]
        jvm_growth = large["jvm_peak_mib"] / small["jvm_peak_mib"]
        print(
            f"rows x{large['rows'] / small['rows']:.0f}: python peak x{python_growth:.2f}, "
            f"JVM peak x{jvm_growth:.2f} (flat = no growth with the data)"
        )
    ok = all(r["mismatches"] == 0 and r["committed"] == r["rows"] for r in results)
    return 0 if ok else 1


def _codec(text: str) -> tuple[int, int]:
    try:
        p, n = (int(part) for part in text.split(","))
    except ValueError:
        raise SystemExit(f"--codecs takes P,N pairs such as 13,6; got {text!r}") from None
    return p, n


if __name__ == "__main__":
    raise SystemExit(main())
