"""Query labels: every label, read as a predicate on the raw rows, counts what its matrix row
counts (``W @ histogram``), for every workload kind and every kind of axis."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from dppub.dp import matrix
from dppub.dp.anonymity import Hierarchy
from dppub.dp.axes import Axis, category_axis, hierarchy_axis, numeric_axis
from dppub.dp.errors import ConfigError
from dppub.dp.matrix.labels import query_labels
from dppub.dp.reference.histogram import histogram
from dppub.dp.schema import ColumnSpec

EDUCATION = {"Preschool": "Primary", "HS-grad": "Secondary", "Masters": "Higher", "PhD": "Higher"}


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    n = 400
    income = rng.uniform(0.0, 100.0, n)
    income[:8] = [0.0, 25.0, 50.0, 75.0, 100.0, 24.999, 75.001, 100.0]  # bin edges, both sides
    return pd.DataFrame(
        {
            "age": rng.integers(17, 25, n),
            "income": income,
            "sex": rng.choice(["Female", "Male"], n),
            "edu": rng.choice(list(EDUCATION), n),
            "band": rng.integers(17, 29, n),
        }
    )


def _axes() -> dict[str, Axis]:
    edu = Hierarchy.from_levels({k: [v, "*"] for k, v in EDUCATION.items()}, name="edu")
    return {
        "age": numeric_axis(ColumnSpec(name="age", type="int", bounds=(17, 24))),
        "income": numeric_axis(ColumnSpec(name="income", type="float", bounds=(0, 100)), bins=4),
        "sex": category_axis(
            ColumnSpec(name="sex", type="category", categories=("Female", "Male"))
        ),
        "edu": hierarchy_axis("edu", edu, level=1),
        "band": hierarchy_axis("band", Hierarchy.from_bands(17, 28, [3, 6]), level=1),
    }


_NUM = r"(-?[0-9.e+]+)"


def _term(term: str, frame: pd.DataFrame, axes: dict[str, Axis]) -> pd.Series:
    """One condition of a label, evaluated on the raw rows (the test's reading of the text)."""
    col, rest = term.split(" ", 1)
    axis = axes[col]
    raw = frame[axis.column]
    # A categorical hierarchy label names the generalized value; numbers are read off raw values.
    text = raw.astype(str)
    if axis.hierarchy is not None and raw.dtype.kind not in "iu":
        text = axis.hierarchy.generalize(text, axis.level).astype(str)
    if m := re.fullmatch(r"<= " + _NUM, rest):
        return raw <= float(m[1])
    if m := re.fullmatch(r"< " + _NUM, rest):
        return raw < float(m[1])
    if m := re.fullmatch(r"in \[" + _NUM + ", " + _NUM + r"([)\]])", rest):
        upper = raw <= float(m[2]) if m[3] == "]" else raw < float(m[2])
        return (raw >= float(m[1])) & upper
    if m := re.fullmatch(r"in \{(.*)\}", rest):
        return text.isin(m[1].split(", "))
    if m := re.fullmatch(r"(-?\d+)-(-?\d+)", rest):
        return (raw >= int(m[1])) & (raw <= int(m[2]))
    if m := re.fullmatch(r"= (.*)", rest):
        return raw == int(m[1]) if raw.dtype.kind in "iu" else text == m[1]
    raise AssertionError(f"unreadable condition {term!r}")


def _count(label: str, frame: pd.DataFrame, axes: dict[str, Axis]) -> float:
    mask = pd.Series(True, index=frame.index)
    if label != "total":
        for term in label.split(" & "):
            mask &= _term(term, frame, axes)
    return float(mask.sum())


def _workload(kind: str, sizes: list[int], k: int) -> matrix.Workload:
    # The construction the pipeline uses (flows/stages.py).
    n = int(np.prod(sizes))
    if kind == "identity":
        return matrix.identity(n)
    if kind == "total":
        return matrix.total(n)
    if kind == "marginals":
        return matrix.marginals(tuple(sizes), k)
    make = {"prefix": matrix.prefix, "all_range": matrix.all_range}[kind]
    return make(sizes[0]) if len(sizes) == 1 else matrix.kron(*(make(s) for s in sizes))


AXES = (["age"], ["income"], ["sex"], ["edu"], ["band"], ["band", "sex"], ["income", "edu"])
KINDS = ("identity", "total", "prefix", "all_range", "marginals")
CASES = [(kind, names, 1) for names in AXES for kind in KINDS] + [
    ("marginals", ["age", "sex", "edu"], 2),
    ("marginals", ["band", "income"], 0),
]


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "names", "k"), CASES)
def test_labels_count_what_the_matrix_rows_count(kind: str, names: list[str], k: int) -> None:
    frame, all_axes = _frame(), _axes()
    axes = [all_axes[c] for c in names]
    x = histogram(frame, axes)
    w = _workload(kind, [a.size for a in axes], k)
    labels = query_labels(kind, axes, marginal_k=k)
    assert len(labels) == w.m
    assert [_count(lab, frame, all_axes) for lab in labels] == (w @ x).tolist()
    assert len(set(labels)) == len(labels) or kind == "marginals"  # k = 0: one "total" row


def test_labels_read_in_data_terms() -> None:
    axes = _axes()
    assert query_labels("prefix", [axes["age"]])[:2] == ["age <= 17", "age <= 18"]
    ranges = query_labels("all_range", [axes["income"]])
    assert ranges[:2] == ["income in [0, 25)", "income < 50"]
    assert ranges[4:6] == ["income in [25, 50)", "income in [25, 75)"]
    assert ranges[-1] == "income in [75, 100]"
    assert query_labels("marginals", [axes["band"], axes["sex"]], marginal_k=2)[:2] == [
        "band 17-19 & sex = Female",
        "band 17-19 & sex = Male",
    ]
    assert query_labels("all_range", [axes["edu"]])[1] == "edu in {Primary, Secondary}"
    assert query_labels("total", [axes["age"], axes["sex"]]) == ["total"]


def test_labels_refuse_unknown_kinds() -> None:
    with pytest.raises(ConfigError, match="workload kind must be one of"):
        query_labels("cube", [_axes()["age"]])
    with pytest.raises(ConfigError, match=r"marginal_k must be in \[0, 1\], got 2"):
        query_labels("marginals", [_axes()["age"]], marginal_k=2)
