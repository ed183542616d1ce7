"""Benchmark: the incremental (streaming) tokenize job against the batch job on the same files.

N Parquet files of M rows each (two bigint id columns, one string key) land in a folder. The
batch job tokenizes the folder in one run; the ``available-now`` stream tokenizes the same
files (all in one batch, and ``--files-per-batch`` at a time), each into its own Delta table
(delta-rs commits, local[2]). Printed: rows/s of each and the stream's ratio to the batch
job (the target: >= 0.8x).

Then a continuous stream (``--interval``) is fed one file every ``--every`` seconds for
``--feed`` files: printed is how far behind it ends (the seconds from the last file landing to
its rows committed) and the arrival rate it kept up with.

Run: ``make bench-stream`` or ``python benchmarks/benchmark_stream.py --files 20 --rows 250000``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from spark_mlt.batch import StreamOptions, TokenizeOptions, local_session, tokenize_stream, tokenize_table
from spark_mlt.batch.write.stream import start_stream
from spark_mlt.storage import read_snapshot

COLUMNS = ["customer_id", "product_id", "sku"]


def _land(folder: Path, index: int, rows: int, seed: int) -> None:
    rng = np.random.default_rng(seed + index)
    table = pa.table(
        {
            "customer_id": pa.array(rng.integers(0, 2_000_000, rows), pa.int64()),
            "product_id": pa.array(rng.integers(0, 50_000, rows), pa.int64()),
            "sku": pa.array([f"sku-{i}" for i in rng.integers(0, 5_000, rows)], pa.string()),
            "amount": pa.array(rng.random(rows), pa.float64()),
        }
    )
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".part-{index:05d}.parquet"
    pq.write_table(table, partial)
    partial.rename(folder / f"part-{index:05d}.parquet")  # lands whole: a stream never sees half a file


def _timed(run) -> float:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--rows", type=int, default=250_000, help="rows per file")
    parser.add_argument("--files-per-batch", type=int, default=4)
    parser.add_argument("--interval", default="2 seconds", help="the continuous stream's trigger")
    parser.add_argument("--every", type=float, default=2.0, help="seconds between files fed to the continuous stream")
    parser.add_argument("--feed", type=int, default=10, help="files fed to the continuous stream")
    args = parser.parse_args(argv)
    spark = local_session("spark-mlt-bench-stream", extra_conf={"spark.ui.showConsoleProgress": "false"})
    work = Path(tempfile.mkdtemp(prefix="mlt-stream-"))
    try:
        landing = work / "landing"
        for index in range(args.files):
            _land(landing, index, args.rows, seed=7)
        total = args.files * args.rows
        codec = {"p": 13, "n": 6}  # the same codecs for every run: no sizing pass in any of them
        warm = work / "warm"  # the JVM's first queries (class loading, code generation) are timed by nobody
        _land(warm, 0, 10_000, seed=3)
        tokenize_table(spark, str(warm), str(work / "warm_batch"), COLUMNS, TokenizeOptions(**codec))
        warm_stream = StreamOptions(checkpoint=str(work / "chk_warm"))
        tokenize_stream(
            spark, str(warm), str(work / "warm_stream"), COLUMNS, TokenizeOptions(**codec), stream=warm_stream
        )
        batch_s = _timed(
            lambda: tokenize_table(spark, str(landing), str(work / "batch"), COLUMNS, TokenizeOptions(**codec))
        )
        results = {"batch job": batch_s}
        for label, per_batch in (
            ("stream, one batch", None),
            (f"stream, {args.files_per_batch} files a batch", args.files_per_batch),
        ):
            name = label.replace(" ", "_").replace(",", "")
            stream = StreamOptions(checkpoint=str(work / f"chk_{name}"), max_files_per_trigger=per_batch)
            results[label] = _timed(
                lambda s=stream, n=name: tokenize_stream(
                    spark, str(landing), str(work / n), COLUMNS, TokenizeOptions(**codec), stream=s
                )
            )
        print(f"{total:,} rows in {args.files} files, local[2], PySpark {spark.version}")
        print("| run | seconds | rows/s | vs batch job |\n|---|---|---|---|")
        for label, seconds in results.items():
            print(f"| {label} | {seconds:.1f} | {total / seconds:,.0f} | {batch_s / seconds:.2f}x |")

        feed = work / "feed"
        _land(feed, 0, args.rows, seed=11)
        stream = StreamOptions(checkpoint=str(work / "chk_continuous"), trigger=args.interval)
        query = start_stream(
            spark, str(feed), str(work / "continuous"), COLUMNS, TokenizeOptions(**codec), stream=stream
        )
        try:
            query.processAllAvailable()
            landed_at = 0.0
            for index in range(1, args.feed + 1):
                time.sleep(args.every)
                _land(feed, index, args.rows, seed=11)
                landed_at = time.perf_counter()
            expected = (args.feed + 1) * args.rows
            while read_snapshot(str(work / "continuous")).rows < expected:
                time.sleep(0.2)
            behind = time.perf_counter() - landed_at
        finally:
            query.stop()
        rate = args.rows / args.every
        print(
            f"continuous ({args.interval}): fed {args.feed} files of {args.rows:,} rows every {args.every:g} s "
            f"({rate:,.0f} rows/s); the last file's rows committed {behind:.1f} s after it landed"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
