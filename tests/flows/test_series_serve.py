"""A monthly series under ``dppub serve``: the eleven months before the one due now are
published by one run by hand (``--period``, catching up), then the scheduler's own run
publishes the month due by the clock -- the twelfth of the horizon -- and its next firings are
refused with one line, charging nothing (a minute or more of wall time: a Prefect server
starts; tests/dp/pipeline/kinds/test_series_year.py runs the twelve months one by one)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from dppub.api import publish
from dppub.dp.budget import zcdp_to_dp
from dppub.dp.ledger import Ledger
from dppub.dp.ledger.summary import spending_summary
from dppub.dp.pipeline.kinds.series.series_calendar import due_label, label_of, ordinal
from tests.dp.pipeline.kinds.series_setup import _generator, series_config

ROOT = Path(__file__).resolve().parents[2]


def _where(ledger: Path, out: Path) -> list[str]:
    return ["--ledger", str(ledger), "--out", str(out)]


def test_the_scheduler_publishes_the_month_due_and_refuses_it_twice(tmp_path: Path) -> None:
    due = due_label("month")
    first = ordinal(due, "month") - 11
    start = label_of(first, "month")
    frame = _generator().make_admissions(
        5, patients=300, months=12, start=(first // 12, first % 12 + 1)
    )
    data = tmp_path / "admissions.parquet"
    frame.to_parquet(data, index=False)
    config = series_config(tmp_path, data, start=start)
    raw = yaml.safe_load(config.read_text())
    raw["schedule"] = {"interval_seconds": 5}  # the shipped config's cron fires monthly
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    ledger, out, log = tmp_path / "ledger.sqlite", tmp_path / "out", tmp_path / "serve.log"
    caught = publish(config, ledger=ledger, out=out, period=label_of(first + 10, "month"))
    assert caught.cost.epsilon > 0  # by hand, up to the month before the one due
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp_path / "prefect"),
        "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "5",
        "PREFECT_RUNNER_POLL_FREQUENCY": "2",
    }
    env.pop("PREFECT_API_URL", None)
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dppub.cli", "serve", str(config), *_where(ledger, out)],
            cwd=tmp_path,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline:
                runs = sorted(p for p in (out / "admissions").glob("2*") if p.is_dir())
                if len(runs) == 2 and "a period is published once" in log.read_text():
                    break
                time.sleep(1)
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
    text = log.read_text()
    runs = sorted(p for p in (out / "admissions").glob("2*") if (p / "manifest.json").exists())
    assert len(runs) == 2, text[-3000:]
    served = json.loads((runs[-1] / "admissions_monthly" / "release.json").read_text())
    assert served["details"]["period"] == due
    assert served["details"]["periods"][0] == start and len(served["details"]["periods"]) == 12
    assert f"period {due} was published (up to {due}); a period is published once" in text
    (summary,) = spending_summary(Ledger(str(ledger))).values()
    # Firings with nothing due, and firings the server started at once (a backlog) that found
    # each other pending, were aborted at no cost: nothing but the 12 months is spent, and 12
    # of 12 months add up to the horizon's rho exactly.
    assert (summary["runs"], summary["charged_runs"]) == (2, 0)
    assert summary["spent_epsilon"] == pytest.approx(zcdp_to_dp(0.1, 1e-7), rel=1e-9)
