"""ARX Loss on a hierarchy whose file repeats a row: ARX's domain is the file's rows.

ARX (``DomainShareMaterialized``) takes the domain size ``|D|`` as the number of rows of the
hierarchy file and counts, per level, how many rows carry each label; a row listed twice counts
twice. The figures below are ARX's own: ARX 3.9.2 (arx-deidentifier/arx at aacd487f) built from
source, ``Metric.createLossMetric(0.5, GEOMETRIC_MEAN)``, ``KAnonymity(2)``, each node pinned with
``setMinimumGeneralization`` / ``setMaximumGeneralization`` and 100 % suppression allowed. ARX
truncates every per-attribute value to 10 decimals (``Metric.round``: ``floor(x * 1e10) / 1e10``),
hence its ``0.4999999999`` for 0.5 and the ``2e-10`` tolerance.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dppub.dp.anonymity import Hierarchy
from dppub.dp.anonymity.classes import CodedTable
from dppub.dp.anonymity.metrics import MetricTables
from dppub.dp.reference.frame_anonymity import anonymize, encode_columns
from tests.dp.anonymity.oracle import Dataset

# Leaf 4 is listed twice (as FARS's age file lists 99 twice); leaf 6 is absent from the data.
AGE = "1;1-2;*\n2;1-2;*\n3;3-4;*\n4;3-4;*\n4;3-4;*\n5;5-6;*\n6;5-6;*\n"
SEX = "M;*\nF;*\n"
ROWS = [("1", "M"), ("1", "F"), ("2", "M"), ("3", "F"), ("3", "F")]
ROWS += [("4", "M"), ("4", "M"), ("4", "F"), ("5", "M"), ("5", "F")]

# node -> (ARX's Loss, ARX's per-attribute losses [age, sex]), k = 2.
ARX_K2 = {
    (0, 0): (0.6165807537144565, [0.6333333333, 0.6]),
    (1, 0): (0.39642400433034686, [0.4999999999, 0.3]),
    (2, 0): (0.41421356237309515, [1.0, 0.0]),
    (0, 1): (0.5165750887443721, [0.1499999999, 1.0]),
    (1, 1): (0.5811388300209444, [0.2499999999, 1.0]),
    (2, 1): (1.0000000000000004, [1.0, 1.0]),
}
ARX_TOL = 2e-10


@pytest.fixture
def repeated(tmp_path: Path) -> tuple[pd.DataFrame, dict[str, Hierarchy]]:
    (tmp_path / "age.csv").write_text(AGE)
    (tmp_path / "sex.csv").write_text(SEX)
    hs = {c: Hierarchy.from_csv(tmp_path / f"{c}.csv", name=c) for c in ("age", "sex")}
    return pd.DataFrame(ROWS, columns=["age", "sex"]), hs


def test_hierarchy_counts_a_repeated_row_in_its_domain(repeated: Dataset) -> None:
    _, hs = repeated
    age = hs["age"]
    assert age.leaves == ("1", "2", "3", "4", "5", "6")  # encoding sees each leaf once
    assert age.domain_size == 7  # ARX's |D|: rows of the file
    assert age.group_sizes(0).tolist() == [1, 1, 1, 2, 1, 1]
    assert age.group_sizes(1).tolist() == [2, 3, 2]
    assert age.group_sizes(2).tolist() == [7]
    assert hs["sex"].domain_size == 2
    # The repetition is part of the hierarchy's content: equality and digest see it.
    once = Hierarchy.from_levels(
        {"1": ["1-2", "*"], "2": ["1-2", "*"], "3": ["3-4", "*"], "4": ["3-4", "*"]}
        | {"5": ["5-6", "*"], "6": ["5-6", "*"]},
        name="age",
    )
    assert once.levels == age.levels
    assert once.domain_size == 6
    assert once != age
    assert once.digest() != age.digest()


def test_loss_per_node_matches_arx(repeated: Dataset) -> None:
    df, hs = repeated
    table = CodedTable.build(encode_columns(df, hs), list(hs.values()), None)
    tables = MetricTables.build(table)
    for node, (loss, per_qi) in ARX_K2.items():
        nc = table.classes(node, 2, None)
        got = tables.loss_per_qi(node, nc, table.counts)
        assert got.tolist() == pytest.approx(per_qi, abs=ARX_TOL), node
        assert tables.score("loss", node, nc, table.counts) == pytest.approx(loss, abs=ARX_TOL)
    # Without suppression the exact lower bound is the score (the search relies on it).
    bound = tables.lower_bounds("loss", np.array([[2, 0]]))
    assert bound is not None and bound[0] == pytest.approx(ARX_K2[(2, 0)][0], abs=ARX_TOL)


@pytest.mark.parametrize(("sigma", "node"), [(0.0, (2, 0)), (0.3, (1, 0)), (1.0, (1, 0))])
def test_optimum_and_its_loss_match_arx(
    repeated: Dataset, sigma: float, node: tuple[int, int]
) -> None:
    # ARX's global optimum for KAnonymity(2) at these suppression limits (same build as above).
    df, hs = repeated
    res = anonymize(df, hs, k=2, max_suppression=sigma, metric="loss")
    assert tuple(res.levels.values()) == node
    assert res.score == pytest.approx(ARX_K2[node][0], abs=ARX_TOL)
    assert list(res.metrics["loss_per_qi"].values()) == pytest.approx(ARX_K2[node][1], abs=ARX_TOL)
