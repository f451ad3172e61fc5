"""A publication, in order, once: read, bound units, shared scan, compute every release,
compose, reports, publish, commit.

:func:`publish` is the whole run on a plan and a run already opened (:meth:`Plan.open_run`)
and held (``with run:`` settles it, whatever happens, in whoever opened it). *How* each step
runs is the caller's: :class:`Steps` holds one callable per step and the one that maps the
releases, so the same order runs in this thread (:func:`in_order`: tests, a run without
Prefect) or as Prefect tasks submitted to a task runner (``flows/publish.py``). The step
bodies are here too (:func:`read`, :func:`bound_units`, ...): a Prefect task only wraps one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dppub.dp.engine import TableSource, with_progress
from dppub.dp.faults import fault_point
from dppub.dp.pipeline import execute
from dppub.dp.pipeline.execute import Filters
from dppub.dp.pipeline.hooks import Hooks, stop_requested
from dppub.dp.pipeline.kinds import ReleasePlan, ReleaseSummary
from dppub.dp.pipeline.plan import Plan
from dppub.dp.pipeline.published import Publication, read_publication
from dppub.dp.pipeline.report_html import RunReports, write_reports
from dppub.dp.pipeline.units import unit_filters
from dppub.dp.publication import Staging
from dppub.dp.runs import Run

__all__ = [
    "Exact",
    "Log",
    "Publication",
    "Published",
    "Release",
    "Steps",
    "bound_units",
    "compose",
    "compute",
    "in_order",
    "publish",
    "read",
    "scan",
]

Log = logging.Logger | logging.LoggerAdapter[logging.Logger]
Exact = dict[str, Any]
"""Every release's exact value (what its kind's scan assembles), by release name: kept in
memory only."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Release:
    """One release to compute, with everything it reads and where it writes."""

    plan: ReleasePlan[Any]
    exact: object
    source: TableSource
    staging: Staging
    filters: Filters


@dataclass(frozen=True, slots=True, kw_only=True)
class Steps:
    """How each step of :func:`publish` runs.

    ``releases`` computes every release (one after another, on threads, as tasks): it returns
    the summaries in the order given, and -- whether one fails or not -- returns or raises only
    once no release is still running, so a failed run never discards the staging folder under
    a release that is still writing to it.
    """

    read: Callable[[Plan, str], TableSource]
    bound_units: Callable[[Plan, TableSource], Filters]
    scan: Callable[[Plan, TableSource, Filters], Exact]
    releases: Callable[[Sequence[Release]], list[ReleaseSummary]]
    compose: Callable[[Run, list[ReleaseSummary], Plan], tuple[int, str]]
    log: Log


@dataclass(frozen=True, slots=True, kw_only=True)
class Published:
    """What a published and committed run made."""

    run_id: str
    folder: Path
    """The run folder, in place."""
    summaries: list[ReleaseSummary]
    head: tuple[int, str]
    """The ledger head the releases were composed against."""
    reports: RunReports

    def publication(self, plan: Plan) -> Publication:
        """What the run published, as the Python API and the flow return it."""
        return read_publication(self.run_id, self.folder, plan.total)


def publish(plan: Plan, run: Run, steps: Steps) -> Published:
    """Run one publication of ``plan`` in ``run``, which the caller opened and holds (inside
    its ``with run:``, which settles it if anything here fails)."""
    steps.log.info(
        "run %s: %d release(s), epsilon=%g planned",
        run.run_id,
        len(plan.releases),
        plan.total.epsilon,
    )
    source = steps.read(plan, run.reservation.period)
    filters = steps.bound_units(plan, source)
    exact = steps.scan(plan, source, filters)
    jobs = [
        Release(plan=r, exact=exact[r.name], source=source, staging=run.staging, filters=filters)
        for r in plan.releases
    ]
    summaries = steps.releases(jobs)
    fault_point("staged")
    head = steps.compose(run, summaries, plan)
    reports = write_reports(plan, run, summaries, head)
    folder = run.publish(manifest=reports.manifest, report=reports.report)
    run.commit()
    steps.log.info("published run %s to %s", run.run_id, folder)
    return Published(
        run_id=run.run_id, folder=folder, summaries=summaries, head=head, reports=reports
    )


def in_order(log: Log | None = None) -> Steps:
    """Every step called in this thread, the releases one after another."""
    to = log or logging.getLogger("dppub")
    return Steps(
        read=lambda plan, period: read(plan, period, to),
        bound_units=lambda plan, source: bound_units(plan, source, to),
        scan=lambda plan, source, filters: scan(plan, source, filters, to),
        releases=lambda jobs: [compute(j, to) for j in jobs],
        compose=lambda run, summaries, plan: compose(run, summaries, plan, to),
        log=to,
    )


def read(plan: Plan, period: str, log: Log) -> TableSource:
    """The run's data as its engine reads it (the in-memory engine reads and validates it
    here, once, for every release)."""
    fault_point("reading")
    source = plan.source(period)
    log.info(
        "data of period %s: %d declared column(s), %s engine",
        period,
        len(plan.columns),
        type(source.backend).__name__,
    )
    return source


def bound_units(plan: Plan, source: TableSource, log: Log) -> Filters:
    """With a privacy unit: one pass choosing which rows of each unit the releases read (the
    selection is exact data: kept in memory only)."""
    reporting = _reporting(source, "privacy unit bounding pass", log)
    filters = unit_filters([r.bounding for r in plan.releases], reporting, plan.columns)
    if filters:
        log.info("privacy unit bounded for %d row selection(s)", len(filters))
    return filters


def scan(plan: Plan, source: TableSource, filters: Filters, log: Log) -> Exact:
    """Every release's exact aggregates in one pass (exact: kept in memory only)."""
    return execute.shared_scan(plan.releases, _reporting(source, "shared scan", log), filters)


def compute(job: Release, log: Log) -> ReleaseSummary:
    """One release into the staging folder; a completed one is reused, never redrawn. Its
    progress lines go to ``log``; it stops early once the run is interrupted
    (:func:`dp.pipeline.hooks.stop_requested`)."""
    kind, name = job.plan.kind, job.plan.name
    hooks = Hooks(
        progress=lambda line: log.info("%s %r: %s", kind, name, line),
        should_stop=stop_requested,
    )
    summary = execute.compute_release(
        job.plan, job.exact, job.source, job.staging, job.filters, hooks
    )
    log.info("%s %r computed (%s)", summary.kind, summary.name, summary.mechanism)
    return summary


def compose(run: Run, summaries: list[ReleaseSummary], plan: Plan, log: Log) -> tuple[int, str]:
    """Record the releases and recompute the run's cost from the ledger rows; publication is
    blocked unless it equals the plan and the reservation. Returns the ledger head."""
    head = run.compose([r for s in summaries for r in s.records()], plan.total)
    log.info("composition check passed: epsilon=%g", plan.total.epsilon)
    return head


def _reporting(source: TableSource, what: str, log: Log) -> TableSource:
    """``source`` logging its pass's progress at every tenth of its files (a source of more than
    one file; the log names counts of files, which its footers already show, never of rows)."""
    logged = -1

    def report(done: int, total: int) -> None:
        nonlocal logged
        tenth = 10 * done // total
        if total > 1 and tenth > logged:
            logged = tenth
            log.info("%s: %d of %d file(s) done", what, done, total)

    return replace(source, backend=with_progress(source.backend, report))
