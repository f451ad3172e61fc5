"""``keys: private`` tables through ``dppub run``: only real keys appear, large groups always do,
the selection's rule and (epsilon, delta) are stated, and the ledger charges delta."""

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from prefect.testing.utilities import prefect_test_harness
from typer.testing import CliRunner

from dp.ledger import Ledger
from flows import cli
from flows.server import prefect_env

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def harness() -> Iterator[None]:
    raise_exceptions, logging.raiseExceptions = logging.raiseExceptions, False
    with prefect_test_harness(server_startup_timeout=120):
        prefect_env()
        yield
    logging.raiseExceptions = raise_exceptions


BIG = [f"S{i:02d}" for i in range(5)]  # 400 rows, 100 persons each: always released
TINY = [f"T{i:02d}" for i in range(15)]  # one row, one person each


def _data(tmp: Path) -> Path:
    rng = np.random.default_rng(26)
    sites = [s for s in BIG for _ in range(400)] + TINY
    persons = [f"p{int(i):04d}" for i in rng.integers(0, 100, 2000)]
    persons += [f"q{i:02d}" for i in range(len(TINY))]
    frame = pd.DataFrame(
        {"site": sites, "person": persons, "hours": rng.uniform(1, 99, len(sites)).round(1)}
    )
    path = tmp / "visits.parquet"
    frame.to_parquet(path, index=False)
    return path


def _config(tmp: Path, data: Path, **dataset: Any) -> Path:
    raw: dict[str, Any] = {
        "dataset": {
            "name": "visits",
            "path": str(data),
            "budget": {"epsilon": 10.0, "delta": 1e-5},
            "columns": {
                "site": {"type": "string"},
                "person": {"type": "string"},
                "hours": {"type": "float", "bounds": [1, 99]},
            },
            **dataset,
        },
        "tables": [
            {
                "name": "visits_by_site",
                "epsilon": 1.0,
                "delta": 1e-6,
                "by": ["site"],
                "keys": "private",
                "measures": ["count", {"mean": "hours"}],
            }
        ],
    }
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _run(tmp: Path, config: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    ledger, out = tmp / "ledger.sqlite", tmp / "out"
    args = ["run", str(config), "--ledger", str(ledger), "--out", str(out)]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    (run,) = [p for p in (out / "visits").iterdir() if p.is_dir()]
    answers = pd.read_csv(run / "visits_by_site" / "answers.csv", dtype={"site": str})
    release = json.loads((run / "visits_by_site" / "release.json").read_text())
    (entry,) = Ledger(str(ledger)).entries()
    assert (entry.epsilon, entry.delta) == (1.0, 1e-6)
    return answers, release


def _details(release: dict[str, Any]) -> dict[str, Any]:
    found = release.get("details", release)
    assert isinstance(found, dict)
    return found


# False-failure rate: a one-row key is released with probability pi(1) ~ 1e-6 (rule threshold)
# or below 1e-6 (Gaussian); 15 such keys: < 2e-5 per test. The big keys are released surely
# (threshold: 400 rows >= N = 101; Gaussian: weight >= 100 units / 2 > threshold + 40 sigma).
def test_row_level_private_keys_publish_only_real_keys(tmp_path: Path) -> None:
    answers, release = _run(tmp_path, _config(tmp_path, _data(tmp_path)))
    assert set(answers["site"]) == set(BIG)
    assert set(answers["measure"]) == {"count", "mean(hours)"}
    counts = answers[answers["measure"] == "count"].set_index("site")["answer"]
    assert (counts.between(400 - 60, 400 + 60)).all()  # Laplace of scale 1/0.4: 60 is 24 scales
    details = _details(release)
    rule = details["key_selection"]
    assert rule["rule"] == "threshold" and rule["released_keys"] == len(BIG)
    assert rule["epsilon"] == pytest.approx(1.0 / 3) and rule["delta"] == 1e-6
    assert sum(details["split"].values()) == pytest.approx(2.0 / 3)


def test_private_keys_under_a_unit_in_several_keys_use_the_weighted_rule(tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        _data(tmp_path),
        privacy_unit="person",
        max_rows_per_unit=8,
        max_partitions_per_unit=4,
    )
    answers, release = _run(tmp_path, config)
    assert set(answers["site"]) == set(BIG)
    rule = _details(release)["key_selection"]
    assert rule["rule"] == "gaussian" and rule["max_partitions_per_unit"] == 4


def test_private_keys_refuse_a_table_without_delta(tmp_path: Path) -> None:
    raw = yaml.safe_load(_config(tmp_path, _data(tmp_path)).read_text())
    del raw["tables"][0]["delta"]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(raw))
    args = ["run", str(tmp_path / "config.yaml"), "--ledger", str(tmp_path / "l.sqlite")]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 2
    assert "keys: private needs a delta > 0, got 0.0" in result.output
