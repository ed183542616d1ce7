"""Lane (SWAR) arithmetic for the native engine: many small sums mod p in one bigint word.

A token, or a digit when decoding, is a sum of products mod p. Rather than one sum per
output, the builders compute "words": bigints that hold several outputs side by side in
``lane``-bit lanes, with no carry between lanes, from lookup tables
(:mod:`spark_mlt.codec.tables`) or from one multiply-add per input (:func:`mat_words`). A
reader then takes each output from its lane with a shift, a mask and ``% p``.

Every intermediate stays below 2**63 (ANSI mode raises on bigint overflow; with ANSI off it
wraps silently): lanes are sized so that their sums fit, and :func:`sum_mod` reduces mod p
in groups whose sum cannot exceed 2**63 - 1.

Plan size: an output reads its word, so where more than ``BIND_WORDS_ABOVE`` outputs would
copy one word, the words are bound once to a lambda variable (:meth:`ExpressionTarget.bind`)
and an expression's size stays linear in n. Spark 4.3 generates code for lambda functions;
before it they run interpreted, so there up to ``COPY_UP_TO`` outputs copy their words
instead (a constant factor on the size).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from spark_mlt.codec import MAX_ID
from spark_mlt.codec.tables import Tables, lane_groups
from spark_mlt.column.targets import ExpressionTarget

__all__ = [
    "BIND_WORDS_ABOVE",
    "COPY_UP_TO",
    "Words",
    "from_words",
    "lookup_words",
    "mat_words",
    "sum_mod",
    "weighted",
]

E = TypeVar("E")

BIND_WORDS_ABOVE = 4  # outputs per word above which an expression binds its words to a lambda
COPY_UP_TO = 8  # outputs that copy their words where lambdas are slow (ExpressionTarget.copies_cheaply)

Words = tuple[list[E], Callable[[Sequence[E]], list[E]]]  # lane-packed words, and their reader


def weighted(t: ExpressionTarget[E], terms: list[tuple[E, int]]) -> E:
    """The sum of ``term * weight``; 0 for no terms."""
    total: E | None = None
    for term, weight in terms:
        product = term if weight == 1 else t.mul(term, t.lit(weight))
        total = product if total is None else t.add(total, product)
    return total if total is not None else t.lit(0)


def sum_mod(t: ExpressionTarget[E], terms: list[tuple[E, int]], p: int) -> E:
    """(sum of term * weight) mod p, never exceeding 2**63 - 1 on the way."""
    terms = [(term, w % p) for term, w in terms if w % p]
    if not terms:
        return t.lit(0)
    per_group = max(1, MAX_ID // max(1, (p - 1) ** 2))  # products < (p-1)**2 each
    groups = []
    for start in range(0, len(terms), per_group):
        groups.append(t.mod(weighted(t, terms[start : start + per_group]), t.lit(p)))
    result = groups[0]
    for group in groups[1:]:  # each < p: the sum of n of them is far below 2**63
        result = t.add(result, group)
    return result if len(groups) == 1 else t.mod(result, t.lit(p))


def _lane_reader(
    t: ExpressionTarget[E], groups: Sequence[Sequence[int]], lane: int, p: int
) -> Callable[[Sequence[E]], list[E]]:
    """Reads every output from its word's lane: a shift, a mask (not for the top lane) and
    ``% p``."""
    mask = (1 << lane) - 1

    def read(words: Sequence[E]) -> list[E]:
        outputs: list[E] = []
        for word, group in zip(words, groups, strict=True):
            for j in group:
                shift = lane * (j - group[0])
                value = word if shift == 0 else t.call("shiftright", [word, t.lit(shift)])
                if j != group[-1]:
                    value = t.bit_and(value, t.lit(mask))
                outputs.append(t.mod(value, t.lit(p)))
        return outputs

    return read


def from_words(t: ExpressionTarget[E], words: Words[E], outputs: int, finish: Callable[[list[E]], E]) -> E:
    """``finish`` of the outputs the words hold. Where many outputs read each word, the words
    are bound once to a lambda variable (see the module docs) instead of copied per output."""
    values, read = words
    if len(values) * BIND_WORDS_ABOVE < outputs and not (outputs <= COPY_UP_TO and t.copies_cheaply):
        return t.bind(values, lambda bound: finish(read(bound)))
    return finish(read(values))


def mat_words(t: ExpressionTarget[E], rows: Sequence[tuple[E, Sequence[int]]], p: int, vmax: int) -> Words[E]:
    """``(sum_i v_i * W_i[j]) mod p`` for every column j, given rows ``(v_i, W_i)`` with
    ``|v_i| <= vmax`` (bigint expressions) and weights in [0, p), as words and their reader.

    The n column sums are computed side by side in lanes of one bigint. Lane j of ``K_i``
    holds ``W_i[j]``, so ``sum_i v_i * K_i`` holds every column's sum in its lane with no
    carry between lanes (each lane's sum is at most ``len(rows) * vmax * (p - 1)``, below
    ``2**lane``), and stays below 2**62. That is one multiply-add per row instead of n (the
    ANSI-checked multiply and add are the expensive operations here), then a shift, a mask and
    a mod per column. When fewer than two lanes fit in 62 bits (large p), each column has a
    word of its own, reduced mod p already.
    """
    n = len(rows[0][1])
    lane = max(1, len(rows) * vmax * (p - 1)).bit_length()
    if 62 // lane < 2:
        return [sum_mod(t, [(v, w[j]) for v, w in rows], p) for j in range(n)], list
    groups = lane_groups(n, lane)
    words = []
    for columns in groups:
        terms = [(v, sum((w[j] % p) << (lane * (j - columns[0])) for j in columns)) for v, w in rows]
        words.append(weighted(t, [(v, k) for v, k in terms if k]))
    return words, _lane_reader(t, groups, lane, p)


def lookup_words(t: ExpressionTarget[E], indexes: Sequence[E], spec: Tables, p: int) -> Words[E]:
    """The tables' words (one lookup per chunk each) and their reader, given each chunk's
    index expression."""
    words: list[E] = []
    for tables in spec.tables:
        entries = [
            t.call("get", [t.long_array(table), index])
            for index, table in zip(indexes, tables, strict=True)
            if any(table)
        ]
        word = entries[0] if entries else t.lit(0)
        for entry in entries[1:]:
            word = t.add(word, entry)
        words.append(word)
    return words, _lane_reader(t, spec.groups, spec.lane, p)
