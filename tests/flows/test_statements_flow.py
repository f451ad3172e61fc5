"""Through ``dppub run``: under a privacy unit (m = 10) the report never states a total
smaller than what is proven, and every release describes itself at the unit level."""

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from dppub import cli
from dppub.dp.budget import zcdp_of_pure
from tests.examples import example

ROOT = Path(__file__).resolve().parents[2]


def _config(tmp: Path, data: Path, m: int) -> Path:
    raw: dict[str, Any] = example("demo.yaml")
    raw.pop("schedule")
    raw.pop("anonymize")
    raw["dataset"].update(path=str(data), privacy_unit="household", max_rows_per_unit=m)
    raw["dataset"]["columns"]["household"] = {"type": "string"}
    raw["dataset"]["budget"] = {"epsilon": 100.0, "delta": 1e-3}
    raw["workloads"] = [
        {
            "name": "age_by_sex",
            "epsilon": 0.5,
            "delta": 1e-6,
            "noise": "gaussian",
            "attributes": [{"column": "age", "level": 2}, {"column": "sex"}],
            "workload": "marginals",
            "marginal_k": 2,
        }
    ]
    linear = [
        {"name": f"linear{i}", "epsilon": 0.5, "target": "income", "features": ["age", "hours"]}
        for i in range(5)
    ]
    logistic = {
        "name": "high_income",
        "model": "logistic",
        "method": "functional",
        "epsilon": 0.15,
        "target": "income",
        "threshold": 75000,
        "features": ["age", "hours"],
    }
    raw["regressions"] = [*linear, logistic]
    raw["clustering"] = [{"name": "km", "epsilon": 0.1, "features": ["age", "hours"], "k": 3}]
    path = tmp / "units.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.mark.slow
def test_a_unit_run_states_no_total_below_basic_composition_and_its_unit(
    tmp_path: Path, census_frame: pd.DataFrame
) -> None:
    m = 10
    data = tmp_path / "households.parquet"
    census_frame.assign(household=[f"h{i % 400}" for i in range(len(census_frame))]).to_parquet(
        data, index=False
    )
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "out"
    args = ["run", str(_config(tmp_path, data, m)), "--ledger", str(ledger), "--out", str(out)]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    folder = out / "census_demo" / result.stdout.strip().splitlines()[-1]
    manifest = json.loads((folder / "manifest.json").read_text())
    basic = manifest["total_epsilon"]
    assert basic == pytest.approx(0.5 + 5 * 0.5 + 0.15 + 0.1)
    report = (folder / "report.md").read_text()
    (line,) = [x for x in report.splitlines() if "zCDP accounting" in x]
    # Every epsilon the zCDP line states is proven: the pure releases' unit-level rho,
    # epsilon^2 / 2, sums to more than basic composition here, so basic composition is stated.
    stated = [float(v) for v in re.findall(r"epsilon = ([0-9.eE+-]+)", line)]
    assert stated and all(v >= basic * (1 - 1e-9) for v in stated), line
    assert f"(epsilon = {basic:.4g}, delta" in line
    for i in range(5):
        details = json.loads((folder / f"linear{i}" / "release.json").read_text())["details"]
        assert details["zcdp_rho"] == pytest.approx(zcdp_of_pure(0.5))  # unit-level rho
    # Every release describes itself at the unit level, with its unit and bound.
    for name, eps in (("linear0", 0.5), ("high_income", 0.15), ("km", 0.1)):
        model = json.loads((folder / name / "model.json").read_text())
        assert model["epsilon"] == eps and model["privacy_unit"]["max_rows_per_unit"] == m
        assert "household" in model["neighbours"] and "one record" not in model["neighbours"]
    assert json.loads((folder / "high_income" / "model.json").read_text())["outcome"] == {
        "column": "income",
        "threshold": 75000,
        "y=1": "income > 75000",
    }
    assert "y = 1 means `income > 75000`" in report
