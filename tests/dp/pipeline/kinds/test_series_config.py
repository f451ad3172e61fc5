"""The ``series:`` section: what a config gets wrong is refused with one line, before any
data is read or anything is reserved."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from dppub.dp.errors import ConfigError, InputError
from dppub.dp.pipeline.kinds.plan_facts import facts_as
from dppub.dp.pipeline.kinds.series.facts import SeriesFacts
from dppub.dp.pipeline.plan import load_plan
from tests.dp.pipeline.kinds.series_setup import admissions, series_config


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return admissions(tmp_path_factory.mktemp("series-data"), patients=50)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"epsilon": 1.0}, "give the whole horizon's budget as epsilon or rho"),
        ({"rho": None}, "give the whole horizon's budget as epsilon or rho"),
        ({"delta": None}, "a rho budget needs delta > 0"),
        ({"start": "2026-13"}, "period '2026-13' is not a month like '2027-03'"),
        ({"period": {"column": "admitted_on", "per": "week"}}, "per"),
        ({"publish": ["period", {"moving": 13}]}, "moving: 13 is longer than the horizon 12"),
        ({"publish": ["period", "period"]}, "publish lists one figure twice"),
        ({"publish": ["weekly"]}, "publish"),
        ({"measures": [{"sum": "region"}]}, "sum column 'region' must be a declared numeric"),
        ({"by": ["cost"]}, "by column 'cost' must be a declared category column"),
        ({"period": {"column": "cost"}}, "period column 'cost' must be a declared date column"),
        ({"max_periods_per_unit": None}, "declare max_periods_per_unit"),
        ({"horizon": 0}, "horizon"),
        ({"revisions": "yes"}, "revisions"),
    ],
)
def test_a_bad_series_is_refused_with_one_line(
    tmp_path: Path, data: Path, change: dict[str, Any], message: str
) -> None:
    config = series_config(tmp_path, data, **change)
    with pytest.raises(ConfigError, match=message) as caught:
        load_plan(config, period="2026-01")
    assert "\n" not in str(caught.value)


def test_a_sum_needs_non_negative_bounds(tmp_path: Path, data: Path) -> None:
    config = series_config(tmp_path, data)
    raw = yaml.safe_load(config.read_text())
    raw["dataset"]["columns"]["cost"]["bounds"] = [-5, 20000]
    config.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"needs bounds \[lo, hi\] with 0 <= lo < hi"):
        load_plan(config, period="2026-01")


def test_without_a_unit_max_periods_is_refused(tmp_path: Path, data: Path) -> None:
    config = series_config(tmp_path, data)
    raw = yaml.safe_load(config.read_text())
    del raw["dataset"]["privacy_unit"], raw["dataset"]["max_rows_per_unit"]
    config.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match="max_periods_per_unit needs the dataset's privacy_unit"):
        load_plan(config, period="2026-01")


def test_a_period_outside_the_horizon_is_refused(tmp_path: Path, data: Path) -> None:
    config = series_config(tmp_path, data)
    outside = r"period 2027-01 is outside its horizon 2026-01 \.\. 2026-12"
    with pytest.raises(ConfigError, match=outside):
        load_plan(config, period="2027-01")
    with pytest.raises(ConfigError, match="period 'March' is not a month"):
        load_plan(config, period="March")


def test_the_plan_states_the_period_the_strategy_and_the_bounds(tmp_path: Path, data: Path) -> None:
    plan = load_plan(series_config(tmp_path, data), period="2026-03")
    (release,) = plan.releases
    described = release.release_kind.describe(release)
    facts = facts_as(described, SeriesFacts)
    assert (release.kind, facts.period, facts.last_published) == ("series", "2026-03", None)
    chosen = facts.candidates[facts.strategy]
    assert chosen == min(facts.candidates.values())
    assert chosen >= facts.svd_bound
    figures = facts.figures
    assert [f.figure for f in figures] == ["per_period", "running_total", "moving_sum_12"]
    for f in figures:
        assert 0 < f.bound_rmse <= f.rmse
    text = release.release_kind.plan_text(described)
    assert "series period 2026-03" in text and "SVD bound" in text


def test_a_published_period_is_refused_before_reserving(tmp_path: Path, data: Path) -> None:
    from dppub.api import publish

    config = series_config(tmp_path, data)
    publish(config, out=tmp_path / "out", period="2026-02")
    with pytest.raises(InputError, match=r"period 2026-01 was published \(up to 2026-02\)"):
        load_plan(config, period="2026-01")


def test_the_shipped_monthly_series_fits_its_budget_on_a_monthly_cron(
    tmp_path: Path, data: Path
) -> None:
    from dppub.dp.budget import zcdp_to_dp
    from tests.dp.pipeline.kinds.series_setup import example_series

    raw = example_series()
    assert raw["schedule"] == {"cron": "0 3 1 * *"}
    raw["dataset"]["path"] = str(data)
    config = tmp_path / "monthly_series.yaml"
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    plan = load_plan(config, period="2027-12")  # the horizon at once: the whole budget
    assert plan.config.schedule is not None and plan.config.schedule.cron == "0 3 1 * *"
    assert plan.total.epsilon == pytest.approx(zcdp_to_dp(0.1, 1e-7), rel=1e-12)
    assert plan.total.epsilon <= plan.config.budget.epsilon


def test_a_dataset_whose_path_names_its_period_is_refused(tmp_path: Path, data: Path) -> None:
    """A series reads every period so far from its date column. A dataset path naming
    ``{period}`` (its budget renewing per period) reads only the current period's file: the
    past periods' rows would be missing and each period's budget spent anew. Old code planned it
    on the current file alone."""
    monthly = tmp_path / "2026-01.parquet"
    monthly.write_bytes(data.read_bytes())
    config = series_config(tmp_path, data)
    raw = yaml.safe_load(config.read_text())
    raw["dataset"]["path"] = str(tmp_path / "{period}.parquet")
    raw["dataset"]["budget"] |= {"per": "month", "renew": True}
    del raw["dataset"]["privacy_unit"], raw["dataset"]["max_rows_per_unit"]
    del raw["series"][0]["max_periods_per_unit"]
    config.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"names \{period\}") as caught:
        load_plan(config, period="2026-01")
    assert "\n" not in str(caught.value)
