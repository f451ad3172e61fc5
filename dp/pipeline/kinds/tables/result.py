"""A table's typed result: the public facts ``release.json`` states about it (split, bounds,
key policy, intervals, rounding, precision, quality).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pydantic import Field, JsonValue

from dppub.dp.pipeline.kinds.base import Result
from dppub.dp.pipeline.kinds.release_file import Stated
from dppub.dp.tables.office import Presentation
from dppub.dp.tables.precision import PRECISION_RULE
from dppub.dp.tables.rounding import GAP, NODE_LIMIT, sum_base
from dppub.dp.tables.table import TableDesign

SPLIT_RULE = (
    "minimises the sum of the measures' noise variances: each component gets epsilon in "
    "proportion to the cube root of its weight; a mean weighs 1 on its centred sum and 1/3 on "
    "its column's count (the rows where it is present); a column's count and centred sum are "
    "one component (weight twice theirs) measured together as the sums of v - lo and hi - v "
    "when that lowers the variance (a mean alone: all of epsilon, each as if alone at "
    "epsilon / sqrt(2)); a variance or std weighs 1 on its column's count, centred sum and "
    "centred square"
)


INTERVAL_METHOD = (
    "noise only (not clamping or sampling): exact least-squares noise variances of counts and "
    "centred sums with the Laplace-safe multiplier; sums and means combine them (a mean by the "
    "delta method, a variance too, a std the square root of its variance's interval); "
    "quantiles read off a hierarchical CDF invert its noise band, those drawn "
    "by the exponential mechanism have none (empty; their rank bound is in components)"
)


class JointFacts(Stated):
    """``joint: <group>``: what a table estimated jointly with others states
    (:func:`dp.pipeline.kinds.tables.joint_planning.joint_facts`)."""

    group: str
    tables: tuple[str, ...]
    """The group's tables, this one among them."""
    epsilon: float
    """The group's epsilon (the sum of its tables')."""
    epsilons: dict[str, float]
    """Each table's own epsilon, as the ledger charges it."""
    strategy: str
    guarantee: str
    """What is proven of the group, and of this table alone, in words."""


class MissingRowsFacts(Stated):
    """A count and sum pair's rows missing its column: counted in parallel with the pair."""

    rows: str
    sensitivity: float
    noise_scale: float


class ComponentFacts(Stated):
    """One measured component's public facts (``release.json``'s ``components``): what it ran
    at and its noise; a quantile's CDF its method and rank error
    (:func:`dp.tables.components.component_facts`, :mod:`dp.tables.table`)."""

    epsilon: float
    sensitivity: float
    noise_scale: float
    strategy: str | None = None
    method: str | None = None
    """A quantile's: how its values are read off."""
    interval_covers: str | None = None
    """A quantile's: what its interval covers."""
    bins: int | None = None
    """A quantile's grid."""
    rank_std_error: float | None = None
    """A hierarchical CDF's rank standard error."""
    rank_error_95: float | None = None
    """The exponential mechanism's: its rank is within this many rows, with probability 95%."""
    missing: MissingRowsFacts | None = None


class TableResult(Result):
    """A published table's public account: its ``release.json`` details. Its
    ``privacy_unit`` is the whole unit statement (:func:`dp.pipeline.units.unit_statement`)."""

    key_columns: tuple[str, ...] = Field(alias="keys")
    """The key columns (``keys`` in the file; not an attribute ``keys``, which Prefect, walking
    a task's parameters, would take for a mapping's)."""
    key_policy: str
    dimensions: int
    """Key columns of the cells (a nested hierarchy's levels are one)."""
    groups: int
    rows: int
    measures: tuple[str, ...]
    split: dict[str, float]
    split_rule: str
    components: dict[str, ComponentFacts]
    """Each measured component's epsilon, sensitivity and noise."""
    bounds: dict[str, list[float]]
    margins: bool
    rounding: str
    """``none``, or the controlled rounding: each rounded measure's base."""
    interval_method: str
    interval_level: float
    key_selection: dict[str, JsonValue] | None = None
    """``keys: private``: the rule, its (epsilon, delta) and the keys it released."""
    joint: JointFacts | None = None
    """``joint: <group>``: the group, its tables, its epsilon and the guarantee."""
    precision: str = PRECISION_RULE
    """How many digits each published value carries (post-processing)."""
    quality: str = ""
    """What the ``quality`` column says and from what."""
    suppression: str | None = None
    """``suppress:``: which cells are withheld."""
    missing_values: str = ""
    """How missing values are counted and measured (:data:`dp.tables.split.MISSING_RULE`)."""
    where: str | None = None
    """``where:``: the row filter, as written."""
    counted_rows: str | None = None
    """Under a privacy unit: which rows a count counts (those contribution bounding kept)."""


class JointTable(Stated):
    """One table of a joint group, as the group's ``release.json`` states it: its name (its
    folder within the group's) and what it would state published alone (with ``joint``)."""

    name: str
    table: TableResult


class JointResult(Result):
    """A joint group of tables published as one release: the group's ``release.json``
    details (:mod:`dp.pipeline.kinds.tables.group`)."""

    group: str
    epsilon: float
    """The group's epsilon: the sum of its tables' (each charged its own in the ledger)."""
    strategy: str
    guarantee: str
    """What is proven of the group, and of a table alone, in words."""
    tables: tuple[JointTable, ...]
    """Its tables in config order, each published in ``<group>/<table>/``."""


def rounding_note(design: TableDesign, answers: pd.DataFrame) -> str:
    """What ``release.json`` says of ``round:``: each rounded measure's base (a sum's from its
    standard errors, public: :func:`dp.tables.rounding.sum_base`)."""
    if not design.integer:
        return "none"
    bases: list[str] = []
    for m in design.measures:
        label = m.labels()[0]
        if m.kind == "count":
            bases.append(f"{label} to multiples of {design.base}")
        elif m.kind == "sum":
            se = answers.loc[answers["measure"] == label, "std_error"].to_numpy(np.float64)
            base = sum_base(design.base, se) if len(se) else float(design.base)
            bases.append(f"{label} to multiples of {base:g}")
    return (
        "controlled rounding (post-processing): every cell rounded down or up to a multiple "
        "of its base by an integer program (HiGHS) for the smallest L1 distance of all "
        f"published rows to the released ones (it stops within {GAP:.0%} of it or after "
        f"{NODE_LIMIT} nodes, never worse than rounding each cell alone); every margin is the "
        "sum of its published cells: " + "; ".join(bases)
    )


def suppression_note(presentation: Presentation) -> str | None:
    below = presentation.suppress_below
    if below is None:
        return None
    return (
        f"cells whose published count is below {below} are withheld (blank numbers, quality "
        "'suppressed'; the row stays); margins are kept. Post-processing: the guarantee "
        "holds without it, and a withheld cell can be derived from its margin and siblings"
    )
