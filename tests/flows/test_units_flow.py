"""A declared privacy unit through the whole flow: every release kind publishes, sensitivities
scale with the bound, and removing one unit moves the answers by at most the bound."""

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from dppub.commands import audit_lines, audit_payload, write_audit_page
from dppub.dp.budget import PrivacyCost
from dppub.dp.errors import ConfigError
from dppub.dp.ledger import Ledger
from dppub.dp.pipeline.plan import load_plan
from dppub.dp.pipeline.units import row_level_cost
from tests.examples import example
from tests.flows.conftest import publish_here
from tests.values import obj, seq

ROOT = Path(__file__).resolve().parents[2]


def _households(frame: pd.DataFrame, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return frame.assign(household=[f"h{i}" for i in rng.integers(0, 400, len(frame))])


def _config(tmp: Path, data: Path, m: int, **extra: Any) -> Path:
    raw: dict[str, Any] = example("demo.yaml")
    raw.pop("schedule")
    raw["dataset"].update(path=str(data), privacy_unit="household", max_rows_per_unit=m)
    raw["dataset"]["columns"]["household"] = {"type": "string"}
    raw["dataset"]["budget"]["epsilon"] = 1000.0
    raw.update(extra)
    path = tmp / f"units-{m}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def test_every_kind_publishes_and_sensitivities_scale_with_the_bound(
    tmp_path: Path, census_frame: pd.DataFrame
) -> None:
    data = tmp_path / "data.parquet"
    _households(census_frame).to_parquet(data, index=False)
    sensitivities, published_rows = {}, {}
    for m in (1, 3):
        run_id = publish_here(
            str(_config(tmp_path, data, m)), str(tmp_path / "l.sqlite"), str(tmp_path / "out")
        )
        manifest = json.loads(
            (tmp_path / "out" / "census_demo" / run_id / "manifest.json").read_text()
        )
        kinds = {r["kind"] for r in manifest["releases"]}
        assert kinds == {"k-anonymity", "workload", "regression", "clustering"}
        for r in manifest["releases"]:
            if r["is_dp"]:
                assert r["neighbours"].startswith(f"all rows of one household (at most {m} read")
        (table,) = [
            f
            for r in manifest["releases"]
            if not r["is_dp"]
            for f in r["files"]
            if f.endswith(".parquet")
        ]
        published_rows[m] = len(pd.read_parquet(tmp_path / "out" / "census_demo" / run_id / table))
        assert (
            "neighbours differ by all rows of one household" in manifest["guarantee"]["statement"]
        )
        sensitivities[m] = {
            r["name"]: r["sensitivity"] for r in manifest["releases"] if r["kind"] == "workload"
        }
    for name, one in sensitivities[1].items():
        assert sensitivities[3][name] == pytest.approx(3 * one)
    # The k-anonymous table is not DP: a unit bound does not thin it.
    assert published_rows[1] == published_rows[3] > 0
    rows = [r for r in Ledger(tmp_path / "l.sqlite").history() if r["event"] == "release"]
    assert {r["neighbours"] for r in rows} >= {"all rows of one household (at most 3 read)"}
    # The audit, in text, JSON and HTML, says which neighbours each guarantee was stated for.
    payload = audit_payload(str(tmp_path / "l.sqlite"), None)
    stated = obj(obj(payload["datasets"])["census_demo"])["neighbours"]
    assert "all rows of one household (at most 3 read)" in seq(stated)
    assert any("neighbours: " in line and "at most 3 read" in line for line in audit_lines(payload))
    write_audit_page(str(tmp_path / "l.sqlite"), payload, tmp_path / "audit.html")
    assert "all rows of one household (at most 3 read)" in (tmp_path / "audit.html").read_text()


def test_removing_one_unit_moves_published_counts_by_at_most_the_bound(
    tmp_path: Path, census_frame: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Little noise (epsilon 1000, the limit; least squares): the published histograms of the
    # table and of the table without one household differ by at most m in L1, plus the noise:
    # 8 cells of Laplace differences of scale at most m * 4 / 1000 = 0.008 exceed 0.5 in total
    # with probability below 1e-12.
    # Both runs draw the same row-selection key (a run draws a fresh one from the OS): under
    # one key every other household keeps exactly the rows it kept.
    # not os.urandom: Prefect uses it
    monkeypatch.setattr("dppub.dp.engine.unit_bounding.fresh_key", lambda: 7)
    frame = _households(census_frame.head(3_000), seed=2)
    victim = frame["household"].value_counts().index[0]  # the heaviest household
    m = 2
    workload = [
        {
            "name": "ages",
            "epsilon": 1000.0,
            "attributes": [{"column": "age", "level": 2}],
            "reconstruction": "least-squares",
        }
    ]
    estimates = []
    for label, part in (("all", frame), ("less", frame[frame["household"] != victim])):
        data = tmp_path / f"{label}.parquet"
        part.to_parquet(data, index=False)
        config = _config(tmp_path, data, m, workloads=workload, regressions=[], clustering=[])
        raw = yaml.safe_load(config.read_text())
        raw.pop("anonymize")
        raw["dataset"]["name"] = f"units_{label}"
        raw["dataset"]["budget"]["epsilon"] = 1000.0
        config.write_text(yaml.safe_dump(raw))
        run_id = publish_here(str(config), str(tmp_path / f"{label}.sqlite"), str(tmp_path / "out"))
        got = pd.read_parquet(
            tmp_path / "out" / f"units_{label}" / run_id / "ages" / "estimate.parquet"
        )
        estimates.append(got["estimate"].to_numpy())
    assert (frame["household"] == victim).sum() > m  # the bound really cut this unit
    assert len(estimates[0]) == 8
    assert np.abs(estimates[0] - estimates[1]).sum() <= m + 0.5


def test_a_unit_the_data_lacks_or_the_config_does_not_declare_is_refused(
    tmp_path: Path, census_small: Path
) -> None:
    config = _config(tmp_path, census_small, 2)  # the sample has no household column
    with pytest.raises(Exception, match=r"missing declared column\(s\) \['household'\]"):
        load_plan(config).check_structure(tmp_path / "out")
    raw = yaml.safe_load(config.read_text())
    del raw["dataset"]["columns"]["household"]
    config.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match="privacy_unit 'household' is not a declared column"):
        load_plan(config)
    raw["dataset"]["columns"]["household"] = {"type": "string"}
    del raw["dataset"]["max_rows_per_unit"]
    config.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match="a privacy_unit needs max_rows_per_unit"):
        load_plan(config)


