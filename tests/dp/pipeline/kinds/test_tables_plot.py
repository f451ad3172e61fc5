"""A table's figures in ``report.html`` draw what their captions promise: a quantile's
published interval (or, drawn by the exponential mechanism, the statement that it has none and
its rank bound), and a heatmap's numbers and margins."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from matplotlib.collections import LineCollection

from dppub.dp.pipeline.kinds.tables.plot import TOTAL, heatmap_grid, measure_figure
from dppub.dp.pipeline.kinds.tables.result import TableResult
from tests.dp.pipeline.published_run import demo_config, publish_in_process


def _result(components: dict[str, Any]) -> TableResult:
    return TableResult(
        keys=("sex",),
        key_policy="declared",
        dimensions=1,
        groups=3,
        rows=3,
        measures=("quantile(hours, 0.5)",),
        split={},
        split_rule="",
        components=components,
        bounds={},
        margins=False,
        rounding="none",
        interval_method="",
        interval_level=0.95,
    )


def test_a_quantile_figure_draws_each_published_interval_exactly() -> None:
    from dppub.dp.pipeline.html.figures import style

    # The third answer lies outside its rounded interval's end: its whisker still spans the
    # published ci_low..ci_high (old code: bars, whiskers clipped at the answer).
    rows = pd.DataFrame(
        {
            "sex": ["Female", "Male", "Other"],
            "measure": "quantile(hours, 0.5)",
            "answer": [40.0, 41.5, 38.0],
            "ci_low": [38.9, 39.0, 38.5],
            "ci_high": [40.9, 44.0, 39.5],
        }
    )
    with style():
        fig, caption = measure_figure("t", "quantile(hours, 0.5)", rows, ["sex"], _result({}))
    (ax,) = fig.axes
    whiskers = [c for c in ax.collections if isinstance(c, LineCollection) and c.get_segments()]
    (lines,) = whiskers
    drawn = [tuple(map(tuple, seg)) for seg in lines.get_segments()]
    assert drawn == [
        ((0.0, 38.9), (0.0, 40.9)),
        ((1.0, 39.0), (1.0, 44.0)),
        ((2.0, 38.5), (2.0, 39.5)),
    ]
    assert not ax.patches  # points, not bars from zero
    assert "Whiskers: each answer's published 95% interval" in caption
    assert "no published interval" not in caption


def test_an_exponential_quantile_figure_promises_no_interval_and_states_its_rank_bound() -> None:
    from dppub.dp.pipeline.html.figures import style

    rows = pd.DataFrame(
        {
            "sex": ["Female", "Male"],
            "measure": "quantile(hours, 0.5)",
            "answer": [40.0, 41.5],
            "ci_low": [np.nan, np.nan],
            "ci_high": [np.nan, np.nan],
        }
    )
    result = _result(
        {
            "cdf(hours)": {
                "epsilon": 1.0,
                "sensitivity": 1.0,
                "noise_scale": 1.0,
                "rank_error_95": 71.49,
                "method": "exponential mechanism",
            }
        }
    )
    with style():
        fig, caption = measure_figure("t", "quantile(hours, 0.5)", rows, ["sex"], result)
    lines = [c for c in fig.axes[0].collections if isinstance(c, LineCollection)]
    assert not any(len(c.get_segments()) for c in lines)
    assert "Whiskers" not in caption
    assert "These answers have no published interval" in caption
    assert "exponential mechanism" in caption and "within 71.5 rows" in caption


def test_a_heatmap_grid_has_the_published_margins_as_a_total_row_and_column() -> None:
    rows = pd.DataFrame(
        {
            "sex": ["F", "F", "M", "M", "F", "M", "*", "*", "*"],
            "marital": ["a", "b", "a", "b", "*", "*", "a", "b", "*"],
            "answer": [1.0, 2.0, 3.0, np.nan, 3.0, 7.0, 4.0, 6.0, 10.0],
        }
    )
    text = pd.Series(["1", "2", "3", "", "3", "7", "4", "6", "10"])
    values, words = heatmap_grid(rows, ["sex", "marital"], text)
    assert list(values.index) == ["F", "M", TOTAL] and list(values.columns) == ["a", "b", TOTAL]
    assert words.to_numpy().tolist() == [["1", "2", "3"], ["3", "", "7"], ["4", "6", "10"]]
    assert values.loc[TOTAL, TOTAL] == 10.0 and np.isnan(values["b"]["M"])


def _config(tmp_path: Path, data: Path, tables: list[dict[str, Any]]) -> Path:
    path = demo_config(tmp_path, data)
    raw = yaml.safe_load(path.read_text())
    for section in ("anonymize", "workloads", "regressions", "clustering"):
        raw.pop(section, None)
    raw["tables"] = tables
    raw["dataset"]["budget"] = {"epsilon": 4.0, "delta": 1e-5}
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.mark.slow  # ~3 s: two tables published, report.html drawn
def test_report_html_shows_heatmap_numbers_margins_and_honest_quantile_captions(
    tmp_path: Path, census_small: Path
) -> None:
    tables = [
        {
            "name": "median_hours",
            "epsilon": 1.0,
            "by": ["sex"],
            "measures": [{"quantile": "hours", "at": [0.5]}],
        },
        {
            "name": "by_sex_marital",
            "epsilon": 1.0,
            "by": ["sex", "marital"],
            "measures": ["count"],
            "margins": True,
            "round": "integer",
        },
        {
            "name": "people_by_zip",
            "epsilon": 1.0,
            "delta": 1e-6,
            "by": ["zip"],
            "keys": "private",
            "measures": ["count"],
        },
    ]
    config = _config(tmp_path, census_small, tables)
    folder = publish_in_process(config, tmp_path / "ledger.sqlite", tmp_path / "out").folder
    # Issue 37: each mechanism under its own name in report.md's budget table too (old code,
    # before issue 34: 'laplace' for an exponential-mechanism quantile and for key selection)
    report = (folder / "report.md").read_text()
    assert "| median_hours | table | exponential |" in report
    assert "| people_by_zip | table | optimal_threshold+laplace |" in report
    assert "| by_sex_marital | table | laplace |" in report
    html = (folder / "report.html").read_text()
    # old code: "the whiskers are each answer's published 95% interval" under a quantile drawn
    # by the exponential mechanism, which publishes none (nothing was drawn)
    assert "These answers have no published interval (hollow points)" in html
    assert "the whiskers are each answer" not in html
    # old code: the heatmap had colours only, no numbers and no margins
    answers = pd.read_csv(folder / "by_sex_marital" / "answers.csv", dtype=str)
    grand = answers[(answers["sex"] == "*") & (answers["marital"] == "*")]["answer"].item()
    texts = re.findall(r">([^<>]+)</text>", html)
    for cell in answers["answer"]:
        assert cell in texts, cell
    assert grand in texts and TOTAL in texts
    assert "the Total row and column are the published margins" in html
