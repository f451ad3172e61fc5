"""``keys: private`` through ``dppub run`` (Prefect): a table publishes only real keys, and a
table without delta is refused in one line. (A ``tables:`` item walked by Prefect once failed
every run: the config model had a field named ``keys``, and ``dict(model)`` calls ``keys()``.)"""

import logging
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import yaml
from prefect.testing.utilities import prefect_test_harness
from typer.testing import CliRunner

from dppub.flows import cli
from dppub.flows.server import prefect_env
from tests.dp.pipeline.kinds.test_tables_private import BIG, config, visits

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def harness() -> Iterator[None]:
    raise_exceptions, logging.raiseExceptions = logging.raiseExceptions, False
    with prefect_test_harness(server_startup_timeout=120):
        prefect_env()
        yield
    logging.raiseExceptions = raise_exceptions


def test_dppub_run_publishes_a_private_keys_table(tmp_path: Path) -> None:
    # False-failure rate < 2e-5: see tests/dp/pipeline/kinds/test_tables_private.py.
    cfg, out = config(tmp_path, visits(tmp_path)), tmp_path / "out"
    args = ["run", str(cfg), "--ledger", str(tmp_path / "l.sqlite"), "--out", str(out)]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    (run,) = [p for p in (out / "visits").iterdir() if p.name[0].isdigit()]
    answers = pd.read_csv(run / "visits_by_site" / "answers.csv", dtype={"site": str})
    assert set(answers["site"]) == set(BIG)


def test_dppub_run_refuses_private_keys_without_delta(tmp_path: Path) -> None:
    cfg = config(tmp_path, visits(tmp_path))
    raw = yaml.safe_load(cfg.read_text())
    del raw["tables"][0]["delta"]
    cfg.write_text(yaml.safe_dump(raw))
    result = CliRunner().invoke(cli.app, ["run", str(cfg), "--ledger", str(tmp_path / "l")])
    assert result.exit_code == 2
    assert "keys: private needs a delta > 0, got 0.0" in result.output
