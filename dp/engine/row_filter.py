"""``where:`` row filters on declared columns, parsed from the config and applied to batches.

A filter is a Python-style boolean expression over declared columns and literals::

    age >= 18 and ward in ('A', 'B')
    18 <= age < 65 and not (sex == 'Female' or hours > 60)

Allowed: ``and``, ``or``, ``not``, parentheses, the comparisons ``== != < <= > >=`` (chained
too), ``in`` / ``not in`` a tuple or list of literals; a column on one side, a literal on the
other. A numeric column compares with numbers, a text column with strings, and a category
column's literals must be declared categories. Anything else (a function call, an attribute,
arithmetic, an undeclared column) is refused in one line when the plan is built: the filter
reads only the config.

Semantics. The filter sees each row's values after the declared value policies (numbers
clamped to their bounds, categories mapped), the values every release reads. A row with a
missing value in any column the filter reads is not kept (whatever ``or`` and ``not`` would make
of it: nothing is known about such a row). A filter is a function of one row, so adding or
removing a row adds or removes at most one kept row: the neighbour relation, and every
sensitivity derived from it, is unchanged; it is applied before contribution bounding.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from dppub.dp.engine.batches import Batch
from dppub.dp.errors import ConfigError
from dppub.dp.schema import TableSchema

__all__ = ["RowFilter", "parse_filter"]

Mask = npt.NDArray[np.bool_]
Literal = float | str

_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_MIRROR: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.Eq,
    ast.NotEq: ast.NotEq,
    ast.Lt: ast.Gt,
    ast.LtE: ast.GtE,
    ast.Gt: ast.Lt,
    ast.GtE: ast.LtE,
}
_SYMBOL = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


@dataclass(frozen=True, slots=True)
class _Test:
    """``column <op> literal`` or ``column [not] in (literals)``."""

    column: str
    op: str  # one of _SYMBOL's values, "in" or "not in"
    values: tuple[Literal, ...]


@dataclass(frozen=True, slots=True)
class _Node:
    kind: str  # "and", "or", "not", "test"
    parts: tuple[_Node, ...] = ()
    test: _Test | None = None


@dataclass(frozen=True, slots=True)
class RowFilter:
    """A parsed ``where:`` filter (:func:`parse_filter`)."""

    text: str
    """As written in the config (what ``dppub plan`` shows)."""
    columns: tuple[str, ...]
    """The declared columns it reads."""
    _root: _Node

    def keep(self, batch: Batch) -> Mask:
        """Where the filter holds for the rows of ``batch`` (a missing value: false)."""
        return _known(self._root, batch) & _eval(self._root, batch)


def rows_kept(batch: Batch, columns: Sequence[str], where: RowFilter | None) -> Batch:
    """The rows of ``batch`` present in every one of ``columns`` that ``where`` keeps (all of
    them: ``batch`` itself)."""
    keep = batch.present(columns)
    if where is not None:
        keep &= where.keep(batch)
    return batch if keep.all() else batch.take(keep)


def parse_filter(text: str, schema: TableSchema) -> RowFilter:
    """Parse and check ``text`` against the declared ``schema`` (module doc).

    Raises:
        ConfigError: one line naming what is not allowed.
    """
    if not isinstance(text, str) or not text.strip():
        raise ConfigError("where: needs an expression, e.g. \"age >= 18 and ward in ('A', 'B')\"")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise ConfigError(f"where: {text!r} is not an expression") from None
    columns: list[str] = []
    root = _node(tree.body, schema, columns, text)
    return RowFilter(text=text.strip(), columns=tuple(dict.fromkeys(columns)), _root=root)


def _refuse(text: str, what: str) -> ConfigError:
    return ConfigError(f"where: {text!r}: {what}")


def _node(node: ast.expr, schema: TableSchema, columns: list[str], text: str) -> _Node:
    if isinstance(node, ast.BoolOp):
        kind = "and" if isinstance(node.op, ast.And) else "or"
        return _Node(kind, tuple(_node(v, schema, columns, text) for v in node.values))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _Node("not", (_node(node.operand, schema, columns, text),))
    if isinstance(node, ast.Compare):
        tests = _compare(node, schema, text)
        columns.extend(t.column for t in tests)
        nodes = tuple(_Node("test", test=t) for t in tests)
        return nodes[0] if len(nodes) == 1 else _Node("and", nodes)
    raise _refuse(text, f"{ast.unparse(node)!r} is not a comparison of a column")


def _compare(node: ast.Compare, schema: TableSchema, text: str) -> list[_Test]:
    """A chained comparison as tests of one column each (``18 <= age < 65``: two)."""
    terms = [node.left, *node.comparators]
    tests = []
    for left, op, right in zip(terms, node.ops, terms[1:], strict=False):
        if isinstance(op, ast.In | ast.NotIn):
            column = _column(left, schema, text)
            if not isinstance(right, ast.Tuple | ast.List) or not right.elts:
                raise _refuse(text, "'in' needs a list of literals, e.g. ward in ('A', 'B')")
            values = tuple(_literal(e, text) for e in right.elts)
            tests.append(
                _checked(column, "in" if isinstance(op, ast.In) else "not in", values, schema, text)
            )
            continue
        if type(op) not in _SYMBOL:
            raise _refuse(text, f"{type(op).__name__} is not an allowed comparison")
        if isinstance(left, ast.Name):
            column, symbol, value = _column(left, schema, text), _SYMBOL[type(op)], right
        elif isinstance(right, ast.Name):
            column, symbol, value = _column(right, schema, text), _SYMBOL[_MIRROR[type(op)]], left
        else:
            raise _refuse(
                text, f"{ast.unparse(left)!r} and {ast.unparse(right)!r}: one side must be a column"
            )
        tests.append(_checked(column, symbol, (_literal(value, text),), schema, text))
    return tests


def _column(node: ast.expr, schema: TableSchema, text: str) -> str:
    if not isinstance(node, ast.Name):
        raise _refuse(text, f"{ast.unparse(node)!r} is not a declared column")
    if node.id not in schema.names:
        raise _refuse(
            text, f"{node.id!r} is not a declared column (declared: {list(schema.names)})"
        )
    return node.id


def _literal(node: ast.expr, text: str) -> Literal:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _literal(node.operand, text)
        if isinstance(inner, float):
            return -inner
    if isinstance(node, ast.Constant) and not isinstance(node.value, bool):
        if isinstance(node.value, int | float):
            return float(node.value)
        if isinstance(node.value, str):
            return node.value
    raise _refuse(text, f"{ast.unparse(node)!r} is not a number or a quoted string")


def _checked(
    column: str, op: str, values: tuple[Literal, ...], schema: TableSchema, text: str
) -> _Test:
    spec = schema[column]
    if spec.is_numeric:
        if not all(isinstance(v, float) for v in values):
            raise _refuse(text, f"{column!r} is numeric: compare it with numbers")
    else:
        if not all(isinstance(v, str) for v in values):
            raise _refuse(text, f"{column!r} holds text: compare it with quoted strings")
        if spec.categories is not None:
            unknown = [v for v in values if v not in spec.categories]
            if unknown:
                raise _refuse(
                    text,
                    f"{unknown} not among {column!r}'s declared categories {list(spec.categories)}",
                )
    return _Test(column, op, values)


def _known(node: _Node, batch: Batch) -> Mask:
    """Rows where none of the filter's columns is marked missing."""
    keep = np.ones(batch.num_rows, dtype=bool)
    for column in _columns_of(node):
        if column in batch.missing:
            keep &= ~batch.missing[column]
    return keep


