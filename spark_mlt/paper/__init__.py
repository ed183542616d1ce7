"""The MLT paper's Table 1, reproduced from a tokenized MovieLens Delta table.

``reproduce(table, output)`` reads the table the MovieLens job writes (ids, ratings, tokens
and the codecs from its properties), splits it 80/20 at random with a fixed seed, trains the
paper's shared head (Dense 64 relu, Dense 32 relu, Dense 1 sigmoid; Adam; binary
cross-entropy; threshold 0.5) on each representation, for the paper's epochs or for the count
each method does best with on a validation split carved from the training split, and writes
``report.json``, ``report.md`` and ``report.png`` into ``output``. Training runs on one machine
(the driver), in Keras 3 on JAX's CPU backend, with scikit-learn's hashing trick and metrics:
the optional extra ``spark-mlt[paper]``. The Spark ML stages ([`spark_mlt.ml`][spark_mlt.ml]) remain the way to
produce the same features on a cluster.

Example::

    from spark_mlt.paper import PaperOptions, reproduce
    reproduce("out/ratings_mlt", "out/paper", PaperOptions(methods=("mlt", "mlt_categories")))
    reproduce("out/ratings_mlt", "out/fair", PaperOptions(epoch_selection="validation"))
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_mlt.paper.data import Ratings, load_ratings, split
from spark_mlt.paper.methods import METHODS, MethodResult, run_method
from spark_mlt.paper.models import keras_module
from spark_mlt.paper.options import DEFAULT_EPOCHS, PaperOptions
from spark_mlt.paper.report import write_report

log = logging.getLogger("spark_mlt.paper")

__all__ = ["DEFAULT_EPOCHS", "METHODS", "PaperOptions", "PaperReport", "reproduce"]


@dataclass(frozen=True)
class PaperReport:
    """What [`reproduce`][spark_mlt.paper.reproduce] measured, and where it wrote the report."""

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
        "epoch_selection": options.epoch_selection,
        "validation_fraction": options.validation_fraction if options.epoch_selection == "validation" else None,
        "max_epochs": options.max_epochs if options.epoch_selection == "validation" else None,
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
    """Train and score every method on the tokenized MovieLens table ``table``; write the
    report into the folder ``output``.

    Raises:
        MissingExtraError: Keras 3, JAX or scikit-learn is not installed (``pip install 'spark-mlt[paper]'``).
        MissingTableError, MissingCodecError, SourceError: ``table`` is not a tokenized
            MovieLens table.
    """
    options = options or PaperOptions()
    keras_module()  # first: without the extra, say so before any work
    ratings = load_ratings(os.fspath(table), label_threshold=options.label_threshold, limit=options.limit)
    train, test = split(ratings, test_fraction=options.test_fraction, seed=options.seed)
    results = []
    for index, method in enumerate(options.methods, 1):
        log.info("method %d/%d: %s (%d training rows)", index, len(options.methods), method, len(train))
        results.append(run_method(method, train, test, options))
        result = results[-1]
        log.info(
            "method %s: accuracy %.4f, ROC AUC %.4f after %d epoch(s)",
            method,
            result.accuracy,
            result.roc_auc,
            result.epochs,
        )
    meta = _meta(os.fspath(table), ratings, train, test, options)
    return PaperReport(results, meta, write_report(results, meta, os.fspath(output)))
