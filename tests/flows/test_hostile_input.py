"""Hostile and bad input through the real CLI: one clear line, non-zero exit, nothing published,
no budget spent.

The CLI runs in-process (typer's CliRunner), without Prefect (no Prefect API is configured), so
each case costs a second or two.
"""

import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from dppub import cli
from dppub.dp.ledger import Ledger
from dppub.dp.ledger.summary import spending_summary
from tests.examples import example

ROOT = Path(__file__).resolve().parents[2]


class Case:
    def __init__(self, tmp: Path, frame: pd.DataFrame) -> None:
        tmp.mkdir(parents=True, exist_ok=True)
        self.tmp, self.frame = tmp, frame.copy()
        self.raw: dict[str, Any] = example("demo.yaml")
        self.raw.pop("schedule")
        self.ledger, self.out = tmp / "ledger.sqlite", tmp / "out"

    def run(self, *, data: Path | None = None) -> Any:
        if data is None:
            data = self.tmp / "data.parquet"
            self.frame.to_parquet(data, index=False)
        self.raw["dataset"]["path"] = str(data)
        config = self.tmp / "config.yaml"
        config.write_text(yaml.safe_dump(self.raw))
        args = ["run", str(config), "--ledger", str(self.ledger), "--out", str(self.out)]
        return CliRunner().invoke(cli.app, args)

    def published(self) -> list[str]:
        d = self.out / "census_demo"
        return [p.name for p in d.iterdir() if not p.name.startswith(".")] if d.exists() else []

    def spent(self) -> float:
        if not self.ledger.exists():
            return 0.0
        summary = spending_summary(Ledger(self.ledger))
        return float(sum(d["lifetime_spent_epsilon"] for d in summary.values()))


def _refused(case: Case, result: Any, message: str) -> None:
    assert result.exit_code == 2, result.output
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("dppub: error:")]
    assert len(errors) == 1, result.stderr
    assert message in errors[0]
    assert "Traceback" not in result.stderr
    assert case.published() == []
    assert case.spent() == 0.0
    if case.ledger.exists():  # the ledger is untouched: not even a reserve/abort pair
        with sqlite3.connect(case.ledger) as con:
            assert con.execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 0


STRUCTURE: dict[str, tuple[Callable[[pd.DataFrame], pd.DataFrame], str]] = {
    "missing column": (lambda f: f.drop(columns="hours"), "missing declared column(s) ['hours']"),
    "renamed column": (lambda f: f.rename(columns={"age": "Age"}), "missing declared column(s)"),
    "wrong type": (lambda f: f.assign(age=f["age"].astype(str)), "'age' should be int"),
}


@pytest.mark.parametrize("name", list(STRUCTURE))
def test_structural_problems_are_refused_before_the_budget(
    tmp_path: Path, census_frame: pd.DataFrame, name: str
) -> None:
    mutate, message = STRUCTURE[name]
    case = Case(tmp_path, mutate(census_frame))
    _refused(case, case.run(), message)


ONE_RECORD: dict[str, Callable[[pd.DataFrame], pd.DataFrame]] = {
    "NaN": lambda f: f.assign(hours=f["hours"].where(f.index != 3)),
    "inf": lambda f: f.assign(income=f["income"].where(f.index != 4, np.inf)),
    "undeclared category": lambda f: f.assign(sex=f["sex"].where(f.index != 5, "Unknown")),
    "missing category": lambda f: f.assign(race=f["race"].where(f.index != 6, None)),
    "zip of another length": lambda f: f.assign(zip=f["zip"].where(f.index != 7, "19")),
}


@pytest.mark.parametrize("name", ["clean", *ONE_RECORD])
def test_one_bad_record_does_not_change_the_outcome(
    tmp_path: Path, census_frame: pd.DataFrame, name: str
) -> None:
    # Neighbouring tables: the clean sample (once: its outcome is the same for every case),
    # and the same with one record damaged. Each publishes (exit 0); the damaged value meets
    # its declared policy, nothing names it.
    case = Case(tmp_path, ONE_RECORD[name](census_frame) if name in ONE_RECORD else census_frame)
    result = case.run()
    assert result.exit_code == 0, (name, result.output)
    assert len(case.published()) == 1


@pytest.mark.parametrize("rows", [0, 1, 4, 5])
def test_tiny_tables_publish_like_any_other(
    tmp_path: Path, census_frame: pd.DataFrame, rows: int
) -> None:
    # n = 0 and n = 1, and n = k - 1 and k for the k-anonymous table: the same exit status.
    case = Case(tmp_path, census_frame.head(rows))
    result = case.run()
    assert result.exit_code == 0, result.output
    (run,) = case.published()
    table = pd.read_parquet(case.out / "census_demo" / run / "k_anonymous_table" / "table.parquet")
    assert len(table) == (rows if rows >= 5 else 0)  # fewer than k: every record suppressed


