"""Tables of one run estimated jointly (``joint: <group>``) end to end without Prefect: the
group planned as one release, its errors, one measurement and one draw, each member's own ledger
row and statement, the published layout (``<group>/<table>/``), and what a group may not
say."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import openpyxl
import pandas as pd
import pytest

from dppub.dp.errors import ConfigError
from dppub.dp.ledger import Ledger
from dppub.dp.pipeline.kinds.plan_facts import facts_as
from dppub.dp.pipeline.kinds.tables.facts import JointGroupFacts
from dppub.dp.pipeline.kinds.tables.result import JointResult
from dppub.dp.pipeline.plan import load_plan
from dppub.dp.pipeline.registry import read_summary
from tests.dp.pipeline.kinds.test_tables import _config
from tests.dp.pipeline.published_run import publish_in_process
from tests.dp.pipeline.test_release_schema import SCHEMA

GROUP: list[dict[str, Any]] = [
    {
        "name": "by_sex_marital",
        "epsilon": 0.5,
        "by": ["sex", "marital"],
        "measures": ["count", {"mean": "hours"}],
        "joint": "people",
    },
    {
        "name": "by_marital",
        "epsilon": 0.25,
        "by": ["marital"],
        "measures": ["count", {"mean": "hours"}],
        "joint": "people",
    },
    {
        "name": "by_sex",
        "epsilon": 0.25,
        "by": ["sex"],
        "measures": ["count", {"mean": "hours"}],
        "margins": True,
        "joint": "people",
    },
]


GROUP_EPS = [(t["name"], t["epsilon"]) for t in GROUP]


@pytest.mark.slow
def test_a_joint_group_is_measured_once_and_each_table_is_charged_its_own(
    tmp_path: Path, census_small: Path
) -> None:
    from typer.testing import CliRunner

    from dppub.cli import app

    config = _config(tmp_path, census_small, GROUP)
    plan = load_plan(config)
    assert plan.total.epsilon == pytest.approx(1.0)  # the members' epsilons, unchanged
    (release,) = plan.releases  # the group is one release, named after it
    assert (release.name, release.kind, release.cost.epsilon) == ("people", "table", 1.0)
    assert [(p.name, p.cost.epsilon) for p in release.planned_costs] == [
        ("by_sex_marital", 0.5),
        ("by_marital", 0.25),
        ("by_sex", 0.25),
    ]
    described = facts_as(plan.kind(release).describe(release), JointGroupFacts)
    assert [t.name for t in described.tables] == ["by_sex_marital", "by_marital", "by_sex"]
    for table in described.tables:
        for m in table.facts.measures:  # never worse than measured alone
            assert m.separate_rmse is not None
            assert m.expected_rmse <= m.separate_rmse * (1 + 1e-9)  # exact
    shown = CliRunner().invoke(app, ["plan", str(config)])
    assert shown.exit_code == 0, shown.output
    assert "joint group of 3 tables measured once; the ledger charges each its own" in (
        shown.output
    )
    assert "    by_marital: epsilon 0.25, 4 groups, keys declared" in shown.output
    assert "separately; jointly" in shown.output

    published = publish_in_process(config, tmp_path / "ledger.sqlite", tmp_path / "out")
    group = published.folder / "people"
    assert sorted(p.name for p in published.folder.iterdir() if p.is_dir()) == ["people"]

    def answers(name: str) -> pd.DataFrame:
        return pd.read_csv(group / name / "answers.csv", keep_default_na=False)

    fine, marital, sex = answers("by_sex_marital"), answers("by_marital"), answers("by_sex")
    # Post-processing of one estimate: the tables add up exactly before each published count is
    # rounded to an integer on its own (no round:), so a row and its k cells' sum differ by at
    # most (k + 1) / 2.
    for measure in ("count",):
        cells = fine[fine["measure"] == measure]
        for _, row in marital[marital["measure"] == measure].iterrows():
            rows = cells[cells["marital"] == row["marital"]]["answer"]
            assert abs(row["answer"] - rows.sum()) <= (len(rows) + 1) / 2
        by_sex = sex[(sex["measure"] == measure) & (sex["sex"] != "*")]
        for _, row in by_sex.iterrows():
            rows = cells[cells["sex"] == row["sex"]]["answer"]
            assert abs(row["answer"] - rows.sum()) <= (len(rows) + 1) / 2
        (grand,) = sex[(sex["measure"] == measure) & (sex["sex"] == "*")]["answer"]
        assert abs(grand - cells["answer"].sum()) <= (len(cells) + 1) / 2

    details = json.loads((group / "release.json").read_text())
    assert details["epsilon"] == pytest.approx(1.0)
    assert [(p["name"], p["epsilon"]) for p in details["parts"]] == [
        ("by_sex_marital", 0.5),
        ("by_marital", 0.25),
        ("by_sex", 0.25),
    ]
    files = {f"people/{n}/answers.{x}" for n, *_ in GROUP_EPS for x in ("csv", "parquet", "xlsx")}
    assert files <= set(details["files"])
    assert "Together they are 1-DP" in details["details"]["guarantee"]
    (summary,) = published.summaries
    tables = summary.result_as(JointResult).tables
    assert [t.name for t in tables] == ["by_sex_marital", "by_marital", "by_sex"]
    for (name, eps), table in zip(GROUP_EPS, details["details"]["tables"], strict=True):
        assert table["name"] == name
        joint = table["table"]["joint"]
        assert joint["tables"] == ["by_sex_marital", "by_marital", "by_sex"]
        assert joint["epsilon"] == pytest.approx(1.0)
        assert f"This table alone is not claimed {eps:g}-DP" in joint["guarantee"]
        # The components are the group's, stated as a table measured alone states its own
        # (they were the member's vectors at the group's epsilon under the member's names).
        split, components = table["table"]["split"], table["table"]["components"]
        assert set(split) == set(components) == {"count+centred_sum(hours)"}
        (fact,) = components.values()
        assert fact["epsilon"] == split["count+centred_sum(hours)"] == pytest.approx(1.0)
        assert fact["noise_scale"] == pytest.approx(fact["sensitivity"] / fact["epsilon"])
        assert fact["missing"]["noise_scale"] == pytest.approx(
            fact["missing"]["sensitivity"] / fact["epsilon"]
        )
        notes = openpyxl.load_workbook(group / name / "answers.xlsx")["Notes"]
        guarantee = {r[0].value: r[1].value for r in notes.iter_rows()}["Guarantee"]
        assert guarantee.startswith("epsilon 1 (its joint group's), delta 0: differential")
        assert f"This table alone is not claimed {eps:g}-DP" in guarantee
    # two sensitivities (the pair's, and the rows missing hours' in parallel): none alone
    assert details["sensitivity"] is None
    report = (published.folder / "report.md").read_text()
    assert "differential privacy, jointly: epsilon 1 for by_sex_marital, by_marital, by_sex" in (
        report
    )
    assert "This table alone is not claimed 0.5-DP" in report
    assert "`people/by_marital/answers.csv`" in report
    html = (published.folder / "report.html").read_text()
    for name, _ in GROUP_EPS:  # each table's figures and its released rows
        assert f"Released table {name} (" in html
        assert f'aria-label="people-{name}-count' in html
    jsonschema.validate(details, json.loads(SCHEMA.read_text()))
    assert read_summary(details).to_json() == details  # read back as written
    runs = Ledger(tmp_path / "ledger.sqlite").history()
    assert [(r["release"], r["epsilon"]) for r in runs if r["event"] == "draw"] == [("people", 1.0)]
    rows = sorted((r["release"], r["epsilon"]) for r in runs if r["event"] == "release")
    assert rows == sorted(GROUP_EPS)  # one ledger row per table, at its own epsilon


@pytest.mark.slow
@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"measures": ["count"]}, "every member needs the same measures"),
        ({"round": "integer"}, "has round: integer; joint tables are not rounded"),
        ({"keys": "private", "delta": 1e-6}, "joint: people is for declared keys"),
        ({"joint": "alone"}, "has no other table"),
    ],
)
def test_what_a_joint_group_may_not_say(
    tmp_path: Path, census_small: Path, change: dict[str, Any], message: str
) -> None:
    tables = [GROUP[0], {**GROUP[1], **change}]
    with pytest.raises(ConfigError, match=message):
        load_plan(_config(tmp_path, census_small, tables))


@pytest.mark.slow
def test_levels_of_one_hierarchy_are_estimated_jointly_and_nest(
    tmp_path: Path, census_small: Path
) -> None:
    # education: 6 leaves (level 0) under Primary / Secondary / Higher (level 1).
    tables = [
        {
            "name": "leaves",
            "epsilon": 0.5,
            "by": [{"column": "education", "level": 0}],
            "measures": [{"sum": "hours"}],
            "joint": "education",
        },
        {
            "name": "parents",
            "epsilon": 0.5,
            "by": [{"column": "education", "level": 1}],
            "measures": [{"sum": "hours"}],
            "joint": "education",
        },
    ]
    config = _config(tmp_path, census_small, tables)
    plan = load_plan(config)
    (release,) = plan.releases
    assert [a.size for a in release.spec.joint.axes] == [6]  # the finest level
    published = publish_in_process(config, tmp_path / "ledger.sqlite", tmp_path / "out")
    group = published.folder / "education"
    leaves = pd.read_csv(group / "leaves" / "answers.csv").set_index("education")
    parents = pd.read_csv(group / "parents" / "answers.csv").set_index("education")
    children = {
        "Higher": ["Bachelors", "Masters", "Doctorate"],
        "Secondary": ["HS-grad", "Some-college"],
        "Primary": ["Preschool"],
    }
    assert sorted(parents.index) == sorted(children)
    for parent, kids in children.items():  # exact before each is rounded at a tenth of its se
        total = leaves.loc[kids, "answer"].sum()
        slack = (parents["std_error"][parent] + leaves.loc[kids, "std_error"].sum()) / 20
        assert abs(parents["answer"][parent] - total) <= slack


@pytest.mark.slow
def test_a_fault_after_the_groups_draw_charges_the_whole_group_and_publishes_nothing(
    tmp_path: Path, census_small: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An I/O error right after the group's draw was recorded, before any noise: the draw is
    # at the group's whole epsilon (its one measurement costs every table's), so the settled
    # run is charged it; nothing is published.
    config = _config(tmp_path, census_small, GROUP)
    monkeypatch.setenv("DPPUB_FAULT_AT", "drawn")
    monkeypatch.setenv("DPPUB_FAULT", "eio")
    with pytest.raises(OSError, match="fault injected at drawn"):
        publish_in_process(config, tmp_path / "ledger.sqlite", tmp_path / "out")
    book = Ledger(tmp_path / "ledger.sqlite")
    draws = [r for r in book.history() if r["event"] == "draw"]
    assert [(r["release"], r["epsilon"], r["state"]) for r in draws] == [("people", 1.0, "charged")]
    cfg = load_plan(config).config
    left = book.remaining(data=cfg.data_identity, policy=cfg.budget_policy)
    assert cfg.budget_policy.total.epsilon - left.epsilon == pytest.approx(1.0)
    dataset = tmp_path / "out" / "census_demo"
    assert not [p for p in dataset.iterdir() if p.name[0].isdigit()]


def test_a_group_named_as_one_of_its_tables_or_beside_one_is_refused(
    tmp_path: Path, census_small: Path
) -> None:
    own = [{**t, "joint": "by_sex"} for t in GROUP]
    with pytest.raises(ConfigError, match="joint group 'by_sex' has the name of one of its"):
        load_plan(_config(tmp_path, census_small, own))
    other = {"name": "people", "epsilon": 0.5, "by": ["race"], "measures": ["count"]}
    with pytest.raises(ConfigError, match="release names must be unique"):
        load_plan(_config(tmp_path, census_small, [*GROUP, other]))
