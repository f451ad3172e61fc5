"""What a release states about itself is what was proven: zCDP totals, rho budgets, interval
settings that no clock can change, the unit and the logistic outcome (issue 24, items 3-6)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from dppub.dp import matrix
from dppub.dp.budget import PrivacyCost, zcdp_of_pure, zcdp_to_dp
from dppub.dp.matrix.exact import certified_sensitivity
from dppub.dp.pipeline.kinds import ReleaseSummary
from dppub.dp.pipeline.kinds.base import Result
from dppub.dp.pipeline.kinds.workload.kind import WorkloadKind, workload_intervals
from dppub.dp.pipeline.kinds.workload.result import WorkloadResult
from dppub.dp.pipeline.plan import load_plan
from dppub.dp.pipeline.report import tightest_epsilon, zcdp_lines
from tests.dp.pipeline.published_run import demo_config, publish_in_process


def _summary(epsilon: float, delta: float, rho: float | None, name: str = "r") -> ReleaseSummary:
    return ReleaseSummary(
        name=name,
        release_kind=WorkloadKind(),
        mechanism="m",
        cost=PrivacyCost(epsilon=epsilon, delta=delta),
        is_dp=True,
        sensitivity=None,
        parts=(),
        files=(),
        output_hash="",
        result=Result(zcdp_rho=rho),
    )


def test_the_stated_total_is_the_smaller_of_two_proven_figures() -> None:
    # Ten pure epsilon 0.3 releases beside one Gaussian: their zCDP conversion (5.9) is looser
    # than basic composition (3.3), which is what must be stated.
    pure = [_summary(0.3, 0.0, None, f"p{i}") for i in range(10)]
    gauss = _summary(0.3, 1e-6, 0.002, "g")
    total = PrivacyCost(epsilon=3.3, delta=1e-6)
    rho, eps, stated = tightest_epsilon([*pure, gauss], total)
    assert rho is not None and eps is not None
    assert rho == pytest.approx(10 * zcdp_of_pure(0.3) + 0.002)
    assert eps == pytest.approx(zcdp_to_dp(rho, 1e-6)) and eps > 3.3
    assert stated == 3.3
    (line,) = zcdp_lines([*pure, gauss], total)
    assert "no tighter than basic composition" in line and "(epsilon = 3.3, delta" in line
    # Many small Gaussian releases: zCDP is the tighter proven figure.
    many = [_summary(0.3, 1e-7, 0.002, f"g{i}") for i in range(10)]
    total = PrivacyCost(epsilon=3.0, delta=1e-6)
    _, eps, stated = tightest_epsilon(many, total)
    assert stated == eps == pytest.approx(zcdp_to_dp(0.02, 1e-6)) and stated < 3.0
    # An approximate-DP release that proves no rho: nothing but basic composition is stated.
    assert tightest_epsilon([_summary(0.3, 1e-6, None)], PrivacyCost(epsilon=0.3, delta=1e-6)) == (
        None,
        None,
        0.3,
    )
    assert zcdp_lines([_summary(0.3, 1e-6, None)], PrivacyCost(epsilon=0.3, delta=1e-6)) == []


def _unit_config(tmp: Path, census_small: Path, m: int, **sections: Any) -> Path:
    frame = pd.read_parquet(census_small)
    frame["household"] = [f"h{i % 700}" for i in range(len(frame))]
    data = tmp / "households.parquet"
    frame.to_parquet(data, index=False)
    config = demo_config(tmp, data)
    raw = yaml.safe_load(config.read_text())
    raw["dataset"].update(privacy_unit="household", max_rows_per_unit=m)
    raw["dataset"]["columns"]["household"] = {"type": "string"}
    raw["dataset"]["budget"] = {"epsilon": 100.0, "delta": 1e-3}
    for section in ("workloads", "regressions", "clustering", "anonymize"):
        raw.pop(section, None)
    raw.update(sections)
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    return config


@pytest.mark.slow
def test_a_rho_budget_is_calibrated_as_zcdp_and_says_so(tmp_path: Path, census_small: Path) -> None:
    m, rho, delta = 3, 0.02, 1e-6
    workload = {
        "name": "age_by_sex",
        "rho": rho,
        "delta": delta,
        "attributes": [{"column": "age", "level": 2}, {"column": "sex"}],
        "workload": "marginals",
        "marginal_k": 2,
    }
    config = _unit_config(tmp_path, census_small, m, workloads=[workload])
    (release,) = load_plan(config).releases
    l2 = certified_sensitivity(release.spec.chosen(), l2=True)  # the answers as computed
    published = publish_in_process(config, tmp_path / "ledger.sqlite", tmp_path / "out")
    (summary,) = published.summaries
    assert summary.sensitivity == pytest.approx(m * l2)
    # sigma = m L2 / sqrt(2 rho): exactly rho-zCDP for one unit (not the analytic Gaussian at
    # the converted (epsilon, delta), which is 1.3-1.5x rho).
    result = summary.result_as(WorkloadResult)
    assert result.zcdp_rho == pytest.approx(rho, rel=1e-12)
    sigma = result.noise_scale
    assert sigma == pytest.approx(math.sqrt((m * l2) ** 2 / (2.0 * rho)), rel=1e-12)
    assert summary.cost == matrix.zcdp_cost(rho, delta)  # what the ledger is charged
    folder = published.folder
    stated = json.loads((folder / "age_by_sex" / "release.json").read_text())["details"]
    assert stated["accounting"].startswith("zCDP: rho = 0.02")
    (entry,) = json.loads((folder / "manifest.json").read_text())["releases"]
    assert entry["accounting"] == stated["accounting"]
    assert f"accounting: {stated['accounting']}" in (folder / "report.md").read_text()


@pytest.mark.slow
def test_an_epsilon_release_says_it_was_accounted_in_epsilon(
    tmp_path: Path, census_small: Path
) -> None:
    workload = {
        "name": "age_cdf",
        "epsilon": 0.3,
        "delta": 1e-6,
        "noise": "gaussian",
        "attributes": [{"column": "age"}],
        "workload": "prefix",
    }
    config = _unit_config(tmp_path, census_small, 2, workloads=[workload])
    published = publish_in_process(config, tmp_path / "ledger.sqlite", tmp_path / "out")
    (entry,) = published.manifest["releases"]
    assert entry["accounting"] == "(epsilon, delta)"


class _SlowClock:
    """Every reading is 1,000 s after the last: a machine so loaded that nothing fits."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1000.0
        return self.now


