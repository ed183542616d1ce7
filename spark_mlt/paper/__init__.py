"""The MLT paper's Table 1, reproduced from a tokenised MovieLens Delta table.

``reproduce(table, output)`` reads the table the MovieLens job writes (ids, ratings, tokens
and the codecs from its properties), splits it 80/20 at random with a fixed seed, trains the
paper's shared head (Dense 64 relu, Dense 32 relu, Dense 1 sigmoid; Adam; binary
cross-entropy; threshold 0.5) on each representation, and writes ``report.json``,
``report.md`` and ``report.png`` into ``output``. Training runs on one machine (the driver),
in Keras 3 on JAX's CPU backend, with scikit-learn's hashing trick and metrics: the optional
extra ``spark-mlt[paper]``. The Spark ML stages (:mod:`spark_mlt.ml`) remain the way to
produce the same features on a cluster.

Example::

    from spark_mlt.paper import PaperOptions, reproduce
    reproduce("out/ratings_mlt", "out/paper", PaperOptions(methods=("mlt", "mlt_categories")))
"""

from __future__ import annotations

import datetime as dt
import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_mlt.errors import MLTError
from spark_mlt.options import check_choice
from spark_mlt.paper.data import Ratings, load_ratings, split
from spark_mlt.paper.methods import DEFAULT_EPOCHS, METHODS, MethodResult, run_method
from spark_mlt.paper.models import keras_module
from spark_mlt.paper.report import write_report

__all__ = ["DEFAULT_EPOCHS", "METHODS", "PaperOptions", "PaperReport", "reproduce"]


@dataclass(frozen=True, kw_only=True)
class PaperOptions:
    """How :func:`reproduce` runs.

    Each field's ``metadata["help"]`` says what it does (``spark-mlt paper --help`` prints it).

    Example::

        PaperOptions(methods=("mlt", "hashing"), epochs={"mlt": 2}, limit=100_000)
    """

    methods: tuple[str, ...] = field(
        default=tuple(METHODS),
        metadata={"help": "the representations to train and report, in this order (a b, or a,b)"},
    )
    epochs: Mapping[str, int] = field(
        default_factory=dict,
        metadata={
            "help": "epochs of a method, method=count, overriding the paper's (default: "
            + " ".join(f"{method}={count}" for method, count in DEFAULT_EPOCHS.items())
            + ")"
        },
    )
    seed: int = field(default=42, metadata={"help": "seed of the train/test split and of the models' initial weights"})
    test_fraction: float = field(default=0.2, metadata={"help": "the share of rows held out for testing, in (0, 1)"})
    label_threshold: float = field(
        default=4.0,
        metadata={
            "help": "label = rating >= this (4: the paper's code), whatever rule the table records; also the "
            "rule of a release folder tokenised first"
        },
    )
    limit: int | None = field(
        default=None, metadata={"help": "read at most this many rows of the table (for smoke runs; default: all)"}
    )

    def __post_init__(self) -> None:
        for method in self.methods:
            check_choice("methods", method, tuple(METHODS))
        for method, count in self.epochs.items():
            check_choice("epochs", method, tuple(METHODS))
            if not isinstance(count, int) or count < 1:
                raise MLTError(
                    f"epochs: {method} must train for a whole number of epochs >= 1, got {count!r}", parameter="epochs"
                )
        if not 0 < self.test_fraction < 1:
            raise MLTError(f"test_fraction must be in (0, 1), got {self.test_fraction!r}", parameter="test_fraction")


@dataclass(frozen=True)
class PaperReport:
    """What :func:`reproduce` measured, and where it wrote the report."""

    results: list[MethodResult]
    meta: dict[str, Any]
    files: dict[str, Path]


def _meta(table: str, ratings: Ratings, train: Ratings, test: Ratings, options: PaperOptions) -> dict[str, Any]:
    positive = float(test.labels.mean()) if len(test) else 0.0
    return {
        "date": dt.date.today().isoformat(),
        "source": str(table),
        "rows": len(ratings),
        "train_rows": len(train),
        "test_rows": len(test),
        "seed": options.seed,
        "label_rule": ratings.label_rule,
        "table_label_rule": ratings.table_label_rule,
        "positive_rate": positive,
        "majority_rate": max(positive, 1 - positive),
        "codecs": [{"p": c.p, "n": c.n, "seed": c.seed} for c in ratings.codecs],
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
    }


def reproduce(
    table: str | os.PathLike[str], output: str | os.PathLike[str], options: PaperOptions | None = None
) -> PaperReport:
    """Train and score every method on the tokenised MovieLens table ``table``; write the
    report into the folder ``output``.

    Raises:
        MissingExtraError: Keras 3, JAX or scikit-learn is not installed (``pip install 'spark-mlt[paper]'``).
        MissingTableError, MissingCodecError, SourceError: ``table`` is not a tokenised
            MovieLens table.
    """
    options = options or PaperOptions()
    keras = keras_module()  # first: without the extra, say so before any work
    ratings = load_ratings(os.fspath(table), label_threshold=options.label_threshold, limit=options.limit)
    train, test = split(ratings, test_fraction=options.test_fraction, seed=options.seed)
    results = []
    for method in options.methods:
        keras.utils.set_random_seed(options.seed)
        results.append(run_method(method, train, test, options.epochs))
    meta = _meta(os.fspath(table), ratings, train, test, options)
    return PaperReport(results, meta, write_report(results, meta, os.fspath(output)))
