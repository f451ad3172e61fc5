"""Adding a release kind takes its module and one registry line, nothing else.

The toy kind below (``count``: a noisy count of the rows that have a column) is the whole of
what a new kind writes, as ARCHITECTURE.md's "A release kind" says. Registered by extending
:data:`dp.pipeline.registry.KINDS` (the one line a real kind adds), it is configured, planned,
shown by ``dppub plan``, run, recorded in the ledger and reported in ``report.md`` and
``report.html`` without a change anywhere else.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd
import pytest
import yaml
from pydantic import Field

from dppub.dp.axes import Axis
from dppub.dp.engine import HistogramAggregate
from dppub.dp.ledger import Ledger
from dppub.dp.mechanisms import laplace
from dppub.dp.pipeline import registry
from dppub.dp.pipeline.config import Cost, Name, PipelineConfig
from dppub.dp.pipeline.declared_domains import histogram_axis
from dppub.dp.pipeline.html.sections import Section, Table
from dppub.dp.pipeline.kinds.base import (
    ExecuteContext,
    Executed,
    PlanFacts,
    ReleaseKind,
    ReleasePlan,
    ReleaseSummary,
    Result,
    Scan,
    facts_as,
    scan_one,
)
from dppub.dp.pipeline.plan import load_plan
from dppub.dp.pipeline.units import bounding_for
from tests.dp.pipeline.published_run import demo_config, publish_in_process

# ---- the kind's module: everything a new kind writes ------------------------------------------


class CountModel(Cost):
    """One item of the ``counts:`` section."""

    name: Name
    column: str = Field(min_length=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class CountSpec:
    axis: Axis


class CountResult(Result):
    """What ``release.json`` states about a noisy count."""

    count: float


class CountFacts(PlanFacts):
    """What ``dppub plan`` shows of a planned count."""

    column: str


Counts = npt.NDArray[np.float64]


class CountKind(ReleaseKind[CountModel, CountSpec, Counts]):
    section = "counts"
    label = "count"
    many = True
    model = CountModel
    result = CountResult
    facts = CountFacts

    def plan(self, cfg: PipelineConfig, item: CountModel) -> ReleasePlan[CountSpec]:
        axis = histogram_axis(cfg, item.name, item.column, bins=None, level=None)
        return ReleasePlan(
            name=item.name,
            release_kind=self,
            mechanism="laplace",
            cost=item.cost,
            is_dp=True,
            columns=(item.column,),
            bounding=bounding_for(cfg),
            spec=CountSpec(axis=axis),
        )

    def scan(self, plan: ReleasePlan[CountSpec]) -> Scan[Counts]:
        return scan_one(HistogramAggregate((plan.spec.axis,)))

    def execute(
        self, plan: ReleasePlan[CountSpec], exact: Counts, context: ExecuteContext
    ) -> Executed:
        out = context.out
        m = plan.bounding.rows_per_unit  # a unit adds up to m rows
        noisy = float(laplace(float(exact.sum()), sensitivity=m, epsilon=plan.cost.epsilon))
        out.write_json(plan.name, "count.json", {"count": noisy})
        return Executed(result=CountResult(count=noisy), sensitivity=float(m))

    def report(self, summary: ReleaseSummary) -> list[str]:
        return [f"A noisy row count: {summary.result_as(CountResult).count:.1f} (in `count.json`)."]

    def describe(self, plan: ReleasePlan[CountSpec]) -> CountFacts:
        return CountFacts(column=plan.spec.axis.column)

    def plan_text(self, facts: PlanFacts) -> str:
        return f"  rows that have {facts_as(facts, CountFacts).column}"

    def plot(self, summary: ReleaseSummary, folder: Path) -> Section:
        count = json.loads((folder / summary.name / "count.json").read_text())["count"]
        table = Table(caption="The noisy row count", headers=("count",), rows=((f"{count:.1f}",),))
        return Section(tables=(table,))


# ---- the test -------------------------------------------------------------------------------


@pytest.fixture
def count_config(tmp_path: Path, census_small: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The demo dataset with one ``counts:`` release, the kind registered by its one line."""
    monkeypatch.setattr(registry, "KINDS", (*registry.KINDS, CountKind()))
    path = demo_config(tmp_path, census_small)
    raw = yaml.safe_load(path.read_text())
    for section in ("anonymize", "workloads", "regressions", "clustering"):
        raw.pop(section, None)
    raw["counts"] = [{"name": "rows", "column": "sex", "epsilon": 0.5}]
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.mark.slow
def test_a_kind_needs_its_module_and_one_registry_line(
    tmp_path: Path, census_small: Path, count_config: Path
) -> None:
    from typer.testing import CliRunner

    from dppub.cli import app

    plan = load_plan(count_config)
    assert [(r.name, r.kind, r.cost.epsilon) for r in plan.releases] == [("rows", "count", 0.5)]
    shown = CliRunner().invoke(app, ["plan", str(count_config)])
    assert shown.exit_code == 0, shown.output
    assert "rows that have sex" in shown.output
    shown = CliRunner().invoke(app, ["plan", "--json", str(count_config)])
    assert shown.exit_code == 0, shown.output
    (planned,) = json.loads(shown.output)["releases"]
    assert planned["column"] == "sex"

    ledger = tmp_path / "ledger.sqlite"
    published = publish_in_process(count_config, ledger, tmp_path / "out")

    (entry,) = published.manifest["releases"]
    assert entry["kind"] == "count"
    assert entry["files"] == ["rows/count.json"]
    assert published.manifest["guarantee"]["dp_releases"] == ["rows"]
    count = json.loads((published.folder / "rows" / "count.json").read_text())["count"]
    exact = int(pd.read_parquet(census_small, columns=["sex"])["sex"].notna().sum())
    # Laplace noise of scale 1 / 0.5 = 2: |noise| > 40 has probability e^-20 (~2e-9).
    assert abs(count - exact) < 40

    report = (published.folder / "report.md").read_text()
    assert "### rows (count)" in report
    assert f"A noisy row count: {count:.1f}" in report
    html = (published.folder / "report.html").read_text()
    assert "The noisy row count" in html
    assert f"{count:.1f}" in html

    rows = Ledger(str(ledger), create=False).history()
    released = [(r["release"], r["kind"], r["epsilon"]) for r in rows if r["event"] == "release"]
    assert released == [("rows", "count", 0.5)]
    assert [r["release"] for r in rows if r["event"] == "draw"] == ["rows"]
