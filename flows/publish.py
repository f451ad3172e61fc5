"""The ``publish`` flow: :func:`dp.pipeline.publish.publish` with Prefect's tasks and map.

The flow holds no step order of its own: the order is :mod:`dp.pipeline.publish`'s, each step
runs as the task of :mod:`tasks.releases` that wraps it, the releases are submitted to the
flow's task runner (threads, or the DaskTaskRunner's workers), and the flow adds its artifacts.

Who opens a run settles it: ``dppub run`` opens (and reserves) before Prefect starts and hands
the held run in-process (:class:`Handed`); a served run opens its own here, through the same
:meth:`dp.pipeline.plan.Plan.open_run`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.futures import PrefectFuture, wait
from prefect.runtime import deployment, flow_run

from dppub.dp.pipeline.hooks import clear_stop, request_stop
from dppub.dp.pipeline.kinds import ReleaseSummary
from dppub.dp.pipeline.plan import Plan, ledger_for, load_plan
from dppub.dp.pipeline.publish import Published, Release, Steps
from dppub.dp.pipeline.publish import publish as publication
from dppub.dp.pipeline.published import Publication
from dppub.dp.pipeline.report import budget_rows
from dppub.dp.runs import Run
from dppub.flows.logs import quiet_expected_errors
from dppub.flows.server import check_served
from dppub.tasks.releases import bound_units, compose, compute_release, read_source, shared_scan

__all__ = ["Handed", "publish"]


class Handed:
    """A run the calling process opened and holds (``dppub run``), handed to the flow
    in-process. Never serialised: Prefect records the parameter as ``<Handed>`` (it has no
    ``__dict__`` to walk)."""

    __slots__ = ("plan", "run")

    def __init__(self, plan: Plan, run: Run) -> None:
        self.plan = plan
        self.run = run


def _releases(jobs: Sequence[Release]) -> list[ReleaseSummary]:
    """Every release submitted to the task runner; every one is waited for before a result or
    a failure is returned (even if a later submit failed: nothing may still be writing). If
    the wait is interrupted (a signal; Prefect's SIGTERM bridge raises here, before dppub's
    handler hears of it), the releases still running are asked to stop at their next safe
    point (:func:`dp.pipeline.hooks.request_stop`), so the run settles promptly."""
    futures: list[PrefectFuture[ReleaseSummary]] = []
    stopped = False
    try:
        for j in jobs:
            futures.append(compute_release.submit(j.plan, j.exact, j.source, j.staging, j.filters))
        wait(futures)
    except BaseException:
        stopped = True
        request_stop()
        raise
    finally:
        wait(futures)
        if stopped:
            clear_stop()  # a served process runs the next flow unasked
    return [f.result() for f in futures]


def _steps() -> Steps:
    return Steps(
        read=read_source,
        bound_units=bound_units,
        scan=shared_scan,
        releases=_releases,
        compose=compose,
        log=get_run_logger(),
    )


@flow(name="dppub-publish", persist_result=False, validate_parameters=False)
def publish(
    config_path: str,
    ledger_path: str,
    out_dir: str,
    engine: str | None = None,
    handed: Handed | None = None,
) -> Publication:
    """Run one private publication; returns what it published (only public values: Prefect
    persists no result of this flow).

    With ``handed`` (``dppub run``) the run is already open and the caller settles it; the
    paths only name it in Prefect. Without (a served run, or a subflow of a user's flow), the
    flow opens the run in the config's ledger (``ledger_path`` may not name another) and
    settles it.
    """
    quiet_expected_errors()  # in whichever process runs the flow (CLI or a served run)
    if deployment.id is not None:  # a served run: nothing may differ from the registration
        paths = {"config_path": config_path, "ledger_path": ledger_path, "out_dir": out_dir}
        given = None if handed is None else "given"
        check_served({**paths, "engine": engine, "handed": given})
    if handed is not None:
        plan = handed.plan
        done = publication(plan, handed.run, _steps())
    else:
        # A served run's series period is the one due at its scheduled time, not when a busy
        # worker got to it (a backlog of monthly runs publishes each its own month).
        at = _scheduled_time() if deployment.id is not None else None
        plan = load_plan(config_path, engine, ledger=ledger_path, at=at)
        with plan.open_run(ledger_for(plan.config, ledger_path), out_dir) as run:
            done = publication(plan, run, _steps())
    _artifacts(done, plan)
    return done.publication(plan)


def _scheduled_time() -> datetime:
    """The running flow run's scheduled start time, in UTC."""
    when = flow_run.scheduled_start_time
    return datetime.fromisoformat(when.isoformat()).astimezone(UTC)


def _artifacts(done: Published, plan: Plan) -> None:
    """The budget table, the run's summary and its report (report.md, which the UI renders;
    a ``file://`` link would not open from a browser)."""
    name = plan.config.dataset.name
    key = f"dppub-budget-{name.lower().replace('_', '-')}"
    run_id = done.run_id
    create_table_artifact(
        key=f"{key}-table",
        table=budget_rows(done.summaries),
        description=f"Releases and privacy costs of run {run_id}",
    )
    head = done.head
    create_markdown_artifact(
        key=key,
        markdown=f"# dppub run `{run_id}` on `{name}`\n\n{done.reports.table}\n\n"
        f"Ledger head: seq {head[0]}, `{head[1]}`\n\n"
        f"Report with plots: `report.html` in `{done.folder}`\n",
        description=f"Privacy budget of run {run_id}",
    )
    create_markdown_artifact(
        key=f"{key}-report",
        markdown=done.reports.report,
        description=f"The report of run {run_id} (report.md; report.html adds the plots)",
    )
