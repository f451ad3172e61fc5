"""Running a publication: open the run, publish it -- as the Prefect flow or without Prefect --
then settle it, whatever happened.

:func:`open_run` is how ``dppub run`` and :func:`dppub.publish` open a run (through
:meth:`dp.pipeline.plan.Plan.open_run`, the one way a run opens): it decides, once, whether the
run is recorded in Prefect and where its releases run (:func:`flows.runner.dask_cluster`).
:func:`execute` publishes the opened run and settles it; a run that did not publish comes out
as :class:`NotPublished` (why, and how it was settled), which :mod:`dppub.failures` turns into
the command's line and exit code.

Without a Prefect API (:func:`publish_locally`), :func:`dp.pipeline.publish.publish` runs with
steps of this process instead of Prefect tasks: the same step order, the releases submitted
together to a thread pool (Prefect's default task runner is one too) or, with ``engine: dask``,
to a ``distributed.Client`` made from the arguments the ``DaskTaskRunner`` gets; reading
retries exactly as the Prefect task does (:mod:`tasks.retries`). Nothing is recorded in Prefect
(no flow run, no artifacts); the ledger, the run folder, the reports and the exit codes are
those of a run under Prefect. Prefect is not imported, and no server is started.
"""

from __future__ import annotations

import logging
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_all
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from dppub.dp.engine import TableSource
from dppub.dp.pipeline import publish as steps
from dppub.dp.pipeline.hooks import clear_stop
from dppub.dp.pipeline.kinds import ReleaseSummary
from dppub.dp.pipeline.plan import Plan, ledger_for
from dppub.dp.pipeline.publish import Published, Release, Steps
from dppub.dp.pipeline.published import Publication
from dppub.dp.runs import Run
from dppub.flows.runner import DaskCluster, dask_cluster
from dppub.interrupts import Interrupted, Signals
from dppub.tasks.retries import READ_RETRIES, READ_RETRY_DELAY_SECONDS, retryable

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["NOT_RECORDED", "NotPublished", "Opened", "execute", "open_run", "publish_locally"]

NOT_RECORDED = (
    "dppub: no Prefect API configured: this run is not recorded in Prefect; to record runs, "
    "start a server (prefect server start) and set PREFECT_API_URL "
    "(prefect config set PREFECT_API_URL=http://127.0.0.1:4200/api)"
)
"""The one line a run without Prefect prints (on stderr)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Opened:
    """A run opened (locked and reserved) before publishing."""

    plan: Plan
    name: str
    """The config as the flow run's parameters name it (its file, absolute)."""
    location: str
    """Where the ledger is (named in the flow run's parameters)."""
    engine: str | None
    """The engine the caller asked for, if any (named in the flow run's parameters)."""
    out: Path
    """The publication folder."""
    run: Run
    api: str | None
    """The Prefect API the run is recorded in (:func:`flows.server.configured_api`), or None:
    the run publishes without Prefect (:func:`publish_locally`)."""
    cluster: DaskCluster | None
    """Where the releases run (:func:`flows.runner.dask_cluster`); None: threads."""


def open_run(
    plan: Plan,
    name: str,
    *,
    ledger: str | None,
    out: Path,
    engine: str | None,
    timeout: float,
    signals: Signals,
) -> Opened:
    """Open a run of ``plan`` (no value read yet) through :meth:`dp.pipeline.plan.Plan.open_run`.

    Whether the run is recorded in Prefect is decided here, once: a Prefect API configured
    the way Prefect resolves it must answer before the ledger is opened. From the reservation
    on, a signal is only noted: :func:`execute` delivers it once it holds the run, so an
    interrupted run is always settled (here, aborted at no cost).
    """
    from dppub.flows.server import check_api, configured_api

    api = configured_api()
    if api is not None:
        check_api(api)
    location = ledger_for(plan.config, ledger)
    run = plan.open_run(location, out, timeout=timeout, reserving=signals.disarm)
    return Opened(
        plan=plan,
        name=name,
        location=location,
        engine=engine,
        out=out,
        run=run,
        api=api,
        cluster=dask_cluster(plan),
    )


class NotPublished(BaseException):
    """A reserved run that did not publish, raised once it was settled.

    A ``BaseException``: it may carry a Ctrl-C, which no ``except Exception`` may swallow."""

    def __init__(
        self, cause: BaseException | None, *, signum: int | None, opened: Opened, state: str
    ) -> None:
        super().__init__(cause)
        self.cause = cause
        """What failed (None: a signal arrived while nothing failed)."""
        self.signum = signum
        """The signal that interrupted the run, if one did: it decides what the run says,
        not what Prefect made of it."""
        self.api = opened.api
        self.run_id = opened.run.run_id
        self.state = state
        """How the run was settled: ``aborted``, ``charged`` or ``committed``."""

    @property
    def settled(self) -> str:
        """``run R was aborted, nothing was spent``."""
        spent = ", nothing was spent" if self.state == "aborted" else ""
        return f"run {self.run_id} was {self.state}{spent}"


