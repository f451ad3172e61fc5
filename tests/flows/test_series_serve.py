"""A monthly series under ``dppub serve``: twelve scheduled runs, each scheduled on the first of
the month after its period (the shipped cron, ``0 3 1 * *``), are executed by serve's runner one
after another -- the path every scheduled run takes -- and each publishes the month due at its
scheduled time; a run scheduled now, with everything published, is refused with one line and
charges nothing. (A Prefect server starts: a minute or two of wall time.
tests/dp/pipeline/kinds/test_series_year.py runs the twelve months by hand, with ``--period``.)
"""

from __future__ import annotations

import json
import os
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID

import pytest
import yaml

from dppub.dp.budget import zcdp_to_dp
from dppub.dp.ledger import Ledger
from dppub.dp.ledger.summary import spending_summary
from dppub.dp.pipeline.kinds.series.series_calendar import due_label, label_of, ordinal
from tests.dp.pipeline.kinds.series_setup import _generator, series_config
from tests.flows.serving import start_serve, stop_group

SERVING = re.compile(r"to run it now: PREFECT_API_URL=(\S+) prefect deployment run (\S+)")


def _scheduled_on_the_first_after(month: int) -> datetime:
    """03:00 UTC on the first day of the month after ``month`` (an ordinal): when the cron
    ``0 3 1 * *`` fires to publish it."""
    after = month + 1
    return datetime(after // 12, after % 12 + 1, 1, 3, 0, tzinfo=UTC)


def _run_scheduled_at(url: str, deployment: str, when: datetime, log: Path) -> str:
    """One flow run of the served deployment, scheduled at ``when`` (in the past: the runner
    takes it at its next poll), waited for; its final state's type."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.states import Scheduled

    with temporary_settings(updates={PREFECT_API_URL: url}), get_client(sync_client=True) as c:
        served = c.read_deployment_by_name(deployment)
        run = c.create_flow_run_from_deployment(served.id, state=Scheduled(scheduled_time=when))
        deadline = time.monotonic() + 120
        while True:
            state = c.read_flow_run(UUID(str(run.id))).state
            if state is not None and state.is_final():
                return state.type.value
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)


def test_served_runs_publish_the_month_due_at_their_scheduled_time(tmp_path: Path) -> None:
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
    raw["schedule"] = {"cron": "0 3 1 * *"}  # the shipped config's: next firing next month
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    ledger, out, log = tmp_path / "ledger.sqlite", tmp_path / "out", tmp_path / "serve.log"
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp_path / "prefect"),
        "PREFECT_RUNNER_POLL_FREQUENCY": "1",
    }
    env.pop("PREFECT_API_URL", None)
    where = ["--ledger", str(ledger), "--out", str(out)]
    states: list[str] = []
    proc = start_serve([str(config), *where], cwd=tmp_path, env=env, log=log)
    try:
        deadline = time.monotonic() + 240
        while (serving := SERVING.search(log.read_text())) is None:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
        url, deployment = serving.groups()
        for month in range(first, first + 12):
            when = _scheduled_on_the_first_after(month)
            states.append(_run_scheduled_at(url, deployment, when, log))
        states.append(_run_scheduled_at(url, deployment, datetime.now(UTC), log))
    finally:
        stop_group(proc)
    text = log.read_text()
    assert states[:12] == ["COMPLETED"] * 12, text[-3000:]
    assert states[12] != "COMPLETED"  # refused: nothing left to publish
    runs = sorted(p for p in (out / "admissions").glob("2*") if (p / "manifest.json").exists())
    periods = [
        json.loads((r / "admissions_monthly" / "release.json").read_text())["details"]["period"]
        for r in runs
    ]
    assert periods == [label_of(m, "month") for m in range(first, first + 12)], text[-3000:]
    assert f"period {due} was published (up to {due}); a period is published once" in text
    (summary,) = spending_summary(Ledger(str(ledger))).values()
    # 13 runs, the last aborted at no cost; 12 of 12 months add up to the horizon's rho.
    assert summary["runs"] == 12
    assert summary["spent_epsilon"] == pytest.approx(zcdp_to_dp(0.1, 1e-7), rel=1e-9)
