"""The options of the paper's reproduction
([`spark_mlt.paper.reproduce`][spark_mlt.paper.reproduce], ``spark-mlt paper``).

Each field's ``metadata["help"]`` is its flag's help: the CLI derives ``--mlt-rank`` from
``mlt_rank``. Values are checked once, when the options are built, and an error names the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

from spark_mlt.errors import MLTError
from spark_mlt.models import COMBINATIONS, COMPOSITION_DEFAULTS, EMBEDDING_BUDGET, Combination
from spark_mlt.options import check_choice

__all__ = ["DEFAULT_EPOCHS", "EPOCH_SELECTIONS", "METHOD_KEYS", "EpochSelection", "Method", "PaperOptions"]

EpochSelection = Literal["fixed", "validation"]
EPOCH_SELECTIONS: tuple[EpochSelection, ...] = get_args(EpochSelection)
#: The representations the reproduction trains (``spark_mlt.paper.methods.METHODS`` says how),
#: in the report's order. Declared here, with their epochs, so that the options check them
#: without importing the methods, which take the options: the dependency runs methods -> options.
Method = Literal[
    "one_hot",
    "hashing",
    "mlt",
    "mlt_autoencoder",
    "embeddings",
    "mlt_categories",
    "mlt_pairs",
    "mlt_compositional",
    "qr_embeddings",
]
METHOD_KEYS: tuple[Method, ...] = get_args(Method)

#: Epochs and batch size per method, as the paper's code trains them (the autoencoder: its own
#: 10 epochs, then the head's 10). MLT as categories (and token pairs) is ours: trained like
#: the embeddings. Compositional MLT embeddings and the QR trick share rows between ids, which
#: takes more epochs: their counts are the median of the counts chosen on validation splits of
#: ml-latest-small (``epoch_selection="validation"``).
DEFAULT_EPOCHS: dict[str, int] = {
    "one_hot": 3,
    "hashing": 3,
    "mlt": 10,
    "mlt_autoencoder": 10,
    "embeddings": 3,
    "mlt_categories": 3,
    "mlt_pairs": 3,
    "mlt_compositional": 16,
    "qr_embeddings": 7,
}


@dataclass(frozen=True, kw_only=True)
class PaperOptions:
    """How [`spark_mlt.paper.reproduce`][spark_mlt.paper.reproduce] runs.

    Each field's ``metadata["help"]`` says what it does (``spark-mlt paper --help`` prints it).

    Example::

        PaperOptions(methods=("mlt", "hashing"), epochs={"mlt": 2}, limit=100_000)
        PaperOptions(epoch_selection="validation", mlt_rank=8)
    """

    methods: tuple[str, ...] = field(
        default=METHOD_KEYS,
        metadata={"help": "the representations to train and report, in this order (a b, or a,b)"},
    )
    epochs: Mapping[str, int] = field(
        default_factory=dict,
        metadata={
            "help": "epochs of a method, method=count, overriding the paper's (default: "
            + " ".join(f"{method}={count}" for method, count in DEFAULT_EPOCHS.items())
            + "); with --epoch-selection validation, only the autoencoder's own epochs"
        },
    )
    epoch_selection: EpochSelection = field(
        default="fixed",
        metadata={
            "help": "fixed: each method trains its --epochs (the paper's); validation: each method's epoch count is "
            "the one with the lowest log loss on a validation split carved from the training split (up to "
            "--max-epochs, stopping 3 epochs after the best), then it is retrained on the whole training split"
        },
    )
    validation_fraction: float = field(
        default=0.1, metadata={"help": "share of the training split held out to choose epochs, in (0, 1)"}
    )
    max_epochs: int = field(default=20, metadata={"help": "most epochs tried per method when choosing on validation"})
    mlt_combination: Combination = field(
        default="qr",
        metadata={
            "help": "how compositional MLT embeddings combine an id's token rows: qr (their element-wise product), "
            "path (a row times one matrix per further token) or product (element-wise, of 1 + each row)"
        },
    )
    mlt_rank: int | None = field(
        default=None,
        metadata={
            "help": "width of the vectors in the compositional MLT embeddings' tables (the path's r x r); default: "
            # no percent sign: argparse formats help with %
            f"the largest whose tables hold at most {EMBEDDING_BUDGET:g} times the supervised embeddings' "
            "parameters for the training split's ids"
        },
    )
    mlt_code_width: int | None = field(
        default=None,
        metadata={
            "help": "numbers per id the head reads from the compositional MLT embeddings: a learned projection "
            "of the table vector to this width, or 0 for the whole --mlt-rank-wide vector; default: "
            + ", ".join(f"{name} {width}" for name, (_, width) in COMPOSITION_DEFAULTS.items())
        },
    )
    seed: int = field(default=42, metadata={"help": "seed of the train/test split and of the models' initial weights"})
    test_fraction: float = field(default=0.2, metadata={"help": "the share of rows held out for testing, in (0, 1)"})
    label_threshold: float = field(
        default=4.0,
        metadata={
            "help": "label = rating >= this (4: the paper's code), whatever rule the table records; also the "
            "rule of a release folder tokenized first"
        },
    )
    limit: int | None = field(
        default=None, metadata={"help": "read at most this many rows of the table (for smoke runs; default: all)"}
    )

    def __post_init__(self) -> None:
        for method in self.methods:
            check_choice("methods", method, METHOD_KEYS)
        for method, count in self.epochs.items():
            check_choice("epochs", method, METHOD_KEYS)
            _check_count("epochs", count, f"epochs: {method} must train for a whole number of epochs >= 1")
        check_choice("epoch_selection", self.epoch_selection, EPOCH_SELECTIONS)
        check_choice("mlt_combination", self.mlt_combination, COMBINATIONS)
        _check_count("max_epochs", self.max_epochs, "max_epochs must be a whole number >= 1")
        if self.mlt_rank is not None:
            _check_count("mlt_rank", self.mlt_rank, "mlt_rank must be a whole number >= 1")
        width = self.mlt_code_width
        if width is not None and (isinstance(width, bool) or not isinstance(width, int) or width < 0):
            raise MLTError(
                f"mlt_code_width must be a whole number >= 0 (0: the whole vector), got {self.mlt_code_width!r}",
                parameter="mlt_code_width",
            )
        for name in ("test_fraction", "validation_fraction"):
            value = getattr(self, name)
            if not 0 < value < 1:
                raise MLTError(f"{name} must be in (0, 1), got {value!r}", parameter=name)


def _check_count(name: str, value: object, text: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise MLTError(f"{text}, got {value!r}", parameter=name)