@pytest.mark.slow
@pytest.mark.parametrize("name", ["age_cdf", "income_ranges", "age_band_by_sex"])
def test_interval_settings_and_values_do_not_depend_on_the_clock(
    tmp_path: Path, census_small: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    plan = load_plan(demo_config(tmp_path, census_small))
    (release,) = [r for r in plan.releases if r.name == name]
    spec = release.spec
    x = np.random.default_rng(5).poisson(20.0, spec.workload.n).astype(np.float64)
    result = matrix.answer(
        spec.workload,
        x,
        epsilon=release.cost.epsilon,
        strategy=spec.chosen(),
        reconstruction=spec.reconstruction,
        rng=np.random.default_rng(6),
    )
    idle = workload_intervals(spec, result)
    for clock in ("perf_counter", "monotonic", "time", "process_time"):
        monkeypatch.setattr(time, clock, _SlowClock())
    loaded = workload_intervals(spec, result)
    assert idle is not None and loaded is not None
    assert loaded.describe() == idle.describe()
    assert idle.replicates > 0 and "bootstrap" in idle.method
    np.testing.assert_array_equal(loaded.ci_low, idle.ci_low)
    np.testing.assert_array_equal(loaded.ci_high, idle.ci_high)
    np.testing.assert_array_equal(loaded.std_error, idle.std_error)


@pytest.mark.slow
def test_unit_releases_state_the_unit_and_logistic_models_their_outcome(
    tmp_path: Path, census_small: Path
) -> None:
    m = 4
    regressions = [
        {"name": "linear", "epsilon": 0.4, "target": "income", "features": ["age", "hours"]},
        {
            "name": "logit",
            "model": "logistic",
            "method": "functional",
            "epsilon": 0.2,
            "target": "income",
            "threshold": 75000,
            "features": ["age", "hours"],
        },
        {
            "name": "married",
            "model": "logistic",
            "method": "objective",
            "epsilon": 0.2,
            "target": "marital",
            "positive": "Married",
            "features": ["age", "hours"],
        },
    ]
    clustering = [{"name": "km", "epsilon": 0.2, "features": ["age", "hours"], "k": 2}]
    config = _unit_config(tmp_path, census_small, m, regressions=regressions, clustering=clustering)
    published = publish_in_process(config, tmp_path / "ledger.sqlite", tmp_path / "out")
    folder = published.folder
    report = (folder / "report.md").read_text()
    costs = {"linear": 0.4, "logit": 0.2, "married": 0.2, "km": 0.2}
    for name, eps in costs.items():
        model = json.loads((folder / name / "model.json").read_text())
        assert model["epsilon"] == eps, name  # the unit-level cost, not epsilon / m
        assert model["neighbours"] == f"add/remove all rows of one household (at most {m} read)"
        unit = model["privacy_unit"]
        assert (unit["column"], unit["max_rows_per_unit"]) == ("household", m)
        assert unit["row_level_epsilon"] == pytest.approx(eps / m)
        table = "clusters" if name == "km" else "coefficients"
        meta = json.loads(
            pq.read_schema(folder / name / f"{table}.parquet").metadata[b"PANDAS_ATTRS"]
        )
        stated = meta["dppub"]
        assert stated["epsilon"] == eps and stated["privacy_unit"]["max_rows_per_unit"] == m
        details = json.loads((folder / name / "release.json").read_text())["details"]
        assert details["privacy_unit"]["column"] == "household"
        assert (
            f"Cost: epsilon = {eps:g}, delta = 0 for neighbours that differ by all rows" in report
        )
    # What y = 1 means, in every file and the report.
    for name, meaning in (("logit", "income > 75000"), ("married", "marital = Married")):
        model = json.loads((folder / name / "model.json").read_text())
        assert model["outcome"]["y=1"] == meaning
        details = json.loads((folder / name / "release.json").read_text())["details"]
        assert details["outcome"]["y=1"] == meaning
        coefficients = pd.read_csv(folder / name / "coefficients.csv")
        assert set(coefficients["outcome"]) == {meaning}
        meta = pq.read_schema(folder / name / "coefficients.parquet").metadata[b"PANDAS_ATTRS"]
        assert json.loads(meta)["dppub"]["outcome"]["y=1"] == meaning
        assert f"y = 1 means `{meaning}`" in report
    # The functional mechanism's intervals are named for what they cover: the surrogate.
    logit = pd.read_csv(folder / "logit" / "coefficients.csv")
    assert {"surrogate_ci_low", "surrogate_ci_high", "surrogate_std_error"} <= set(logit.columns)
    assert "ci_low" not in logit.columns
    details = json.loads((folder / "logit" / "release.json").read_text())["details"]
    assert details["interval_covers"].startswith("NOT the logistic regression's coefficients")
    assert "`surrogate_ci_low`" in report and "NOT the logistic regression's" in report
    linear = pd.read_csv(folder / "linear" / "coefficients.csv")
    assert {"ci_low", "ci_high"} <= set(linear.columns)
