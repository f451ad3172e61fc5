"""A year of monthly runs from one config: every run's figures are what its plan says (standard
errors equal the planned expected error of each figure; estimates within their intervals'
reach of the exact figures), the series stays consistent and the ledger adds up to the
series' cumulative loss."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dppub.api import publish
from dppub.dp.budget import zcdp_to_dp
from dppub.dp.engine import StreamingBackend
from dppub.dp.ledger import Ledger
from dppub.dp.ledger.summary import spending_summary
from dppub.dp.pipeline.kinds.series.planning import expected_rmse
from dppub.dp.pipeline.kinds.series.publishing import full_figures
from dppub.dp.pipeline.kinds.series.series_scan import SeriesExact
from dppub.dp.pipeline.plan import load_plan
from tests.dp.pipeline.kinds.series_setup import (
    admissions,
    as_published,
    read_text,
    series_config,
)

MONTHS = [f"2026-{m:02d}" for m in range(1, 13)]


@pytest.mark.slow
def test_a_year_of_monthly_runs_matches_its_plans(tmp_path: Path) -> None:
    data = admissions(tmp_path, patients=1500, seed=11)
    config = series_config(tmp_path, data)
    out, ledger = tmp_path / "out", tmp_path / "ledger.sqlite"
    checked = 0
    for month in MONTHS:
        plan = load_plan(config, period=month)
        (release,) = plan.releases
        spec = release.spec
        (aggregate,) = release.release_kind.scan(release).aggregates
        exact = StreamingBackend().run(aggregate, data, plan.config.table_schema)  # type: ignore[misc]
        assert isinstance(exact, SeriesExact)
        run = publish(config, out=out, period=month)
        folder = run.path / "admissions_monthly"
        published = read_text(folder / "figures.csv")
        assert set(published["published"]) == {month}
        # figures.csv is rounded (test_series_precision.py): it is this month's figures at
        # full precision, recomputed from the state, rounded; those are checked below.
        full = full_figures(spec, folder)
        figures = full[full["published"] == month].reset_index(drop=True)
        assert published.equals(as_published(figures))
        workload = spec.release.workload
        rmse = expected_rmse(spec.choice, spec.release, spec.item)
        names = [name for name, rows in workload.blocks for _ in range(rows)]
        t = spec.period
        due = np.flatnonzero(workload.periods == t)
        for row in due:
            for j, (label, scale) in enumerate(zip(spec.labels, spec.scales, strict=True)):
                mine = figures[(figures["figure"] == names[row]) & (figures["measure"] == label)]
                assert len(mine) == len(spec.groups)
                # The standard error is the plan's expected error of this very figure.
                assert mine["std_error"].to_numpy() == pytest.approx(rmse[row] * scale, rel=1e-9)
                truth = workload.matrix[row, : t + 1] @ exact.values[j][: t + 1] * scale
                # Gaussian estimates: |z| > 5.5 has probability 3.8e-8 per figure; about 700
                # figures here: a false failure about once in 40,000 runs.
                z = (mine["value"].to_numpy() - truth) / mine["std_error"].to_numpy()
                assert np.all(np.abs(z) < 5.5), (month, names[row], label, z)
                checked += 1
    assert checked == 12 * 3 * 2
    # The runs' charges add up to the conversion of the whole horizon's rho (12 of 12 months).
    (summary,) = spending_summary(Ledger(str(ledger), create=False)).values()
    assert summary["spent_epsilon"] == pytest.approx(zcdp_to_dp(0.1, 1e-7), rel=1e-9)
    assert summary["spent_delta"] == pytest.approx(1e-7)
