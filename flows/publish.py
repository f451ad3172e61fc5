"""The ``publish`` flow: plan -> open (reserve) -> read -> scan -> releases -> compose ->
publish -> commit, and whatever happens, settle.

Orchestration only: the plan comes from :func:`dp.pipeline.plan.load_plan`, the run protocol
from :class:`dp.runs.Run` (leaving ``with run`` settles it: committed if published, charged if
it drew noise, else aborted), and every data-touching step is a task (``tasks/``).
"""

from __future__ import annotations

from prefect import flow, get_run_logger
from prefect.artifacts import (
    create_link_artifact,
    create_markdown_artifact,
    create_table_artifact,
)
from prefect.futures import PrefectFuture, wait
from prefect.runtime import deployment

from dp.faults import fault_point
from dp.ledger import Ledger
from dp.pipeline.kinds import ReleaseSummary
from dp.pipeline.plan import Plan, load_plan
from dp.pipeline.report import budget_rows
from dp.pipeline.report_html import write_reports
from dp.runs import Run
from flows.logs import quiet_expected_errors
from flows.server import check_served
from tasks.releases import bound_units, compose, compute_release, read_source, shared_scan

__all__ = ["publish"]


def _releases(plan: Plan, run: Run, period: str) -> list[ReleaseSummary]:
    """Read the data, fold the shared scan, compute every release.

    The releases are independent of each other: all are submitted to the flow's task runner
    (threads, or the DaskTaskRunner's workers) and every one is waited for before a result or
    a failure is returned, so a failed run never discards the staging folder under a task
    that is still writing to it.
    """
    source = read_source(plan, period)
    filters = bound_units(plan, source)
    exact = shared_scan(plan, source, filters)
    futures: list[PrefectFuture[ReleaseSummary]] = []
    try:
        for r in plan.releases:
            call = (r, exact[r.name], source, run.staging, filters)
            futures.append(compute_release.submit(*call))
    finally:
        wait(futures)  # even if a later submit failed: nothing may still be writing
    return [f.result() for f in futures]


@flow(name="dppub-publish", persist_result=False, validate_parameters=False)
def publish(
    config_path: str,
    ledger_path: str,
    out_dir: str,
    run_id: str | None = None,
    engine: str | None = None,
) -> str:
    """Run one private publication; returns the run id. See the module docstring.

    With ``run_id`` the caller (``dppub run``) has already opened the run and holds it; the
    flow attaches to that reservation, which must match this plan.
    """
    quiet_expected_errors()  # in whichever process runs the flow (CLI or a served run)
    if deployment.id is not None:  # a served run: nothing may differ from the registration
        paths = {"config_path": config_path, "ledger_path": ledger_path, "out_dir": out_dir}
        check_served({**paths, "run_id": run_id, "engine": engine})
    logger = get_run_logger()
    plan = load_plan(config_path, engine)
    ledger = Ledger(ledger_path)
    if run_id is None:
        run = plan.open_run(ledger, out_dir)
    else:
        run = Run.attach(ledger, out_dir, plan.run_plan, run_id)
    cfg = plan.config
    logger.info(
        "run %s: %d release(s), epsilon=%g planned",
        run.run_id,
        len(plan.releases),
        plan.total.epsilon,
    )
    with run:
        reservation = run.reservation
        summaries = _releases(plan, run, reservation.period)
        fault_point("staged")
        head = compose(run, summaries, plan)
        reports = write_reports(plan, run, summaries, head)
        final = run.publish(manifest=reports.manifest, report=reports.report)
        run.commit()
    key = f"dppub-budget-{cfg.dataset.name.lower().replace('_', '-')}"
    create_table_artifact(
        key=f"{key}-table",
        table=budget_rows(summaries),
        description=f"Releases and privacy costs of run {run.run_id}",
    )
    link = (final / "report.html").resolve().as_uri()  # a local file: the run folder
    create_markdown_artifact(
        key=key,
        markdown=f"# dppub run `{run.run_id}` on `{cfg.dataset.name}`\n\n{reports.table}\n\n"
        f"Ledger head: seq {head[0]}, `{head[1]}`\n\nReport with plots: [report.html]({link})\n",
        description=f"Privacy budget of run {run.run_id}",
    )
    create_link_artifact(
        key=f"{key}-report",
        link=link,
        link_text=f"report.html of run {run.run_id}",
        description=f"The report of run {run.run_id}: budget, guarantee, a plot per release",
    )
    logger.info("published run %s to %s", run.run_id, final)
    return run.run_id
