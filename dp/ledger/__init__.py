"""The privacy-budget ledger: a persistent, append-only, hash-chained log.

Every change is a new row (an *event*); nothing is ever updated or deleted:

* ``declare`` -- the first run on a body of data records its identity (name and source) and its
  budget policy; ``amend`` -- an explicit, recorded change of either (who, when, why).
* ``reserve`` -- a run's planned, composed cost is held against the data's budget. The check
  "already spent + held + requested <= budget" and the insert happen in one exclusive
  transaction, so concurrent processes can never overspend.
* ``draw`` -- a release is about to draw noise on private data (written *before* the draw):
  from here on the run costs something even if it never publishes, and no release is drawn twice.
* ``release`` -- one row per computed release (name, kind, mechanism, epsilon, delta,
  sensitivity, disjoint partition, output hash), written before publication so that the
  composition check recomputes the run's cost from the ledger itself.
* how the run ended, with what it finally costs: ``commit`` (published: its reserved cost),
  ``charge`` (drew noise, published nothing: the composed cost of its draws) or ``abort``
  (drew nothing, published nothing: zero).

A run that has not ended (e.g. its process was killed) keeps counting its whole hold: a crash
can over-count, never under-count.

Each row stores ``hash = sha256(prev_hash, canonical row)``. Every write first re-verifies the
chain from the last verified checkpoint and refuses to write to a damaged ledger;
:meth:`Ledger.verify` re-checks every row. Deleting rows at the *end* is only detectable against
a head kept elsewhere, so every run's manifest records the head it saw, and a new run refuses
while a published manifest references entries the ledger lacks.

The ledger lives in an embedded SQLite file (the default: one host) or in a PostgreSQL database
that runs on several hosts share (a ``postgresql://`` URL); both keep the same rows and hashes
behind one store interface (:mod:`dp.ledger.store`).
"""

from dppub.dp.ledger.book import Ledger
from dppub.dp.ledger.chain import GENESIS
from dppub.dp.ledger.policy import PERIOD_FIELD, BudgetPolicy, DataIdentity
from dppub.dp.ledger.records import (
    ChainReport,
    Declaration,
    ReleaseRecord,
    Reservation,
    check_run_id,
)
from dppub.dp.ledger.store import NoLedgerError, ledger_location

__all__ = [
    "GENESIS",
    "PERIOD_FIELD",
    "BudgetPolicy",
    "ChainReport",
    "DataIdentity",
    "Declaration",
    "Ledger",
    "NoLedgerError",
    "ReleaseRecord",
    "Reservation",
    "check_run_id",
    "ledger_location",
]
