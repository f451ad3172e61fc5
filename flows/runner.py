"""The Prefect task runner of a run: Prefect's default thread pool, or Dask for ``engine: dask``.

With ``engine: dask`` the release tasks run on the prefect-dask ``DaskTaskRunner``, connected to
``dataset.scheduler`` if the config names one, otherwise to a local cluster of
``dataset.workers`` one-thread worker processes started for the run (loopback, temporary TLS
certificates so no other local process can join or submit work). The releases are
independent, so they are all submitted at once; each is one Prefect task, inside which the
engine partitions the work over the Parquet files as dask tasks on the same cluster
(:class:`dp.engine.dask.DaskBackend`) and merges the exact partials before any noise is drawn.
One Prefect task per partition would be overhead, not parallelism (measured: 17 such tasks
took 14 s for what pyarrow does in 0.12 s).

With a remote scheduler, the workers must see the dataset path and the publication folder at
the same paths as the machine running ``dppub`` (shared storage): they read the Parquet files
and write the staged releases. Secure that cluster yourself (TLS, network policy): its
workers see exact data.
"""

from __future__ import annotations

from typing import Any

from prefect import Flow

from dp.pipeline.plan import Plan
from dp.pipeline.publish import Publication
from flows.publish import publish

__all__ = ["flow_for", "task_runner"]


def flow_for(plan: Plan) -> Flow[..., Publication]:
    """The publish flow with the task runner of the plan's engine."""
    runner = task_runner(plan)
    return publish if runner is None else publish.with_options(task_runner=runner)


def task_runner(plan: Plan) -> Any | None:
    """A ``DaskTaskRunner`` when the plan's engine is dask."""
    if plan.engine != "dask":
        return None
    from prefect_dask.task_runners import DaskTaskRunner

    cfg = plan.config
    if cfg.dataset.scheduler is not None:
        return DaskTaskRunner(address=cfg.dataset.scheduler)
    return DaskTaskRunner(
        cluster_kwargs={
            "n_workers": cfg.dataset.workers,
            "threads_per_worker": 1,
            "processes": True,
            "host": "127.0.0.1",
            # The scheduler always serves HTTP (health, metrics; the dashboard if bokeh is
            # installed): on loopback, at a free port, so concurrent runs never collide on 8787.
            "dashboard_address": "127.0.0.1:0",
            # Temporary TLS certificates: only this run's client and workers can talk to the
            # scheduler, so another local user cannot submit code or fetch exact partials.
            "security": True,
        }
    )
