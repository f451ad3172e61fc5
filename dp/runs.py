"""A run's protocol around the ledger, top to bottom: open, execute, compose, publish, commit,
and -- whatever happens -- settle.

* :meth:`Run.open` takes the run's liveness lock, settles dead runs of the same data, checks
  that every publication under the output folder is still in the ledger (a truncated, replaced
  or deleted ledger is refused), and reserves the plan's cost atomically. Whoever opens a run
  holds it and settles it (``with run:``): ``dppub run`` opens it *before* Prefect starts (a
  refused run never pays Prefect's start-up) and hands it to the flow in-process; a served run
  opens its own inside the flow.
* Releases are computed into the staging folder; each records a ``draw`` in the ledger before
  it draws noise (:meth:`dp.publication.Staging.attempt`).
* :meth:`Run.compose` records the releases and recomputes the run's cost from those rows;
  :meth:`Run.publish` renames the run folder into place; :meth:`Run.commit` records it.
* :func:`settle` ends a run that did not commit, decided by what is true on disk and in the
  ledger, never by where an exception came from: a run whose folder is in place *was
  published* and is committed; a run that drew noise on private data is charged for its draws
  (and its staging folder removed); only a run that drew nothing is aborted at no cost. Every
  exit path -- an exception, Ctrl-C, SIGTERM, a later :func:`recover` after SIGKILL -- goes
  through it, so the ledger never counts less than what was published or drawn.

A pending run whose lock is free belongs to a dead process; :func:`recover` settles those. The
lock is a session lock held by the ledger's server when it has one (PostgreSQL: runs on
several hosts see each other's liveness), else a file lock beside the staging folder.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from dppub.dp.budget import PrivacyCost
from dppub.dp.errors import InvariantError, LedgerError
from dppub.dp.faults import fault_point
from dppub.dp.ledger import BudgetPolicy, DataIdentity, Ledger, ReleaseRecord, Reservation
from dppub.dp.ledger.store import Liveness
from dppub.dp.publication import MANIFEST, Staging, sha256_files

__all__ = [
    "Recovered",
    "Run",
    "RunPlan",
    "check_publications",
    "new_run_id",
    "recover",
    "settle",
    "signals_deferred",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunPlan:
    """What the ledger needs to know about a run before it reads any data."""

    data: DataIdentity
    """The data the run reads (its name and source)."""
    policy: BudgetPolicy
    """The data's budget policy, as the config declares it."""
    cost: PrivacyCost
    """The run's planned, composed cost."""
    config_hash: str
    """Hash of what the config releases."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Recovered:
    run_id: str
    dataset: str
    action: str
    """``committed`` (was published), ``charged`` (drew noise), ``aborted`` (drew nothing),
    ``running`` (its process is alive) or ``unknown`` (no publication folder recorded)."""


def new_run_id() -> str:
    """A sortable, unique run id: UTC timestamp plus 32 random bits."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(4)


