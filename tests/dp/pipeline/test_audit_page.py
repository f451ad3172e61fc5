"""The audit page: spending over time with sensible axes for one run and for a thousand, runs
counted as the budget check counts them, charged-but-unpublished runs shown, releases and
trace-regression tasks by their labels."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from dppub.commands import audit_payload
from dppub.dp.ledger import Ledger
from dppub.dp.pipeline.audit_page import dataset_runs, release_labels, render_audit_html
from dppub.dp.pipeline.html.figures import style
from dppub.dp.pipeline.html.spending_chart import RunPoint, Series, chart_limits, spending_chart
from tests.dp.pipeline.published_run import Demo
from tests.values import obj

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _runs(n: int, step: timedelta, epsilon: float) -> list[RunPoint]:
    return [
        RunPoint(ts=T0 + i * step, epsilon=epsilon, state="committed", period="all")
        for i in range(n)
    ]


def test_one_run_is_a_step_inside_the_axes_not_a_vertical_line() -> None:
    start, end, top = chart_limits(Series(name="d", runs=_runs(1, timedelta(0), 1.5), budget=4.0))
    assert start < T0 < end  # the run sits inside, with zero spending drawn before it
    assert end - start >= timedelta(minutes=2)
    assert top == pytest.approx(4.0 * 1.08)  # the budget is in view, the axis does not run away


def test_a_thousand_runs_fill_the_axes_and_the_budget_bounds_it() -> None:
    runs = _runs(1000, timedelta(hours=9), 0.0035)
    start, end, top = chart_limits(Series(name="d", runs=runs, budget=4.0))
    span = runs[-1].ts - runs[0].ts
    assert runs[0].ts - start == span * 0.04
    assert end - runs[-1].ts == span * 0.04
    assert top == pytest.approx(4.0 * 1.08)  # spent 3.5 of 4: the budget sets the top


def test_overspending_beyond_a_lowered_budget_stays_in_view() -> None:
    runs = _runs(3, timedelta(days=1), 1.0)
    assert chart_limits(Series(name="d", runs=runs, budget=2.0))[2] == pytest.approx(3.0 * 1.08)


@pytest.mark.slow
def test_runs_count_what_the_budget_check_counts(demo: Demo) -> None:
    payload = audit_payload(str(demo.ledger), None)
    history = Ledger(str(demo.ledger), create=False).history()
    runs = dataset_runs(payload, history)["census_demo"]
    assert [r.state for r in runs] == ["committed", "charged"]
    assert [r.epsilon for r in runs] == pytest.approx([1.5, 0.3])  # a charge: its draw only
    assert sum(r.epsilon for r in runs) == pytest.approx(
        obj(obj(payload["datasets"])["census_demo"])["lifetime_spent_epsilon"]
    )


@pytest.mark.slow
def test_the_page_shows_the_chart_the_charged_run_and_the_task_labels(demo: Demo) -> None:
    payload = audit_payload(str(demo.ledger), None)
    history = Ledger(str(demo.ledger), create=False).history()
    labels = {r["label"] for r in release_labels(payload, history)["census_demo"]}
    tasks = {f"income_by_education[{t}]" for t in ("Preschool", "HS-grad", "Doctorate")}
    assert tasks <= labels
    assert not any("[0" in label for label in labels)  # never task indices
    page = render_audit_html(payload, history)
    assert "<script" not in page
    assert page.count("<svg") == 1
    assert "charged, not published" in page  # the chart's marker for it
    charged = page[page.index("Charged but not published") : page.index("Releases by label")]
    assert demo.charged_run in charged
    assert "age_cdf" in charged  # what it drew noise for
    assert "income_by_education[Bachelors]" in page
    # Dates never wrap inside a narrow cell (a date over a time read as two values).
    cells = re.findall(r"<td>([^<]*\d{4}-\d\d-\d\d \d\d:[^<]*)</td>", page)
    assert not cells, cells  # each is in a span that does not wrap
    assert page.count('<span class="when">') >= 2
    assert ".when { white-space: nowrap; }" in page


def test_a_renamed_dataset_keeps_its_history(demo: Demo) -> None:
    payload = audit_payload(str(demo.ledger), None)
    history = Ledger(str(demo.ledger), create=False).history()
    renamed = {"census_2026": obj(payload["datasets"])["census_demo"]}
    runs = dataset_runs({**payload, "datasets": renamed}, history)
    assert len(runs["census_2026"]) == 2  # rows written under the old name still count


def test_a_dataset_without_runs_gets_no_chart() -> None:
    payload = {
        "chain_ok": True,
        "rows": 0,
        "head": "0" * 64,
        "problems": [],
        "datasets": {
            "fresh": {
                "source": "/data/x.parquet",
                "budget": {"epsilon": 1.0, "delta": 0.0, "per": None, "cap": None, "renew": False},
                "budget_text": "epsilon=1 delta=0 lifetime",
                "budget_epsilon": 1.0,
                "period": "all",
                "lifetime_spent_epsilon": 0.0,
                "spent_epsilon": 0.0,
                "remaining_epsilon": 1.0,
                "runs": 0,
                "charged_runs": 0,
                "pending_runs": 0,
                "aborted_runs": 0,
                "periods": {},
                "charged": [],
                "amendments": [],
            }
        },
    }
    page = render_audit_html(payload, [])
    assert "<svg" not in page
    assert "No run has spent from this budget yet." in page


def test_the_time_axis_says_times_and_the_date_in_full() -> None:
    # Runs seconds apart: matplotlib's default concise labels read "21:55, 30, 21:56" and
    # "2026-Jan-01 00:01"; every tick must be a time on its own, the date under the axis ISO.
    runs = _runs(4, timedelta(seconds=40), 0.5)
    with style():
        svg = str(spending_chart(Series(name="d", runs=runs, budget=4.0)))
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    ticks = [t for t in texts if re.fullmatch(r"[\d:]+", t) and t != "0"]
    assert ticks and all(re.fullmatch(r"\d\d:\d\d(:\d\d)?", t) for t in ticks), ticks
    assert "2026-01-01" in texts
