"""``report.html`` of a real run: self-contained, the guarantee and the budget in context, a plot
per release; interval bands and coefficient intervals drawn when a release carries them and
said to be absent when it does not; a failing plot never stops the report."""

from __future__ import annotations

import html
import itertools
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from dppub.dp.budget import PrivacyCost
from dppub.dp.pipeline.html.figures import BAND, style
from dppub.dp.pipeline.kinds import ReleaseSummary
from dppub.dp.pipeline.kinds.base import Result
from dppub.dp.pipeline.kinds.regression.plot import regression_plot
from dppub.dp.pipeline.kinds.regression.result import RegressionResult
from dppub.dp.pipeline.kinds.workload.plot import _heatmap, workload_shape
from dppub.dp.pipeline.registry import kind_of
from dppub.dp.pipeline.report_html import budget_context, render_report_html
from tests.dp.pipeline.published_run import Demo


def _page(demo: Demo) -> str:
    return (demo.published.folder / "report.html").read_text(encoding="utf-8")


def _summary(demo: Demo, name: str) -> ReleaseSummary:
    return next(s for s in demo.published.summaries if s.name == name)


@pytest.mark.slow
def test_the_report_is_one_file_with_nothing_to_fetch(demo: Demo) -> None:
    page = _page(demo)
    assert "<script" not in page
    # No external resource of any kind: links, sources, stylesheets, fonts, CSS imports.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "@import" not in page
    assert all(ref.startswith("#") for ref in re.findall(r"url\(([^)]*)\)", page))  # in-page
    assert page.count("<svg") == 1 + len(demo.published.summaries)  # budget + one per release


def test_the_report_states_the_guarantee_and_the_budget_in_context(demo: Demo) -> None:
    page = _page(demo)
    man = demo.published.manifest
    assert man["guarantee"]["statement"] in page
    for s in demo.published.summaries:
        assert f'id="{s.name}"' in page
    ctx = budget_context(man)
    assert ctx.scope == "lifetime" and ctx.budget == 4.0 and ctx.run == pytest.approx(1.5)
    assert ctx.spent_before == pytest.approx(0.0)  # the first run on this data
    assert ctx.remaining == pytest.approx(2.5)
    assert "spent before this run" in page and "left for the next run" in page


def test_a_capped_budget_does_not_claim_what_was_spent_before(demo: Demo) -> None:
    man = {**demo.published.manifest}
    man["budget"] = {**man["budget"], "per": "month", "cap": [1.5, 0.0]}
    ctx = budget_context(man)
    assert ctx.spent_before is None  # remaining is the smaller of two limits: no subtraction
    assert "at most epsilon=1.5" in ctx.policy


def test_a_second_run_sees_the_first_in_its_budget_context(demo: Demo) -> None:
    man = {**demo.published.manifest, "remaining_epsilon": 1.0}
    assert budget_context(man).spent_before == pytest.approx(1.5)


def test_workload_shapes_from_details_files_and_labels() -> None:
    answers = pd.DataFrame({"answer": [1.0, 2.0, 3.0]})
    assert workload_shape("prefix", answers, 3, 1) == "prefix"
    assert workload_shape(None, answers, 3, 1) == "identity"
    assert workload_shape(None, answers, 2, 1) == "all_range"  # 3 ranges over 2 cells
    assert workload_shape(None, pd.DataFrame({"answer": [5.0]}), 4, 2) == "total"
    assert workload_shape(None, pd.DataFrame({"answer": [1.0] * 4}), 4, 2) == "marginals"
    labels = pd.DataFrame({"label": ["age = 17", "age = 18"], "answer": [1.0, 2.0]})
    assert workload_shape(None, labels, 2, 1) == "identity"


