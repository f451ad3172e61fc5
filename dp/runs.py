"""A run's lifecycle around the ledger: open (lock + recover + reserve), confirm, recover.

* :func:`open_run` takes the run's liveness lock, resolves dead runs of the dataset, and
  reserves the plan's cost atomically. ``dppub run`` calls it *before* Prefect starts, so a run
  the budget refuses never pays Prefect's start-up and racing processes are decided by one
  SQLite transaction each; scheduled runs call it from inside the flow.
* A pending reservation is resolved only when its run is dead (its lock is free): if the run
  folder was published (the rename happened) it is committed without a second charge,
  otherwise the reservation is aborted and the staging folder removed — nothing of it was
  published, so nothing was spent. The ledger may over-count while a dead run is unresolved;
  it never under-counts.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dp.budget import PrivacyCost
from dp.errors import BudgetExceededError, InvariantError, LedgerError
from dp.ledger import Ledger, Reservation
from dp.periods import Period, next_period_start, period_label
from dp.publication import Staging, sha256_files

__all__ = ["Recovered", "confirm_reservation", "new_run_id", "open_run", "recover", "resolve"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Recovered:
    run_id: str
    dataset: str
    action: str
    """``committed`` (was published), ``aborted`` (was not), ``running`` or ``unknown``."""


def new_run_id() -> str:
    """A sortable, unique run id: UTC timestamp plus 32 random bits."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(4)


def open_run(
    ledger: Ledger,
    out_dir: str | Path,
    *,
    dataset: str,
    cost: PrivacyCost,
    budget: PrivacyCost,
    config_hash: str,
    per: Period | None = None,
) -> tuple[Staging, PrivacyCost]:
    """Lock a new run, resolve dead runs of ``dataset``, and reserve ``cost`` for this period.

    Returns the run's locked staging area (the caller must ``unlock()`` it when the run ends)
    and what the period's budget leaves after this reservation.

    Raises:
        BudgetExceededError: the cost does not fit; nothing was written.
    """
    staging = Staging(out_dir, dataset=dataset, run_id=new_run_id())
    if not staging.try_lock():
        raise InvariantError(f"a fresh run id {staging.run_id!r} is already locked")
    try:
        recover(ledger, dataset=dataset)
        remaining = ledger.reserve(
            dataset=dataset,
            run_id=staging.run_id,
            cost=cost,
            budget=budget,
            config_hash=config_hash,
            period=period_label(per),
            location=str(staging.dataset_dir.resolve()),
        )
    except BudgetExceededError as exc:
        staging.unlock()
        opens = next_period_start(per)
        if opens is None:
            raise
        raise BudgetExceededError(f"{exc}; the next period opens {opens.isoformat()}") from None
    except BaseException:
        staging.unlock()
        raise
    return staging, remaining


def confirm_reservation(
    ledger: Ledger,
    *,
    run_id: str,
    dataset: str,
    cost: PrivacyCost,
    config_hash: str,
    budget: PrivacyCost,
) -> PrivacyCost:
    """Check that ``run_id`` holds a pending, unused reservation for exactly this plan."""
    res = ledger.reservation(run_id)
    if res.state != "pending" or res.recorded:
        raise LedgerError(f"run {run_id!r} is {res.state} and cannot be executed again")
    if res.dataset != dataset or res.config_hash != config_hash:
        raise LedgerError(f"run {run_id!r} was reserved for another dataset or config")
    if res.cost != cost:
        raise LedgerError(f"run {run_id!r} reserved {res.cost}, the plan costs {cost}")
    return ledger.remaining(dataset=dataset, budget=budget, period=res.period)


def _staging(res: Reservation) -> Staging | None:
    if not res.location:
        return None
    return Staging(Path(res.location).parent, dataset=res.dataset, run_id=res.run_id)


def resolve(ledger: Ledger, staging: Staging) -> str:
    """Resolve one pending run whose lock the caller holds; returns the action taken."""
    if ledger.reservation(staging.run_id).state != "pending":
        return "none"
    if staging.published:
        ledger.commit(run_id=staging.run_id, output_hash=sha256_files(staging.final))
        return "committed"
    staging.discard()
    ledger.abort(run_id=staging.run_id)
    return "aborted"


def recover(ledger: Ledger, *, dataset: str | None = None) -> list[Recovered]:
    """Resolve every pending run of a dead process (optionally of one dataset)."""
    done: list[Recovered] = []
    for res in ledger.pending():
        if dataset is not None and res.dataset != dataset:
            continue
        staging = _staging(res)
        if staging is None:
            action = "unknown"
        elif not staging.try_lock():
            action = "running"
        else:
            try:
                action = resolve(ledger, staging)
            finally:
                staging.unlock()
        done.append(Recovered(run_id=res.run_id, dataset=res.dataset, action=action))
    return done
