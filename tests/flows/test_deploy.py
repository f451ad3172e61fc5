"""``dppub deploy`` against a real Prefect server, a process work pool and a worker (no mocked
client), and ``dppub serve``'s run command and Ctrl-C, on the same server.

The test process's server (``prefect_server``), and one work pool and worker for the module: a
deployment is registered once, run once through the exact command ``deploy`` printed, then
refused with run parameters that name another ledger or output folder.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from dppub.dp.ledger import Ledger
from dppub.dp.ledger.summary import spending_summary
from tests.examples import example
from tests.flows.serving import start_serve, stop_group
from tests.prefect_server import PrefectServer

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
POOL = "dppub-test-pool"
DEPLOYMENT = "dppub-publish/census_demo"


@dataclass
class Server:
    api: str
    tmp: Path
    env: dict[str, str]
    """A clean environment: no PREFECT_API_URL, no profile (HOME is empty), own PREFECT_HOME."""


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.load(resp)


def _post(url: str, body: dict[str, Any]) -> Any:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.load(resp)


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, prefect_server: PrefectServer
) -> Iterator[Server]:
    """The test process's Prefect server, with this module's work pool and worker."""
    tmp = tmp_path_factory.mktemp("deploy")
    (tmp / "home").mkdir()
    env = {
        **os.environ,
        "HOME": str(tmp / "home"),
        "PREFECT_HOME": str(tmp / "prefect"),
        "DPPUB_HOME": str(tmp / "dppub"),
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "false",
    }
    env.pop("PREFECT_API_URL", None)
    env.pop("PREFECT_PROFILE", None)
    api = prefect_server.url
    client = {**env, "PREFECT_API_URL": api}
    create: list[str | Path] = [BIN / "prefect", "work-pool", "create", POOL, "--type", "process"]
    done = subprocess.run(create, env=client, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    with (tmp / "worker.log").open("wb") as log:
        worker = subprocess.Popen(  # outside the checkout: it runs the installed package
            [BIN / "prefect", "worker", "start", "--pool", POOL],
            cwd=tmp,
            env={**client, "PREFECT_WORKER_QUERY_SECONDS": "2"},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield Server(api, tmp, env)
    finally:
        stop_group(worker)


def _config(directory: Path, data: Path) -> Path:
    """The demo's dataset, two cheap releases (epsilon 0.5), a schedule that never fires during
    the test; no ``ledger:``: the ledger is ``ledger.sqlite`` beside the config."""
    raw = example("demo.yaml")
    raw["dataset"]["path"] = str(data)
    raw["dataset"]["budget"] = {"epsilon": 10.0}
    raw.pop("anonymize")
    raw.pop("clustering")
    raw["workloads"] = [{**raw["workloads"][2], "epsilon": 0.3}]
    raw["regressions"] = [{**raw["regressions"][0], "epsilon": 0.2}]
    raw["schedule"] = {"cron": "0 0 1 1 *"}
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _dppub(
    *args: str, env: dict[str, str], timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dppub.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@dataclass
class Deployed:
    config: Path
    out: Path
    command: str
    """The command ``dppub deploy`` printed."""


@pytest.fixture(scope="module")
def deployed(server: Server, census_small: Path) -> Deployed:
    # The server is configured the way a user configures Prefect (`prefect config set`): in the
    # active profile of their Prefect home, not in PREFECT_API_URL.
    home = server.tmp / "user"
    (home / ".prefect").mkdir(parents=True)
    (home / ".prefect" / "profiles.toml").write_text(
        f'active = "team"\n\n[profiles.team]\nPREFECT_API_URL = "{server.api}"\n'
    )
    config, out = _config(server.tmp / "cfg", census_small), server.tmp / "out"
    env = {**server.env, "HOME": str(home)}
    env.pop("PREFECT_HOME")
    done = _dppub("deploy", str(config), "--pool", POOL, "--out", str(out), env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    found = re.search(r"to run it now: (.+)$", done.stdout, re.MULTILINE)
    assert found is not None, done.stdout
    assert found.group(1) == f"PREFECT_API_URL={server.api} prefect deployment run {DEPLOYMENT}"
    return Deployed(config, out, found.group(1))


def _trigger(server: Server, command: str) -> dict[str, Any]:
    """Run ``command`` in a shell with no Prefect configuration; wait for the flow run it
    started to finish; its final state as the API reports it."""
    done = subprocess.run(
        command, shell=True, env=server.env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stdout + done.stderr
    run_id = re.search(r"UUID: ([0-9a-f-]{36})", done.stdout)
    assert run_id is not None, done.stdout
    deadline = time.monotonic() + 300
    while True:
        run = _get(f"{server.api}/flow_runs/{run_id.group(1)}")
        if run["state_type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
            return dict(run)
        assert time.monotonic() < deadline, (server.tmp / "worker.log").read_text()[-3000:]
        time.sleep(1)


def test_a_deployed_config_runs_on_the_worker_with_its_report_in_the_ui(
    server: Server, deployed: Deployed
) -> None:
    deployment = _get(f"{server.api}/deployments/name/{DEPLOYMENT}")
    assert deployment["work_pool_name"] == POOL
    assert deployment["entrypoint"] == "dppub.flows.publish.publish"  # the installed package's
    assert deployment["pull_steps"] == []
    assert [s["schedule"]["cron"] for s in deployment["schedules"]] == ["0 0 1 1 *"]
    assert deployment["parameters"] == {
        "config_path": str(deployed.config),
        "ledger_path": str(deployed.config.parent / "ledger.sqlite"),
        "out_dir": str(deployed.out),
    }

    run = _trigger(server, deployed.command)
    assert run["state_type"] == "COMPLETED", (server.tmp / "worker.log").read_text()[-3000:]
    runs = sorted((deployed.out / "census_demo").glob("2*"))
    assert len(runs) == 1 and (runs[0] / "manifest.json").exists()
    spent = spending_summary(Ledger(deployed.config.parent / "ledger.sqlite"))["census_demo"]
    assert spent["lifetime_spent_epsilon"] == pytest.approx(0.5) and spent["runs"] == 1

    artifacts = _post(
        f"{server.api}/artifacts/filter", {"flow_runs": {"id": {"any_": [run["id"]]}}}
    )
    report = [a for a in artifacts if a["key"].endswith("-report")]
    assert len(report) == 1 and report[0]["type"] == "markdown"
    # The report itself, readable in the UI: report.md as published.
    assert report[0]["data"] == (runs[0] / "report.md").read_text()


def test_a_run_parameter_cannot_move_the_ledger_or_the_output(
    server: Server, deployed: Deployed
) -> None:
    ledger = deployed.config.parent / "ledger.sqlite"
    before = spending_summary(Ledger(ledger))["census_demo"]
    published = sorted((deployed.out / "census_demo").glob("*"))
    other, elsewhere = server.tmp / "other.sqlite", server.tmp / "elsewhere"
    for param in (f"ledger_path={other}", f"out_dir={elsewhere}"):
        run = _trigger(server, f"{deployed.command} --param {param}")
        assert run["state_type"] == "FAILED", param
        assert _logged(server, run["id"], "never run parameters"), param
    assert not other.exists() and not elsewhere.exists()  # nothing opened or written there
    assert spending_summary(Ledger(ledger))["census_demo"] == before
    assert sorted((deployed.out / "census_demo").glob("*")) == published


def test_deploy_without_a_prefect_server_says_to_set_one(
    server: Server, census_small: Path
) -> None:
    config = _config(server.tmp / "nowhere", census_small)
    done = _dppub("deploy", str(config), "--pool", POOL, env=server.env)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("dppub: error: ")
    assert "set PREFECT_API_URL" in done.stderr
    assert not (config.parent / "ledger.sqlite").exists()


@pytest.mark.parametrize("after", [0.0, 2.0], ids=["starting", "polling"])
def test_serve_prints_its_run_command_and_ctrl_c_exits_130(
    server: Server, census_small: Path, after: float
) -> None:
    # Ctrl-C while the runner is still starting was lost (asyncio's cancel of the main task
    # absorbed by Prefect's start-up: serve went on until SIGTERM), and once it polls.
    config = _config(server.tmp / f"serve-{after}", census_small)
    log = server.tmp / f"serve-{after}.log"
    env = {**server.env, "PREFECT_API_URL": server.api}
    proc = start_serve([str(config), "--out", str(server.tmp)], cwd=ROOT, env=env, log=log)
    try:
        deadline = time.monotonic() + 240
        while "deployment run" not in log.read_text():  # serving (old or new message)
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        time.sleep(after)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the whole group
        code = proc.wait(timeout=60)
    finally:
        stop_group(proc)
    text = log.read_text()
    assert code == 130, text[-3000:]
    assert text.splitlines()[-1] == "dppub: error: interrupted by SIGINT; serve stopped"
    assert "Traceback" not in text and "FATAL" not in text
    assert (
        f"to run it now: PREFECT_API_URL={server.api} prefect deployment run {DEPLOYMENT}" in text
    )


def test_prefect_yaml_registers_what_dppub_deploy_would(server: Server) -> None:
    # Last in the module: it re-registers the demo's deployment name.
    from dppub.dp.pipeline.plan import load_plan

    done = subprocess.run(
        [BIN / "prefect", "--no-prompt", "deploy", "--all", "--pool", POOL],
        cwd=ROOT,
        env={**server.env, "PREFECT_API_URL": server.api, "PWD": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    deployment = _get(f"{server.api}/deployments/name/{DEPLOYMENT}")
    assert deployment["entrypoint"] == "dppub.flows.publish.publish"
    assert deployment["pull_steps"] == [] and deployment["work_pool_name"] == POOL
    assert deployment["parameters"] == {
        "config_path": str(ROOT / "configs" / "demo.yaml"),
        "ledger_path": str(ROOT / ".state" / "ledger.sqlite"),
        "out_dir": str(ROOT / ".state" / "published"),
    }
    sched = load_plan(ROOT / "configs" / "demo.yaml").config.schedule
    assert sched is not None
    [registered] = [s["schedule"] for s in deployment["schedules"]]
    assert (registered["cron"], registered["timezone"]) == (sched.cron, sched.timezone)


def _logged(server: Server, flow_run: str, text: str, wait: float = 60.0) -> bool:
    """Whether a log line of the run says ``text``: a run's logs reach the server in batches,
    after its state may already say FAILED, so wait for them (up to ``wait`` seconds)."""
    deadline = time.monotonic() + wait
    while True:
        logs = _post(f"{server.api}/logs/filter", {"logs": {"flow_run_id": {"any_": [flow_run]}}})
        if any(text in entry["message"] for entry in logs):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(1.0)
