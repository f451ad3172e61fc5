"""The period due by the run's date (what a scheduled run publishes), nothing due, and a
revised quarterly series without a privacy unit."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dppub.api import publish
from dppub.dp.errors import InputError
from dppub.dp.ledger import Ledger
from dppub.dp.ledger.summary import spending_summary
from dppub.dp.pipeline.kinds.plan_facts import facts_as
from dppub.dp.pipeline.kinds.series import planning
from dppub.dp.pipeline.kinds.series.facts import SeriesFacts
from dppub.dp.pipeline.plan import load_plan
from tests.dp.pipeline.kinds.series_setup import (
    admissions,
    as_published,
    published_and_full,
    series_config,
    spec_of,
)


def test_a_run_publishes_the_period_due_by_its_date(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = series_config(tmp_path, admissions(tmp_path, patients=200))
    out, ledger = tmp_path / "out", tmp_path / "ledger.sqlite"
    monkeypatch.setattr(planning, "due_label", lambda per, now: "2026-03")  # on 1 April 2026
    run = publish(config, out=out)
    details = json.loads((run.path / "admissions_monthly" / "release.json").read_text())
    assert details["details"]["published"] == ["2026-01", "2026-02", "2026-03"]
    # Nothing is due until May: the plan costs nothing (serve registers the schedule), and the
    # run is refused with one line once it holds its empty reservation, nothing spent.
    plan = load_plan(config)
    assert plan.total.epsilon == 0.0
    (release,) = plan.releases
    assert "nothing due" in release.release_kind.plan_text(release.release_kind.describe(release))
    with pytest.raises(InputError, match="period 2026-03 was published .* aborted, nothing"):
        publish(config, out=out)
    (summary,) = spending_summary(Ledger(str(ledger), create=False)).values()
    assert (summary["runs"], summary["aborted_runs"], summary["charged_runs"]) == (1, 1, 0)
    monkeypatch.setattr(planning, "due_label", lambda per, now: "2027-02")  # past the horizon
    assert load_plan(config).total.epsilon == 0.0
    with pytest.raises(InputError, match=r"period 2027-02 is outside its horizon"):
        publish(config, out=out)


def test_a_run_due_at_a_scheduled_time_plans_the_period_before_it(tmp_path: Path) -> None:
    """A served run plans the period due at its scheduled time (``at``), not at the clock's:
    a monthly run scheduled on 1 April publishes March whenever a worker starts it."""
    config = series_config(tmp_path, admissions(tmp_path, patients=200))
    for at, period in [
        (datetime(2026, 4, 1, 3, 0, tzinfo=UTC), "2026-03"),
        (datetime(2026, 3, 31, 23, 59, tzinfo=UTC), "2026-02"),
    ]:
        plan = load_plan(config, at=at)
        (release,) = plan.releases
        assert facts_as(release.release_kind.describe(release), SeriesFacts).period == period
        assert plan.total.epsilon > 0


def test_a_revised_quarterly_series_without_a_unit(tmp_path: Path) -> None:
    data = admissions(tmp_path, patients=200)
    config = series_config(
        tmp_path,
        data,
        period={"column": "admitted_on", "per": "quarter"},
        start="2026-Q1",
        horizon=8,
        rho=None,
        delta=None,
        epsilon=1.0,
        max_periods_per_unit=None,
        measures=["count"],
        publish=["period", "year_to_date"],
        revisions=True,
    )
    raw = yaml.safe_load(config.read_text())
    del raw["dataset"]["privacy_unit"], raw["dataset"]["max_rows_per_unit"]
    config.write_text(yaml.safe_dump(raw))
    out, ledger = tmp_path / "out", tmp_path / "ledger.sqlite"
    first = publish(config, out=out, period="2026-Q2")
    spec = spec_of(config, "2026-Q3")
    second = publish(config, out=out, period="2026-Q3")
    f1 = pd.read_csv(first.path / "admissions_monthly" / "figures.csv", dtype={"period": str})
    # figures.csv is rounded (test_series_precision.py): the full-precision figures are
    # recomputed from the state, and the file holds them rounded.
    text, f2 = published_and_full(spec, second.path / "admissions_monthly")
    assert text.equals(as_published(f2))
    # With revisions each run publishes every period so far, re-estimated.
    assert sorted(set(f2["period"])) == ["2026-Q1", "2026-Q2", "2026-Q3"]
    assert set(f2["figure"]) == {"per_period", "year_to_date_4"}
    ytd = f2[(f2["figure"] == "year_to_date_4") & (f2["period"] == "2026-Q3")]
    parts = f2[(f2["figure"] == "per_period")].groupby("group")["value"].sum()
    assert np.allclose(ytd.set_index("group")["value"].sort_index(), parts.sort_index())
    assert (
        len(f1)
        and json.loads((second.path / "admissions_monthly" / "release.json").read_text())[
            "mechanism"
        ]
        == "laplace"
    )
    (summary,) = spending_summary(Ledger(str(ledger), create=False)).values()
    assert summary["spent_epsilon"] <= 1.0 + 1e-12  # never more than the horizon's budget
    assert summary["spent_delta"] == 0.0
