"""``dppub plan`` says whether the ledger would take the run, with ``run``'s own refusal."""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner, Result

from dppub import cli
from dppub.dp.budget import PrivacyCost
from dppub.dp.ledger import Ledger
from dppub.dp.pipeline.plan import load_config
from tests.flows.conftest import small_config

DEMO_COST = 1.5  # what the demo plan costs


def _plan(config: Path, ledger: Path, *more: str) -> Result:
    return CliRunner().invoke(cli.app, ["plan", str(config), "--ledger", str(ledger), *more])


def _spend(config: Path, ledger: Path, epsilon: float) -> None:
    """A run of ``epsilon`` the ledger recorded (reserved: its hold counts as spent)."""
    cfg = load_config(config)
    Ledger(ledger).reserve(
        run_id="earlier",
        data=cfg.data_identity,
        policy=cfg.budget_policy,
        cost=PrivacyCost(epsilon=epsilon, delta=0.0),
        config_hash="x",
    )


def _run(config: Path, ledger: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """``dppub run``, in a process of its own, as a user runs it."""
    command = [sys.executable, "-m", "dppub.cli", "run", str(config)]
    return subprocess.run(
        [*command, "--ledger", str(ledger), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def _refusal(result: Result | subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("dppub: error:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_plan_over_the_remaining_budget_exits_3_and_says_why(
    tmp_path: Path, census_small: Path
) -> None:
    config, ledger = small_config(tmp_path, census_small, budget=2.0), tmp_path / "l.sqlite"
    _spend(config, ledger, 1.0)  # 1.0 left, the plan needs 1.5
    done = _plan(config, ledger)
    assert done.exit_code == 3, done.output
    assert "remaining before this run: epsilon=1 of 2" in done.stdout  # the plan is still shown
    assert "budget exceeded for dataset 'census_demo'" in _refusal(done)
    as_json = _plan(config, ledger, "--json")
    assert as_json.exit_code == 3
    payload = json.loads(as_json.stdout)
    assert payload["fits"] is False
    assert payload["refusal"] in _refusal(as_json)


def test_plan_that_fits_exits_0(tmp_path: Path, census_small: Path) -> None:
    config, ledger = small_config(tmp_path, census_small, budget=4.0), tmp_path / "l.sqlite"
    _spend(config, ledger, 2.0)  # 2.0 left, the plan needs 1.5
    done = _plan(config, ledger, "--json")
    assert done.exit_code == 0, done.output
    payload = json.loads(done.stdout)
    assert payload["fits"] is True and "refusal" not in payload
    assert payload["remaining_epsilon"] == 2.0


def test_plan_refuses_a_budget_the_ledger_was_not_amended_to(
    tmp_path: Path, census_small: Path
) -> None:
    config, ledger = small_config(tmp_path, census_small, budget=4.0), tmp_path / "l.sqlite"
    _spend(config, ledger, 1.0)
    raw = yaml.safe_load(config.read_text())
    raw["dataset"]["budget"]["epsilon"] = 9.0
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    done = _plan(config, ledger, "--json")
    # old code: exit 3 (the budget's code), where run exits 2 for a config the ledger disagrees
    # with
    run = _run(config, ledger, tmp_path / "out")
    assert (done.exit_code, _refusal(done)) == (run.returncode, _refusal(run)) == (2, _refusal(run))
    line = _refusal(done)
    assert "differs from what the ledger recorded" in line and "9" in line
    payload = json.loads(done.stdout)
    assert payload["fits"] is False
    assert payload["budget_epsilon"] == 4.0  # the recorded budget is the one in force
    assert payload["remaining_epsilon"] == 3.0


def test_plan_without_a_ledger_fits_against_the_whole_budget_and_creates_none(
    tmp_path: Path, census_small: Path
) -> None:
    ledger = tmp_path / "l.sqlite"
    fits = small_config(tmp_path, census_small, budget=DEMO_COST)
    done = _plan(fits, ledger, "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["fits"] is True
    too_small = small_config(tmp_path, census_small, budget=1.0)
    done = _plan(too_small, ledger, "--json")
    assert done.exit_code == 3, done.output
    assert json.loads(done.stdout)["fits"] is False
    assert "budget exceeded" in _refusal(done)
    assert not ledger.exists()


def test_version_prints_the_installed_version() -> None:
    from importlib.metadata import version

    done = CliRunner().invoke(cli.app, ["--version"])
    assert done.exit_code == 0, done.output
    assert done.stdout == f"dppub {version('dppub')}\n"


def _missing_file(data: Path, tmp_path: Path) -> Path:
    return tmp_path / "nowhere.parquet"


def _without_hours(data: Path, tmp_path: Path) -> Path:
    path = tmp_path / "no-hours.parquet"
    pd.read_parquet(data).drop(columns=["hours"]).to_parquet(path)
    return path


def _age_as_text(data: Path, tmp_path: Path) -> Path:
    path = tmp_path / "age-text.parquet"
    frame = pd.read_parquet(data)
    frame.assign(age=frame["age"].astype(str)).to_parquet(path)
    return path


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (_missing_file, "dataset not found: "),
        (_without_hours, "missing declared column(s) ['hours']"),
        (_age_as_text, "column 'age' should be int, found "),
    ],
    ids=["no data file", "a declared column missing", "a column of another type"],
)
def test_plan_refuses_the_input_run_refuses_with_runs_line_and_exit_code(
    tmp_path: Path, census_small: Path, make: Any, says: str
) -> None:
    # old code: plan exited 0 ("fits": true); run then refused with exit 2.
    config = small_config(tmp_path, census_small)
    raw = yaml.safe_load(config.read_text())
    raw["dataset"]["path"] = str(make(census_small, tmp_path))
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    ledger = tmp_path / "l.sqlite"
    done = _plan(config, ledger, "--json")
    run = _run(config, ledger, tmp_path / "out")
    assert run.returncode == 2 and says in _refusal(run), run.stderr
    assert (done.exit_code, _refusal(done)) == (run.returncode, _refusal(run))
    payload = json.loads(done.stdout)  # the plan is still shown
    assert payload["fits"] is False and payload["refusal"] in _refusal(done)
    assert not ledger.exists() and not (tmp_path / "out" / "census_demo").exists()


def test_plan_shows_a_k_anonymous_release_as_not_differentially_private(
    tmp_path: Path, census_small: Path
) -> None:
    # old code: "k_anonymous_table  k-anonymity  epsilon=0  delta=0", which reads as free
    config = small_config(tmp_path, census_small)
    done = _plan(config, tmp_path / "l.sqlite")
    assert done.exit_code == 0, done.output
    (line,) = [ln for ln in done.stdout.splitlines() if "k_anonymous_table" in ln]
    assert "not differentially private" in line and "epsilon=" not in line
    dp_lines = [ln for ln in done.stdout.splitlines() if " workload " in ln]
    assert dp_lines and all("epsilon=" in ln for ln in dp_lines)
    as_json = json.loads(_plan(config, tmp_path / "l.sqlite", "--json").stdout)
    kanon = next(r for r in as_json["releases"] if r["kind"] == "k-anonymity")
    assert (kanon["epsilon"], kanon["delta"]) == (0.0, 0.0)  # the keys and values --json kept
