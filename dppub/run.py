"""``dppub run`` when no Prefect API is configured: the same publication, without Prefect.

:func:`dp.pipeline.publish.publish` runs with steps of this process instead of Prefect tasks:
the same step order, the releases submitted together to a thread pool (Prefect's default task
runner is one too) or, with ``engine: dask``, to a ``distributed.Client`` made from the
arguments the ``DaskTaskRunner`` gets (:func:`flows.runner.dask_cluster`); reading retries
exactly as the Prefect task does (:mod:`tasks.retries`). Nothing is recorded in Prefect (no
flow run, no artifacts); the ledger, the run folder, the reports and the exit codes are those
of a run under Prefect. Prefect is not imported, and no server is started.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_all
from contextlib import contextmanager
from typing import Any

from dppub.dp.engine import TableSource
from dppub.dp.pipeline import publish as steps
from dppub.dp.pipeline.kinds import ReleaseSummary
from dppub.dp.pipeline.plan import Plan
from dppub.dp.pipeline.publish import Published, Release, Steps
from dppub.dp.runs import Run
from dppub.flows.runner import dask_cluster
from dppub.tasks.retries import READ_RETRIES, READ_RETRY_DELAY_SECONDS, retryable

__all__ = ["NOT_RECORDED", "publish_locally"]

NOT_RECORDED = (
    "dppub: no Prefect API configured: this run is not recorded in Prefect; to record runs, "
    "start a server (prefect server start) and set PREFECT_API_URL "
    "(prefect config set PREFECT_API_URL=http://127.0.0.1:4200/api)"
)
"""The one line a run without Prefect prints (on stderr)."""

Releases = Callable[[Sequence[Release]], list[ReleaseSummary]]


def publish_locally(plan: Plan, run: Run) -> Published:
    """Publish ``plan`` in ``run`` (opened and held by the caller) without Prefect."""
    log = _logger()
    with _releases(plan, log) as releases:
        return steps.publish(
            plan,
            run,
            Steps(
                read=lambda p, period: _retrying_read(p, period, log),
                bound_units=lambda p, source: steps.bound_units(p, source, log),
                scan=lambda p, source, filters: steps.scan(p, source, filters, log),
                releases=releases,
                compose=lambda r, summaries, p: steps.compose(r, summaries, p, log),
                log=log,
            ),
        )


def _retrying_read(plan: Plan, period: str, log: logging.Logger) -> TableSource:
    """:func:`dp.pipeline.publish.read`, retried as the ``read-source`` task is."""
    for attempt in range(READ_RETRIES + 1):
        try:
            return steps.read(plan, period, log)
        except Exception as exc:
            if attempt == READ_RETRIES or not retryable(exc):
                raise
            log.warning("reading failed (%s); retry %d of %d", exc, attempt + 1, READ_RETRIES)
            time.sleep(READ_RETRY_DELAY_SECONDS)
    raise AssertionError("unreachable")  # the last attempt returns or raises


@contextmanager
def _releases(plan: Plan, log: logging.Logger) -> Iterator[Releases]:
    """The releases' map: threads, or the dask cluster of ``engine: dask`` (for the run)."""
    if plan.engine != "dask":
        yield lambda jobs: _mapped(ThreadPoolExecutor(max_workers=max(1, len(jobs))), jobs, log)
        return
    from distributed import Client, LocalCluster

    address, cluster = dask_cluster(plan)
    made = None if address is not None else LocalCluster(**cluster)  # type: ignore[no-untyped-call]
    client = Client(address or made)  # type: ignore[no-untyped-call]
    log.info("dask: releases run on %s", address or f"a local cluster ({client.dashboard_link})")
    try:
        yield lambda jobs: _on_dask(client, jobs, log)
    finally:
        client.close()  # type: ignore[no-untyped-call]
        if made is not None:
            made.close()


def _mapped(pool: ThreadPoolExecutor, jobs: Sequence[Release], log: logging.Logger) -> list[Any]:
    """Every release submitted at once; returns (or raises the first failure, in order) only
    when none is running any more -- even if the wait is interrupted (a signal: the pool then
    drops what has not started and waits for what has)."""
    futures: list[Future[ReleaseSummary]] = []
    try:
        for j in jobs:
            futures.append(pool.submit(steps.compute, j, log))
        wait_all(futures)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return [f.result() for f in futures]


def _on_dask(client: Any, jobs: Sequence[Release], log: logging.Logger) -> list[Any]:
    """As :func:`_mapped`, each release a task on the cluster's workers."""
    from distributed import wait as wait_dask

    futures = []
    try:
        for j in jobs:
            futures.append(client.submit(steps.compute, j, log, pure=False))
        wait_dask(futures)  # type: ignore[no-untyped-call]
    finally:  # after an interruption too (signals are then only noted)
        wait_dask(futures)  # type: ignore[no-untyped-call]
    return [f.result() for f in futures]


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is when a record is logged (not the stream of the
    moment the handler was made: a caller may swap it, as typer's test runner does)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def _logger() -> logging.Logger:
    """The ``dppub`` logger, at INFO; where no handler would show it (the command line), on
    stderr, where Prefect's console log would be."""
    log = logging.getLogger("dppub")
    if log.level == logging.NOTSET:
        log.setLevel(logging.INFO)
    if not log.hasHandlers():
        handler = _Stderr()
        handler.setFormatter(logging.Formatter("%(asctime)s | %(levelname)-7s | %(message)s"))
        log.addHandler(handler)
    return log
