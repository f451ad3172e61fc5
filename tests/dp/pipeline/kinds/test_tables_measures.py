"""Issue 37, sections 2 and 3, end to end: missing values counted as stated, ``where:`` row
filters, ``count_distinct`` of privacy units, ``variance`` and ``std``; at a large epsilon the
published values are the exact ones (noise far below the rounding)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from dppub.dp.errors import ConfigError
from dppub.dp.pipeline.plan import load_plan
from tests.dp.pipeline.kinds.test_tables import _config
from tests.dp.pipeline.published_run import publish_in_process

BIG = {"budget": {"epsilon": 1000.0, "delta": 0.0}}
"""A budget for tables at epsilon 200 or more: counts' noise far below 1/2."""


def _with_missing_hours(tmp_path: Path, census_small: Path) -> tuple[Path, pd.DataFrame]:
    """The sample with ``hours`` missing on every 7th row and ``marital`` on every 11th
    (declared ``missing: drop``)."""
    frame = pd.read_parquet(census_small)
    frame["hours"] = frame["hours"].astype(float).where(np.arange(len(frame)) % 7 != 0)
    frame["marital"] = frame["marital"].astype(object).where(np.arange(len(frame)) % 11 != 0)
    path = tmp_path / "missing.parquet"
    frame.to_parquet(path, index=False)
    return path, frame


def _answers(folder: Path, table: str) -> pd.DataFrame:
    return pd.read_csv(folder / table / "answers.csv")


def _value(answers: pd.DataFrame, measure: str, **keys: object) -> float:
    rows = answers[answers["measure"] == measure]
    for k, v in keys.items():
        rows = rows[rows[k] == v]
    (value,) = rows["answer"].tolist()
    return float(value)


@pytest.mark.slow  # ~3 s: two tables published
def test_count_counts_every_row_and_each_measure_its_present_rows(
    tmp_path: Path, census_small: Path
) -> None:
    # Old code: count in a table with mean(hours) counted only the rows with hours (and
    # {count: hours} did not exist): the two tables' counts differed.
    data, frame = _with_missing_hours(tmp_path, census_small)
    tables: list[dict[str, Any]] = [
        {"name": "alone", "epsilon": 300.0, "by": ["sex"], "measures": ["count"]},
        {
            "name": "with_hours",
            "epsilon": 300.0,
            "by": ["sex"],
            "measures": [
                "count",
                {"count": "hours"},
                {"count": "marital"},  # any declared column can be counted
                {"mean": "hours"},
                {"sum": "hours"},
            ],
        },
    ]
    config = _config(tmp_path, data, tables, **BIG)
    folder = publish_in_process(config, tmp_path / "ledger.sqlite", tmp_path / "out").folder
    alone, hours = _answers(folder, "alone"), _answers(folder, "with_hours")
    for sex, group in frame.groupby("sex"):
        rows, present = len(group), int(group["hours"].notna().sum())
        assert present < rows
        assert _value(alone, "count", sex=sex) == rows
        assert _value(hours, "count", sex=sex) == rows
        assert _value(hours, "count(hours)", sex=sex) == present
        assert _value(hours, "count(marital)", sex=sex) == group["marital"].notna().sum()
        assert _value(hours, "mean(hours)", sex=sex) == pytest.approx(
            group["hours"].mean(), abs=0.05
        )
        assert _value(hours, "sum(hours)", sex=sex) == pytest.approx(group["hours"].sum(), rel=1e-3)
    details = json.loads((folder / "with_hours" / "release.json").read_text())["details"]
    assert details["missing_values"].startswith("count counts every row of the group")
    # the count is read off count(hours) and the rows missing hours, measured in parallel
    assert set(details["components"]) == {"count+centred_sum(hours)", "count(marital)"}
    assert "missing" in details["components"]["count+centred_sum(hours)"]
    report = (folder / "report.md").read_text()
    assert "Missing values: count counts every row of the group" in report


