"""A table's published files: ``answers.parquet``, ``answers.csv``, ``answers_wide.csv`` and
``answers.xlsx``.
"""

from __future__ import annotations

import json

from dppub.dp.pipeline.kinds.base import (
    ReleasePlan,
    as_object,
    as_str,
)
from dppub.dp.pipeline.kinds.tables.planning import TableSpec
from dppub.dp.pipeline.kinds.tables.result import INTERVAL_METHOD, SPLIT_RULE, TableResult
from dppub.dp.publication import Staging
from dppub.dp.tables.office import OfficeTable
from dppub.dp.tables.table import (
    INTERVAL_LEVEL,
    TableDesign,
)
from dppub.dp.tables.wide import wide_blocks, wide_csv
from dppub.dp.tables.workbook import write_workbook


def write_answers(
    out: Staging,
    plan: ReleasePlan[TableSpec],
    design: TableDesign,
    published: OfficeTable,
    result: TableResult,
) -> None:
    """The published files: ``answers.parquet`` (rounded floats), ``answers.csv`` (the same
    digits as text), ``answers_wide.csv`` and ``answers.xlsx`` (:mod:`dp.tables.wide`)."""
    out.write_frame(plan.name, "answers.parquet", published.answers)
    folder = out.release_dir(plan.name)
    # "\r\n" line ends: the csv module then quotes a label holding "\r" (RFC 4180).
    out.write_csv(plan.name, "answers.csv", published.text(), lineterminator="\r\n")
    blocks = wide_blocks(published, design.keys)
    (folder / "answers_wide.csv").write_bytes(wide_csv(blocks).encode("utf-8"))
    cost = plan.cost
    guarantee = f"epsilon {cost.epsilon:g}, delta {cost.delta:g}: differential privacy"
    if result.joint is not None:  # not claimed at its own epsilon (joint_facts)
        guarantee = (
            f"epsilon {result.joint.epsilon:g} (its joint group's), delta "
            f"{cost.delta:g}: differential privacy. {result.joint.guarantee}"
        )
    methods = [
        f"{name}: {as_str(as_object(fact)['method'])}"
        for name, fact in result.components.items()
        if "method" in as_object(fact)
    ]
    method = "counts and sums: the Laplace mechanism (the matrix mechanism with margins)"
    notes = [
        ("Table", plan.name),
        ("Guarantee", guarantee),
        ("Neighbours", f"add/remove {plan.bounding.neighbours}"),
        ("Method", "; ".join([method, *methods])),
        ("Epsilon split", f"{dict(result.split)}: {SPLIT_RULE}"),
        ("Intervals", f"{100 * INTERVAL_LEVEL:g}%: {INTERVAL_METHOD}"),
        ("Rounding", result.rounding),
        ("Precision", result.precision),
        ("Quality", result.quality),
    ]
    if result.key_selection is not None:
        notes.append(("Keys", f"selected from the data: {json.dumps(result.key_selection)}"))
    if result.suppression is not None:
        notes.append(("Suppression", result.suppression))
    write_workbook(folder / "answers.xlsx", blocks, notes)
