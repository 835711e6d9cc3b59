"""The jobs' SQL (written for DuckDB) rendered for Spark SQL: sqlglot, plus the few fixes it lacks.

The jobs keep one description of their logic, in DuckDB's dialect; sqlglot
transpiles it (``read="duckdb", write="spark"``). Where sqlglot leaves a DuckDB
construct as it is, this module rewrites the syntax tree so Spark computes the
same thing:

- a lambda's index argument: DuckDB counts from 1, Spark's ``filter`` from 0;
- list slices ``l[a:b]`` (1-based, inclusive) become ``slice(l, a, b - a + 1)``;
- ``list_position`` is Spark's ``array_position`` (both 1-based), ``regexp_split_to_array`` its ``split``;
- ``list_aggregate(l, 'histogram')`` becomes a map built with ``transform``/``filter``;
- ``try_strptime(x, '%a, %d %b %Y %H:%M:%S GMT')`` (HTTP dates) becomes ``try_to_timestamp``;
- ``ts + to_milliseconds(n)`` becomes ``timestampadd(MILLISECOND, n, ts)``;
- DuckDB's ``TIMESTAMP_MS`` type is Spark's ``TIMESTAMP_NTZ`` (both naive UTC).

Everything else the jobs use is either transpiled by sqlglot or written in the
portable subset both engines share (see the job modules).
"""

from __future__ import annotations

from functools import lru_cache

import sqlglot
from sqlglot import exp

# strptime formats the jobs use -> Java DateTimeFormatter patterns. The weekday is skipped
# (Spark cannot parse 'EEE'): a Last-Modified date is "Sun, 06 Nov 1994 08:49:37 GMT".
_DATE_FORMATS = {"%a, %d %b %Y %H:%M:%S GMT": (5, "dd MMM yyyy HH:mm:ss 'GMT'")}


def _one_based_index(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.ArrayFilter) and isinstance(node.expression, exp.Lambda):
        lam = node.expression
        if len(lam.expressions) == 2:
            index = lam.expressions[1].name

            def shift(n: exp.Expression) -> exp.Expression:
                # Inside a lambda sqlglot leaves its parameters as bare identifiers.
                bare = isinstance(n, exp.Identifier) and not isinstance(n.parent, exp.Column | exp.Dot)
                if (bare or isinstance(n, exp.Column) and not n.table) and n.name == index:
                    return exp.paren(exp.Add(this=n.copy(), expression=exp.Literal.number(1)))
                return n

            lam.set("this", lam.this.transform(shift, copy=False))
    return node


def _slice(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.Bracket) and len(node.expressions) == 1 and isinstance(node.expressions[0], exp.Slice):
        start, end = node.expressions[0].this, node.expressions[0].expression
        # start in parentheses: l[n - k + 1:n] is n - (n - k + 1) + 1 long
        length = exp.paren(exp.Add(this=exp.Sub(this=end.copy(), expression=exp.paren(start.copy())),
                                   expression=exp.Literal.number(1)))
        return exp.Anonymous(this="SLICE", expressions=[node.this.copy(), start.copy(), length])
    return node


_RENAMES = {"LIST_POSITION": "ARRAY_POSITION", "REGEXP_SPLIT_TO_ARRAY": "SPLIT"}  # same arguments, same result

# DuckDB's histogram of a list (element -> count), built from Spark's higher-order functions. The
# list is bound once to the lambda parameter __l: inlined in the inner lambda, Spark would
# recompute it (regexes and all) for every element.
_HISTOGRAM = sqlglot.parse_one(
    "ELEMENT_AT(TRANSFORM(ARRAY(__list), __l -> MAP_FROM_ENTRIES(TRANSFORM(ARRAY_DISTINCT(__l),"
    " __e -> STRUCT(__e, SIZE(FILTER(__l, __t -> __t = __e)))))), 1)",
    read="spark",
)


def _renames(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.Anonymous) and node.name.upper() in _RENAMES:
        return exp.Anonymous(this=_RENAMES[node.name.upper()], expressions=node.expressions)
    return node


def _functions(node: exp.Expression) -> exp.Expression:
    if not isinstance(node, exp.Anonymous):
        return node
    name = node.name.upper()
    args = node.expressions
    if name == "LIST_AGGREGATE" and isinstance(args[1], exp.Literal) and args[1].this == "histogram":
        listed = args[0]
        return _HISTOGRAM.transform(
            lambda n: listed.copy() if isinstance(n, exp.Column | exp.Identifier) and n.name == "__list" else n
        )
    if name == "TRY_STRPTIME" and isinstance(args[1], exp.Literal) and args[1].this in _DATE_FORMATS:
        skip, pattern = _DATE_FORMATS[args[1].this]
        text = exp.Anonymous(this="SUBSTR", expressions=[args[0].copy(), exp.Literal.number(skip + 1)])
        parsed = exp.Anonymous(this="TRY_TO_TIMESTAMP", expressions=[text, exp.Literal.string(pattern)])
        return exp.Cast(this=parsed, to=exp.DataType.build("TIMESTAMP_NTZ", dialect="spark"))
    return node


def _interval_add(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.Add):
        right = node.expression.unnest() if isinstance(node.expression, exp.Paren) else node.expression
        if isinstance(right, exp.Anonymous) and right.name.upper() == "TO_MILLISECONDS":
            return exp.Anonymous(
                this="TIMESTAMPADD", expressions=[exp.var("MILLISECOND"), right.expressions[0].copy(), node.this.copy()]
            )
    return node


def _types(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.DataType) and node.this in (exp.DataType.Type.TIMESTAMP_MS, exp.DataType.Type.TIMESTAMP):
        return exp.DataType.build("TIMESTAMP_NTZ", dialect="spark")
    return node


@lru_cache(maxsize=512)
def to_spark(sql: str) -> str:
    """``sql`` in DuckDB's dialect, as Spark SQL computing the same rows."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    for fix in (_renames, _one_based_index, _slice, _functions, _interval_add, _types):
        tree = tree.transform(fix)
    return tree.sql(dialect="spark")
