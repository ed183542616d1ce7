"""The test vectors of the JVM engine's kernels (``jvm/src/test``), written by the NumPy codec.

Maven's unit tests compile each codec's generated kernels and check them against these
tokens, packed values and ids; ``tests/column/test_kernels.py`` checks that the committed file is
what the NumPy codec writes today. Rewrite it with ``python -m tests.support.jvm_vectors``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from spark_mlt import MLTCodec

PATH = Path(__file__).parents[2] / "jvm/src/test/resources/io/sparkmlt/vectors.json"

#: one codec per kernel strategy and boundary: p = 2 (XOR tables; n = 64 beyond 2^63),
#: lane tables (p = 3 with p^n below and above 2^63, small primes, p near 2^8, one digit per
#: chunk for 257 and 1,009; (7, 30) and (1009, 7) have more tokens than an id below 2^63 has
#: digits), arithmetic (p above 4,096, p^n above 2^63, the Mersenne prime) and its loops
#: (n = 63 and 64, where the tables would be too large)
FAMILIES = [
    (2, 2), (2, 40), (2, 63), (2, 64), (3, 2), (3, 39), (3, 40), (11, 7), (13, 6), (13, 17), (251, 8),
    (257, 7), (1009, 5), (65521, 4), (65521, 5), (2_147_483_647, 2), (2_147_483_647, 3), (2_147_483_647, 17),
    (7, 30), (1009, 7), (3, 64), (251, 63), (65521, 64), (2_147_483_647, 64),
]  # fmt: skip
MAX_ID = 2**63 - 1


def _ids(codec: MLTCodec, rng: np.random.Generator) -> list[int]:
    edge = {0, 1, codec.p - 1, codec.p, codec.max_id, codec.max_id - 1, 2**31 - 1, 2**31, 2**32 + 1}
    random = rng.integers(0, codec.max_id, size=16, endpoint=True).tolist()
    return sorted(i for i in edge | set(random) if 0 <= i <= codec.max_id)


def family(p: int, n: int) -> dict[str, Any]:
    """A codec's vectors: ids with their tokens (and packed tokens), and token vectors with
    their id, or None where they are no code of an id below 2^63."""
    codec = MLTCodec.from_seed(p, n, seed=11)
    rng = np.random.default_rng(p * 131 + n)
    ids = _ids(codec, rng)
    tokens = codec.encode(ids)
    case: dict[str, Any] = {"p": p, "n": n, "codec": codec.to_json(), "ids": ids, "tokens": tokens.tolist()}
    if codec.packed_bits is not None:
        case["packed"] = [int(v) for v in codec.pack(tokens)]
    vectors = rng.integers(0, p, size=(12, n), dtype=np.int64)
    decoded, valid = codec.decode_masked(vectors)
    case["vectors"] = vectors.tolist()
    case["vector_ids"] = [int(i) if ok else None for i, ok in zip(decoded.tolist(), valid.tolist(), strict=True)]
    return case


def vectors() -> str:
    """The file's text."""
    return json.dumps({"families": [family(p, n) for p, n in FAMILIES]}, separators=(",", ":")) + "\n"


if __name__ == "__main__":
    PATH.write_text(vectors())
    print(f"wrote {PATH} ({PATH.stat().st_size:,} bytes)")