def _columns_of(node: _Node) -> set[str]:
    if node.test is not None:
        return {node.test.column}
    return set().union(*(_columns_of(p) for p in node.parts))


def _eval(node: _Node, batch: Batch) -> Mask:
    if node.kind == "and":
        return np.asarray(np.logical_and.reduce([_eval(p, batch) for p in node.parts]), bool)
    if node.kind == "or":
        return np.asarray(np.logical_or.reduce([_eval(p, batch) for p in node.parts]), bool)
    if node.kind == "not":
        return ~_eval(node.parts[0], batch)
    if node.test is None:
        raise ConfigError(f"where: an empty {node.kind} node")
    return _apply(node.test, batch)


def _apply(test: _Test, batch: Batch) -> Mask:
    if test.column in batch.numeric:
        values: npt.NDArray[np.generic] = np.asarray(batch.numeric[test.column])
        return _on(values, test)
    column = batch.text[test.column]
    # Once per distinct value, then to the rows (a null index: a marked row, masked by _known).
    words = np.asarray(column.dictionary.to_pylist(), dtype=object)
    hit = pa.array(_on(words, test) if words.size else np.zeros(0, dtype=bool))
    rows = pc.fill_null(pc.take(hit, column.indices), False)
    return np.asarray(rows.to_numpy(zero_copy_only=False), dtype=bool)


def _on(values: npt.NDArray[np.generic], test: _Test) -> Mask:
    if test.op in ("in", "not in"):
        inside = np.isin(values, np.asarray(test.values, dtype=values.dtype))
        return np.asarray(inside if test.op == "in" else ~inside, dtype=bool)
    return np.asarray(_COMPARE[test.op](values, test.values[0]), dtype=bool)
