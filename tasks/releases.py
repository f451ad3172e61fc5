"""Tasks: read the data, bound the units, the shared scan, one release, the composition check.

Each wraps one step of :mod:`dp.pipeline.publish` (where the steps' order and bodies live) with
the settings of :mod:`tasks._common`: nothing they return is cached or persisted by Prefect,
only reading retries (on I/O errors), and logs carry names and costs, never values or counts.
"""

from __future__ import annotations

from prefect import task

from dppub.dp.engine import TableSource
from dppub.dp.pipeline import publish as steps
from dppub.dp.pipeline.execute import Filters
from dppub.dp.pipeline.kinds import ReleasePlan, ReleaseSummary
from dppub.dp.pipeline.plan import Plan
from dppub.dp.publication import Staging
from dppub.dp.runs import Run
from dppub.tasks._common import PRIVATE, Private, retry_on_io_error, run_logger
from dppub.tasks.retries import READ_RETRIES, READ_RETRY_DELAY_SECONDS

__all__ = ["bound_units", "compose", "compute_release", "read_source", "shared_scan"]


_READING: Private = {**PRIVATE, "retries": READ_RETRIES}


@task(
    name="read-source",
    **_READING,
    retry_delay_seconds=READ_RETRY_DELAY_SECONDS,
    retry_condition_fn=retry_on_io_error,
)
def read_source(plan: Plan, period: str) -> TableSource:
    """:func:`dp.pipeline.publish.read`."""
    return steps.read(plan, period, run_logger())


@task(name="bound-units", **PRIVATE)
def bound_units(plan: Plan, source: TableSource) -> Filters:
    """:func:`dp.pipeline.publish.bound_units`."""
    return steps.bound_units(plan, source, run_logger())


@task(name="shared-scan", **PRIVATE)
def shared_scan(plan: Plan, source: TableSource, filters: Filters) -> steps.Exact:
    """:func:`dp.pipeline.publish.scan`."""
    return steps.scan(plan, source, filters, run_logger())


# Each run is named after its release (a config name, never data): Prefect formats the
# template with the task's parameters.
@task(name="release", task_run_name="release-{release.name}", **PRIVATE)
def compute_release(
    release: ReleasePlan[object],
    exact: object,
    source: TableSource,
    staging: Staging,
    filters: Filters,
) -> ReleaseSummary:
    """:func:`dp.pipeline.publish.compute` (the job's fields as the task's parameters)."""
    job = steps.Release(plan=release, exact=exact, source=source, staging=staging, filters=filters)
    return steps.compute(job, run_logger())


@task(name="composition-check", **PRIVATE)
def compose(run: Run, summaries: list[ReleaseSummary], plan: Plan) -> tuple[int, str]:
    """:func:`dp.pipeline.publish.compose`."""
    return steps.compose(run, summaries, plan, run_logger())