class _FileLock:
    """A run's liveness lock on one machine: an ``flock`` the kernel drops when the process
    dies."""

    def __init__(self, staging: Staging) -> None:
        self.path = staging.dataset_dir / ".staging" / f"{staging.run_id}.lock"
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock without waiting; False if another process holds it."""
        if self._fd is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            self.path.unlink(missing_ok=True)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _lock(ledger: Ledger, staging: Staging) -> Liveness:
    """The run's liveness lock: held by the ledger's server where it has one (runs on several
    hosts then see each other), else a file lock beside the staging folder."""
    held = ledger.store.liveness(staging.run_id)
    return held if held is not None else _FileLock(staging)


class Run:
    """One publication run. Use :meth:`open` (through :meth:`dp.pipeline.plan.Plan.open_run`),
    then ``with run: ...``: leaving the block settles the run (see the module docstring) and
    drops its lock."""

    def __init__(self, ledger: Ledger, staging: Staging, *, remaining: PrivacyCost) -> None:
        self.ledger = ledger
        self.staging = staging
        self.remaining = remaining
        """What the budget leaves after this run's reservation."""
        self._lock: Liveness | None = None

    @property
    def run_id(self) -> str:
        return self.staging.run_id

    @property
    def reservation(self) -> Reservation:
        return self.ledger.reservation(self.run_id)

    @classmethod
    def open(cls, ledger: Ledger, out_dir: str | Path, plan: RunPlan) -> Run:
        """Lock a new run, settle dead runs of the same data, check the publications against
        the ledger, and reserve ``plan.cost``.

        Raises:
            BudgetExceededError: the cost does not fit; nothing was written.
            ConfigError: the config disagrees with what the ledger recorded for this data.
            LedgerError: the ledger is damaged or lacks entries a publication recorded.
        """
        staging = Staging(out_dir, dataset=plan.data.name, run_id=new_run_id(), ledger=ledger)
        lock = _lock(ledger, staging)
        if not lock.acquire():
            raise InvariantError(f"a fresh run id {staging.run_id!r} is already locked")
        run: Run | None = None
        try:
            with signals_deferred():  # a signal lands once the run is reserved, or refused
                declared = ledger.declaration_of(plan.data)
                if declared is not None:
                    recover(ledger, key=declared.key)
                check_publications(ledger, staging.dataset_dir, known=declared is not None)
                remaining = ledger.reserve(
                    run_id=staging.run_id,
                    data=plan.data,
                    policy=plan.policy,
                    cost=plan.cost,
                    config_hash=plan.config_hash,
                    location=str(staging.dataset_dir.resolve()),
                )
                run = cls(ledger, staging, remaining=remaining)
                run._lock = lock
            fault_point("reserved")
        except BaseException:  # refused, or interrupted before the caller holds the run
            if run is None:
                lock.release()
            else:
                settle(ledger, staging)
                run.close()
            raise
        return run

    def __enter__(self) -> Run:
        try:
            self.staging.create()
        except BaseException:  # the block never starts: settle here, as leaving it would
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            settle(self.ledger, self.staging)
        finally:
            self.close()

    def close(self) -> None:
        """Drop the liveness lock (if this object took it)."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def compose(self, releases: list[ReleaseRecord], planned: PrivacyCost) -> tuple[int, str]:
        """Record the computed releases and recompute the run's cost *from the ledger rows*;
        block publication unless it equals the plan and the reservation. Returns the head."""
        self.ledger.record_releases(run_id=self.run_id, releases=releases)
        reserved, recomputed = self.ledger.recorded_cost(self.run_id)
        for label, other in (("planned", planned), ("reserved", reserved)):
            if not (recomputed.fits_within(other) and other.fits_within(recomputed)):
                raise InvariantError(
                    f"composition check failed: releases cost epsilon={recomputed.epsilon:g} "
                    f"delta={recomputed.delta:g}, {label} epsilon={other.epsilon:g} "
                    f"delta={other.delta:g}; nothing was published"
                )
        fault_point("composed")
        return self.ledger.head()

    def publish(self, *, manifest: dict[str, Any], report: str) -> Path:
        """Rename the run folder into place: from here on the run is published."""
        final = self.staging.publish(manifest=manifest, report=report)
        fault_point("published")
        return final

    def commit(self) -> tuple[int, str]:
        """Record the publication in the ledger."""
        self.ledger.commit(run_id=self.run_id, output_hash=sha256_files(self.staging.final))
        fault_point("committed")
        return self.ledger.head()


def settle(ledger: Ledger, staging: Staging) -> str:
    """End a pending run by what is true now; returns the action taken (``none`` if it had
    ended). Idempotent; the caller holds the run's lock (or the run's process is dead).
    SIGINT and SIGTERM wait until it is done (:func:`signals_deferred`)."""
    with signals_deferred():
        if ledger.reservation(staging.run_id).state != "pending":
            return "none"
        fault_point("settling")
        if staging.published:
            ledger.commit(run_id=staging.run_id, output_hash=sha256_files(staging.final))
            return "committed"
        staging.discard()
        if ledger.drew(staging.run_id):
            ledger.charge(run_id=staging.run_id)
            return "charged"
        ledger.abort(run_id=staging.run_id)
        return "aborted"


_deferring = False


@contextmanager
def signals_deferred() -> Iterator[None]:
    """SIGINT and SIGTERM that arrive in the block are delivered when it ends, to whatever
    handler was there (dppub's, Prefect's SIGTERM bridge, Python's Ctrl-C): a reservation or a
    settlement is never cut short half-way. Python runs signal handlers in the main thread
    only, so elsewhere there is nothing to defer."""
    global _deferring
    if _deferring or threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    wanted = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.getsignal(s) for s in wanted}
    swapped = {s: h for s, h in previous.items() if h is not None}  # None: not Python's
    for s in swapped:
        signal.signal(s, lambda signum, frame: arrived.append(signum))
    _deferring = True
    try:
        yield
    finally:
        _deferring = False
        for s, h in swapped.items():
            signal.signal(s, h)
        if arrived:
            signal.raise_signal(arrived[0])  # the handler runs here, after the block


def check_publications(ledger: Ledger, dataset_dir: Path, *, known: bool = True) -> None:
    """Refuse if a publication under ``dataset_dir`` recorded ledger entries the ledger lacks.

    Every manifest records the ledger head its run composed against; a ledger that lost those
    rows (cut short, replaced by an older copy, deleted and recreated) would let spending
    restart, so no run may reserve against it. A ledger that does not know the dataset
    (``known`` false) is most often another ledger than the one those runs spent in (a new
    ``--ledger`` with an output folder of earlier runs): the refusal says so.

    Raises:
        LedgerError: one line naming the publication and the missing entry.
    """
    if not dataset_dir.is_dir():
        return
    seen: dict[tuple[int, str], Path] = {}
    for folder in sorted(dataset_dir.iterdir()):
        manifest = folder / MANIFEST
        if folder.name.startswith(".") or not manifest.is_file():
            continue
        try:
            head = json.loads(manifest.read_text())["ledger_head"]
            seen[(int(head["seq"]), str(head["hash"]))] = folder
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise LedgerError(f"cannot read the ledger head of {manifest}: {exc}") from None
    missing = ledger.missing(list(seen))
    if missing and not known:
        seq, _ = missing[0]
        raise LedgerError(
            f"ledger {ledger.name} has no record of dataset {dataset_dir.name!r}, but "
            f"{dataset_dir} holds its publication {seen[missing[0]].name}, which spent in "
            f"another ledger (its entry {seq}): name that ledger (--ledger, or the config's "
            "ledger:), or publish to another --out, as a new ledger would start the budget "
            "those runs spent afresh; a lost ledger is restored from a copy (nothing was "
            "reserved)"
        )
    if missing:
        seq, _ = missing[0]
        raise LedgerError(
            f"ledger {ledger.name} lacks entry {seq} that the publication "
            f"{seen[missing[0]]} recorded: the ledger was cut short, replaced or recreated; "
            "restore it from a copy (nothing was reserved)"
        )


def _staging_of(ledger: Ledger, res: Reservation) -> Staging | None:
    if not res.location:
        return None
    return Staging(Path(res.location).parent, dataset=res.dataset, run_id=res.run_id, ledger=ledger)


def recover(ledger: Ledger, *, key: str | None = None) -> list[Recovered]:
    """Settle every pending run of a dead process (optionally of one data identity)."""
    done: list[Recovered] = []
    for res in ledger.pending():
        if key is not None and res.source != key:
            continue
        staging = _staging_of(ledger, res)
        if staging is None:
            action = "unknown"
        else:
            lock = _lock(ledger, staging)
            if not lock.acquire():
                action = "running"
            else:
                try:
                    action = settle(ledger, staging)
                finally:
                    lock.release()
        done.append(Recovered(run_id=res.run_id, dataset=res.dataset, action=action))
    return done
