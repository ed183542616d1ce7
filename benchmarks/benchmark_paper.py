"""Seconds per training epoch of each Table 1 method, on synthetic ratings in MovieLens 20M's id
layout (138,493 users, 26,744 movies), and the time the paper's epochs would take on 20M rows.

Ratings are generated in NumPy (planted user and movie effects, as ``generate_synthetic``) and
tokenized with the paper's codec (p = 47, n = 7), so only training is timed. Each method trains
one epoch; a training epoch is linear in the rows, so 20M rows take ``20M / rows`` times as long.
The driver's peak memory (ru_maxrss) is printed after each size: the inputs are ids and tokens,
never a dense one-hot matrix, so it grows with the rows, not with the one-hot width.

Run: ``make bench-paper`` or ``python benchmarks/benchmark_paper.py --rows 1000000 4000000``.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from spark_mlt import MLTCodec
from spark_mlt.paper import DEFAULT_EPOCHS, METHODS, PaperOptions
from spark_mlt.paper.data import Ratings, split
from spark_mlt.paper.methods import run_method
from spark_mlt.paper.models import keras_module

USERS, MOVIES = 138_493, 26_744  # MovieLens 20M
PAPER_ROWS = 20_000_263


def synthetic(rows: int, seed: int = 7) -> Ratings:
    """Ratings with planted user and movie effects, tokenized with p = 47, n = 7."""
    rng = np.random.default_rng(seed)
    users = rng.integers(1, USERS + 1, rows)
    popularity = 1.0 / np.arange(1, MOVIES + 1) ** 1.1
    movies = rng.choice(np.arange(1, MOVIES + 1), size=rows, p=popularity / popularity.sum())
    raw = 3.5 + rng.normal(0, 0.7, USERS + 1)[users] + rng.normal(0, 0.6, MOVIES + 1)[movies] + rng.normal(0, 0.7, rows)
    labels = (np.clip(np.round(raw * 2) / 2, 0.5, 5.0) >= 4).astype(np.uint8)
    codec = MLTCodec.from_seed(47, 7)
    tokens = np.concatenate([codec.encode(users), codec.encode(movies)], axis=1).astype(np.uint8)
    return Ratings(users, movies, tokens, labels, (codec, codec), "rating >= 4", "synthetic")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 4_000_000])
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    args = parser.parse_args()
    keras = keras_module()
    one_epoch = PaperOptions(epochs=dict.fromkeys(METHODS, 1))
    print(f"Keras {keras.__version__} on {keras.backend.backend()}; one epoch per method; 20M = {PAPER_ROWS:,} rows")
    print(f"{'rows':>10} {'method':<28} {'s/epoch':>9} {'µs/sample':>10} {'accuracy':>9} {'20M, paper epochs':>18}")
    for rows in args.rows:
        train, test = split(synthetic(rows))
        for method in args.methods:
            started = time.perf_counter()
            result = run_method(method, train, test, one_epoch)
            per_epoch = result.seconds_per_epoch + result.extra.get("autoencoder_seconds_per_epoch", 0.0)
            at_20m = per_epoch * PAPER_ROWS * 0.8 / len(train) * DEFAULT_EPOCHS[method]
            print(
                f"{rows:>10,} {method:<28} {result.seconds_per_epoch:>9.2f} {result.us_per_sample:>10.2f}"
                f" {result.accuracy:>9.2%} {at_20m / 60:>14.1f} min  ({time.perf_counter() - started:.0f} s in all)",
                flush=True,
            )
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{rows:>10,} peak driver memory so far: {peak:,.0f} MiB", flush=True)


if __name__ == "__main__":
    main()
