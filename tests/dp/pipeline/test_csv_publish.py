"""A run reads a CSV source as it reads Parquet: the demo's k-anonymous table and workloads
published from the sample as CSV, and plan and run check the same structure."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from dppub.dp.errors import InputError
from dppub.dp.pipeline.plan import load_plan
from tests.dp.pipeline.published_run import demo_config, publish_in_process


def _config(directory: Path, data: Path) -> Path:
    """The demo on ``data`` without its models (which read the data the same way, slowly)."""
    path = demo_config(directory, data)
    raw = yaml.safe_load(path.read_text())
    del raw["regressions"], raw["clustering"]
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.mark.slow  # ~5 s: a k-anonymous table and three workloads published
def test_the_demo_tables_publish_from_a_csv_file(tmp_path: Path, census_small: Path) -> None:
    data = tmp_path / "census.csv"
    pd.read_parquet(census_small).to_csv(data, index=False)
    config = _config(tmp_path, data)
    plan = load_plan(config)
    plan.check_input()
    done = publish_in_process(config, tmp_path / "ledger.sqlite", tmp_path / "out")
    releases = {r["name"] for r in done.manifest["releases"]}
    assert releases == {r.name for r in plan.releases}
    answers = pd.read_csv(next(done.folder.rglob("answers.csv")))
    assert len(answers) > 0 and answers["answer"].notna().all()


def test_plan_refuses_a_csv_file_without_a_declared_column(
    tmp_path: Path, census_small: Path
) -> None:
    data = tmp_path / "census.csv"
    pd.read_parquet(census_small).drop(columns=["income"]).to_csv(data, index=False)
    plan = load_plan(_config(tmp_path, data))
    with pytest.raises(InputError, match=r"census\.csv: missing declared column\(s\) \['income'\]"):
        plan.check_input()
