"""The public compositional MLT model (``spark_mlt.models``): its default size follows the id
counts, within 5% of the supervised embeddings' parameters and the largest that is; it imports
without Keras or PySpark; a bad argument is refused naming it."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from spark_mlt.errors import MLTError, MLTTypeError, OptionError
from spark_mlt.models import (
    COMBINATIONS,
    EMBEDDING_BUDGET,
    compositional_parameters,
    compositional_rank,
    embedding_parameters,
    mlt_compositional_model,
)
from spark_mlt.paper import models as paper_models

RELEASES = {
    "ml-latest-small": (((13, 3), (13, 5)), (610, 9_022)),
    "ml-100k": (((13, 3), (13, 3)), (943, 1_648)),
    "ml-20m": (((13, 5), (13, 5)), (138_493, 26_744)),
    "paper codec, ml-20m": (((47, 7), (47, 7)), (138_493, 26_744)),
    "three columns": (((7, 4), (13, 3), (31, 2)), (2_000, 1_500, 900)),
}


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("combination", COMBINATIONS)
@pytest.mark.parametrize("code_width", [None, 0, 2])
def test_the_default_rank_is_the_largest_within_the_budget(
    release: str, combination: str, code_width: int | None
) -> None:
    codecs, id_counts = RELEASES[release]
    width = code_width if code_width is not None else (0 if combination == "qr" else 2)
    rank = compositional_rank(codecs, id_counts, combination=combination, code_width=code_width)  # type: ignore[arg-type]
    limit = EMBEDDING_BUDGET * embedding_parameters(id_counts)

    def size(r: int) -> int:
        return compositional_parameters(codecs, r, combination=combination, code_width=width)  # type: ignore[arg-type]

    assert size(rank) <= limit < size(rank + 1)


def test_the_budget_ranks_of_the_releases_measured() -> None:
    """ml-latest-small's training ids allow rank 148 (13,312 parameters at rank 128 were 4.3% of
    the embeddings' 308,288); ml-100k's, rank 53 (rank 128 was 12% of 82,976)."""
    assert embedding_parameters((610, 9_022)) == 308_288
    assert embedding_parameters((943, 1_648)) == 82_976
    assert compositional_rank(*RELEASES["ml-latest-small"]) == 148
    assert compositional_rank(*RELEASES["ml-100k"]) == 53
    assert compositional_rank(*RELEASES["ml-100k"], budget=0.12) == 127


@pytest.mark.parametrize("combination", COMBINATIONS)
def test_the_model_takes_its_default_rank_from_the_id_counts(combination: str) -> None:
    """The built model has the parameters the budget allows, counted as the paper counts them
    (the head apart); without id counts it has the combination's fixed default."""
    codecs, id_counts = ((5, 3), (7, 2)), (400, 90)
    model = mlt_compositional_model(codecs, combination=combination, id_counts=id_counts)  # type: ignore[arg-type]
    rank = compositional_rank(codecs, id_counts, combination=combination)  # type: ignore[arg-type]
    width = 0 if combination == "qr" else 2
    expected = compositional_parameters(codecs, rank, combination=combination, code_width=width)  # type: ignore[arg-type]
    assert paper_models.encoder_parameters(model) == expected
    assert expected <= EMBEDDING_BUDGET * embedding_parameters(id_counts)
    fixed = mlt_compositional_model(codecs, combination=combination)  # type: ignore[arg-type]
    assert paper_models.encoder_parameters(fixed) == compositional_parameters(
        codecs,
        128 if combination == "qr" else 12,
        combination=combination,  # type: ignore[arg-type]
        code_width=width,
    )


def test_the_model_trains_on_tokens_of_any_number_of_columns() -> None:
    """Three id columns, named: one short fit lowers the loss on a learnable rule."""
    codecs = ((5, 2), (7, 2), (3, 3))
    model = mlt_compositional_model(codecs, id_counts=(20, 40, 25), columns=("shop", "item", "day"))
    rng = np.random.default_rng(7)
    tokens = np.hstack([rng.integers(0, p, size=(512, n)) for p, n in codecs]).astype(np.int32)
    labels = (tokens[:, 0] >= 2).astype(np.float32)
    history = model.fit(tokens, labels, epochs=3, batch_size=64, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert model.get_layer("day_code").output.shape[-1] == compositional_rank(codecs, (20, 40, 25))


def test_the_public_module_imports_without_keras_or_pyspark() -> None:
    """A Keras user's import loads neither Keras (imported when a model is built) nor PySpark."""
    script = (
        "import sys; from spark_mlt.models import mlt_compositional_model, compositional_rank; "
        "print(sorted(m for m in ('keras', 'jax', 'pyspark') if m in sys.modules))"
    )
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert completed.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("call", "error", "parameter", "message"),
    [
        (
            lambda: compositional_rank(((13, 3), (13, 5)), (610,)),
            OptionError,
            "id_counts",
            r"id_counts must give one count per codec \(2\), got 1: \(610,\)",
        ),
        (
            lambda: compositional_rank(((13, 3),), (610,), budget=0),
            OptionError,
            "budget",
            r"budget must be a share > 0 of the embeddings' parameters, got 0",
        ),
        (
            lambda: compositional_rank(((47, 7), (47, 7)), (10, 10)),
            OptionError,
            "budget",
            r"budget 0.05 allows 35 parameters for id_counts \(10, 10\), fewer than rank 1 takes \(658\)",
        ),
        (
            lambda: compositional_rank(((1, 3),), (610,)),
            OptionError,
            "codecs",
            r"codecs: p must be a whole number >= 2, got 1",
        ),
        (
            lambda: compositional_rank([13, 3], (610,)),  # type: ignore[list-item]
            MLTTypeError,
            "codecs",
            r"codecs: each codec must be a \(p, n\) pair, got 13",
        ),
        (
            lambda: embedding_parameters((610, 0)),
            OptionError,
            "id_counts",
            r"id_counts must be a whole number >= 1, got 0",
        ),
        (
            lambda: compositional_parameters(((13, 3),), 2.5),  # type: ignore[arg-type]
            MLTTypeError,
            "rank",
            r"rank must be a whole number >= 1, got 2.5",
        ),
        (
            lambda: compositional_rank(((13, 3),), (610,), combination="sum"),  # type: ignore[arg-type]
            OptionError,
            "combination",
            r"combination must be one of 'qr', 'path', 'product'; got 'sum'",
        ),
        (
            lambda: mlt_compositional_model(((13, 3), (13, 5)), columns=("user",)),
            OptionError,
            "columns",
            r"columns must give a distinct name to each of the 2 codecs, got \('user',\)",
        ),
        (
            lambda: mlt_compositional_model(((13, 3), (13, 5)), rank=0),
            OptionError,
            "rank",
            r"rank must be a whole number >= 1, got 0",
        ),
    ],
)
def test_a_bad_argument_is_refused_naming_it_and_what_was_expected(
    call: object, error: type[MLTError], parameter: str, message: str
) -> None:
    with pytest.raises(error, match=message) as caught:
        call()  # type: ignore[operator]
    assert caught.value.parameter == parameter