def test_group_privacy_turns_a_unit_level_cost_into_the_mechanism_cost() -> None:
    unit = PrivacyCost(epsilon=1.0, delta=1e-6)
    row = row_level_cost(unit, 4)
    assert row.epsilon == pytest.approx(0.25)
    # (m e, m e^((m-1) e) d) at the row-level cost gives back the unit-level one.
    assert 4 * np.exp(3 * row.epsilon) * row.delta == pytest.approx(unit.delta)
    assert row_level_cost(unit, 1) == unit


def test_plan_shows_the_unit_its_bounds_and_their_price(
    tmp_path: Path, census_frame: pd.DataFrame
) -> None:
    from typer.testing import CliRunner

    from dppub import cli

    data = tmp_path / "data.parquet"  # plan reads its footers (columns, types), no rows
    _households(census_frame).to_parquet(data, index=False)
    config = _config(tmp_path, data, 4)
    result = CliRunner().invoke(
        cli.app, ["plan", str(config), "--ledger", str(tmp_path / "none.sqlite")]
    )
    assert result.exit_code == 0, result.output
    assert "privacy unit: household (neighbours differ by all its rows); at most 4 row(s)" in (
        result.stdout
    )
    age_cdf = next(line for line in result.stdout.splitlines() if "age_cdf" in line)
    costly, one_row = (float(x) for x in re.findall(r"([\d.]+)(?: \(SVD|\sif no unit)", age_cdf))
    assert costly == pytest.approx(4 * one_row, rel=1e-3)  # Laplace error scales with m


def test_int_unit_ids_are_keyed_as_stored_not_clamped_or_rounded(
    tmp_path: Path, census_frame: pd.DataFrame
) -> None:
    # Six households of 64-bit hashed ids 2^60 + 0..5 (one float64 value, 2^60, and all
    # above the declared bounds) with m = 1: six units, so six rows read. Old code hashed the
    # clamped float64 read of the ids: one unit, one row (a unit could move 2m rows).
    ids = np.int64(2**60) + np.arange(6, dtype=np.int64)
    frame = census_frame.head(60).assign(household=np.repeat(ids, 10))
    data = tmp_path / "ids.parquet"
    frame.to_parquet(data, index=False)
    workload = [
        {
            "name": "ages",
            "epsilon": 1000.0,
            "attributes": [{"column": "age", "level": 2}],
            "reconstruction": "least-squares",
        }
    ]
    config = _config(tmp_path, data, 1, workloads=workload, regressions=[], clustering=[])
    raw = yaml.safe_load(config.read_text())
    raw.pop("anonymize")
    raw["dataset"]["columns"]["household"] = {"type": "int", "bounds": [0, 10]}
    raw["dataset"]["budget"]["epsilon"] = 1000.0  # the limit: Laplace scale <= 0.003 a cell
    config.write_text(yaml.safe_dump(raw))
    run_id = publish_here(str(config), str(tmp_path / "l.sqlite"), str(tmp_path / "out"))
    got = pd.read_parquet(tmp_path / "out" / "census_demo" / run_id / "ages" / "estimate.parquet")
    # Six rows, not one: the noise of a handful of cells exceeds 0.5 in total with probability
    # far below 1e-12.
    assert got["estimate"].sum() == pytest.approx(6, abs=0.5)


@pytest.mark.parametrize(
    "declared",
    [
        {"type": "float", "bounds": [0, 1e6]},
        {"type": "string", "missing": "h0"},
        {"type": "category", "categories": ["h0", "h1"], "unknown": "h0"},
    ],
    ids=["float id", "missing mapped", "unknown mapped"],
)
def test_a_unit_declaration_that_could_merge_units_is_refused(
    tmp_path: Path, census_small: Path, declared: dict[str, Any]
) -> None:
    config = _config(tmp_path, census_small, 2)
    raw = yaml.safe_load(config.read_text())
    raw["dataset"]["columns"]["household"] = declared
    config.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match="'household' is the privacy unit") as info:
        load_plan(config)
    assert "\n" not in str(info.value)
