"""The "How it works" figure (docs/img/how-it-works.svg) shows a codec's real numbers."""

from __future__ import annotations

import re
from xml.etree import ElementTree

import numpy as np

from spark_mlt import MLTCodec
from tests.support.paths import ROOT

FIGURE = ROOT / "docs" / "img" / "how-it-works.svg"


def test_the_figures_codec_matrix_digits_and_tokens_are_the_codecs() -> None:
    texts = [element.text or "" for element in ElementTree.parse(FIGURE).iter() if element.tag.endswith("text")]
    title = next(text for text in texts if text.startswith("1. The codec"))
    match = re.search(r"p = (\d+), n = (\d+), seed = (\d+)", title)
    assert match is not None, title
    p, n, seed = (int(value) for value in match.groups())
    codec = MLTCodec.from_seed(p=p, n=n, seed=seed)
    assert f"(ids 0 .. {codec.capacity - 1:,})" in title
    shown_id = int(texts[texts.index("id") + 1])
    digits = [int(d) for d in texts[texts.index("most significant first") + 1].strip("[]").split()]
    assert sum(d * p ** (n - 1 - j) for j, d in enumerate(digits)) == shown_id
    start = texts.index("M =") + 1
    assert [int(v) for v in texts[start : start + n * n]] == codec.M.ravel().tolist()
    tokens = next(text for text in texts[texts.index("tokens: n numbers below p") + 1 :] if text.startswith("["))
    assert [int(t) for t in tokens.strip("[]").split()] == codec.encode(np.array([shown_id]))[0].tolist()
