"""Lane (SWAR) arithmetic for the native engine: many small sums mod p in one bigint word.

A token, or a digit when decoding, is a sum of products mod p. Rather than one sum per output, the
builders compute "words": bigints that hold several outputs side by side in ``lane``-bit lanes, with
no carry between lanes, from lookup tables ([`spark_mlt.codec.tables`][spark_mlt.codec.tables]) or
from one multiply-add per input ([`mat_words`][spark_mlt.column.lanes.mat_words]). A reader then
takes each output from its lane with a shift, a mask and ``% p``.

Every intermediate stays below 2**63 (ANSI mode raises on bigint overflow; with ANSI off it
wraps silently): lanes are sized so that their sums fit, and [`sum_mod`][spark_mlt.column.lanes.sum_mod] reduces mod p
in groups whose sum cannot exceed 2**63 - 1.

Each output copies the expression of the word it reads: Spark's subexpression elimination
computes a word once per row however many outputs copy it, and puts a large one in a method
of its own. Binding the words to a lambda variable instead would keep the plan smaller, but
Spark before 4.3 interprets lambdas, and from 4.3 it compiles a lambda's body into its
caller's method, which HotSpot stops compiling to machine code above 8,000 bytes of
bytecode (see docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from spark_mlt.codec import MAX_ID
from spark_mlt.codec.tables import Tables, lane_groups
from spark_mlt.column import sqltext as sql

__all__ = ["Words", "lane_outputs", "lookup_words", "mat_words", "sum_mod", "weighted"]

Words = tuple[list[str], int, Sequence[Sequence[int]]]  # lane-packed words, lane width, outputs per word


def weighted(terms: list[tuple[str, int]]) -> str:
    """The sum of ``term * weight``; 0 for no terms."""
    return sql.total([term if weight == 1 else sql.mul(term, sql.lit(weight)) for term, weight in terms])


def sum_mod(terms: list[tuple[str, int]], p: int, vmax: int) -> str:
    """(sum of term * weight) mod p, given ``|term| <= vmax``, never exceeding 2**63 - 1 on the
    way. ``vmax`` is the terms' bound, not p - 1: the decoder's terms are masked tokens, up
    to 2**token_bits - 1 for an invalid one, and must not overflow before the check rejects it."""
    terms = [(term, w % p) for term, w in terms if w % p]
    if not terms:
        return sql.lit(0)
    per_group = max(1, MAX_ID // max(1, vmax * (p - 1)))  # products of at most vmax * (p - 1) each
    groups = []
    for start in range(0, len(terms), per_group):
        groups.append(sql.mod(weighted(terms[start : start + per_group]), sql.lit(p)))
    # each group < p: the sum of n of them is far below 2**63
    return groups[0] if len(groups) == 1 else sql.mod(sql.total(groups), sql.lit(p))


def lane_outputs(words: Words, p: int) -> list[str]:
    """Every output read from its word's lane: a shift, a mask (not for the top lane) and
    ``% p`` (not where the word holds one output, already reduced)."""
    values, lane, groups = words
    mask = (1 << lane) - 1
    outputs: list[str] = []
    for word, group in zip(values, groups, strict=True):
        if lane == 0:  # one output per word, reduced mod p already (sum_mod)
            outputs.append(word)
            continue
        for j in group:
            shift = lane * (j - group[0])
            value = word if shift == 0 else sql.call("shiftright", [word, sql.lit(shift)])
            if j != group[-1]:
                value = sql.bit_and(value, sql.lit(mask))
            outputs.append(sql.mod(value, sql.lit(p)))
    return outputs


def mat_words(rows: Sequence[tuple[str, Sequence[int]]], p: int, vmax: int) -> Words:
    """``(sum_i v_i * W_i[j]) mod p`` for every column j, given rows ``(v_i, W_i)`` with
    ``|v_i| <= vmax`` (bigint expressions) and weights in [0, p), as words.

    The n column sums are computed side by side in lanes of one bigint. Lane j of ``K_i``
    holds ``W_i[j]``, so ``sum_i v_i * K_i`` holds every column's sum in its lane with no
    carry between lanes (each lane's sum is at most ``len(rows) * vmax * (p - 1)``, below
    ``2**lane``), and stays below 2**62. That is one multiply-add per row instead of n (the
    ANSI-checked multiply and add are the expensive operations here), then a shift, a mask and
    a mod per column. When fewer than two lanes fit in 62 bits (large p), each column has a
    word of its own, reduced mod p already (lane width 0).
    """
    n = len(rows[0][1])
    lane = max(1, len(rows) * vmax * (p - 1)).bit_length()
    if 62 // lane < 2:
        return [sum_mod([(v, w[j]) for v, w in rows], p, vmax) for j in range(n)], 0, [(j,) for j in range(n)]
    groups = lane_groups(n, lane)
    words = []
    for columns in groups:
        terms = [(v, sum((w[j] % p) << (lane * (j - columns[0])) for j in columns)) for v, w in rows]
        words.append(weighted([(v, k) for v, k in terms if k]))
    return words, lane, groups


def lookup_words(indexes: Sequence[str], spec: Tables) -> Words:
    """The tables' words (one lookup per chunk each), given each chunk's index expression."""
    words: list[str] = []
    for tables in spec.tables:
        entries = [
            sql.call("get", [sql.long_array(table), index])
            for index, table in zip(indexes, tables, strict=True)
            if any(table)
        ]
        words.append(sql.total(entries))
    return words, spec.lane, spec.groups
