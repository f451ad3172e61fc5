"""``keys: private`` through ``dppub run`` (Prefect): a table publishes only real keys, and a
table without delta is refused in one line. (A ``tables:`` item walked by Prefect once failed
every run: the config model had a field named ``keys``, and ``dict(model)`` calls ``keys()``.)"""

from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from dppub import cli
from tests.dp.pipeline.kinds.test_tables_private import BIG, config, visits
from tests.flows.conftest import PrefectServer
from tests.flows.test_prefect_path import _dppub

pytestmark = pytest.mark.slow


def test_dppub_run_publishes_a_private_keys_table(
    tmp_path: Path, prefect_server: PrefectServer
) -> None:
    # False-failure rate < 2e-5: see tests/dp/pipeline/kinds/test_tables_private.py.
    cfg, out = config(tmp_path, visits(tmp_path)), tmp_path / "out"
    # As a Prefect flow on a real server: the path where the `keys` field once failed.
    done = _dppub(
        "run",
        cfg,
        "--ledger",
        tmp_path / "l.sqlite",
        "--out",
        out,
        env={"PREFECT_API_URL": prefect_server.url},
    )
    assert done.returncode == 0, done.stderr[-3000:]
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
