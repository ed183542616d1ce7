"""The reproduction's report: ``report.json``, ``report.md`` and ``report.png``.

One row per method: dimensions, reversibility (for MLT+Autoencoder the measured exact-recovery
rate, for compositional MLT embeddings the measured count of distinct codes), encoder parameters
as the paper counts them, head parameters, epochs (fixed, or chosen on validation), seconds per
training epoch, µs per predicted sample, accuracy, ROC AUC and log loss on the test split;
beside it, the majority-class rate of the test split and the paper's own figures.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from spark_mlt.paper.methods import PAPER_FIGURES, MethodResult

__all__ = ["markdown", "write_report"]


def _number(value: float | int | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.{digits}f}"


def _reversible(result: MethodResult) -> str:
    if result.exact_recovery is not None:
        return f"{'yes' if result.reversible else 'no'} ({result.exact_recovery:.1%} of ids recovered)"
    if "distinct_codes" in result.extra:
        counts = result.extra["distinct_codes"]
        codes = ", ".join(f"{codes:,} of {ids:,} {column}s" for column, (codes, ids) in counts.items())
        return f"{'yes' if result.reversible else 'no'} (distinct codes: {codes})"
    return "yes" if result.reversible else "no"


def _protocol(meta: dict[str, Any]) -> str:
    if meta.get("epoch_selection") == "validation":
        return (
            "Epochs: each method's count has the lowest log loss on a validation split"
            f" ({meta['validation_fraction']:.0%} of the training split, seed {meta['seed'] + 1};"
            f" up to {meta['max_epochs']} epochs), then the method is retrained on the whole training split"
            " and tested once."
        )
    return "Epochs: fixed (the paper's; ours as chosen on ml-latest-small's validation split)."


def markdown(results: list[MethodResult], meta: dict[str, Any]) -> str:
    """The report as a Markdown table, with the run's setting above it."""
    lines = [
        f"# MLT paper, Table 1, reproduced ({meta['date']})",
        "",
        f"Data: {meta['source']} — {meta['rows']:,} ratings ({meta['train_rows']:,} train, {meta['test_rows']:,} test,"
        f" split seed {meta['seed']}); label `{meta['label_rule']}` (the table records: {meta['table_label_rule']}).",
        f"Majority-class rate on the test split: {meta['majority_rate']:.2%}. Machine: {meta['machine']}.",
        _protocol(meta),
        "",
        "| method | dims | reversible | encoder params | head params | epochs | s/epoch | µs/sample"
        " | accuracy | ROC AUC | log loss | paper: accuracy | paper: params | paper: dims |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        paper = PAPER_FIGURES.get(r.key, {})
        accuracy = paper.get("accuracy")
        lines.append(
            f"| {r.name} | {r.dims:,} | {_reversible(r)} | {r.encoder_params:,} | {r.head_params:,} | {r.epochs}"
            f" | {_number(r.seconds_per_epoch)} | {_number(r.us_per_sample)} | {r.accuracy:.2%} | {r.roc_auc:.4f}"
            f" | {r.log_loss:.4f} | {'-' if accuracy is None else f'{accuracy:.2%}'}"
            f" | {_number(paper.get('params'))} | {_number(paper.get('dims'))} |"
        )
    return "\n".join(lines) + "\n"


def _plot(results: list[MethodResult], meta: dict[str, Any], path: Path) -> None:
    import matplotlib as mpl

    mpl.use("Agg")
    import matplotlib.pyplot as plt

    names = [r.name for r in results]
    ours = [r.accuracy for r in results]
    paper = [PAPER_FIGURES.get(r.key, {}).get("accuracy") or 0.0 for r in results]
    figure, axis = plt.subplots(figsize=(10, 4.5), constrained_layout=True)
    positions = range(len(results))
    axis.bar([x - 0.2 for x in positions], ours, width=0.4, label="this run")
    axis.bar([x + 0.2 for x in positions], paper, width=0.4, label="paper (MovieLens 20M)")
    axis.axhline(meta["majority_rate"], color="grey", linestyle="--", label="majority class (this run)")
    axis.set_xticks(list(positions), names, rotation=20, ha="right")
    axis.set_ylabel("test accuracy")
    axis.set_ylim(0.4, 1.0)
    axis.legend(loc="upper left")
    axis.set_title(f"MLT paper, Table 1: {meta['source']}")
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_report(results: list[MethodResult], meta: dict[str, Any], folder: str | Path) -> dict[str, Path]:
    """Write the three report files into ``folder``; returns their paths."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "report.json", "markdown": out / "report.md", "plot": out / "report.png"}
    document = {"meta": meta, "methods": [asdict(r) for r in results], "paper": PAPER_FIGURES}
    paths["json"].write_text(json.dumps(document, indent=2, default=float) + "\n")
    paths["markdown"].write_text(markdown(results, meta))
    _plot(results, meta, paths["plot"])
    return paths
