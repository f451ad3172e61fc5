"""``dppub plan|run CONFIG --period P`` for a series, as a user runs them (real processes):
the period is published once; a second attempt is one line, exit 2, nothing spent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dppub.dp.ledger import Ledger
from dppub.dp.ledger.summary import spending_summary
from tests.dp.pipeline.kinds.series_setup import admissions, series_config

pytestmark = pytest.mark.slow  # real processes

ROOT = Path(__file__).resolve().parents[2]


def _dppub(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    return subprocess.run(
        [sys.executable, "-m", "dppub.cli", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def test_run_and_plan_take_the_period(tmp_path: Path) -> None:
    config = series_config(tmp_path, admissions(tmp_path, patients=100))
    out = tmp_path / "out"
    shown = _dppub("plan", config, "--period", "2026-02", "--json")
    assert shown.returncode == 0, shown.stderr
    (release,) = json.loads(shown.stdout)["releases"]
    assert release["period"] == "2026-02" and release["svd_bound"] > 0
    done = _dppub("run", config, "--period", "2026-02", "--out", out)
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip()
    assert (out / "admissions" / run_id / "admissions_monthly" / "figures.csv").is_file()
    spent = spending_summary(Ledger(str(tmp_path / "ledger.sqlite")))["admissions"]
    again = _dppub("run", config, "--period", "2026-01", "--out", out)
    assert again.returncode == 2
    errors = [ln for ln in again.stderr.splitlines() if ln.startswith("dppub: error:")]
    assert errors == [
        "dppub: error: series 'admissions_monthly': period 2026-01 was published (up to "
        "2026-02); a period is published once: nothing reserved"
    ]
    after = spending_summary(Ledger(str(tmp_path / "ledger.sqlite")))["admissions"]
    assert after["lifetime_spent_epsilon"] == spent["lifetime_spent_epsilon"]