@pytest.mark.slow  # ~2 s
def test_a_count_beside_a_mean_counts_the_rows_without_its_value(
    tmp_path: Path, census_small: Path
) -> None:
    # Old code: 2,571 and not 3,000 -- only the rows with hours (the 4019 for 4027).
    data, frame = _with_missing_hours(tmp_path, census_small)
    table = {"name": "t", "epsilon": 300.0, "by": ["sex"], "measures": ["count", {"mean": "hours"}]}
    config = _config(tmp_path, data, [table], **BIG)
    folder = publish_in_process(config, tmp_path / "ledger.sqlite", tmp_path / "out").folder
    answers = _answers(folder, "t")
    assert sum(_value(answers, "count", sex=s) for s in ("Female", "Male")) == len(frame)


def _households(tmp_path: Path, census_small: Path) -> tuple[Path, pd.DataFrame]:
    frame = pd.read_parquet(census_small)
    frame["household"] = [f"h{i % 700}" for i in range(len(frame))]
    path = tmp_path / "households.parquet"
    frame.to_parquet(path, index=False)
    return path, frame


def _unit_config(tmp_path: Path, data: Path, tables: list[dict[str, Any]], **unit: Any) -> Path:
    config = _config(tmp_path, data, tables, privacy_unit="household", **BIG, **unit)
    raw = yaml.safe_load(config.read_text())
    raw["dataset"]["columns"]["household"] = {"type": "string"}
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    return config


@pytest.mark.slow  # ~3 s: one table published under a unit
def test_where_filters_rows_before_the_bound_and_plan_shows_it(
    tmp_path: Path, census_small: Path
) -> None:
    from dppub.cli import app

    data, frame = _households(tmp_path, census_small)
    where = "age >= 40 and marital in ('Married', 'Divorced')"
    table = {
        "name": "t",
        "epsilon": 400.0,
        "by": ["race"],
        "where": where,
        "measures": ["count", "count_distinct", {"mean": "hours"}],
    }
    # Every household keeps all its rows (4 or 5, in at most 5 races): the published values
    # are the exact ones on the filtered rows.
    config = _unit_config(tmp_path, data, [table], max_rows_per_unit=5, max_partitions_per_unit=5)
    (plan,) = load_plan(config).releases
    assert plan.bounding.where is not None and plan.bounding.where.text == where
    shown = CliRunner().invoke(app, ["plan", str(config)])
    assert shown.exit_code == 0, shown.output
    assert f"where {where} (each row, before any bound)" in shown.output
    as_json = CliRunner().invoke(app, ["plan", str(config), "--json"])
    assert where in as_json.output
    folder = publish_in_process(config, tmp_path / "ledger.sqlite", tmp_path / "out").folder
    answers = _answers(folder, "t")
    kept = frame[(frame["age"] >= 40) & frame["marital"].isin(["Married", "Divorced"])]
    for race, group in kept.groupby("race"):
        assert _value(answers, "count", race=race) == len(group)
        assert _value(answers, "count_distinct", race=race) == group["household"].nunique()
    details = json.loads((folder / "t" / "release.json").read_text())["details"]
    assert details["where"] == where
    # count_distinct's sensitivity: a unit reaches at most min(max_partitions_per_unit,
    # max_rows_per_unit) races
    assert details["components"]["distinct"]["sensitivity"] == pytest.approx(5.0, rel=1e-4)
    assert "a count counts the rows contribution bounding kept" in details["counted_rows"]
    assert "a count counts the rows contribution bounding kept" in (
        (folder / "report.md").read_text()
    )


@pytest.mark.slow  # ~2 s
def test_the_bound_is_spent_on_the_rows_the_filter_keeps(
    tmp_path: Path, census_small: Path
) -> None:
    # One row per household kept: filtered first, every household with a kept row counts one
    # (filtered after the bound, a household whose one chosen row fails the filter would be
    # lost: about a third of them here).
    data, frame = _households(tmp_path, census_small)
    table = {
        "name": "t",
        "epsilon": 400.0,
        "by": ["sex"],
        "where": "age >= 50",
        "measures": ["count"],
    }
    config = _unit_config(tmp_path, data, [table], max_rows_per_unit=1)
    folder = publish_in_process(config, tmp_path / "ledger.sqlite", tmp_path / "out").folder
    answers = _answers(folder, "t")
    total = sum(_value(answers, "count", sex=s) for s in ("Female", "Male"))
    assert total == frame[frame["age"] >= 50]["household"].nunique()


