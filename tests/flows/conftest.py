import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]

# `dppub run` is recorded in Prefect only where a Prefect API is configured (tests/conftest.py
# gives the session an empty PREFECT_HOME, so no profile configures one): the tests that cover
# the Prefect path ask for `prefect_server`; every other run here runs without Prefect.
os.environ.pop("PREFECT_API_URL", None)

ConfigFactory = Callable[..., Path]
"""The ``config_factory`` fixture: :func:`small_config`'s keywords -> the config's path."""


def small_config(
    directory: Path, data: Path, *, budget: float = 4.0, light: bool = False, **overrides: Any
) -> Path:
    """The demo config, pointed at ``data`` (small sample) and with smaller domains. ``light``:
    one workload and one regression (epsilon 0.5 in all, a third of the demo's run time), for
    tests about what surrounds the releases (budget, ledger, commands), not the releases."""
    raw = example("demo.yaml")
    raw["dataset"]["path"] = str(data)
    raw["dataset"]["budget"] = {"epsilon": budget, "delta": 0.0}
    raw["workloads"][1]["attributes"][0]["bins"] = 16
    raw.pop("schedule")
    if light:
        for key in ("anonymize", "clustering"):
            raw.pop(key)
        raw["workloads"] = [{**raw["workloads"][2], "epsilon": 0.3}]  # age_band_by_sex
        raw["regressions"] = [{**raw["regressions"][0], "epsilon": 0.2}]  # income_model
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
def config_factory(tmp_path: Path, census_small: Path) -> ConfigFactory:
    def make(**kwargs: Any) -> Path:
        return small_config(tmp_path, census_small, **kwargs)

    return make


from tests.examples import example  # noqa: E402
from tests.prefect_server import PrefectServer as PrefectServer  # noqa: E402 (for the tests)


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_at(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh ledger location on each back end: a SQLite file, or a PostgreSQL schema."""
    if request.param == "sqlite":
        return str(tmp_path / "ledger.sqlite")
    return str(request.getfixturevalue("postgres").schema_url())
