"""The Prefect task runner of a run: Prefect's default thread pool, or Dask for ``engine: dask``.

With ``engine: dask`` the release tasks run on the prefect-dask ``DaskTaskRunner`` (a run
without Prefect: on a ``distributed.Client`` made from the same arguments, :mod:`dppub.run`),
connected to
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

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dppub.dp.pipeline.plan import Plan
from dppub.dp.pipeline.published import Publication

if TYPE_CHECKING:
    from prefect import Flow
    from prefect_dask.task_runners import DaskTaskRunner

__all__ = ["DaskCluster", "dask_cluster", "flow_for", "task_runner"]


@dataclass(frozen=True, slots=True)
class DaskCluster:
    """Where ``engine: dask`` runs a run's releases."""

    address: str | None
    """The config's ``dataset.scheduler``, or None: a local cluster started for the run."""
    local: dict[str, object] = field(default_factory=dict)
    """The local cluster's arguments (``LocalCluster``'s, the ``DaskTaskRunner``'s
    ``cluster_kwargs``); empty with an address."""


def dask_cluster(plan: Plan) -> DaskCluster | None:
    """The run's one engine decision: the Dask cluster its releases run on (``engine: dask``),
    or None: threads (Prefect's default task runner; a pool without Prefect). Made once, by
    whoever starts the run, and passed to :func:`flow_for` or to the run without Prefect."""
    if plan.engine != "dask":
        return None
    cfg = plan.config
    if cfg.dataset.scheduler is not None:
        return DaskCluster(cfg.dataset.scheduler)
    return DaskCluster(
        None,
        {
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
        },
    )


def flow_for(cluster: DaskCluster | None) -> Flow[..., Publication]:
    """The publish flow with the task runner of the run's engine (:func:`dask_cluster`)."""
    from dppub.flows.publish import publish

    runner = task_runner(cluster)
    if runner is None:
        return publish
    # prefect-dask's runner makes PrefectDaskFutures, a subtype Prefect's signature (invariant in
    # the future type) does not admit.
    return publish.with_options(task_runner=runner)  # type: ignore[arg-type]


def task_runner(cluster: DaskCluster | None) -> DaskTaskRunner | None:
    """A ``DaskTaskRunner`` on ``cluster``; None: Prefect's default thread pool."""
    if cluster is None:
        return None
    from prefect_dask.task_runners import DaskTaskRunner

    if cluster.address is not None:
        return DaskTaskRunner(address=cluster.address)
    return DaskTaskRunner(cluster_kwargs=cluster.local)
