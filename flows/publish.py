"""The ``publish`` flow: plan -> reserve -> execute -> compose -> publish -> commit.

Orchestration only: every step is a task (``tasks/``) around the privacy core (``dp/``).

* plan: the config declares every release's epsilon/delta; the composed total is known before
  any private data is read;
* reserve: the total is held in the ledger atomically (concurrent runs cannot overspend);
* execute: releases are computed into a private staging folder;
* compose: release rows are written to the ledger and the run's cost is recomputed from them;
* publish: the staging folder is renamed into place (atomic);
* commit: the ledger records the publication.

However the run ends, :func:`dp.runs.settle` decides what it costs: a published run is
committed, a run that drew noise is charged for its draws, only a run that drew nothing is
aborted at no cost; a crash leaves the whole hold counted until ``dppub recover``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pandas as pd
from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.futures import wait

from dp.budget import PrivacyCost
from dp.engine import TableSource
from dp.faults import fault_point
from dp.io import complete_rows
from dp.ledger import Ledger
from dp.publication import Staging
from dp.runs import Run
from flows.config import PipelineConfig, load_config, plan_releases, regression_mechanism
from flows.logs import quiet_expected_errors
from flows.report import budget_rows, budget_table, guarantee_statement, render_report
from flows.stages import (
    anonymity_hierarchies,
    clustering_estimator,
    regression_estimator,
    table_source,
    workload_axes,
    workload_operator,
)
from tasks.anonymize import anonymize_release
from tasks.ledger import check_composition
from tasks.read import read_private_table
from tasks.regression import fit_model
from tasks.workload import answer_workload

__all__ = ["publish"]


def _execute(cfg: PipelineConfig, staging: Staging, period: str) -> list[dict[str, Any]]:
    """Compute every release of the run charged to ``period`` into the staging folder; returns
    their summaries."""
    path = cfg.data_path(period)
    engine = cfg.dataset.engine
    source: pd.DataFrame | TableSource
    if engine == "pandas":  # one frame for all releases; missing values marked NA
        source = read_private_table(path, cfg.schema, cfg.used_columns)
    else:  # every stage folds its exact aggregates over record batches: no column is loaded
        source = table_source(cfg, engine, period)

    def data(*columns: str | None) -> pd.DataFrame | TableSource:
        """What a release reads: the complete rows of its columns (a scan drops the others)."""
        if isinstance(source, TableSource):
            return source
        return complete_rows(source, cfg.schema, [c for c in columns if c is not None])

    calls: list[tuple[Any, Any, dict[str, Any]]] = []
    if cfg.anonymize is not None and cfg.anonymize.publish:
        a = cfg.anonymize
        rows = data(*a.quasi_identifiers, *a.include)
        calls.append(
            (
                anonymize_release,
                rows,
                dict(
                    name=a.name,
                    hierarchies=anonymity_hierarchies(cfg, rows),
                    k=a.k,
                    max_suppression=a.max_suppression,
                    metric=a.metric,
                    include=a.include,
                    staging=staging,
                ),
            )
        )
    for w in cfg.workloads:
        axes = workload_axes(cfg, w)
        W, A = workload_operator(w, axes)
        calls.append(
            (
                answer_workload,
                data(*(axis.column for axis in axes)),
                dict(
                    name=w.name,
                    epsilon=w.epsilon,
                    axes=axes,
                    workload=W,
                    strategy=A,
                    reconstruction=w.reconstruction,
                    staging=staging,
                ),
            )
        )
    for r in cfg.regressions:
        labels = cfg.schema[r.tasks].categories or () if r.tasks else ()
        calls.append(
            (
                fit_model,
                data(*r.features, r.target, r.tasks),
                dict(
                    name=r.name,
                    kind="regression",
                    mechanism=regression_mechanism(r),
                    estimator=regression_estimator(cfg, r),
                    features=r.features,
                    target=r.target,
                    positive=r.positive,
                    threshold=r.threshold,
                    task_column=r.tasks,
                    task_labels=labels,
                    staging=staging,
                ),
            )
        )
    for k in cfg.clustering:
        calls.append(
            (
                fit_model,
                data(*k.features),
                dict(
                    name=k.name,
                    kind="clustering",
                    mechanism="dp-lloyd-laplace",
                    estimator=clustering_estimator(cfg, k),
                    features=k.features,
                    staging=staging,
                ),
            )
        )
    return _run(calls, parallel=engine == "dask")


def _run(calls: list[tuple[Any, Any, dict[str, Any]]], *, parallel: bool) -> list[dict[str, Any]]:
    """Run the release tasks; returns their summaries in call order.

    On the dask engine the releases (independent of each other) are all submitted to the task
    runner -- the DaskTaskRunner that :func:`flows.runner.flow_for` gives the flow -- and every
    one is waited for before a result or a failure is returned, so a failed run never discards
    the staging folder under a task that is still writing to it. Otherwise they run in order
    in the flow's thread.
    """
    if not parallel:
        return [task(data, **kwargs) for task, data, kwargs in calls]
    futures: list[Any] = []
    try:
        for task, data, kwargs in calls:
            futures.append(task.submit(data, **kwargs))
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

    With ``run_id`` the caller (``dppub run``) has already opened the run and holds it (see
    :meth:`dp.runs.Run.open`); the flow attaches to that reservation, which must match this plan.
    """
    quiet_expected_errors()  # in whichever process runs the flow (CLI or a served run)
    logger = get_run_logger()
    cfg = load_config(config_path)
    if engine is not None:  # --engine overrides the config (same plan, same cost)
        cfg = cfg.model_copy(update={"dataset": cfg.dataset.model_copy(update={"engine": engine})})
    plan, total = plan_releases(cfg)
    ledger = Ledger(ledger_path)
    if run_id is None:
        run = Run.open(ledger, out_dir, cfg.run_plan(total))
    else:
        run = Run.attach(ledger, out_dir, cfg.run_plan(total), run_id)
    logger.info("run %s: %d release(s), epsilon=%g planned", run.run_id, len(plan), total.epsilon)
    with run:
        summaries = _execute(cfg, run.staging, run.reservation.period)
        fault_point("staged")
        head = check_composition(run, summaries=summaries, planned=total)
        table = budget_table(summaries, total=total, budget=cfg.budget, remaining=run.remaining)
        manifest = _manifest(cfg, run, summaries, total, head)
        report = render_report(
            dataset=cfg.dataset.name,
            run_id=run.run_id,
            summaries=summaries,
            table=table,
            ledger_head=head,
            guarantee=manifest["guarantee"],
        )
        final = run.publish(manifest=manifest, report=report)
        run.commit()
    key = f"dppub-budget-{cfg.dataset.name.lower().replace('_', '-')}"
    create_table_artifact(
        key=f"{key}-table",
        table=budget_rows(summaries),
        description=f"Releases and privacy costs of run {run.run_id}",
    )
    create_markdown_artifact(
        key=key,
        markdown=f"# dppub run `{run.run_id}` on `{cfg.dataset.name}`\n\n{table}\n\n"
        f"Ledger head: seq {head[0]}, `{head[1]}`\n",
        description=f"Privacy budget of run {run.run_id}",
    )
    logger.info("published run %s to %s", run.run_id, final)
    return run.run_id


def _manifest(
    cfg: PipelineConfig,
    run: Run,
    summaries: list[dict[str, Any]],
    total: PrivacyCost,
    head: tuple[int, str],
) -> dict[str, Any]:
    keys = (
        "name",
        "kind",
        "mechanism",
        "epsilon",
        "delta",
        "sensitivity",
        "is_dp",
        "files",
        "output_hash",
    )
    covered = [s["name"] for s in summaries if s["is_dp"]]
    syntactic = [s["name"] for s in summaries if not s["is_dp"]]
    res = run.reservation
    return {
        "run_id": run.run_id,
        "dataset": cfg.dataset.name,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "config_hash": cfg.config_hash,
        "releases": [{k: s.get(k) for k in keys} for s in summaries],
        "guarantee": guarantee_statement(covered, syntactic, total),
        "total_epsilon": total.epsilon,
        "total_delta": total.delta,
        "budget": cfg.budget_policy.to_json(),
        "budget_epsilon": cfg.budget.epsilon,
        "budget_delta": cfg.budget.delta,
        "remaining_epsilon": run.remaining.epsilon,
        "budget_period": res.period,
        "budget_scope": res.scope,
        "ledger_head": {"seq": head[0], "hash": head[1]},
    }
