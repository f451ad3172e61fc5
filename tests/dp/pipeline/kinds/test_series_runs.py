"""A series run by run: each period published once, skipped periods caught up, published
values never change, the state kept between runs sealed by the ledger, and the ledger never
holding less than the privacy loss of what has been published (checked on neighbours)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dppub.api import publish
from dppub.commands import audit_lines, audit_payload
from dppub.dp.budget import zcdp_to_dp
from dppub.dp.engine import StreamingBackend
from dppub.dp.errors import InputError
from dppub.dp.ledger import Ledger
from dppub.dp.ledger.summary import spending_summary
from dppub.dp.pipeline.kinds.series.series_scan import SeriesExact
from dppub.dp.pipeline.kinds.series.series_store import store_folder
from dppub.dp.pipeline.plan import Plan, load_plan
from dppub.dp.pipeline.publish import in_order
from dppub.dp.pipeline.publish import publish as publication
from dppub.dp.pipeline.published import Publication
from dppub.dp.tables.precision import exponents
from tests.dp.pipeline.kinds.series_setup import (
    admissions,
    as_published,
    published_and_full,
    series_config,
    spec_of,
)


def _spent(ledger: Path) -> tuple[float, float]:
    (summary,) = spending_summary(Ledger(str(ledger), create=False)).values()
    return float(summary["spent_epsilon"]), float(summary["spent_delta"])


def _figures(run: Publication) -> pd.DataFrame:
    return pd.read_csv(
        run.path / "admissions_monthly" / "figures.csv",
        dtype={"published": str, "period": str},
    )


def _details(run: Publication) -> dict[str, object]:
    data = json.loads((run.path / "admissions_monthly" / "release.json").read_text())
    details: dict[str, object] = data["details"]
    return details


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return series_config(tmp_path, admissions(tmp_path, patients=300))


def test_each_period_once_caught_up_and_never_revised(tmp_path: Path, config: Path) -> None:
    out, ledger = tmp_path / "out", tmp_path / "ledger.sqlite"
    first = publish(config, out=out, period="2026-01")
    second = publish(config, out=out, period="2026-02")
    spent = _spent(ledger)
    runs = sorted(p.name for p in (out / "admissions").iterdir())
    with pytest.raises(InputError, match="a period is published once: nothing reserved"):
        publish(config, out=out, period="2026-02")
    assert _spent(ledger) == spent  # refused before the reservation: nothing charged
    assert sorted(p.name for p in (out / "admissions").iterdir()) == runs
    third = publish(config, out=out, period="2026-05")  # March and April were skipped
    assert _details(third)["published"] == ["2026-03", "2026-04", "2026-05"]
    assert _details(third)["periods"] == [f"2026-0{m}" for m in range(1, 6)]
    f1, f2, f3 = _figures(first), _figures(second), _figures(third)
    assert set(f3["published"]) == {"2026-03", "2026-04", "2026-05"}
    assert set(f1["published"]) == {"2026-01"} and set(f2["published"]) == {"2026-02"}

    def value(f: pd.DataFrame, figure: str, period: str) -> pd.Series:
        rows = f[(f["figure"] == figure) & (f["period"] == period)]
        return rows.set_index(["measure", "group"])["value"]

    # The CSV files are rounded (test_series_precision.py): the figures at full precision are
    # recomputed from the state the next run reads, and the CSV files are them rounded.
    text, full = published_and_full(spec_of(config, "2026-06"), third.path / "admissions_monthly")
    assert text.equals(as_published(full))
    # Consistent with everything earlier: each running total is the previous one plus the
    # new period's estimate, across runs.
    total = value(full, "running_total", "2026-02")
    for month in ("2026-03", "2026-04", "2026-05"):
        total = total + value(full, "per_period", month)
        assert np.allclose(value(full, "running_total", month), total, rtol=1e-9, atol=1e-6)
    assert np.allclose(
        value(full, "running_total", "2026-02"),
        value(full, "per_period", "2026-01") + value(full, "per_period", "2026-02"),
        rtol=1e-9,
        atol=1e-6,
    )
    # The state keeps the values as published: they never change (the first run's CSV value
    # is the state's, rounded: within half a unit of its last digit).
    state = json.loads((third.path / "admissions_monthly" / "state.json").read_text())
    published = np.asarray(state["published"])
    count_north = state["columns"].index("count:North")
    first_value = value(f1, "per_period", "2026-01")[("count", "North")]
    first_se = f1[(f1["figure"] == "per_period") & (f1["measure"] == "count")]["std_error"]
    (unit,) = 10.0 ** exponents(first_se.to_numpy()[:1], counts=[True])
    assert abs(published[0, count_north] - first_value) <= unit / 2
    assert published.shape[0] == 5 and "noise" not in json.dumps(state)
    # history.csv: every figure published so far, as published (the plot's source).
    history = pd.read_csv(
        third.path / "admissions_monthly" / "history.csv", dtype={"published": str, "period": str}
    )
    assert history.equals(pd.concat([f1, f2, f3], ignore_index=True))
    # report.html draws the series with its intervals; report.md says what the run published.
    page = (third.path / "report.html").read_text()
    assert '<svg role="img" aria-label="admissions_monthly"' in page
    report = (third.path / "report.md").read_text()
    assert "period 2026-05 (caught up: 2026-03, 2026-04, 2026-05)" in report
    # The audit shows the series as one line with its runs' periods.
    lines = audit_lines(audit_payload(str(ledger), None))
    (line,) = [x for x in lines if "series admissions_monthly" in x]
    assert "3 run(s) published up to 2026-01, 2026-02, 2026-05" in line


def test_missing_or_tampered_state_refuses_the_next_run(tmp_path: Path, config: Path) -> None:
    out, ledger = tmp_path / "out", tmp_path / "ledger.sqlite"
    publish(config, out=out, period="2026-01")
    spent = _spent(ledger)
    (folder,) = store_folder(str(ledger), "admissions", "admissions_monthly").iterdir()
    state = folder / "state.json"
    original = state.read_text()
    state.write_text(original.replace('"last":0', '"last":0 '))
    with pytest.raises(InputError, match="does not match the ledger's hash .* nothing published"):
        publish(config, out=out, period="2026-02")
    state.write_text(original)
    backup = tmp_path / "kept"
    shutil.move(folder, backup)
    with pytest.raises(InputError, match="is missing .* nothing published") as caught:
        load_plan(config, period="2026-02")
    assert "\n" not in str(caught.value)
    assert _spent(ledger) == spent
    shutil.move(backup, folder)
    publish(config, out=out, period="2026-02")  # restored: the series goes on


def _exact(plan: Plan, data: Path) -> SeriesExact:
    """The exact values the plan's release measures, on ``data``."""
    (release,) = plan.releases
    (aggregate,) = release.release_kind.scan(release).aggregates
    result = StreamingBackend().run(aggregate, data, plan.config.table_schema)  # type: ignore[misc]
    assert isinstance(result, SeriesExact)
    return result


