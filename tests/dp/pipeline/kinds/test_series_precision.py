"""A series publishes only the digits its noise supports (the tables' rule): every number of
``figures.csv`` and ``history.csv`` is its full-precision figure rounded to the power of ten at
or below a tenth of its standard error (counts to units at least), while ``state.json``, which
the next run reads, keeps full precision."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dppub.api import publish
from dppub.dp.pipeline.kinds.series.publishing import (
    PRECISION,
    VALUES,
    rounded_figures,
    write_figures,
)
from dppub.dp.pipeline.kinds.series.series_store import Published
from tests.dp.pipeline.kinds.series_setup import (
    admissions,
    as_published,
    published_and_full,
    read_text,
    series_config,
    spec_of,
)


def _decimals(text: str) -> int:
    return len(text.partition(".")[2])


def test_a_known_standard_error_gives_its_digits() -> None:
    frame = pd.DataFrame(
        {
            "measure": ["count", "count", "sum_cost", "sum_cost"],
            "value": [2086.0911728424985, 12.5, 1234.5678, -0.00004],
            "std_error": [9.1786225266111678, 0.51, 31.6, 0.0342],
            "ci_low": [2068.1011, 11.5004, 1172.6, -0.067072],
            "ci_high": [2104.0812, 13.4996, 1296.5, 0.066992],
        }
    )
    text = rounded_figures(frame, ("count",))
    # a count to units (its se 9.18 would allow none finer; 0.51 would allow tenths), half to
    # even (12.5 -> 12); a sum to a tenth of its se: 31.6 -> units, 0.0342 -> thousandths
    assert text["value"].tolist() == ["2086", "12", "1235", "0.000"]
    assert text["std_error"].tolist() == ["9", "1", "32", "0.034"]
    assert text["ci_low"].tolist() == ["2068", "12", "1173", "-0.067"]
    assert text["ci_high"].tolist() == ["2104", "13", "1296", "0.067"]
    assert text["measure"].tolist() == frame["measure"].tolist()


def test_figures_csv_has_no_more_digits_than_the_noise_supports(tmp_path: Path) -> None:
    config = series_config(tmp_path, admissions(tmp_path, patients=200))
    spec = spec_of(config, "2026-02")
    run = publish(config, out=tmp_path / "out", period="2026-02")
    folder = run.path / "admissions_monthly"
    figures = read_text(folder / "figures.csv")
    assert len(figures) == 2 * 3 * 2 * 4  # periods, figures, measures, regions
    # Each row's numbers all have the decimals of its std_error; a std_error has two
    # significant digits (a count's: units), none more.
    for row in figures.itertuples():
        decimals = _decimals(str(row.std_error))
        assert all(_decimals(str(getattr(row, c))) == decimals for c in VALUES), row
        if row.measure == "count":
            assert decimals == 0, row
        else:
            se = float(str(row.std_error))
            assert float(f"{se:.2g}") == se, row
    # ... and they are exactly the full-precision figures (recomputed from the state) rounded.
    assert figures.equals(read_text(folder / "history.csv"))
    text, full = published_and_full(spec, folder)
    assert text.equals(as_published(full))
    # The state is not rounded: a period value is the full figure, not its published digits.
    state = json.loads((folder / "state.json").read_text())
    first = dict(zip(state["columns"], np.asarray(state["published"])[0], strict=True))
    january = full[(full["figure"] == "per_period") & (full["period"] == "2026-01")]
    scale = dict(zip(spec.labels, spec.scales, strict=True))  # a sum's state is over its hi
    for row in january.itertuples():
        assert first[f"{row.measure}:{row.group}"] * scale[str(row.measure)] == row.value
    assert not any(float(v) == round(float(v)) for v in first.values())
    details = json.loads((folder / "release.json").read_text())["details"]
    assert details["precision"] == PRECISION
    assert "rounded to the digits its noise supports" in (run.path / "report.md").read_text()


def test_the_history_keeps_earlier_runs_text_as_published(tmp_path: Path) -> None:
    """An earlier history is carried over as text: rounding a rounded number again could drop
    a digit (a std_error of 0.0996 is published as 0.100 at thousandths, and 0.100 itself would
    be rounded at hundredths), and a history from before the rounding keeps its digits."""
    config = series_config(tmp_path, admissions(tmp_path, patients=200))
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    before = (
        "published,period,figure,measure,group,value,std_error,ci_low,ci_high\n"
        "2026-01,2026-01,per_period,sum_cost,North,1.234,0.100,1.038,1.430\n"
        "2026-01,2026-01,per_period,count,South,12.345678901234567,0.5,11.3,13.3\n"
    )
    (earlier / "history.csv").write_text(before)
    spec = dataclasses.replace(
        spec_of(config, "2026-02"), published=Published(periods=(), state=None, folder=earlier)
    )
    frame = pd.DataFrame(
        [["2026-02", "2026-02", "per_period", "count", "North", 7.4, 3.2, 1.1, 13.7]],
        columns=list(read_text(earlier / "history.csv").columns),
    )
    out = tmp_path / "out"
    out.mkdir()
    write_figures(out, spec, frame)
    assert (out / "figures.csv").read_text().splitlines()[1].endswith("North,7,3,1,14")
    history = (out / "history.csv").read_text().splitlines()
    assert history[:3] == before.splitlines()
    assert history[3] == "2026-02,2026-02,per_period,count,North,7,3,1,14"


@pytest.mark.parametrize("revisions", [False, True])
def test_the_next_run_reads_full_precision(tmp_path: Path, revisions: bool) -> None:
    """Each run's figures are computed from the state at full precision: the second run's
    figures are those recomputed from its state, whose first rows are the first run's state
    bit for bit (nothing rounded in between)."""
    config = series_config(tmp_path, admissions(tmp_path, patients=200), revisions=revisions)
    out = tmp_path / "out"
    first = publish(config, out=out, period="2026-01").path / "admissions_monthly"
    spec = spec_of(config, "2026-02")
    state = spec.published.state
    assert state is not None
    one = json.loads((first / "state.json").read_text())
    assert np.array_equal(state.measurements, np.asarray(one["measurements"]))
    assert np.array_equal(state.published, np.asarray(one["published"]))
    second = publish(config, out=out, period="2026-02").path / "admissions_monthly"
    two = json.loads((second / "state.json").read_text())
    rows = len(one["measurements"])
    assert np.array_equal(np.asarray(two["measurements"])[:rows], state.measurements)
    if not revisions:  # published period values never change
        assert np.array_equal(np.asarray(two["published"])[:1], state.published)
    text, full = published_and_full(spec, second)
    assert text.equals(as_published(full))
