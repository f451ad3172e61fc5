"""Tasks: read the data, the shared scan, one release, the composition check.

Thin adapters around :mod:`dp.pipeline` and :mod:`dp.runs` with the settings of
:mod:`tasks._common`: nothing they return is cached or persisted by Prefect, only reading
retries (on I/O errors), and logs carry names and costs, never values or counts.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from prefect import task

from dp.engine import TableSource, with_progress
from dp.faults import fault_point
from dp.pipeline import execute
from dp.pipeline.execute import Filters
from dp.pipeline.kinds import ReleasePlan, ReleaseSummary
from dp.pipeline.plan import Plan
from dp.pipeline.units import unit_filters
from dp.publication import Staging
from dp.runs import Run
from tasks._common import PRIVATE, retry_on_io_error, run_logger

__all__ = ["bound_units", "compose", "compute_release", "read_source", "shared_scan"]


@task(
    name="read-source",
    **{**PRIVATE, "retries": 2},
    retry_delay_seconds=1,
    retry_condition_fn=retry_on_io_error,
)
def read_source(plan: Plan, period: str) -> TableSource:
    """The run's data as its engine reads it (the in-memory engine reads and validates it
    here, once, for every release)."""
    fault_point("reading")
    source = plan.source(period)
    run_logger().info(
        "data of period %s: %d declared column(s), %s engine",
        period,
        len(plan.columns),
        type(source.backend).__name__,
    )
    return source


@task(name="bound-units", **PRIVATE)
def bound_units(plan: Plan, source: TableSource) -> Filters:
    """With a privacy unit: one pass choosing which rows of each unit the releases read (the
    selection is exact data: kept in memory only)."""
    reporting = _reporting(source, "privacy unit bounding pass")
    filters = unit_filters([r.bounding for r in plan.releases], reporting, plan.columns)
    if filters:
        run_logger().info("privacy unit bounded for %d row selection(s)", len(filters))
    return filters


@task(name="shared-scan", **PRIVATE)
def shared_scan(plan: Plan, source: TableSource, filters: Filters) -> dict[str, list[Any]]:
    """Every release's exact aggregates in one pass (exact: kept in memory only)."""
    return execute.shared_scan(plan.releases, _reporting(source, "shared scan"), filters)


def _reporting(source: TableSource, what: str) -> TableSource:
    """``source`` logging its pass's progress at every tenth of its files (a source of more than
    one file; the log names counts of files, which its footers already show, never of rows)."""
    logger = run_logger()
    logged = -1

    def report(done: int, total: int) -> None:
        nonlocal logged
        tenth = 10 * done // total
        if total > 1 and tenth > logged:
            logged = tenth
            logger.info("%s: %d of %d file(s) done", what, done, total)

    return replace(source, backend=with_progress(source.backend, report))


@task(name="release", **PRIVATE)
def compute_release(
    release: ReleasePlan[Any],
    exact: list[Any],
    source: TableSource,
    staging: Staging,
    filters: Filters,
) -> ReleaseSummary:
    """One release into the staging folder; a completed one is reused, never redrawn."""
    summary = execute.compute_release(release, exact, source, staging, filters)
    run_logger().info("%s %r computed (%s)", summary.kind, summary.name, summary.mechanism)
    return summary


@task(name="composition-check", **PRIVATE)
def compose(run: Run, summaries: list[ReleaseSummary], plan: Plan) -> tuple[int, str]:
    """Record the releases and recompute the run's cost from the ledger rows; publication is
    blocked unless it equals the plan and the reservation. Returns the ledger head."""
    head = run.compose([r for s in summaries for r in s.records()], plan.total)
    run_logger().info("composition check passed: epsilon=%g", plan.total.epsilon)
    return head
