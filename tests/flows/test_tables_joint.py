"""Joint tables through ``dppub run`` (Prefect, releases on the task runner's threads): the
group is one release (one draw), every member is charged its own epsilon, and the members add
up exactly."""

from pathlib import Path

import pandas as pd
import pytest

from dppub.dp.ledger import Ledger
from tests.dp.pipeline.kinds.test_tables import _config
from tests.dp.pipeline.kinds.test_tables_joint import GROUP
from tests.flows.conftest import PrefectServer
from tests.flows.test_prefect_path import _dppub

pytestmark = pytest.mark.slow


def test_dppub_run_publishes_a_joint_group(
    tmp_path: Path, census_small: Path, prefect_server: PrefectServer
) -> None:
    cfg, out, ledger = _config(tmp_path, census_small, GROUP), tmp_path / "out", tmp_path / "l"
    done = _dppub(
        "run", cfg, "--ledger", ledger, "--out", out, env={"PREFECT_API_URL": prefect_server.url}
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = [p for p in (out / "census_demo").iterdir() if p.name[0].isdigit()]
    fine = pd.read_csv(run / "people" / "by_sex_marital" / "answers.csv")
    sex = pd.read_csv(run / "people" / "by_sex" / "answers.csv")
    cells = fine[fine["measure"] == "count"]
    for _, row in sex[(sex["measure"] == "count") & (sex["sex"] != "*")].iterrows():
        group = cells[cells["sex"] == row["sex"]]["answer"]  # integers rounded one by one
        assert abs(row["answer"] - group.sum()) <= (len(group) + 1) / 2
    history = Ledger(ledger).history()
    assert [(r["release"], r["epsilon"]) for r in history if r["event"] == "draw"] == [
        ("people", 1.0)
    ]
    rows = sorted((r["release"], r["epsilon"]) for r in history if r["event"] == "release")
    assert rows == [("by_marital", 0.25), ("by_sex", 0.25), ("by_sex_marital", 0.5)]
