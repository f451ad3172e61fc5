"""Tables of one run estimated jointly (``joint: <group>``) end to end without Prefect: the
plan's errors, one measurement for the group, each member's own ledger row and statement, and
what a group may not say."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openpyxl
import pandas as pd
import pytest

from dppub.dp.errors import ConfigError
from dppub.dp.ledger import Ledger
from dppub.dp.pipeline.kinds.plan_facts import facts_as
from dppub.dp.pipeline.kinds.tables.facts import TableFacts
from dppub.dp.pipeline.kinds.tables.result import TableResult
from dppub.dp.pipeline.plan import load_plan
from tests.dp.pipeline.kinds.test_tables import _config
from tests.dp.pipeline.published_run import publish_in_process

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


@pytest.mark.slow
def test_a_joint_group_is_measured_once_and_each_table_is_charged_its_own(
    tmp_path: Path, census_small: Path
) -> None:
    from typer.testing import CliRunner

    from dppub.cli import app

    config = _config(tmp_path, census_small, GROUP)
    plan = load_plan(config)
    assert plan.total.epsilon == pytest.approx(1.0)  # the members' epsilons, unchanged
    for release in plan.releases:
        described = facts_as(plan.kind(release).describe(release), TableFacts)
        for m in described.measures:  # never worse than measured alone
            assert m.separate_rmse is not None
            assert m.expected_rmse <= m.separate_rmse * (1 + 1e-9)  # exact
    shown = CliRunner().invoke(app, ["plan", str(config)])
    assert shown.exit_code == 0, shown.output
    assert "estimated jointly (group people: by_sex_marital, by_marital, by_sex; epsilon 1" in (
        shown.output
    )
    assert "separately; jointly" in shown.output

    published = publish_in_process(config, tmp_path / "ledger.sqlite", tmp_path / "out")
    folder = published.folder

    def answers(name: str) -> pd.DataFrame:
        return pd.read_csv(folder / name / "answers.csv", keep_default_na=False)

    fine, marital, sex = answers("by_sex_marital"), answers("by_marital"), answers("by_sex")
    # Post-processing of one estimate: the tables add up exactly before each published count is
    # rounded to an integer on its own (no round:), so a row and its k cells' sum differ by at
    # most (k + 1) / 2.
    for measure in ("count",):
        cells = fine[fine["measure"] == measure]
        for _, row in marital[marital["measure"] == measure].iterrows():
            group = cells[cells["marital"] == row["marital"]]["answer"]
            assert abs(row["answer"] - group.sum()) <= (len(group) + 1) / 2
        by_sex = sex[(sex["measure"] == measure) & (sex["sex"] != "*")]
        for _, row in by_sex.iterrows():
            group = cells[cells["sex"] == row["sex"]]["answer"]
            assert abs(row["answer"] - group.sum()) <= (len(group) + 1) / 2
        (grand,) = sex[(sex["measure"] == measure) & (sex["sex"] == "*")]["answer"]
        assert abs(grand - cells["answer"].sum()) <= (len(cells) + 1) / 2

    summaries = {s.name: s for s in published.summaries}
    for name, eps in (("by_sex_marital", 0.5), ("by_marital", 0.25), ("by_sex", 0.25)):
        details = json.loads((folder / name / "release.json").read_text())
        assert details["epsilon"] == eps
        joint = details["details"]["joint"]
        assert joint["tables"] == ["by_sex_marital", "by_marital", "by_sex"]
        assert joint["epsilon"] == pytest.approx(1.0)
        assert f"This table alone is not claimed {eps:g}-DP" in joint["guarantee"]
        # The components are the group's, stated as a table measured alone states its own
        # (they were the member's vectors at the group's epsilon under the member's names).
        split, components = details["details"]["split"], details["details"]["components"]
        assert set(split) == set(components) == {"count+centred_sum(hours)"}
        (fact,) = components.values()
        assert fact["epsilon"] == split["count+centred_sum(hours)"] == pytest.approx(1.0)
        assert fact["noise_scale"] == pytest.approx(fact["sensitivity"] / fact["epsilon"])
        # two sensitivities (the pair's, and the rows missing hours' in parallel): none alone
        assert details["sensitivity"] is None
        assert fact["missing"]["noise_scale"] == pytest.approx(
            fact["missing"]["sensitivity"] / fact["epsilon"]
        )
        joint_result = summaries[name].result_as(TableResult).joint
        assert joint_result is not None and joint_result.group == "people"
        notes = openpyxl.load_workbook(folder / name / "answers.xlsx")["Notes"]
        guarantee = {r[0].value: r[1].value for r in notes.iter_rows()}["Guarantee"]
        assert guarantee.startswith("epsilon 1 (its joint group's), delta 0: differential")
        assert f"This table alone is not claimed {eps:g}-DP" in guarantee
    report = (folder / "report.md").read_text()
    assert "differential privacy, jointly: epsilon 1 with by_marital, by_sex" in report
    assert "This table alone is not claimed 0.5-DP" in report
    runs = Ledger(tmp_path / "ledger.sqlite").history()
    draws = [(r["release"], r["epsilon"]) for r in runs if r["event"] == "draw"]
    assert sorted(draws) == [("by_marital", 0.25), ("by_sex", 0.25), ("by_sex_marital", 0.5)]
    assert not list((folder.parent / ".staging").glob("*.joint"))  # the measurement is gone


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
    assert [a.size for a in plan.releases[1].spec.joint.axes] == [6]  # the finest level
    published = publish_in_process(config, tmp_path / "ledger.sqlite", tmp_path / "out")
    leaves = pd.read_csv(published.folder / "leaves" / "answers.csv").set_index("education")
    parents = pd.read_csv(published.folder / "parents" / "answers.csv").set_index("education")
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
def test_a_fault_after_the_groups_draws_charges_the_whole_group_and_publishes_nothing(
    tmp_path: Path, census_small: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An I/O error right after the first member recorded the draws, before any noise: every
    # member's draw is in the ledger (the group's one measurement costs them all), so the
    # settled run is charged the group's whole epsilon; nothing is published or left behind.
    config = _config(tmp_path, census_small, GROUP)
    monkeypatch.setenv("DPPUB_FAULT_AT", "drawn")
    monkeypatch.setenv("DPPUB_FAULT", "eio")
    with pytest.raises(OSError, match="fault injected at drawn"):
        publish_in_process(config, tmp_path / "ledger.sqlite", tmp_path / "out")
    book = Ledger(tmp_path / "ledger.sqlite")
    draws = [r for r in book.history() if r["event"] == "draw"]
    assert sorted((r["release"], r["epsilon"]) for r in draws) == [
        ("by_marital", 0.25),
        ("by_sex", 0.25),
        ("by_sex_marital", 0.5),
    ]
    assert {r["state"] for r in draws} == {"charged"}
    cfg = load_plan(config).config
    left = book.remaining(data=cfg.data_identity, policy=cfg.budget_policy)
    assert cfg.budget_policy.total.epsilon - left.epsilon == pytest.approx(1.0)
    dataset = tmp_path / "out" / "census_demo"
    assert not [p for p in dataset.iterdir() if p.name[0].isdigit()]
    assert not list((dataset / ".staging").glob("*.joint"))
