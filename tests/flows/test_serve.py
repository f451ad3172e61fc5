"""``dppub serve``: a short interval schedule fires repeatedly; a per-minute budget refuses
cleanly inside a minute and resumes when the next minute opens (~1-2 minutes of wall time, on
the Prefect server serve starts for itself); and runs triggered through the API of a configured
server (the test process's) cannot name another ledger."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

from dppub.dp.ledger import Ledger
from dppub.dp.ledger.summary import spending_summary
from tests.examples import example
from tests.flows.serving import start_serve, stop_group
from tests.prefect_server import PrefectServer

ROOT = Path(__file__).resolve().parents[2]


def test_schedule_fires_refuses_and_resumes_with_the_next_period(
    tmp_path: Path, census_small: Path
) -> None:
    raw = example("demo.yaml")
    raw["dataset"]["path"] = str(census_small)
    # One run per minute fits the cap; the lifetime total is far away.
    raw["dataset"]["budget"] = {"epsilon": 10.0, "per": "minute", "cap": {"epsilon": 0.7}}
    raw.pop("anonymize")
    raw.pop("clustering")
    raw["workloads"] = [{**raw["workloads"][2], "epsilon": 0.3}]
    raw["regressions"] = [{**raw["regressions"][0], "epsilon": 0.4}]  # 0.3 + 0.4 = 0.7
    raw["schedule"] = {"interval_seconds": 5}
    config = tmp_path / "serve.yaml"
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    ledger, out, log = tmp_path / "ledger.sqlite", tmp_path / "out", tmp_path / "serve.log"
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp_path / "prefect"),
        "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "5",
        "PREFECT_RUNNER_POLL_FREQUENCY": "2",
    }
    env.pop("PREFECT_API_URL", None)
    args = [str(config), "--ledger", str(ledger), "--out", str(out)]
    proc = start_serve(args, cwd=tmp_path, env=env, log=log)
    runs: list[Path] = []
    try:
        deadline = time.monotonic() + 360  # generous: the suite loads both cores
        while time.monotonic() < deadline:
            d = out / "census_demo"
            runs = sorted(p for p in d.glob("2*") if (p / "manifest.json").exists())
            if len(runs) >= 2 and "the next period opens" in log.read_text():
                break
            time.sleep(1)
    finally:
        stop_group(proc)
    text = log.read_text()
    assert len(runs) >= 2, text[-3000:]
    periods = [json.loads((r / "manifest.json").read_text())["budget_period"] for r in runs]
    assert len(set(periods)) == len(periods)  # each run in its own minute: it resumed
    assert "the next period opens" in text  # and refused cleanly in between
    # Refusals are one line each; Prefect's runner prints its own tracebacks when it is
    # stopped with SIGTERM, so only the log before shutdown is checked.
    assert "Traceback" not in text.split("SIGTERM received")[0]
    for p in spending_summary(Ledger(ledger))["census_demo"]["periods"].values():
        assert p["spent_epsilon"] <= 0.7 + 1e-12


_TRIGGER = """
import json, sys
from prefect.deployments import run_deployment
for params in json.loads(sys.argv[1]):  # one process (Prefect's import is seconds), in turn
    run = run_deployment(
        "dppub-publish/served_demo", parameters=params, timeout=240, poll_interval=1
    )
    print(run.state.type.value, flush=True)
"""


def test_a_served_run_cannot_be_pointed_at_another_ledger(
    tmp_path: Path, census_small: Path, prefect_server: PrefectServer
) -> None:
    # Anyone who reaches the Prefect API can start a deployment run with parameters: they must
    # not buy a fresh budget by naming another ledger or output folder. Served through the
    # test process's server (PREFECT_API_URL): the test above covers serve's own server. Its
    # own dataset name: test_deploy.py registers census_demo's deployment on the same server.
    raw = example("demo.yaml")
    raw["dataset"]["name"] = "served_demo"
    raw["dataset"]["path"] = str(census_small)
    raw["dataset"]["budget"] = {"epsilon": 10.0}
    raw.pop("anonymize")
    raw.pop("clustering")
    raw["workloads"] = [{**raw["workloads"][2], "epsilon": 0.3}]
    raw["regressions"] = [{**raw["regressions"][0], "epsilon": 0.2}]
    raw["schedule"] = {"cron": "0 0 1 1 *"}  # never fires during the test: runs are triggered
    config = tmp_path / "serve.yaml"
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    out, log = tmp_path / "out", tmp_path / "serve.log"
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect"), "DPPUB_HOME": str(tmp_path)}
    env["PREFECT_API_URL"] = prefect_server.url
    env["PREFECT_RUNNER_POLL_FREQUENCY"] = "1"  # a triggered run starts within a second
    proc = start_serve([str(config), "--out", str(out)], cwd=ROOT, env=env, log=log)
    try:
        deadline = time.monotonic() + 240
        while "deployment run" not in log.read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()[-3000:]
            time.sleep(1)
        assert "Prefect server for the schedules" not in log.read_text()  # the configured one
        client = env

        other, elsewhere = tmp_path / "other.sqlite", tmp_path / "elsewhere"
        runs = [{"ledger_path": str(other), "out_dir": str(elsewhere)}, {"ledger_path": str(other)}]
        runs.append({})  # the registered run
        done = subprocess.run(
            [sys.executable, "-c", _TRIGGER, json.dumps(runs)],
            env={**client, "PREFECT_HOME": str(tmp_path / "client")},
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        # Refused, refused, and the registered run still works.
        assert done.stdout.split()[-3:] == ["FAILED", "FAILED", "COMPLETED"], done.stdout
    finally:
        stop_group(proc)
    text = log.read_text()
    assert "never run parameters" in text
    assert not other.exists() and not elsewhere.exists()  # nothing opened or written there
    # The registered run spent in the config's ledger (ledger.sqlite beside the config).
    spent = spending_summary(Ledger(tmp_path / "ledger.sqlite"))["served_demo"]
    assert spent["lifetime_spent_epsilon"] == 0.5 and spent["runs"] == 1
    assert len(list((out / "served_demo").glob("2*"))) == 1
