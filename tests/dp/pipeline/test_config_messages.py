"""The first errors a user meets in a config: one line that names what was written and what
was meant, never pydantic's internals (its union tags, "Field required" for a misspelt key)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from dppub.dp.errors import ConfigError
from dppub.dp.pipeline.plan import load_config
from tests.examples import example

Edit = Callable[[dict[str, Any]], object]


def _rename(where: dict[str, Any], old: str, new: str) -> None:
    where[new] = where.pop(old)


CASES: list[tuple[str, Edit, str]] = [
    # old: "tables.0.epsilon: Field required (and 1 more)"
    (
        "a misspelt key in a release",
        lambda r: _rename(r["tables"][0], "epsilon", "epsilom"),
        "tables.0: unknown key 'epsilom' (did you mean 'epsilon'?)",
    ),
    # old: "tables.4.detla: Extra inputs are not permitted"
    (
        "a misspelt optional key",
        lambda r: _rename(r["tables"][4], "delta", "detla"),
        "tables.4: unknown key 'detla' (did you mean 'delta'?)",
    ),
    # old: "dataset.budget: Field required (and 1 more)"
    (
        "a misspelt dataset key",
        lambda r: _rename(r["dataset"], "budget", "budgt"),
        "dataset: unknown key 'budgt' (did you mean 'budget'?)",
    ),
    # old: "tabels: Extra inputs are not permitted"
    (
        "a misspelt section",
        lambda r: _rename(r, "tables", "tabels"),
        "(top level): unknown key 'tabels' (did you mean 'tables'?)",
    ),
    # old: "tables.1.by.0.str: Input should be a valid string (and 2 more)"
    (
        "a misspelt key inside one alternative of a union",
        lambda r: r["tables"][1].update(by=[{"colum": "age", "level": 2}]),
        "tables.1.by.0: unknown key 'colum' (did you mean 'column'?)",
    ),
    # old: "tables.0.measures.1.\"literal['count']\": Input should be 'count', got {'avg':
    # 'income'} (and 7 more)"
    (
        "a measure that does not exist",
        lambda r: r["tables"][0].update(measures=["count", {"avg": "income"}]),
        "tables.0.measures.1: expected one of 'count', 'count_distinct', {count: ...}, {sum: ...}, "
        "{mean: ...}, {variance: ...}, {std: ...}, {quantile: ..., at: ...}; got {'avg': 'income'}",
    ),
    (
        "a misspelt measure",
        lambda r: r["tables"][0].update(measures=["cnt"]),
        "tables.0.measures.0: expected one of 'count', 'count_distinct', {count: ...}, {sum: ...}, "
        "{mean: ...}, {variance: ...}, {std: ...}, {quantile: ..., at: ...}; got 'cnt' "
        "(did you mean 'count'?)",
    ),
    (
        "a misspelt measure name in a mapping",
        lambda r: r["tables"][0].update(measures=[{"sume": "income"}]),
        "tables.0.measures.0: expected one of 'count', 'count_distinct', {count: ...}, {sum: ...}, "
        "{mean: ...}, {variance: ...}, {std: ...}, {quantile: ..., at: ...}; got "
        "{'sume': 'income'} (did you mean 'sum'?)",
    ),
    (
        "a key no alternative knows, with nothing near",
        lambda r: r["tables"][1]["measures"][0].update(zzz=1),
        "tables.1.measures.0: unknown key 'zzz'; allowed: at, bins, quantile",
    ),
]


@pytest.mark.parametrize(("edit", "line"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_config_error_names_what_was_written_and_what_was_meant(
    tmp_path: Path, edit: Edit, line: str
) -> None:
    raw = example("tables.yaml")
    edit(raw)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert message == f"{path}: {line}"  # one line, and nothing more is wrong here
    assert not re.search(r"literal\[|Model\b|Field required|function-", message), message


def test_a_problem_in_a_dataset_file_names_that_file(tmp_path: Path) -> None:
    (tmp_path / "datasets").mkdir()
    raw = example("demo.yaml")
    dataset = {"dataset": dict(raw["dataset"], budgett=raw["dataset"]["budget"])}
    dataset["dataset"].pop("budget")
    (tmp_path / "datasets" / "census.yaml").write_text(yaml.safe_dump(dataset))
    raw["dataset"] = "datasets/census.yaml"
    config = tmp_path / "demo.yaml"
    config.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    assert str(caught.value) == (
        f"{tmp_path / 'datasets' / 'census.yaml'}: dataset: unknown key 'budgett' "
        "(did you mean 'budget'?)"
    )
