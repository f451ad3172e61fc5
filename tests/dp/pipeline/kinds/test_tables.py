"""The ``tables:`` kind end to end without Prefect: plan, ``dppub plan``, a published run
(answers, release.json, ledger, both reports), a privacy unit, and what the config may not say."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from dppub.dp.errors import ConfigError
from dppub.dp.ledger import Ledger
from dppub.dp.numerics.fixedpoint import float_allowance
from dppub.dp.pipeline.kinds.plan_facts import facts_as
from dppub.dp.pipeline.kinds.tables.facts import TableFacts
from dppub.dp.pipeline.kinds.tables.result import TableResult
from dppub.dp.pipeline.plan import load_plan
from dppub.dp.tables.quantiles import RANK_ROUNDINGS
from tests.dp.pipeline.published_run import demo_config, publish_in_process

TABLES: list[dict[str, Any]] = [
    {
        "name": "income_by_race",
        "epsilon": 1.0,
        "by": ["race"],
        "measures": ["count", {"sum": "income"}, {"mean": "income"}],
    },
    {
        "name": "median_hours",
        "epsilon": 1.0,
        "by": ["sex"],
        "measures": [{"quantile": "hours", "at": [0.5, 0.9]}],
    },
    {
        "name": "by_sex_marital",
        "epsilon": 1.0,
        "by": ["sex", "marital"],
        "measures": ["count"],
        "margins": True,
        "round": "integer",
    },
]


def _config(tmp_path: Path, data: Path, tables: list[dict[str, Any]], **dataset: Any) -> Path:
    path = demo_config(tmp_path, data)
    raw = yaml.safe_load(path.read_text())
    for section in ("anonymize", "workloads", "regressions", "clustering"):
        raw.pop(section, None)
    raw["dataset"].update(dataset)
    raw["tables"] = tables
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.mark.slow  # ~4 s: three tables published, both reports drawn
def test_tables_are_planned_published_recorded_and_reported(
    tmp_path: Path, census_small: Path
) -> None:
    from typer.testing import CliRunner

    from dppub.cli import app

    config = _config(tmp_path, census_small, TABLES)
    plan = load_plan(config)
    assert [(r.name, r.kind, r.cost.epsilon) for r in plan.releases] == [
        ("income_by_race", "table", 1.0),
        ("median_hours", "table", 1.0),
        ("by_sex_marital", "table", 1.0),
    ]
    shown = CliRunner().invoke(app, ["plan", str(config)])
    assert shown.exit_code == 0, shown.output
    assert "mean(income): epsilon 1, expected RMSE about" in shown.output
    assert (
        "quantile(hours, 0.5/0.9): epsilon 1, expected rank RMSE 5.09 rows (of a group's n), "
        "exponential mechanism"
    ) in shown.output

    ledger = tmp_path / "ledger.sqlite"
    published = publish_in_process(config, ledger, tmp_path / "out")
    folder = published.folder
    exact = pd.read_parquet(census_small)

    answers = pd.read_csv(folder / "income_by_race" / "answers.csv")
    assert list(answers.columns) == [
        "race",
        "measure",
        "answer",
        "std_error",
        "ci_low",
        "ci_high",
        "quality",
    ]
    assert answers["measure"].unique().tolist() == ["count", "sum(income)", "mean(income)"]
    counts = answers[answers["measure"] == "count"].set_index("race")["answer"]
    truth = exact["race"].value_counts()
    # Laplace noise of scale 1 / 0.513: |noise| > 40 has probability below e^-20 per group.
    assert (counts - truth.reindex(counts.index)).abs().max() < 40
    means = answers[answers["measure"] == "mean(income)"]
    assert means["answer"].between(0, 250_000).all()
    assert (means["ci_low"] <= means["answer"]).all() and (
        means["answer"] <= means["ci_high"]
    ).all()
    assert pd.read_parquet(folder / "income_by_race" / "answers.parquet").shape == answers.shape

    release = json.loads((folder / "income_by_race" / "release.json").read_text())["details"]
    assert release["key_policy"] == "declared"
    assert release["bounds"] == {"income": [0.0, 250000.0]}
    assert sum(release["split"].values()) == pytest.approx(1.0)
    assert "noise only" in release["interval_method"]

    margins = pd.read_csv(folder / "by_sex_marital" / "answers.csv", keep_default_na=False)
    assert len(margins) == (2 + 1) * (4 + 1)
    grand = margins[(margins["sex"] == "*") & (margins["marital"] == "*")]["answer"]
    cells = margins[(margins["sex"] != "*") & (margins["marital"] != "*")]["answer"]
    assert float(grand.iloc[0]) == cells.sum() and (cells == cells.round()).all()

    quantiles = pd.read_csv(folder / "median_hours" / "answers.csv")
    assert quantiles["measure"].tolist() == [
        "quantile(hours, 0.5)",
        "quantile(hours, 0.5)",
        "quantile(hours, 0.9)",
        "quantile(hours, 0.9)",
    ]
    assert quantiles["answer"].between(1, 99).all()
    assert quantiles[["std_error", "ci_low", "ci_high"]].isna().all().all()  # no value interval
    details = json.loads((folder / "median_hours" / "release.json").read_text())
    cdf = details["details"]["components"]["cdf(hours)"]
    assert cdf["method"].startswith("exponential mechanism")
    assert cdf["sensitivity"] == 0.9 + float_allowance(RANK_ROUNDINGS)  # float roundings

    entry = {e["name"]: e for e in published.manifest["releases"]}["median_hours"]
    assert entry["kind"] == "table"
    assert sorted(entry["files"]) == [
        f"median_hours/{f}"
        for f in ("answers.csv", "answers.parquet", "answers.xlsx", "answers_wide.csv")
    ]
    rows = Ledger(str(ledger), create=False).history()
    released = [(r["release"], r["kind"], r["epsilon"]) for r in rows if r["event"] == "release"]
    assert released == [(t["name"], "table", 1.0) for t in TABLES]

    report = (folder / "report.md").read_text()
    assert "### income_by_race (table)" in report
    assert "Epsilon split: count+centred_sum(income) 1 " in report
    html = (folder / "report.html").read_text()
    assert "No plot for this release" not in html
    assert html.count("<svg") >= 4  # three measures' bars, two quantiles' bars, one heatmap


@pytest.mark.slow
def test_a_unit_bounds_its_rows_and_scales_the_noise(tmp_path: Path, census_small: Path) -> None:
    frame = pd.read_parquet(census_small)
    frame["household"] = [f"h{i % 700}" for i in range(len(frame))]
    data = tmp_path / "households.parquet"
    frame.to_parquet(data, index=False)
    table = {"name": "t", "epsilon": 1.0, "by": ["race"], "measures": [{"mean": "hours"}]}
    config = _config(
        tmp_path,
        data,
        [table],
        privacy_unit="household",
        max_rows_per_unit=3,
        max_partitions_per_unit=2,
    )
    raw = yaml.safe_load(config.read_text())
    raw["dataset"]["columns"]["household"] = {"type": "string"}
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    (plan,) = load_plan(config).releases
    assert (plan.bounding.rows_per_unit, plan.bounding.partition) == (3, "race")
    published = publish_in_process(config, tmp_path / "ledger.sqlite", tmp_path / "out")
    (summary,) = published.summaries
    components = summary.result_as(TableResult).components
    # m rows of one unit, each adding v - lo and hi - v (98 in all) to the count and sum pair
    pair = components["count(hours)+centred_sum(hours)"]
    assert pair.sensitivity == pytest.approx(3 * 98.0, rel=1e-4)
    unit = summary.result_as(TableResult).privacy_unit
    assert unit is not None
    assert (unit.column, unit.max_rows_per_unit, unit.max_partitions_per_unit) == (
        "household",
        3,
        2,
    )
    assert "for all the rows one unit may contribute (3)" in unit.note
    assert "household" in summary.neighbours


@pytest.mark.slow
@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"keys": "private"}, "keys: private needs a delta > 0, got 0.0"),
        ({"measures": [{"mean": "sex"}]}, "must be numeric with declared bounds"),
        (
            {"measures": [{"mean": "hours"}], "round": "integer"},
            "round: integer rounds counts and sums, and this table has neither",
        ),
        ({"by": ["zip"]}, "has no declared domain"),
    ],
)
def test_what_a_table_may_not_say(
    tmp_path: Path, census_small: Path, table: dict[str, Any], message: str
) -> None:
    item = {"name": "t", "epsilon": 1.0, "by": ["race"], "measures": ["count"], **table}
    with pytest.raises(ConfigError, match=message):
        load_plan(_config(tmp_path, census_small, [item]))


def test_declared_keys_spend_no_delta(tmp_path: Path, census_small: Path) -> None:
    item = {"name": "t", "epsilon": 1.0, "delta": 1e-6, "by": ["race"], "measures": ["count"]}
    with pytest.raises(ConfigError, match="delta is spent only by keys: private"):
        load_plan(_config(tmp_path, census_small, [item]))


def test_the_example_config_plans(tmp_path: Path) -> None:
    from tests.dp.pipeline.published_run import ROOT

    plan = load_plan(ROOT / "configs" / "tables.yaml")
    assert [r.kind for r in plan.releases] == ["table"] * 6  # a joint group is one release
    assert plan.releases[5].name == "hours"
    assert [p.name for p in plan.releases[5].parts] == ["hours_by_sex_marital", "hours_by_marital"]
    assert plan.releases[2].spec.design.margins and plan.releases[2].spec.design.integer
    assert plan.releases[4].spec.keys == "private" and plan.releases[4].cost.delta == 1e-6


@pytest.mark.slow
def test_a_nested_hierarchy_gets_consistent_integer_margins(
    tmp_path: Path, census_small: Path
) -> None:
    # education: 6 leaves under Primary / Secondary / Higher (level 1), all under * (level 2).
    item = {
        "name": "by_education",
        "epsilon": 1.0,
        "by": [{"column": "education", "level": 1}, {"column": "education", "level": 0}],
        "measures": ["count"],
        "margins": True,
        "round": "integer",
    }
    config = _config(tmp_path, census_small, [item])
    published = publish_in_process(config, tmp_path / "ledger.sqlite", tmp_path / "out")
    answers = pd.read_csv(published.folder / "by_education" / "answers.csv", keep_default_na=False)
    assert list(answers.columns[:2]) == ["education_level0", "education_level1"]
    leaves = answers[answers["education_level0"] != "*"]
    levels = answers[(answers["education_level0"] == "*") & (answers["education_level1"] != "*")]
    (total,) = answers[answers["education_level1"] == "*"]["answer"]
    assert len(leaves) == 6 and sorted(levels["education_level1"]) == [
        "Higher",
        "Primary",
        "Secondary",
    ]
    assert (leaves["answer"] == leaves["answer"].round()).all() and (leaves["answer"] >= 0).all()
    for _, row in levels.iterrows():  # each level-1 group is exactly the sum of its leaves
        children = leaves[leaves["education_level1"] == row["education_level1"]]
        assert row["answer"] == children["answer"].sum()
    assert total == leaves["answer"].sum() == levels["answer"].sum()
    higher = leaves[leaves["education_level1"] == "Higher"]["education_level0"]
    assert sorted(higher) == ["Bachelors", "Doctorate", "Masters"]


def test_an_int_columns_default_grid_scores_its_quantiles_with_ties(
    tmp_path: Path, census_small: Path
) -> None:
    tables = [
        {
            "name": "ages",
            "epsilon": 1.0,
            "by": ["sex"],
            "measures": [{"quantile": "age", "at": [0.5]}],
        },
        {
            "name": "hours",
            "epsilon": 1.0,
            "by": ["sex"],
            "measures": [{"quantile": "hours", "at": [0.5]}],
        },
        {
            "name": "binned",
            "epsilon": 1.0,
            "by": ["sex"],
            "measures": [{"quantile": "age", "at": [0.5], "bins": 10}],
        },
    ]
    plan = load_plan(_config(tmp_path, census_small, tables))
    grids = [r.spec.design.integer_grids for r in plan.releases]
    assert grids == [frozenset({"age"}), frozenset(), frozenset()]


@pytest.mark.slow
def test_quantiles_with_margins_give_every_cell_and_margin_its_own(
    tmp_path: Path, census_small: Path
) -> None:
    item = {
        "name": "hours_by_sex_marital",
        "epsilon": 1.0,
        "by": ["sex", "marital"],
        "measures": [{"quantile": "hours", "at": [0.5, 0.9]}],
        "margins": True,
    }
    config = _config(tmp_path, census_small, [item])
    (plan,) = load_plan(config).releases
    (error,) = facts_as(load_plan(config).kind(plan).describe(plan), TableFacts).measures
    assert "hierarchical CDF of cells and margins jointly" in error.error
    published = publish_in_process(config, tmp_path / "ledger.sqlite", tmp_path / "out")
    answers = pd.read_csv(
        published.folder / "hours_by_sex_marital" / "answers.csv", keep_default_na=False
    )
    assert len(answers) == 2 * (2 + 1) * (4 + 1)  # two quantiles of 8 cells, 7 margins, total
    exact = pd.read_parquet(census_small).dropna(subset=["sex", "marital", "hours"])
    # Each group's own median (ties allowed): within 6 of the worst row's rank noise standard
    # deviations (44.2 rows, the total's, at the worst CDF point; release-grade noise, so the
    # few groups of 1,000+ rows checked fail with probability below 1e-3 together).
    medians = answers[answers["measure"] == "quantile(hours, 0.5)"]
    for _, row in medians.iterrows():
        rows = exact
        for key in ("sex", "marital"):
            if row[key] != "*":
                rows = rows[rows[key] == row[key]]
        if len(rows) >= 1000:
            below = int((rows["hours"] < row["answer"]).sum())
            at_most = int((rows["hours"] <= row["answer"]).sum())
            assert below - 6 * 44.2 <= len(rows) / 2 <= at_most + 6 * 44.2
    (summary,) = published.summaries
    cdf = summary.result_as(TableResult).components["cdf(hours)"]
    assert "Kronecker product" in (cdf.method or "") and cdf.epsilon == 1.0


@pytest.mark.slow  # ~3 s: three tables published, the audit page drawn
def test_each_mechanism_is_recorded_under_its_own_name(tmp_path: Path, census_small: Path) -> None:
    # Issue 34, item 6 (old code: every table was recorded as 'laplace', also quantiles drawn
    # by the exponential mechanism).
    from dppub.commands import audit_payload, write_audit_page

    both = {
        "name": "hours_by_sex",
        "epsilon": 1.0,
        "by": ["sex"],
        "measures": ["count", {"quantile": "hours", "at": [0.5]}],
    }
    cdf = {**both, "name": "hours_with_margins", "margins": True}
    config = _config(tmp_path, census_small, [TABLES[0], TABLES[1], both, cdf])
    expected = {
        "income_by_race": "laplace",
        "median_hours": "exponential",
        "hours_by_sex": "laplace+exponential",
        "hours_with_margins": "laplace",  # with margins, quantiles come from the noisy CDF
    }
    assert {r.name: r.mechanism for r in load_plan(config).releases} == expected
    ledger = tmp_path / "ledger.sqlite"
    folder = publish_in_process(config, ledger, tmp_path / "out").folder
    book = Ledger(str(ledger), create=False)
    rows = [r for r in book.history() if r["event"] == "release"]
    assert {r["release"]: r["mechanism"] for r in rows} == expected
    assert book.verify().ok
    entries = {
        e["name"]: e["mechanism"]
        for e in json.loads((folder / "manifest.json").read_text())["releases"]
    }
    assert entries == expected
    for name, mechanism in expected.items():
        assert json.loads((folder / name / "release.json").read_text())["mechanism"] == mechanism
    page = tmp_path / "audit.html"
    write_audit_page(str(ledger), audit_payload(str(ledger), None), page)
    assert "<td>laplace+exponential</td>" in page.read_text()


@pytest.mark.slow
def test_a_small_epsilon_under_a_unit_plans_and_publishes(
    tmp_path: Path, census_small: Path
) -> None:
    # old code: `dppub plan` and the quantile's method choice computed an expected error at
    # epsilon / m (2.5e-7 here), below the floor no mechanism runs at: "epsilon must be at
    # least 1e-06 ..." in `plan`, and in `run` after the reservation (charged)
    from dppub.dp.pipeline.registry import kind_of

    frame = pd.read_parquet(census_small)
    frame["household"] = [f"h{i % 700}" for i in range(len(frame))]
    data = tmp_path / "households.parquet"
    frame.to_parquet(data, index=False)
    table = {
        "name": "t",
        "epsilon": 1e-5,
        "by": ["sex"],
        "measures": ["count", {"quantile": "hours", "at": [0.5]}],
    }
    config = _config(tmp_path, data, [table], privacy_unit="household", max_rows_per_unit=20)
    raw = yaml.safe_load(config.read_text())
    raw["dataset"]["columns"]["household"] = {"type": "string"}
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    (plan,) = load_plan(config).releases
    (count, quantile) = facts_as(kind_of("table").describe(plan), TableFacts).measures
    assert count.expected_rmse > 1e6 and quantile.expected_rmse > 1e6
    published = publish_in_process(config, tmp_path / "ledger.sqlite", tmp_path / "out")
    (summary,) = published.summaries
    assert summary.result_as(TableResult).rows == 4  # two groups, count and one quantile


QUANTILE = {"quantile": "age", "at": [0.5]}


@pytest.mark.slow
@pytest.mark.parametrize("bounds", [[0, 250_000_000], [-(2**63), 2**63]])
def test_an_int_quantile_column_plans_in_memory_independent_of_its_bounds(
    tmp_path: Path, census_small: Path, bounds: list[int]
) -> None:
    # Old code: one float per integer of the bounds to decide whether the grid is one bin per
    # integer (2.1 GB and seconds for [0, 2.5e8]; a traceback for the documented limit).
    path = _config(
        tmp_path,
        census_small,
        [{"name": "ages", "epsilon": 1.0, "by": ["sex"], "measures": [QUANTILE]}],
    )
    raw = yaml.safe_load(path.read_text())
    raw["dataset"]["columns"]["age"]["bounds"] = bounds
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    tracemalloc.start()
    try:
        plan = load_plan(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 * 2**20  # bytes; the old code's arange alone held 2 GB
    (release,) = plan.releases
    assert release.spec.design.integer_grids == frozenset()
    assert len(release.spec.design.edges["age"]) == 1025
