"""``keys: private`` tables, published in-process: only real keys, large groups always, the
rule and its (epsilon, delta) stated, delta charged, an empty selection an empty table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from dppub.dp.errors import ConfigError
from dppub.dp.ledger import Ledger
from dppub.dp.pipeline.kinds.tables.kind import TableKind
from dppub.dp.pipeline.plan import load_plan
from tests.dp.pipeline.published_run import publish_in_process

BIG = [f"S{i:02d}" for i in range(5)]
"""400 rows each, from 300 persons who visit no other site: always released (see below)."""
TINY = [f"T{i:02d}" for i in range(15)]
"""One row, one person each."""


def visits(tmp: Path) -> Path:
    rng = np.random.default_rng(26)
    sites = [s for s in BIG for _ in range(400)] + TINY
    persons = [f"{s}-{i % 300}" for s in BIG for i in range(400)] + [f"q{t}" for t in TINY]
    frame = pd.DataFrame(
        {"site": sites, "person": persons, "hours": rng.uniform(1, 99, len(sites)).round(1)}
    )
    path = tmp / "visits.parquet"
    frame.to_parquet(path, index=False)
    return path


def config(tmp: Path, data: Path, table: dict[str, Any] | None = None, **dataset: Any) -> Path:
    item = {
        "name": "visits_by_site",
        "epsilon": 1.0,
        "delta": 1e-6,
        "by": ["site"],
        "keys": "private",
        "measures": ["count", {"mean": "hours"}],
    }
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
        "tables": [{**item, **(table or {})}],
    }
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _publish(tmp: Path, cfg: Path) -> tuple[pd.DataFrame, dict[str, Any], list[dict[str, Any]]]:
    ledger = tmp / "ledger.sqlite"
    folder = publish_in_process(cfg, ledger, tmp / "out").folder
    answers = pd.read_csv(folder / "visits_by_site" / "answers.csv", dtype={"site": str})
    release = json.loads((folder / "visits_by_site" / "release.json").read_text())
    rows = [r for r in Ledger(str(ledger), create=False).history() if r["event"] == "release"]
    return answers, release, rows


# False-failure rates: a one-row key is released with probability pi(1) ~ 1e-6 (threshold rule)
# or below 1e-6 (Gaussian), 15 such keys: < 2e-5 per test. The big keys are always released:
# threshold, 400 units >= the 74 from which pi = 1; Gaussian (m = 4), each key's weight is 300
# (its persons visit one site), > 200 above the threshold 65, 16 sigma.
@pytest.mark.slow  # ~3 s: two tables published
def test_private_keys_publish_only_real_keys_row_level_and_per_unit(tmp_path: Path) -> None:
    data = visits(tmp_path)
    answers, release, rows = _publish(tmp_path, config(tmp_path, data))
    assert set(answers["site"]) == set(BIG)
    assert set(answers["measure"]) == {"count", "mean(hours)"}
    counts = answers[answers["measure"] == "count"].set_index("site")["answer"]
    assert counts.between(400 - 60, 400 + 60).all()  # Laplace of scale 1/0.35: 60 is 21 scales
    details = release["details"]
    rule = details["key_selection"]
    assert rule["rule"] == "threshold" and rule["released_keys"] == len(BIG)
    assert release["mechanism"] == "optimal_threshold+laplace"  # old code: 'laplace'
    assert [r["mechanism"] for r in rows] == ["optimal_threshold+laplace"]
    assert rule["epsilon"] == pytest.approx(1.0 / 3) and rule["delta"] == 1e-6
    assert sum(details["split"].values()) == pytest.approx(2.0 / 3)
    assert [(r["epsilon"], r["delta"]) for r in rows] == [(1.0, 1e-6)]

    unit = tmp_path / "unit"
    unit.mkdir()
    cfg = config(unit, data, privacy_unit="person", max_rows_per_unit=8, max_partitions_per_unit=4)
    answers, release, rows = _publish(unit, cfg)
    assert set(answers["site"]) == set(BIG)
    rule = release["details"]["key_selection"]
    assert rule["rule"] == "gaussian" and rule["max_partitions_per_unit"] == 4
    assert [r["mechanism"] for r in rows] == ["gaussian_threshold+laplace"]


@pytest.mark.slow  # ~2 s: one table published
def test_a_selection_of_no_key_publishes_an_empty_table(tmp_path: Path) -> None:
    data = tmp_path / "few.parquet"
    pd.DataFrame({"site": TINY, "person": TINY, "hours": [5.0] * len(TINY)}).to_parquet(data)
    answers, release, rows = _publish(tmp_path, config(tmp_path, data))
    assert answers.empty
    assert list(answers.columns) == [
        "site",
        "measure",
        "answer",
        "std_error",
        "ci_low",
        "ci_high",
        "quality",
    ]
    assert release["details"]["key_selection"]["released_keys"] == 0
    assert [(r["epsilon"], r["delta"]) for r in rows] == [(1.0, 1e-6)]  # the selection was paid


def test_plan_states_the_rule_and_refuses_what_private_keys_do_not_do(tmp_path: Path) -> None:
    data = visits(tmp_path)
    (plan,) = load_plan(config(tmp_path, data)).releases
    assert plan.spec.selection is not None and plan.spec.selection.kind == "threshold"
    shown = TableKind().plan_text(TableKind().describe(plan))
    assert "groups selected from the data (keys private: threshold rule at epsilon 0.3333" in shown
    # 2/3 of epsilon, shared; the count read off count(hours) and the rows missing hours
    # (in parallel): as if alone at 2/3 / sqrt(3): RMSE sqrt(2) sqrt(3) / (2/3) = 3.67
    assert "count: epsilon 0.6667, expected RMSE 3.67 rows" in shown
    bad: list[tuple[dict[str, Any], str]] = [
        ({"delta": 0.0}, "keys: private needs a delta > 0, got 0.0"),
        ({"by": ["site", "person"]}, "keys: private takes one by column"),
        ({"margins": True}, "publishes count, sum and mean without margins"),
        ({"measures": [{"quantile": "hours", "at": [0.5]}]}, "without margins"),
    ]
    for change, message in bad:
        with pytest.raises(ConfigError, match=message):
            load_plan(config(tmp_path, data, change))


@pytest.mark.slow  # ~2 s: one table published
def test_a_private_key_with_a_line_break_stays_one_row_of_answers_csv(tmp_path: Path) -> None:
    # Old code: answers.csv was written with "\n" line ends, so the csv module left "S\r01"
    # unquoted and a CSV reader split its rows in two.
    import csv

    frame = pd.read_parquet(visits(tmp_path))
    frame["site"] = frame["site"].str.replace("S0", "S\r0", regex=False)
    frame.to_parquet(tmp_path / "visits.parquet", index=False)
    answers, _, _ = _publish(tmp_path, config(tmp_path, tmp_path / "visits.parquet"))
    assert set(answers["site"]) == {s.replace("S0", "S\r0") for s in BIG}
    path = next((tmp_path / "out").rglob("visits_by_site/answers.csv"))
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    assert len(rows) == 1 + len(answers) and all(len(r) == len(rows[0]) for r in rows)
    with path.with_name("answers_wide.csv").open(newline="") as f:
        labels = {r[0] for r in csv.reader(f) if len(r) > 1}
    assert {s.replace("S0", "S\r0") for s in BIG} <= labels


def test_an_int_key_under_a_unit_is_selected_for_max_partitions_keys_per_unit(
    tmp_path: Path,
) -> None:
    # Old code: an int by column's selection was calibrated to max_rows_per_unit (5) keys per
    # unit, a text column's to max_partitions_per_unit (2). Both are min(p, m) = 2 now: the key
    # weights' finish keeps a unit in at most p keys by label, whatever its rows
    # (dp.engine.key_weights), so the int key needs no partition bound of its rows.
    frame = pd.read_parquet(visits(tmp_path))
    frame["floor"] = [int(s[1:]) for s in frame["site"]]
    data = tmp_path / "floors.parquet"
    frame.to_parquet(data, index=False)
    cfg = config(
        tmp_path,
        data,
        {"by": ["floor"], "measures": ["count"]},
        privacy_unit="person",
        max_rows_per_unit=5,
        max_partitions_per_unit=2,
    )
    raw = yaml.safe_load(cfg.read_text())
    raw["dataset"]["columns"]["floor"] = {"type": "int", "bounds": [0, 99]}
    cfg.write_text(yaml.safe_dump(raw, sort_keys=False))
    (plan,) = load_plan(cfg).releases
    assert plan.spec.selection is not None and plan.spec.selection.max_partitions == 2
    # p above m: a unit's 2 rows reach at most 2 keys
    raw["dataset"].update(max_rows_per_unit=2, max_partitions_per_unit=4)
    cfg.write_text(yaml.safe_dump(raw, sort_keys=False))
    (plan,) = load_plan(cfg).releases
    assert plan.spec.selection is not None and plan.spec.selection.max_partitions == 2


@pytest.mark.slow  # ~2 s
def test_a_where_filter_selects_and_counts_only_the_rows_it_keeps(tmp_path: Path) -> None:
    data = visits(tmp_path)
    frame = pd.read_parquet(data)
    cfg = config(
        tmp_path,
        data,
        {"epsilon": 20.0, "where": "hours >= 50", "measures": ["count", {"count": "hours"}]},
        budget={"epsilon": 100.0, "delta": 1e-5},
    )
    (plan,) = load_plan(cfg).releases
    assert "where hours >= 50 (each row, before any bound)" in TableKind().plan_text(
        TableKind().describe(plan)
    )
    answers, release, _ = _publish(tmp_path, cfg)
    kept = frame[frame["hours"] >= 50]
    counts = answers[answers["measure"] == "count"].set_index("site")["answer"]
    # the big sites are released (~200 filtered rows each, far above the threshold); their
    # counts are the filtered rows' (Laplace noise of scale 0.15 at epsilon 20/3 each: beyond
    # 3 with probability e^-20; unfiltered, 400)
    assert set(BIG) <= set(counts.index)
    for site in BIG:
        assert abs(counts[site] - (kept["site"] == site).sum()) <= 3
    assert release["details"]["where"] == "hours >= 50"
