"""Benchmark: spark-mlt's NumPy codec against light-mlt's own vectorised functions.

Times encode and decode of the same random ids with both, in the same process, on one
core, and prints rows/s, the speed-up, the time against the memory floor and spark-mlt's
peak extra memory (tracemalloc, in multiples of the output array). The floor is the memory
traffic no implementation avoids, timed in the same run: writing a fresh (N, n) int32 token
array (encode), and reading one plus writing the fresh (N,) int64 ids (decode). Targets:
encode >= 10x and decode >= 5x light-mlt, within 2x of the floor, peak extra memory <= 2x
the output.

Run: ``make bench-codec`` or ``python benchmarks/benchmark_codec.py --rows 10000000``.
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
from light_mlt.light_mlt import from_base_p_matrix, to_base_p_matrix

from spark_mlt import MLTCodec

# The codec families of make bench-functions, plus (7, 7).
CASES = ((3, 39), (13, 6), (7, 7), (1009, 5), (251, 8), (65521, 4), (2, 40))


def _best_of(repeats: int, func: Callable[[], Any]) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        result = func()
        best = min(best, time.perf_counter() - start)
    return best, result


def _peak_extra(func: Callable[[], np.ndarray]) -> float:
    """Peak memory traced during func, beyond its result, in multiples of the result."""
    gc.collect()
    tracemalloc.start()
    result = func()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return (peak - result.nbytes) / result.nbytes


def run_case(p: int, n: int, rows: int, repeats: int) -> dict[str, float]:
    """Time one (p, n) case with both implementations on the same ids; check they agree."""
    codec = MLTCodec.from_seed(p, n, seed=42)
    ids = np.random.default_rng(7).integers(0, codec.max_id + 1, size=rows, dtype=np.int64)
    m, m_inv = codec.M, codec.M_inv
    codec.decode(codec.encode(ids[:1000]))  # build the lookup tables outside the timing

    enc_s, tokens = _best_of(repeats, lambda: codec.encode(ids))
    ref_enc_s, ref_tokens = _best_of(repeats, lambda: to_base_p_matrix(ids, p, n) @ m % p)
    dec_s, decoded = _best_of(repeats, lambda: codec.decode(tokens))
    ref_dec_s, ref_ids = _best_of(repeats, lambda: from_base_p_matrix(ref_tokens @ m_inv % p, p))
    if not (np.array_equal(tokens, ref_tokens) and np.array_equal(decoded, ids) and np.array_equal(ref_ids, ids)):
        raise SystemExit(f"p={p}, n={n}: results differ from light-mlt")
    enc_floor_s, _ = _best_of(repeats, lambda: np.full((rows, n), 1, dtype=np.int32))
    read_s, _ = _best_of(repeats, tokens.max)
    write_ids_s, _ = _best_of(repeats, lambda: np.full(rows, 1, dtype=np.int64))
    dec_floor_s = read_s + write_ids_s
    return {
        "enc_floor": enc_s / enc_floor_s,
        "dec_floor": dec_s / dec_floor_s,
        "enc": rows / enc_s,
        "ref_enc": rows / ref_enc_s,
        "dec": rows / dec_s,
        "ref_dec": rows / ref_dec_s,
        "enc_mem": _peak_extra(lambda: codec.encode(ids)),
        "dec_mem": _peak_extra(lambda: codec.decode(tokens)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cases", nargs="*", metavar="P,N", help="codecs to time (default: every family)")
    args = parser.parse_args(argv)
    cases = [tuple(int(v) for v in c.split(",")) for c in args.cases] if args.cases else CASES

    print(f"{args.rows:,} ids, best of {args.repeats}, one core")
    header = (
        f"{'p':>6} {'n':>2} | {'encode M rows/s':>15} {'light-mlt':>9} {'ratio':>6} | "
        f"{'decode M rows/s':>15} {'light-mlt':>9} {'ratio':>6} | {'x floor enc/dec':>15} | "
        f"{'peak extra (x out) enc/dec':>26}"
    )
    print(header)
    print("-" * len(header))
    failures = []
    for p, n in cases:
        r = run_case(p, n, args.rows, args.repeats)
        enc_ratio, dec_ratio = r["enc"] / r["ref_enc"], r["dec"] / r["ref_dec"]
        print(
            f"{p:>6} {n:>2} | {r['enc'] / 1e6:>15.1f} {r['ref_enc'] / 1e6:>9.1f} {enc_ratio:>5.1f}x | "
            f"{r['dec'] / 1e6:>15.1f} {r['ref_dec'] / 1e6:>9.1f} {dec_ratio:>5.1f}x | "
            f"{r['enc_floor']:>6.2f} / {r['dec_floor']:<6.2f} | "
            f"{r['enc_mem']:>12.2f} / {r['dec_mem']:<12.2f}"
        )
        slow = max(r["enc_floor"], r["dec_floor"]) > 2
        if enc_ratio < 10 or dec_ratio < 5 or slow or max(r["enc_mem"], r["dec_mem"]) > 2:
            failures.append((p, n))
    print("targets: encode >= 10x, decode >= 5x light-mlt; <= 2x the floor; peak extra memory <= 2x output")
    print("all targets met" if not failures else f"targets missed for (p, n) in {failures}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
