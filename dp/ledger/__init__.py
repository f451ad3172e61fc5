"""The privacy-budget ledger: a persistent, append-only, hash-chained SQLite log.

Every change is a new row (an *event*); nothing is ever updated or deleted:

* ``reserve`` — a run's planned, composed cost is held against its dataset's budget. The check
  "already spent + held + requested <= budget" and the insert happen in one ``BEGIN IMMEDIATE``
  transaction, so concurrent processes are serialized by SQLite and can never overspend.
* ``release`` — one row per release a run has computed (name, kind, mechanism, epsilon, delta,
  sensitivity, disjoint partition, output hash), written *before* publication so that the
  composition check can recompute the run's cost from the ledger itself.
* ``commit`` — the run was published.
* ``abort`` — the run failed before publication; its hold is released.

A reserved run that is neither committed nor aborted (e.g. the process was killed) keeps counting
as spent: a crash can over-count, never under-count.

Each row stores ``hash = sha256(prev_hash, canonical row)``; :meth:`Ledger.verify` recomputes the
chain and detects any edited, inserted or deleted row. Deleting rows at the *end* is only
detectable against a head kept elsewhere, so every run's manifest records the head it saw.
"""

from dp.ledger.book import Ledger
from dp.ledger.chain import GENESIS
from dp.ledger.records import (
    ChainReport,
    DatasetSpending,
    ReleaseRecord,
    Reservation,
    check_run_id,
)

__all__ = [
    "GENESIS",
    "ChainReport",
    "DatasetSpending",
    "Ledger",
    "ReleaseRecord",
    "Reservation",
    "check_run_id",
]
