"""A table's result and published files: ``answers.parquet``, ``answers.csv``,
``answers_wide.csv`` and ``answers.xlsx``.
"""

from __future__ import annotations

import json
from typing import cast

import numpy as np
from pydantic import JsonValue

from dppub.dp.pipeline.kinds.base import (
    JSON,
    ReleasePlan,
)
from dppub.dp.pipeline.kinds.release_file import PrivacyUnit
from dppub.dp.pipeline.kinds.tables.joint_planning import joint_facts
from dppub.dp.pipeline.kinds.tables.planning import TableSpec, counted_rows, unit_statement
from dppub.dp.pipeline.kinds.tables.result import (
    INTERVAL_METHOD,
    SPLIT_RULE,
    ComponentFacts,
    JointFacts,
    TableResult,
    rounding_note,
    suppression_note,
)
from dppub.dp.publication import Staging
from dppub.dp.tables.office import OfficeTable, office_table
from dppub.dp.tables.precision import PRECISION_RULE
from dppub.dp.tables.quality import quality_rule
from dppub.dp.tables.split import MISSING_RULE
from dppub.dp.tables.table import (
    INTERVAL_LEVEL,
    TableDesign,
    TableRelease,
)
from dppub.dp.tables.wide import wide_blocks, wide_csv
from dppub.dp.tables.workbook import write_workbook


def publish_table(
    out: Staging,
    plan: ReleasePlan[TableSpec],
    design: TableDesign,
    released: TableRelease,
    selection: dict[str, JSON] | None = None,
    *,
    folder: str,
) -> TableResult:
    """Write table ``plan``'s ``released`` rows as published (:mod:`dp.tables.office`) into
    the release folder ``folder`` (its name; a joint group's table: ``group/table``) and
    return its result. ``design``: the one its rows were read with (keys selected from the
    data: the selected); ``selection``: the key selection's facts."""
    spec, joint = plan.spec, plan.spec.joint
    published = office_table(released.answers, design, spec.presentation)
    unit = unit_statement(plan.bounding, joint)
    result = TableResult(
        keys=design.keys,
        key_policy=spec.keys,
        dimensions=len(design.dims),
        groups=int(np.prod(design.shape)),
        rows=len(released.answers),
        measures=tuple(label for m in design.measures for label in m.labels()),
        split={c.name: c.epsilon for c in (design if joint is None else joint).components},
        split_rule=SPLIT_RULE,
        components={
            name: ComponentFacts.model_validate(fact) for name, fact in released.facts.items()
        },
        bounds={c: list(b) for c, b in design.bounds.items()},
        margins=design.margins,
        rounding=rounding_note(design, released.answers),
        interval_method=INTERVAL_METHOD,
        interval_level=INTERVAL_LEVEL,
        privacy_unit=None if unit is None else PrivacyUnit.model_validate(unit),
        key_selection=cast("dict[str, JsonValue] | None", selection),
        joint=None if joint is None else JointFacts.model_validate(joint_facts(joint)),
        precision=PRECISION_RULE,
        quality=quality_rule(spec.presentation.caution, spec.presentation.unreliable),
        suppression=suppression_note(spec.presentation),
        missing_values=MISSING_RULE,
        where=None if plan.bounding.where is None else plan.bounding.where.text,
        counted_rows=counted_rows(plan.bounding),
    )
    write_answers(out, plan, design, published, result, folder=folder)
    return result


def table_sensitivity(result: TableResult) -> float | None:
    """The one number that says a table's sensitivity: a one-component table's (else None:
    ``release.json`` has each component's)."""
    facts = list(result.components.values())
    return facts[0].sensitivity if len(facts) == 1 and facts[0].missing is None else None


def write_answers(
    out: Staging,
    plan: ReleasePlan[TableSpec],
    design: TableDesign,
    published: OfficeTable,
    result: TableResult,
    *,
    folder: str,
) -> None:
    """The published files in the release folder ``folder``: ``answers.parquet`` (rounded
    floats), ``answers.csv`` (the same digits as text), ``answers_wide.csv`` and
    ``answers.xlsx`` (:mod:`dp.tables.wide`)."""
    out.write_frame(folder, "answers.parquet", published.answers)
    path = out.release_dir(folder)
    # "\r\n" line ends: the csv module then quotes a label holding "\r" (RFC 4180).
    out.write_csv(folder, "answers.csv", published.text(), lineterminator="\r\n")
    blocks = wide_blocks(published, design.keys)
    (path / "answers_wide.csv").write_bytes(wide_csv(blocks).encode("utf-8"))
    cost = plan.cost
    guarantee = f"epsilon {cost.epsilon:g}, delta {cost.delta:g}: differential privacy"
    if result.joint is not None:  # not claimed at its own epsilon (joint_facts)
        guarantee = (
            f"epsilon {result.joint.epsilon:g} (its joint group's), delta "
            f"{cost.delta:g}: differential privacy. {result.joint.guarantee}"
        )
    methods = [f"{name}: {f.method}" for name, f in result.components.items() if f.method]
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
    write_workbook(path / "answers.xlsx", blocks, notes)
