"""Plan facts are typed: each kind's ``describe`` returns its own model (the kind's ``facts``),
which ``dppub plan`` reads by field and ``dppub plan --json`` writes as JSON, fields in their
declared order and a None left out unless the model keeps it (``tests/dppub/golden``: the
shipped examples' output, unchanged)."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest

from dppub.api import plan
from dppub.dp.errors import InvariantError
from dppub.dp.pipeline.kinds.plan_facts import PlanFacts, facts_as
from dppub.dp.pipeline.kinds.series.facts import FigureFacts, SeriesFacts
from dppub.dp.pipeline.kinds.tables.facts import JointGroupFacts, MeasureFacts, TableFacts
from dppub.dp.pipeline.registry import kind_of, registered
from tests.dp.pipeline.published_run import demo_config


def test_every_kind_declares_a_plan_facts_model() -> None:
    models = {kind.label: kind.facts for kind in registered()}
    # a model, or a union of models (a table's, or a joint group's)
    assert all(issubclass(m, PlanFacts) for ms in models.values() for m in get_args(ms) or [ms])
    assert models["table"] == TableFacts | JointGroupFacts and models["k-anonymity"] is PlanFacts


def test_the_api_gives_each_release_its_kinds_facts_and_their_json(
    tmp_path: Path, census_small: Path
) -> None:
    report = plan(demo_config(tmp_path, census_small))
    assert {r.kind for r in report.releases} >= {"workload", "regression", "k-anonymity"}
    for release in report.releases:
        assert isinstance(release.facts, kind_of(release.kind).facts)
        shown = release.facts.to_json()
        assert list(release.details)[:4] == ["name", "kind", "epsilon", "delta"]
        assert {k: release.details[k] for k in shown} == shown
    (workload, *_) = (r for r in report.releases if r.kind == "workload")
    assert f"{workload.details['queries']} queries" in report.text


def test_facts_read_as_another_kinds_model_are_refused() -> None:
    with pytest.raises(InvariantError, match="plan facts are a PlanFacts, not a TableFacts"):
        facts_as(PlanFacts(), TableFacts)


def test_the_json_leaves_out_a_none_unless_the_model_keeps_it() -> None:
    count = MeasureFacts(measure="count", epsilon=0.5, expected_rmse=2.0, error="RMSE 2 rows")
    table = TableFacts(groups=4, keys="declared", measures=(count,))
    assert table.to_json() == {
        "groups": 4,
        "keys": "declared",
        "measures": [
            {"measure": "count", "epsilon": 0.5, "expected_rmse": 2.0, "error": "RMSE 2 rows"}
        ],
    }
    assert isinstance(table.to_json()["groups"], int)  # 4, not 4.0
    series = SeriesFacts(
        nothing_due=None,
        series="s",
        period="2026-03",
        last_published=None,
        horizon=12,
        relation="one row",
        strategy="Identity",
        candidates={"Identity": 1.0},
        svd_bound=0.5,
        budget=0.1,
        spent_after=0.05,
        charge_epsilon=1.0,
        figures=(FigureFacts(figure="per_period", rmse=1.0, bound_rmse=0.5),),
    )
    shown = series.to_json()
    assert (shown["nothing_due"], shown["last_published"]) == (None, None)  # stated as null
    assert list(shown)[:4] == ["nothing_due", "series", "period", "last_published"]
