import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]

# `dppub run` is recorded in Prefect only where a Prefect API is configured (tests/conftest.py
# gives the session an empty PREFECT_HOME, so no profile configures one): the tests that cover
# the Prefect path ask for `prefect_server`; every other run here runs without Prefect.
os.environ.pop("PREFECT_API_URL", None)


def small_config(directory: Path, data: Path, *, budget: float = 4.0, **overrides: Any) -> Path:
    """The demo config, pointed at ``data`` (small sample) and with smaller domains."""
    raw = example("demo.yaml")
    raw["dataset"]["path"] = str(data)
    raw["dataset"]["budget"] = {"epsilon": budget, "delta": 0.0}
    raw["workloads"][1]["attributes"][0]["bins"] = 16
    raw.pop("schedule")
    raw.update(overrides)
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def publish_here(config: str | Path, ledger: str | Path, out: str | Path) -> str:
    """A publication opened as ``dppub run`` opens one, published without Prefect (what a run
    does when no Prefect API is configured); returns the run id."""
    from dppub.dp.pipeline.plan import load_plan
    from dppub.flows.runner import dask_cluster
    from dppub.run import publish_locally

    plan = load_plan(config)
    with plan.open_run(ledger, out) as run:
        return publish_locally(plan, run, dask_cluster(plan)).run_id


@pytest.fixture
def config_factory(tmp_path: Path, census_small: Path):  # type: ignore[no-untyped-def]
    def make(**kwargs: Any) -> Path:
        return small_config(tmp_path, census_small, **kwargs)

    return make


from tests.examples import example  # noqa: E402
from tests.pg import postgres  # noqa: E402, F401 (the fixture)


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_at(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh ledger location on each back end: a SQLite file, or a PostgreSQL schema."""
    if request.param == "sqlite":
        return str(tmp_path / "ledger.sqlite")
    return str(request.getfixturevalue("postgres").schema_url())


class PrefectServer(NamedTuple):
    url: str
    """Its API URL (what PREFECT_API_URL names)."""
    home: Path
    """Its PREFECT_HOME: its database."""


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrefectServer]:
    """A real ``prefect server start`` (full services: task runs, artifacts, events are
    recorded) on a free loopback port, with its own home. Session-scoped: one per test worker
    that asks for it (the tests that need it are in few files)."""
    home = tmp_path_factory.mktemp("prefect-server")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/api"
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env |= {"PREFECT_HOME": str(home), "PREFECT_UI_ENABLED": "false"}
    command = [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1"]
    with (home / "server.log").open("wb") as log:
        server = subprocess.Popen([*command, "--port", str(port)], stdout=log, stderr=log, env=env)
    try:
        deadline = time.monotonic() + 300  # a loaded 2-core machine: up to a minute or more
        while True:
            assert server.poll() is None, (home / "server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the Prefect server did not start"
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        yield PrefectServer(url, home)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