def test_the_ledger_holds_at_least_the_loss_of_what_was_published(tmp_path: Path) -> None:
    """After every run, on every neighbour (one patient removed): the published measurements'
    change, in units of the noise, is a zCDP loss no larger than the rho the runs stated, and
    the ledger's (epsilon, delta) is at least that rho's conversion."""
    data = admissions(tmp_path, patients=60, seed=3)
    config = series_config(tmp_path, data)
    frame = pd.read_parquet(data)
    out, ledger = tmp_path / "out", tmp_path / "ledger.sqlite"
    stated = 0.0
    for period in ("2026-01", "2026-02", "2026-04", "2026-07"):
        plan = load_plan(config, period=period)
        spec = plan.releases[0].spec
        t, release = spec.period, spec.release
        exact = _exact(plan, data)  # (its scan checks the ledger: before the run)
        a = release.strategy.matrix[: release.strategy.measured_by(t), : t + 1]
        worst = 0.0
        for unit in frame["patient_id"].unique()[:25]:
            neighbour = tmp_path / "neighbour.parquet"
            frame[frame["patient_id"] != unit].to_parquet(neighbour, index=False)
            other = _exact(plan, neighbour)
            loss = sum(
                float(np.sum((a @ (x - y)) ** 2)) / (2 * release.std**2)
                for x, y in zip(exact.values, other.values, strict=True)
            )
            worst = max(worst, loss)
        run = publish(config, out=out, period=period)
        stated += float(_details(run)["zcdp_rho"])  # type: ignore[arg-type]
        assert worst > 0  # the neighbours do differ
        assert worst <= stated * (1 + 1e-9)
        epsilon, delta = _spent(ledger)
        assert epsilon >= zcdp_to_dp(stated, 1e-7) * (1 - 1e-12)
        assert delta == pytest.approx(1e-7)  # charged once, at the first run


def test_two_runs_at_once_never_publish_a_period_twice(tmp_path: Path, config: Path) -> None:
    out, ledger = tmp_path / "out", tmp_path / "ledger.sqlite"
    raw = yaml.safe_load(config.read_text())
    raw["dataset"]["budget"]["epsilon"] = 10.0  # room for two reservations at once
    config.write_text(yaml.safe_dump(raw))
    publish(config, out=out, period="2026-01")
    held = load_plan(config, period="2026-02").open_run(ledger, out)  # planned, reserved
    with held, pytest.raises(InputError, match="runs of its config are pending at once"):
        publish(config, out=out, period="2026-02")
    # The held run ended unpublished (aborted): the series goes on from its last commit; a
    # run planned before another committed is refused once it holds its reservation.
    stale = load_plan(config, period="2026-03")
    publish(config, out=out, period="2026-02")
    with (
        stale.open_run(ledger, out) as run,
        pytest.raises(InputError, match="another run published it .* since this run"),
    ):
        publication(stale, run, in_order())
    (summary,) = spending_summary(Ledger(str(ledger), create=False)).values()
    assert (summary["runs"], summary["aborted_runs"]) == (2, 3)  # aborted: held, both refused
    assert summary["charged_runs"] == 0


def test_a_state_continues_only_under_the_mechanism_it_started_with(
    tmp_path: Path, config: Path
) -> None:
    out = tmp_path / "out"
    publish(config, out=out, period="2026-01")
    raw = yaml.safe_load(config.read_text())
    raw["series"][0]["rho"] = 0.2  # amended: another noise scale for the same figures
    config.write_text(yaml.safe_dump(raw))
    other = r"the stored state is of series .* under \w+@\w+ over 12 periods, not"
    with pytest.raises(InputError, match=other):
        load_plan(config, period="2026-02")