def _copy_run(demo: Demo, tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    shutil.copytree(demo.published.folder, folder)
    return folder


@pytest.mark.slow
def test_interval_bands_and_coefficient_intervals_are_drawn_when_published(
    demo: Demo, tmp_path: Path
) -> None:
    folder = _copy_run(demo, tmp_path)
    summaries = demo.published.summaries
    page = render_report_html(manifest=demo.published.manifest, summaries=summaries, folder=folder)
    age = page[page.index('id="age_cdf"') : page.index('id="income_ranges"')]
    assert BAND in age  # the band is drawn in its colour
    assert "interval − answer" in age  # and around each answer, on its own scale: visible
    assert "cumulative counts (CDF)" in age  # the labels say it is a prefix workload
    assert "published interval" in age
    assert "age &lt;= 17" in age  # the labelled answers are listed
    # The models' own published tables: coefficients with intervals, clusters with sizes.
    model = page[page.index('id="income_model"') : page.index('id="high_income"')]
    assert "line is its published interval" in model
    coefficients = pd.read_parquet(folder / "income_model" / "coefficients.parquet")
    assert f"{coefficients['ci_high'].iloc[-1]:.6g}" in model  # the intercept's interval
    clusters = page[page.index('id="work_patterns"') :]
    assert "marker area follows the published noisy cluster size" in clusters
    sizes = pd.read_parquet(folder / "work_patterns" / "clusters.parquet")["size"]
    assert f"(≈{sizes.iloc[0]:.0f})" in clusters


@pytest.mark.slow
def test_without_intervals_the_report_says_so(demo: Demo, tmp_path: Path) -> None:
    folder = _copy_run(demo, tmp_path)
    path = folder / "age_cdf" / "answers.parquet"
    pd.read_parquet(path)[["query", "answer"]].to_parquet(path)  # as published before intervals
    summaries = demo.published.summaries
    page = render_report_html(manifest=demo.published.manifest, summaries=summaries, folder=folder)
    age = page[page.index('id="age_cdf"') : page.index('id="income_ranges"')]
    assert BAND not in age
    assert "No intervals were published with these answers." in age
    # A coefficient table with empty intervals (what objective perturbation publishes).
    for name in ("coefficients.parquet", "coefficients.csv"):
        path = folder / "income_model" / name
        table = pd.read_parquet(path) if name.endswith(".parquet") else pd.read_csv(path)
        table[["std_error", "ci_low", "ci_high"]] = float("nan")
        if name.endswith(".parquet"):
            table.to_parquet(path)
        else:
            table.to_csv(path, index=False)
    page = render_report_html(
        manifest=demo.published.manifest, summaries=demo.published.summaries, folder=folder
    )
    model = page[page.index('id="income_model"') : page.index('id="high_income"')]
    assert "no interval was published for this model" in model
    assert "line is its published interval" not in model


@pytest.mark.slow
def test_a_plot_that_fails_leaves_a_note_and_the_report(demo: Demo, tmp_path: Path) -> None:
    folder = _copy_run(demo, tmp_path)
    (folder / "work_patterns" / "model.json").write_text(json.dumps({"centres": "broken"}))
    page = render_report_html(
        manifest=demo.published.manifest, summaries=demo.published.summaries, folder=folder
    )
    section = page[page.index('id="work_patterns"') :]
    assert "No plot for this release (KeyError" in section
    assert page.count("<svg") == len(demo.published.summaries)  # all the others are there


def test_the_markdown_report_nests_its_headings(demo: Demo) -> None:
    text = (demo.published.folder / "report.md").read_text()
    levels = [len(m.group(1)) for m in re.finditer(r"^(#+) ", text, flags=re.MULTILINE)]
    assert levels[0] == 1 and levels.count(1) == 1
    assert all(b - a <= 1 for a, b in itertools.pairwise(levels))  # no skipped level
    assert levels.count(3) == len(demo.published.summaries)  # one per release, under Releases
    assert max(levels) == 3


def _summary_of(name: str, kind: str, files: tuple[str, ...]) -> ReleaseSummary:
    return ReleaseSummary(
        name=name,
        release_kind=kind_of(kind),
        mechanism="m",
        cost=PrivacyCost(epsilon=0.1),
        is_dp=True,
        sensitivity=None,
        parts=(),
        files=files,
        output_hash="",
        result=Result(),
    )


def _texts(svg: str) -> list[str]:
    return [html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]


def test_a_heatmap_labels_every_category() -> None:
    # 16 education levels used to keep every second label (at most 12 ticks).
    levels = [f"level-{i:02d}" for i in range(16)]
    estimate = pd.DataFrame(
        {
            "sex": ["F", "M"] * 16,
            "education": [lv for lv in levels for _ in range(2)],
            "estimate": range(32),
        }
    )
    with style():
        svg = str(_heatmap(_summary_of("edu", "workload", ()), estimate, ["sex", "education"]))
    shown = _texts(svg)
    assert all(lv in shown for lv in levels)


def test_a_forest_plot_gives_each_coefficient_its_own_scale(tmp_path: Path) -> None:
    # A slope of 700 beside one of 0.003: on one shared axis the small one is a dot at 0.
    (tmp_path / "m").mkdir()
    pd.DataFrame(
        {
            "feature": ["age", "small", "intercept"],
            "coefficient": [700.0, 0.003, 5.0],
            "std_error": [30.0, 0.001, 1.0],
            "ci_low": [650.0, 0.001, 3.0],
            "ci_high": [760.0, 0.005, 7.0],
        }
    ).to_parquet(tmp_path / "m" / "coefficients.parquet")
    result = RegressionResult(
        model="linear", target="y", features=("age", "small"), tasks=0, zcdp_rho=None,
        interval_method="parametric bootstrap", interval_level=0.95, bootstrap_replicates=100,
        bootstrap_replicates_dropped=0, interval_covers=None,
        interval_columns=("std_error", "ci_low", "ci_high"),
    )  # fmt: skip
    summary = _summary_of("m", "regression", ("m/coefficients.parquet",))
    with style():
        svg = str(regression_plot(summary, result, tmp_path).figures[0])
    ticks = _texts(svg)
    assert "600" in ticks and "0.004" in ticks  # both scales are drawn
    assert "m: coefficients of y" in ticks


def test_every_kind_names_a_plot_that_takes_its_summary_result_and_folder() -> None:
    import inspect
    from importlib import import_module

    from dppub.dp.pipeline.registry import KINDS

    for kind in KINDS:
        assert kind.plots is not None, kind.label
        package = type(kind).__module__.rpartition(".")[0]
        draw = getattr(import_module(f"{package}.plot"), kind.plots)
        assert list(inspect.signature(draw).parameters)[:3] == ["summary", "result", "folder"]
