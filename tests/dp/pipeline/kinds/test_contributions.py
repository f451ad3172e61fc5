"""The ``contributions:`` kind end to end: one release at its own epsilon and one ledger row,
the histogram of rows per privacy unit over every row (no unit bounding), the shares each
candidate bound would drop derived from the published counts, both reports, and what the
config may not say."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from dppub.dp.contributions import bin_counts, dropped_shares
from dppub.dp.errors import ConfigError
from dppub.dp.ledger import Ledger
from dppub.dp.pipeline.kinds.contributions.result import ContributionsResult
from dppub.dp.pipeline.plan import load_plan
from tests.dp.pipeline.published_run import demo_config, publish_in_process

SIZES = (1, 1, 1, 2, 2, 3, 4, 6, 7, 9, 12)
"""Rows per household, repeated over the rows (some above the dataset's bound of 5)."""


def _households(tmp_path: Path, census: Path) -> tuple[Path, pd.Series]:
    frame = pd.read_parquet(census)
    ids: list[str] = []
    k = 0
    while len(ids) < len(frame):
        ids += [f"h{k}"] * SIZES[k % len(SIZES)]
        k += 1
    frame["household"] = ids[: len(frame)]
    path = tmp_path / "households.parquet"
    frame.to_parquet(path, index=False)
    return path, frame["household"].value_counts()


def _config(tmp_path: Path, data: Path, sections: dict[str, Any], **dataset: Any) -> Path:
    path = demo_config(tmp_path, data)
    raw = yaml.safe_load(path.read_text())
    for section in ("anonymize", "workloads", "regressions", "clustering"):
        raw.pop(section, None)
    raw["dataset"].update(dataset)
    raw["dataset"]["columns"]["household"] = {"type": "string"}
    raw["dataset"]["budget"] = {"epsilon": 200.0, "delta": 0.0}
    raw.update(sections)
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


ITEM = {"name": "rows_per_household", "epsilon": 50.0, "cap": 8, "bins": [1, 2, 3, 4, 5]}


@pytest.mark.slow  # ~3 s: two releases published, both reports drawn
def test_the_rows_per_unit_histogram_is_one_release_over_every_row(
    tmp_path: Path, census_small: Path
) -> None:
    from typer.testing import CliRunner

    from dppub.cli import app

    data, per_unit = _households(tmp_path, census_small)
    table = {"name": "people", "epsilon": 50.0, "by": ["sex"], "measures": ["count"]}
    config = _config(
        tmp_path,
        data,
        {"contributions": [ITEM], "tables": [table]},
        privacy_unit="household",
        max_rows_per_unit=5,
    )
    plan = load_plan(config)
    release = next(r for r in plan.releases if r.kind == "contributions")
    assert (release.mechanism, release.cost.epsilon, release.cost.delta) == ("laplace", 50.0, 0.0)
    shown = CliRunner().invoke(app, ["plan", str(config)])
    assert shown.exit_code == 0, shown.output
    assert "household by rows: 6 bins (1, 2, 3, 4, 5-7, >= 8); L1 sensitivity 1" in shown.output

    ledger = tmp_path / "ledger.sqlite"
    published = publish_in_process(config, ledger, tmp_path / "out")
    folder = published.folder / "rows_per_household"
    histogram = pd.read_csv(folder / "histogram.csv")
    # Every row read (units of 6 to 12 rows counted though the dataset bounds reads at 5):
    # Laplace scale 1 / 50 per bin, so |noise| >= 0.5 (a rounding off by one) has probability
    # exp(-25) ~ 1e-11 per bin.
    exact = bin_counts(per_unit.to_numpy(), (1, 2, 3, 4, 5), 8)
    assert histogram["units"].tolist() == exact.tolist()
    assert histogram["bin"].tolist() == ["1", "2", "3", "4", "5-7", ">= 8"]
    assert exact[-2:].sum() > 0  # units over the dataset's bound are there
    assert (histogram["ci_low"] <= histogram["units"]).all()
    assert (histogram["units"] <= histogram["ci_high"]).all()
    bounds = pd.read_csv(folder / "bounds.csv")
    shares = dropped_shares(exact, (1, 2, 3, 4, 5), 8)
    assert bounds["max_rows_per_unit"].tolist() == [1, 2, 3, 4, 7]
    assert bounds["units_over"].to_numpy() == pytest.approx(shares.units_over, abs=1e-3)
    assert bounds["rows_dropped"].to_numpy() == pytest.approx(shares.rows_dropped, abs=1e-3)
    assert (bounds["rows_dropped_low"] <= bounds["rows_dropped"]).all()
    assert (bounds["rows_dropped"] <= bounds["rows_dropped_high"]).all()
    assert np.all(np.diff(bounds["rows_dropped"]) <= 0)  # a larger bound drops no more
    assert (folder / "histogram.csv").read_bytes().count(b"\r\n") == len(histogram) + 1

    details = json.loads((folder / "release.json").read_text())
    assert details["sensitivity"] == 1.0
    assert details["details"]["per_unit"] is True
    assert (
        details["neighbours"] == "all rows of one household (all read; each household counted once)"
    )

    # The table beside it still reads at most 5 rows of a household (and those of one sex
    # group: max_partitions_per_unit 1), not all 3,000 (Laplace scale 5 / 50 per group:
    # |noise| > 1.5 has probability exp(-15) per group).
    answers = pd.read_csv(published.folder / "people" / "answers.csv")
    bounded = int(np.minimum(per_unit.to_numpy(), 5).sum())
    assert answers["answer"].sum() <= bounded + 3 < len(pd.read_parquet(data)) - 500

    rows = [r for r in Ledger(str(ledger), create=False).history() if r["event"] == "release"]
    mine = [r for r in rows if r["release"] == "rows_per_household"]
    assert [(r["kind"], r["mechanism"], r["epsilon"], r["delta"]) for r in mine] == [
        ("contributions", "laplace", 50.0, 0.0)
    ]
    report = (published.folder / "report.md").read_text()
    assert "### rows_per_household (contributions)" in report
    assert "| max_rows_per_unit | units with more rows | rows dropped |" in report
    assert f"| 4 | {100 * bounds['units_over'][3]:.3g}% (" in report
    html = (published.folder / "report.html").read_text()
    assert "what each candidate bound would drop, from the published counts" in html
    assert "No plot for this release" not in html


@pytest.mark.parametrize(
    ("item", "dataset", "message"),
    [
        ({}, {}, r"the dataset has no privacy_unit: name the column"),
        (
            {"unit": "zip"},
            {"privacy_unit": "household", "max_rows_per_unit": 5},
            r"unit 'zip' is not the dataset's privacy_unit 'household'",
        ),
        ({"delta": 1e-6, "unit": "zip"}, {}, r"the Laplace mechanism is pure: delta must be 0"),
        ({"unit": "zip", "bins": [1, 9]}, {}, r"bins must lie below cap 8"),
        ({"unit": "nowhere"}, {}, r"not declared in dataset.columns: \['nowhere'\]"),
    ],
)
def test_what_a_contributions_item_may_not_say(
    tmp_path: Path, census_small: Path, item: dict[str, Any], dataset: dict[str, Any], message: str
) -> None:
    data, _ = _households(tmp_path, census_small)
    config = _config(tmp_path, data, {"contributions": [{**ITEM, **item}]}, **dataset)
    with pytest.raises(ConfigError, match=message):
        load_plan(config)


@pytest.mark.slow  # ~2 s
def test_without_a_privacy_unit_rows_are_counted_per_value_at_sensitivity_two(
    tmp_path: Path, census_small: Path
) -> None:
    data, _ = _households(tmp_path, census_small)
    item = {"name": "rows_per_zip", "epsilon": 50.0, "cap": 64, "unit": "zip"}
    config = _config(tmp_path, data, {"contributions": [item]})
    published = publish_in_process(config, tmp_path / "ledger.sqlite", tmp_path / "out")
    (summary,) = published.summaries
    assert summary.sensitivity == 2.0 and summary.neighbours == "one row"
    assert summary.result_as(ContributionsResult).per_unit is False
    zips = pd.read_parquet(data, columns=["zip"])["zip"].value_counts().to_numpy()
    histogram = pd.read_csv(published.folder / "rows_per_zip" / "histogram.csv")
    # scale 2 / 50: a rounding off by one has probability exp(-12.5) ~ 4e-6 per bin
    assert histogram["units"].tolist() == bin_counts(zips, (1, 2, 3, 4, 5, 10, 20, 40), 64).tolist()


def test_the_shipped_example_spends_the_census_budget_with_the_other_examples() -> None:
    root = Path(__file__).resolve().parents[4]
    config = root / "configs" / "contributions.yaml"
    plan = load_plan(config)
    assert plan.config.dataset_file == root / "configs" / "datasets" / "census.yaml"
    ((release, kind),) = [(r.name, r.kind) for r in plan.releases]
    assert (release, kind) == ("rows_per_zip", "contributions")
    # demo, tables and synthetic cost 6 of the census' 8: one run of this one fits beside them
    assert 6.0 + plan.total.epsilon <= plan.config.budget.epsilon
    text = config.read_text()
    header = " ".join(text[: text.index("\ndataset:")].split())
    assert (
        "dppub run configs/contributions.yaml --ledger .state/ledger.sqlite --out "
        ".state/published" in header
    )
