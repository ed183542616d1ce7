"""The size and planning time of a DataFrame's plan, as the tests bound it and the benchmarks print it."""

from __future__ import annotations

import time

from pyspark.sql import DataFrame


def plan_figures(df: DataFrame) -> tuple[float, int]:
    """Seconds to analyse, optimise and plan ``df`` (a fresh copy: no cached plan), and the
    number of expression nodes in its optimized plan (Spark Classic)."""
    fresh = df.select("*")
    start = time.perf_counter()
    execution = fresh._jdf.queryExecution()
    execution.executedPlan()
    seconds = time.perf_counter() - start
    total, stack = 0, [execution.optimizedPlan()]
    while stack:
        node = stack.pop()
        expressions = node.expressions()
        for i in range(expressions.size()):
            total += expressions.apply(i).treeString().count("\n")
        children = node.children()
        stack.extend(children.apply(i) for i in range(children.size()))
    return seconds, total


def expression_nodes(df: DataFrame) -> int:
    """Expression nodes in ``df``'s optimized plan."""
    return plan_figures(df)[1]


def plan_operators(df: DataFrame) -> int:
    """Operators (logical plan nodes) in ``df``'s optimized plan (Spark Classic)."""
    total, stack = 0, [df._jdf.queryExecution().optimizedPlan()]
    while stack:
        node = stack.pop()
        total += 1
        children = node.children()
        stack.extend(children.apply(i) for i in range(children.size()))
    return total
