"""The ``publish`` flow: plan -> reserve -> execute -> compose -> publish -> commit.

Orchestration only: every step is a task (``tasks/``) around the privacy core (``dp/``).

* plan: the config declares every release's epsilon/delta; the composed total is known before
  any private data is read;
* reserve: the total is held in the ledger atomically (concurrent runs cannot overspend);
* execute: releases are computed into a private staging folder;
* compose: release rows are written to the ledger and the run's cost is recomputed from them;
* publish: the staging folder is renamed into place (atomic);
* commit: the ledger records the publication.

A failure before publication aborts the reservation and removes the staging folder; a crash
after the reservation leaves the hold in place (counted as spent, never under-counted).
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
from dp.ledger import Ledger
from dp.publication import Staging, sha256_files
from dp.runs import confirm_reservation
from flows.config import PipelineConfig, load_config, plan_releases, regression_mechanism
from flows.faults import fault_point
from flows.logs import quiet_expected_errors
from flows.report import budget_rows, budget_table, render_report
from flows.stages import (
    anonymity_hierarchies,
    clustering_estimator,
    regression_estimator,
    table_source,
    workload_axes,
    workload_operator,
)
from tasks.anonymize import anonymize_release
from tasks.ledger import abort_run, check_composition, commit_run, reserve_budget
from tasks.read import read_private_table
from tasks.regression import fit_model
from tasks.workload import answer_workload

__all__ = ["publish"]


def _execute(cfg: PipelineConfig, staging: Staging) -> list[dict[str, Any]]:
    """Compute every release into the staging folder; returns their summaries."""
    path = cfg.resolve(cfg.dataset.path)
    engine = cfg.dataset.engine
    data: pd.DataFrame | TableSource
    if engine == "pandas":
        data = read_private_table(path, cfg.schema, cfg.used_columns)
    else:  # every stage folds its exact aggregates over record batches: no column is loaded
        data = table_source(cfg, engine)
    calls: list[tuple[Any, Any, dict[str, Any]]] = []
    if cfg.anonymize is not None and cfg.anonymize.publish:
        a = cfg.anonymize
        calls.append(
            (
                anonymize_release,
                data,
                dict(
                    name=a.name,
                    hierarchies=anonymity_hierarchies(cfg, data),
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
                data,
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
                data,
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
                data,
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

    With ``run_id`` the caller (``dppub run``) has already locked the run and reserved its cost
    (:func:`dp.runs.open_run`); the flow checks that reservation matches this plan.
    """
    quiet_expected_errors()  # in whichever process runs the flow (CLI or a served run)
    logger = get_run_logger()
    cfg = load_config(config_path)
    if engine is not None:  # --engine overrides the config (same plan, same cost)
        cfg = cfg.model_copy(update={"dataset": cfg.dataset.model_copy(update={"engine": engine})})
    plan, total = plan_releases(cfg)
    dataset = cfg.dataset.name
    ledger = Ledger(ledger_path)
    owned = run_id is None
    if run_id is None:
        staging, remaining = reserve_budget(
            ledger,
            out_dir,
            dataset=dataset,
            cost=total,
            budget=cfg.budget,
            config_hash=cfg.config_hash,
            per=cfg.dataset.budget.per,
        )
        fault_point("reserved")
    else:
        remaining = confirm_reservation(
            ledger,
            run_id=run_id,
            dataset=dataset,
            cost=total,
            config_hash=cfg.config_hash,
            budget=cfg.budget,
        )
        staging = Staging(out_dir, dataset=dataset, run_id=run_id)
    run_id = staging.run_id
    period = ledger.reservation(run_id).period
    logger.info("run %s: %d release(s), epsilon=%g planned", run_id, len(plan), total.epsilon)
    try:
        try:
            staging.create()
            summaries = _execute(cfg, staging)
            fault_point("staged")
            head = check_composition(ledger, run_id=run_id, summaries=summaries, planned=total)
            fault_point("composed")
            table = budget_table(summaries, total=total, budget=cfg.budget, remaining=remaining)
            manifest = _manifest(cfg, run_id, summaries, total, head, remaining, period)
            report = render_report(
                dataset=dataset,
                run_id=run_id,
                summaries=summaries,
                table=table,
                ledger_head=head,
            )
            final = staging.publish(manifest=manifest, report=report)
        except BaseException:
            abort_run(ledger, run_id=run_id)
            staging.discard()
            raise
        fault_point("published")
        commit_run(ledger, run_id=run_id, output_hash=sha256_files(final))
        fault_point("committed")
    finally:
        if owned:
            staging.unlock()
    key = f"dppub-budget-{dataset.lower().replace('_', '-')}"
    create_table_artifact(
        key=f"{key}-table",
        table=budget_rows(summaries),
        description=f"Releases and privacy costs of run {run_id}",
    )
    create_markdown_artifact(
        key=key,
        markdown=f"# dppub run `{run_id}` on `{dataset}`\n\n{table}\n\n"
        f"Ledger head: seq {head[0]}, `{head[1]}`\n",
        description=f"Privacy budget of run {run_id}",
    )
    logger.info("published run %s to %s", run_id, final)
    return run_id


def _manifest(
    cfg: PipelineConfig,
    run_id: str,
    summaries: list[dict[str, Any]],
    total: PrivacyCost,
    head: tuple[int, str],
    remaining: PrivacyCost,
    period: str,
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
    return {
        "run_id": run_id,
        "dataset": cfg.dataset.name,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "config_hash": cfg.config_hash,
        "releases": [{k: s.get(k) for k in keys} for s in summaries],
        "total_epsilon": total.epsilon,
        "total_delta": total.delta,
        "budget_epsilon": cfg.budget.epsilon,
        "budget_delta": cfg.budget.delta,
        "remaining_epsilon": remaining.epsilon,
        "budget_period": period,
        "ledger_head": {"seq": head[0], "hash": head[1]},
    }