@pytest.mark.slow  # ~2 s
def test_variance_and_std_are_the_datas_at_a_large_epsilon(
    tmp_path: Path, census_small: Path
) -> None:
    data, frame = _with_missing_hours(tmp_path, census_small)
    table = {
        "name": "spread",
        "epsilon": 900.0,
        "by": ["sex"],
        "measures": [{"variance": "hours"}, {"std": "hours"}],
        "margins": True,
    }
    config = _config(tmp_path, data, [table], **BIG)
    folder = publish_in_process(config, tmp_path / "ledger.sqlite", tmp_path / "out").folder
    answers = _answers(folder, "spread")
    for sex, group in [*frame.groupby("sex"), ("*", frame)]:
        hours = group["hours"].dropna()
        var = float(np.var(hours))  # population variance, of the present values
        assert _value(answers, "variance(hours)", sex=sex) == pytest.approx(var, rel=0.02)
        assert _value(answers, "std(hours)", sex=sex) == pytest.approx(np.sqrt(var), rel=0.01)
        # (the interval's coverage is tested seeded, tests/dp/tables/test_spread.py)
        rows = answers[(answers["measure"] == "variance(hours)") & (answers["sex"] == sex)]
        low, answer, high = rows[["ci_low", "answer", "ci_high"]].iloc[0]
        assert low <= answer <= high and high - low < 0.1 * var


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"where": "age >= 18 and ward in ('A',)"}, "'ward' is not a declared column"),
        ({"where": "age >= "}, "is not an expression"),
        ({"where": "len(zip) > 3"}, "one side must be a column"),
        ({"where": "sex == 'Other'"}, "not among 'sex''s declared categories"),
        ({"measures": ["count_distinct"]}, "count_distinct counts privacy units"),
        (
            {"measures": ["count_distinct"], "margins": True},
            "count_distinct: distinct units do not add up over groups",
        ),
    ],
)
def test_a_bad_table_is_refused_in_one_line(
    tmp_path: Path, census_small: Path, change: dict[str, Any], message: str
) -> None:
    table = {"name": "t", "epsilon": 1.0, "by": ["sex"], "measures": ["count"], **change}
    config = _config(tmp_path, census_small, [table])
    with pytest.raises(ConfigError, match="t") as caught:
        load_plan(config)
    assert message in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.slow  # ~3 s: three tables published
def test_joint_and_private_key_tables_count_missing_values_alike(
    tmp_path: Path, census_small: Path
) -> None:
    # Joint tables measure {std: hours} with the group; private keys count every row and
    # {count: hours} the rows with hours, like declared keys.
    data, frame = _with_missing_hours(tmp_path, census_small)
    measures: list[Any] = ["count", {"count": "hours"}, {"count": "sex"}, {"mean": "hours"}]
    tables: list[dict[str, Any]] = [
        {
            "name": "a",
            "epsilon": 300.0,
            "by": ["sex", "race"],
            "joint": "g",
            "measures": [*measures, {"std": "hours"}],
        },
        {
            "name": "b",
            "epsilon": 300.0,
            "by": ["sex"],
            "joint": "g",
            "measures": [*measures, {"std": "hours"}],
        },
        {
            "name": "c",
            "epsilon": 40.0,
            "delta": 1e-6,
            "by": ["marital"],
            "keys": "private",
            "measures": measures,
        },
    ]
    config = _config(tmp_path, data, tables, **{"budget": {"epsilon": 1000.0, "delta": 1e-5}})
    folder = publish_in_process(config, tmp_path / "ledger.sqlite", tmp_path / "out").folder
    b, c = _answers(folder / "g", "b"), pd.read_csv(folder / "c" / "answers.csv")
    for sex, group in frame.groupby("sex"):
        assert _value(b, "count", sex=sex) == len(group)
        assert _value(b, "count(hours)", sex=sex) == group["hours"].notna().sum()
        assert _value(b, "std(hours)", sex=sex) == pytest.approx(
            float(np.std(group["hours"].dropna())), rel=0.02
        )
    for marital, group in frame.groupby("marital"):
        assert _value(c, "count", marital=marital) == len(group)
        assert _value(c, "count(hours)", marital=marital) == group["hours"].notna().sum()
        assert _value(c, "count(sex)", marital=marital) == len(group)
        assert _value(c, "mean(hours)", marital=marital) == pytest.approx(
            group["hours"].mean(), abs=0.1
        )