def test_malformed_and_foreign_files(tmp_path: Path, census_frame: pd.DataFrame) -> None:
    case = Case(tmp_path, census_frame)
    good = tmp_path / "good.parquet"
    census_frame.to_parquet(good, index=False)
    truncated = tmp_path / "truncated.parquet"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    _refused(case, case.run(data=truncated), "cannot read")
    # CSV text under a Parquet name is foreign (a file named .csv is read as CSV).
    csv = tmp_path / "table.parquet"
    census_frame.to_csv(csv, index=False)
    _refused(case, case.run(data=csv), "cannot read")
    _refused(case, case.run(data=tmp_path / "absent.parquet"), "dataset not found")


def test_a_million_distinct_categories(tmp_path: Path, census_frame: pd.DataFrame) -> None:
    n = 1_000_000
    frame = census_frame.sample(n, replace=True, random_state=1).reset_index(drop=True)
    frame["race"] = [f"r{i}" for i in range(n)]  # none declared: every row is dropped
    case = Case(tmp_path, frame)
    for key in ("anonymize", "regressions", "clustering"):
        case.raw.pop(key)
    case.raw["workloads"] = [
        {"name": "race_counts", "epsilon": 0.1, "attributes": [{"column": "race"}]}
    ]
    result = case.run()
    assert result.exit_code == 0, result.output
    (run,) = case.published()
    answers = pd.read_parquet(case.out / "census_demo" / run / "race_counts" / "answers.parquet")
    assert len(answers) == 5


def test_a_declared_category_missing_from_its_hierarchy_is_a_config_error(
    tmp_path: Path, census_frame: pd.DataFrame
) -> None:
    # Structural: refused from the config alone, whether or not a row has the category.
    for label, frame in (
        ("without", census_frame[census_frame.education != "Doctorate"]),
        ("with", census_frame),
    ):
        case = Case(tmp_path / label, frame)
        del case.raw["hierarchies"]["education"]["levels"]["Doctorate"]
        _refused(case, case.run(), "declared category ['Doctorate'] is not among its leaves")


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("dataset", "budget", "epsilon"), 0, "epsilon must be finite and > 0, got 0.0"),
        (("dataset", "budget", "epsilon"), -1, "epsilon must be finite and > 0, got -1.0"),
        (("dataset", "budget", "delta"), float("nan"), "the number '.nan' is not finite"),
        (("dataset", "budget", "delta"), -0.5, "delta must be in [0, 1), got -0.5"),
        (("workloads", 0, "epsilon"), float("inf"), "the number '.inf' is not finite"),
        (("workloads", 0, "epsilon"), float("nan"), "the number '.nan' is not finite"),
        (("regressions", 0, "delta"), 1.0, "delta must be in [0, 1), got 1.0"),
        (("workloads", 0, "workload"), "every_query", "workloads.0.workload: Input should be"),
    ],
)
def test_bad_config_values(
    tmp_path: Path, census_frame: pd.DataFrame, path: tuple[Any, ...], value: Any, message: str
) -> None:
    case = Case(tmp_path, census_frame)
    node = case.raw
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    _refused(case, case.run(), message)
    assert not case.ledger.exists()


def test_yaml_error_names_its_line(tmp_path: Path) -> None:
    config = tmp_path / "broken.yaml"
    config.write_text("dataset:\n  name: x\n  budget: [1\n")
    result = CliRunner().invoke(cli.app, ["run", str(config), "--ledger", str(tmp_path / "l")])
    assert result.exit_code == 2
    assert "line 4, column 1: YAML error" in result.stderr


def test_corrupted_ledger_is_never_recreated(tmp_path: Path, census_frame: pd.DataFrame) -> None:
    case = Case(tmp_path, census_frame)
    case.ledger.write_bytes(b"\x00garbage" * 512)
    result = case.run()
    assert result.exit_code == 2
    assert "dppub: error:" in result.stderr
    assert "is not a dppub ledger" in result.stderr
    assert case.published() == []
    assert case.ledger.read_bytes() == b"\x00garbage" * 512  # left exactly as found


def test_locked_ledger(
    tmp_path: Path, census_frame: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = Case(tmp_path, census_frame)
    Ledger(case.ledger)
    monkeypatch.setenv("DPPUB_LEDGER_TIMEOUT", "0.5")
    holder = sqlite3.connect(case.ledger, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process is mid-write and never finishes
    try:
        _refused(case, case.run(), "database is locked")
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_read_only_ledger(tmp_path: Path, census_frame: pd.DataFrame) -> None:
    case = Case(tmp_path, census_frame)
    Ledger(case.ledger)
    # chmod does not stop root; the immutable attribute does.
    subprocess.run(["chattr", "+i", str(case.ledger)], check=True)
    try:
        _refused(case, case.run(), "readonly database")
    finally:
        subprocess.run(["chattr", "-i", str(case.ledger)], check=True)


def test_extra_columns_empty_groups_and_clamping_still_publish(
    tmp_path: Path, census_frame: pd.DataFrame
) -> None:
    frame = census_frame.assign(extra=1, sex="Male")  # an undeclared column; no Female rows
    frame.loc[:10, "income"] = 9e9  # outside the declared bounds: clamped, never reported
    case = Case(tmp_path, frame)
    result = case.run()
    assert result.exit_code == 0, result.output
    (run,) = case.published()
    report = (case.out / "census_demo" / run / "report.md").read_text()
    assert "clamp" not in report.lower()