def execute(opened: Opened, signals: Signals) -> Publication:
    """Publish an opened run, as the Prefect flow (recorded at ``opened.api``) or without
    Prefect, then settle it whatever happened.

    A SIGINT or SIGTERM at any moment (``signals`` saw it, or Prefect's SIGTERM bridge raised
    ``TerminationSignal``) is noted, and decides what the failure says, whatever exception
    Prefect made of it.

    Raises:
        NotPublished: the run did not publish, or a signal arrived; raised after settling.
    """
    try:
        return _settled(opened, signals)
    finally:
        # The run is settled: its stop request was for it alone (old code: a publish after an
        # interrupted one in the same process stopped at its first check).
        clear_stop()


def _settled(opened: Opened, signals: Signals) -> Publication:
    run = opened.run
    try:
        with run:  # leaving it settles the run; signals wait until that is done
            try:
                signals.arm()
                published = _publish(opened)
            finally:
                signals.disarm()
    except (Interrupted, KeyboardInterrupt, _termination()) as exc:
        terminated = not isinstance(exc, Interrupted | KeyboardInterrupt)
        signals.note(int(signal.SIGTERM if terminated else signal.SIGINT))
        raise _not_published(exc, opened, signals) from None
    except Exception as exc:
        raise _not_published(exc, opened, signals) from None
    if signals.first is not None:
        raise _not_published(None, opened, signals)
    return published


def _not_published(cause: BaseException | None, opened: Opened, signals: Signals) -> NotPublished:
    state = opened.run.ledger.reservation(opened.run.run_id).state
    return NotPublished(cause, signum=signals.first, opened=opened, state=state)


def _publish(opened: Opened) -> Publication:
    """The publication, in this process; the caller holds the run and settles it."""
    if opened.api is None:
        return publish_locally(opened.plan, opened.run, opened.cluster).publication(opened.plan)
    from dppub.flows.publish import Handed
    from dppub.flows.runner import flow_for

    return flow_for(opened.cluster)(
        opened.name,
        opened.location,
        str(opened.out.resolve()),
        engine=opened.engine,
        handed=Handed(opened.plan, opened.run),
    )


def _termination() -> type[BaseException]:
    """Prefect's SIGTERM bridge exception, if Prefect ran (a run without it never imports it)."""
    exceptions = sys.modules.get("prefect.exceptions")
    if exceptions is None:
        return Interrupted
    termination: type[BaseException] = exceptions.TerminationSignal
    return termination


Releases = Callable[[Sequence[Release]], list[ReleaseSummary]]


def publish_locally(plan: Plan, run: Run, cluster: DaskCluster | None) -> Published:
    """Publish ``plan`` in ``run`` (opened and held by the caller) without Prefect, its
    releases on threads or on ``cluster`` (:func:`flows.runner.dask_cluster`)."""
    log = _logger()
    with _releases(cluster, log) as releases:
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
def _releases(cluster: DaskCluster | None, log: logging.Logger) -> Iterator[Releases]:
    """The releases' map: threads, or the dask cluster (for the run)."""
    if cluster is None:
        yield lambda jobs: _mapped(ThreadPoolExecutor(max_workers=max(1, len(jobs))), jobs, log)
        return
    from distributed import Client, LocalCluster

    address = cluster.address
    made = None if address is not None else LocalCluster(**cluster.local)  # type: ignore[no-untyped-call]
    client = Client(address or made)  # type: ignore[no-untyped-call]
    log.info("dask: releases run on %s", address or f"a local cluster ({client.dashboard_link})")
    try:
        yield lambda jobs: _on_dask(client, jobs, log)
    finally:
        client.close()  # type: ignore[no-untyped-call]
        if made is not None:
            made.close()


def _mapped(
    pool: ThreadPoolExecutor, jobs: Sequence[Release], log: logging.Logger
) -> list[ReleaseSummary]:
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


def _on_dask(client: Client, jobs: Sequence[Release], log: logging.Logger) -> list[ReleaseSummary]:
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


class _Stderr(logging.StreamHandler[TextIO]):
    """Writes to whatever ``sys.stderr`` is when a record is logged (not the stream of the
    moment the handler was made: a caller may swap it, as typer's test runner does)."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
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
