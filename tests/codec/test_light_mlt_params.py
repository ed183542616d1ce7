"""light-mlt interoperability: its params dicts and its mlt_params.pkl, read safely."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from spark_mlt import CodecFormatError, MLTCodec, load_light_mlt_params

light_mlt = pytest.importorskip(
    "light_mlt.light_mlt", reason="light-mlt is a dev dependency; the compatibility venvs do not install it"
)


@pytest.fixture(scope="module")
def light_mlt_artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real light-mlt fit: two id columns with per-column (p, n, seed)."""
    folder = tmp_path_factory.mktemp("light_mlt")
    frame = pd.DataFrame({"user": [f"u{i}" for i in range(50)], "item": [f"i{i % 7}" for i in range(50)]})
    light_mlt.fit(
        frame,
        categorical_cols=["user", "item"],
        continuous_cols=[],
        dir=str(folder),
        mlt_config={"user": {"p": 13, "n": 3, "seed": 5}, "item": {"p": 7, "n": 2, "seed": 9}},
    )
    return folder


def test_light_mlt_pickle_loads_into_codecs_that_reproduce_its_tokens(light_mlt_artifacts: Path) -> None:
    codecs = load_light_mlt_params(light_mlt_artifacts / "mlt_params.pkl")
    assert sorted(codecs) == ["item", "user"]
    assert codecs["user"] == MLTCodec(13, MLTCodec.from_seed(13, 3, seed=5).M)
    ids = pd.DataFrame({"user": np.arange(50), "item": np.arange(50) % 7})
    expected, _ = light_mlt.apply_mlt_tokens(ids, ["user", "item"], dir=str(light_mlt_artifacts))
    for column in ("user", "item"):
        token_columns = [f"{column}_t{i}" for i in range(codecs[column].n)]
        np.testing.assert_array_equal(codecs[column].encode(ids[column].to_numpy()), expected[token_columns])


def test_light_mlt_pickle_can_be_given_as_bytes(light_mlt_artifacts: Path) -> None:
    payload = (light_mlt_artifacts / "mlt_params.pkl").read_bytes()
    assert load_light_mlt_params(payload)["item"].p == 7


class _Exploit:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("echo pwned > /dev/null",))


def test_a_crafted_pickle_is_refused_before_any_code_runs(tmp_path: Path) -> None:
    path = tmp_path / "mlt_params.pkl"
    path.write_bytes(pickle.dumps({"user": {"p": 13, "n": 1, "M": _Exploit(), "Minv": [[1]]}}))
    with pytest.raises(CodecFormatError, match=r"refusing to unpickle (posix|os)\.system"):
        load_light_mlt_params(path)


def test_a_pickle_with_other_objects_is_refused(tmp_path: Path) -> None:
    payload = pickle.dumps({"user": {"p": 13, "n": 1, "M": pd.Timestamp("2020-01-01"), "Minv": [[1]]}})
    with pytest.raises(CodecFormatError, match=r"refusing to unpickle pandas"):
        load_light_mlt_params(payload)


def test_a_pickle_of_the_wrong_shape_is_refused() -> None:
    with pytest.raises(CodecFormatError, match=r"must hold a dict of column -> \{p, n, M, Minv\}, got list"):
        load_light_mlt_params(pickle.dumps([1, 2]))
    with pytest.raises(CodecFormatError, match=r"not a readable light-mlt params pickle"):
        load_light_mlt_params(b"not a pickle")


def test_light_mlt_params_with_a_wrong_inverse_are_refused() -> None:
    params = {"p": 7, "n": 1, "M": np.array([[3]]), "Minv": np.array([[4]])}
    with pytest.raises(CodecFormatError, match=r"Minv is not the inverse of M mod p=7"):
        MLTCodec.from_light_mlt_params(params)
    with pytest.raises(CodecFormatError, match=r"missing key\(s\) \['Minv'\]"):
        MLTCodec.from_light_mlt_params({"p": 7, "n": 1, "M": [[3]]})
    with pytest.raises(CodecFormatError, match=r"column 'bad': light-mlt params say n=2 but M is 1 x 1"):
        load_light_mlt_params(pickle.dumps({"bad": {"p": 7, "n": 2, "M": np.array([[3]]), "Minv": np.array([[5]])}}))
