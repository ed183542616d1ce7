"""How much the paper's scores move: with the codec, with the split seed, with the compositional
model's setting. Prints Markdown tables (docs/paper.md's come from them).

A MovieLens release is tokenized by the MovieLens job into a temporary Delta table (through
``reproduce_paper``, as ``spark-mlt paper`` does), so the tokens are the ones a user's table
holds; a Delta table the job wrote is read as it is. Every run chooses each method's epochs
on a validation split carved from the training split (``epoch_selection="validation"``):

* ``codecs``: validation scores of the token models for each codec ``p:n`` (``13:`` sizes n
  for each column from its largest id, as the job does when only ``--p`` is given).
* ``seeds``: test scores over split seeds (each seed draws the split, the validation split and
  the initial weights): mean, standard deviation, range, and the epochs chosen; paired with the
  supervised embeddings, the difference seed by seed and each method's parameters as a share of
  the embeddings' (the compositional model's default rank follows the training ids, so a seed's).
* ``ablation``: validation scores of compositional MLT embeddings per combination, rank and
  code width.

Choosing on validation scores and reporting test scores once keeps the test split out of every
choice. Run one study at a time, pinned to a core::

    taskset -c 1 python benchmarks/benchmark_paper_quality.py seeds --input data/ml-latest-small
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spark_mlt.batch import MovieLensOptions, local_session, reproduce_paper
from spark_mlt.models import COMBINATIONS
from spark_mlt.paper import METHODS, PaperOptions, PaperReport
from spark_mlt.paper.methods import MethodResult

TOKEN_METHODS = ("mlt", "mlt_autoencoder", "mlt_categories", "mlt_pairs", "mlt_compositional")
TOP_METHODS = ("one_hot", "embeddings", "qr_embeddings", "mlt_pairs", "mlt_compositional")


def codec_options(text: str) -> MovieLensOptions:
    """``p:n``, ``p:`` (n sized per column) or ``:`` (the job's default sizing) as the job's options."""
    p, _, n = text.partition(":")
    return MovieLensOptions(p=int(p) if p else None, n=int(n) if n else None, mode="overwrite")


class Runner:
    """Runs ``reproduce_paper`` on one input, tokenizing a release at most once per codec."""

    def __init__(self, source: str, work: Path) -> None:
        self.source, self.work = source, work
        self._session: Any = None
        self._tables: dict[str, str] = {}

    def session(self) -> Any:
        if self._session is None:
            self._session = local_session(
                "paper-quality", extra_conf={"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}
            )
        return self._session

    def run(self, options: PaperOptions, codec: str = ":") -> PaperReport:
        out = self.work / f"run-{len(list(self.work.iterdir()))}"
        table = self._tables.get(codec, self.source)
        report = reproduce_paper(table, str(out), options, session=self.session, tokenize=codec_options(codec))
        if table == self.source and not Path(self.source, "_delta_log").is_dir():
            self._tables[codec] = str(out / "ratings_mlt")
        return report


def _codes(result: MethodResult) -> str:
    return f"{result.encoder_params:,}"


def codecs_study(runner: Runner, codecs: Sequence[str], methods: Sequence[str], seed: int) -> None:
    """One row per codec and method as it runs, then one row per codec: each method's validation
    accuracy (its encoder parameters, where it has any)."""
    print("| codec (p, n: user / movie) | method | encoder params | epochs | val. accuracy | val. AUC | val. loss |")
    print("|---|---|---:|---:|---:|---:|---:|")
    table: dict[str, list[MethodResult]] = {}
    for codec in codecs:
        options = PaperOptions(methods=tuple(methods), epoch_selection="validation", seed=seed)
        report = runner.run(options, codec)
        (user, movie) = report.meta["codecs"]
        label = f"p = {user['p']}, n = {user['n']} / {movie['n']}"
        table[label] = report.results
        for r in report.results:
            v = r.validation or {}
            print(
                f"| {label} | {r.name} | {_codes(r)} | {v['epochs']} | {v['accuracy']:.2%} | {v['roc_auc']:.4f}"
                f" | {v['log_loss']:.4f} |",
                flush=True,
            )
    names = [r.name for r in next(iter(table.values()))]
    print(f"\nValidation accuracy (encoder parameters), split seed {seed}:\n")
    print("| codec | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for label, results in table.items():
        cells = [
            f"{(r.validation or {})['accuracy']:.2%}" + (f" ({_codes(r)})" if r.encoder_params else "") for r in results
        ]
        print(f"| {label} | " + " | ".join(cells) + " |")


def seeds_study(runner: Runner, seeds: Sequence[int], methods: Sequence[str], codec: str, rank: int | None) -> None:
    rows: dict[str, list[MethodResult]] = {}
    meta = {}
    for seed in seeds:
        options = PaperOptions(methods=tuple(methods), epoch_selection="validation", seed=seed, mlt_rank=rank)
        report = runner.run(options, codec)
        meta[seed] = report.meta
        for r in report.results:
            rows.setdefault(r.key, []).append(r)
            v = r.validation or {}
            print(
                f"seed {seed}: {r.name}: epochs {r.epochs} (validation: accuracy {v['accuracy']:.2%}, ROC AUC"
                f" {v['roc_auc']:.4f}, log loss {v['log_loss']:.4f}); test: accuracy {r.accuracy:.2%}, ROC AUC"
                f" {r.roc_auc:.4f}, log loss {r.log_loss:.4f}; {r.seconds_per_epoch:.2f} s/epoch",
                flush=True,
            )
    first = meta[seeds[0]]
    print(
        f"\n{first['rows']:,} ratings, test {first['test_rows']:,} rows; majority class by seed: "
        + ", ".join(f"{meta[s]['majority_rate']:.2%}" for s in seeds)
    )
    print(
        f"\n| method | encoder params | epochs (seeds {', '.join(map(str, seeds))}) | accuracy: mean ± sd | range"
        " | ROC AUC: mean ± sd | range | s/epoch |"
    )
    print("|---|---:|---|---:|---|---:|---|---:|")
    for results in rows.values():
        acc = [r.accuracy for r in results]
        auc = [r.roc_auc for r in results]
        sd = statistics.stdev if len(results) > 1 else (lambda _: 0.0)
        print(
            f"| {results[0].name} | {_codes(results[0])} | {', '.join(str(r.epochs) for r in results)}"
            f" | {statistics.mean(acc):.2%} ± {sd(acc):.2%} | {min(acc):.2%} to {max(acc):.2%}"
            f" | {statistics.mean(auc):.4f} ± {sd(auc):.4f} | {min(auc):.4f} to {max(auc):.4f}"
            f" | {statistics.mean(r.seconds_per_epoch for r in results):.2f} |",
            flush=True,
        )
    baseline = rows.get("embeddings")
    if baseline and len(seeds) > 1:
        print("\nPaired with the supervised embeddings (same split, seed by seed): mean ± sd of the difference")
        for key, results in rows.items():
            if key != "embeddings":
                acc = [r.accuracy - b.accuracy for r, b in zip(results, baseline, strict=True)]
                auc = [r.roc_auc - b.roc_auc for r, b in zip(results, baseline, strict=True)]
                # the split decides the training ids, so the embeddings' size (and a default rank) per seed
                shares = ", ".join(
                    f"{r.encoder_params:,} ({r.encoder_params / b.encoder_params:.2%})"
                    for r, b in zip(results, baseline, strict=True)
                )
                print(
                    f"- {results[0].name}: accuracy {statistics.mean(acc):+.2%} ± {statistics.stdev(acc):.2%},"
                    f" ROC AUC {statistics.mean(auc):+.4f} ± {statistics.stdev(auc):.4f}; encoder params by seed"
                    f" (share of the embeddings'): {shares}"
                )


def ablation_study(
    runner: Runner,
    *,
    combinations: Sequence[str],
    ranks: Sequence[int | None],
    widths: Sequence[int | None],
    seeds: Sequence[int],
    codec: str,
) -> None:
    print(
        f"| setting | encoder params | val. accuracy (seeds {', '.join(map(str, seeds))}) | mean"
        " | val. ROC AUC, mean | val. log loss, mean |"
    )
    print("|---|---:|---|---:|---:|---:|")
    for combination, rank, width in ((c, r, w) for c in combinations for r in ranks for w in widths):
        found = []
        for seed in seeds:
            options = PaperOptions(
                methods=("mlt_compositional",),
                epoch_selection="validation",
                seed=seed,
                mlt_combination=combination,  # type: ignore[arg-type]
                mlt_rank=rank,
                mlt_code_width=width,
            )
            found.append(runner.run(options, codec).results[0])
        v = [r.validation or {} for r in found]
        accuracies = " ".join(f"{x['accuracy']:.2%}" for x in v)
        print(
            f"| {found[0].name} | {_codes(found[0])} | {accuracies}"
            f" | {statistics.mean(x['accuracy'] for x in v):.2%} | {statistics.mean(x['roc_auc'] for x in v):.4f}"
            f" | {statistics.mean(x['log_loss'] for x in v):.4f} |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", choices=("codecs", "seeds", "ablation"))
    parser.add_argument("--input", required=True, help="a MovieLens release folder, or a Delta table the job wrote")
    parser.add_argument("--seeds", type=int, nargs="+", default=[42, 43, 44])
    parser.add_argument("--methods", nargs="+", choices=list(METHODS), help="default: the study's")
    parser.add_argument("--codec", default=":", help="seeds, ablation: the codec p:n of a release (default: sized)")
    parser.add_argument("--codecs", nargs="+", default=["2:", "7:", "13:", "31:", "101:", "13:7", "47:7"])
    parser.add_argument("--combinations", nargs="+", choices=COMBINATIONS, default=list(COMBINATIONS))
    own = "(default: the combination's)"
    parser.add_argument(
        "--ranks", type=int, nargs="+", default=[None], help="ablation (default: within 5%% of the embeddings')"
    )
    parser.add_argument("--code-widths", type=int, nargs="+", default=[None], help=f"ablation {own}")
    parser.add_argument(
        "--mlt-rank", type=int, help="seeds: the compositional model's rank (default: within 5%% of the embeddings')"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="paper-quality-") as work:
        runner = Runner(args.input, Path(work))
        if args.study == "codecs":
            codecs_study(runner, args.codecs, args.methods or TOKEN_METHODS, args.seeds[0])
        elif args.study == "seeds":
            seeds_study(runner, args.seeds, args.methods or TOP_METHODS, args.codec, args.mlt_rank)
        else:
            ablation_study(
                runner,
                combinations=args.combinations,
                ranks=args.ranks,
                widths=args.code_widths,
                seeds=args.seeds,
                codec=args.codec,
            )


if __name__ == "__main__":
    main()
