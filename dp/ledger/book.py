"""The :class:`Ledger`: declare data, reserve, draw, record, and end runs; verify and report.

See :mod:`dp.ledger` for the event model and its guarantees.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from dppub.dp.budget import PlannedCost, PrivacyCost, compose
from dppub.dp.errors import ConfigError, InvariantError, LedgerError
from dppub.dp.ledger.admission import admit, check_in_range
from dppub.dp.ledger.chain import TERMINAL, partition_text
from dppub.dp.ledger.datasets import (
    Append,
    amendment_row,
    check_declared,
    current_declarations,
    identity_key,
)
from dppub.dp.ledger.history import STATES, history_rows, published_neighbours, run_rows
from dppub.dp.ledger.log import ChainedLog
from dppub.dp.ledger.policy import BudgetPolicy, DataIdentity
from dppub.dp.ledger.records import ChainReport, Declaration, ReleaseRecord, Reservation
from dppub.dp.ledger.store import Connection, Row, Store, open_store
from dppub.dp.periods import period_label

__all__ = ["Ledger"]


class Ledger:
    """A budget ledger: an embedded SQLite file, or a PostgreSQL database shared by hosts.

    Every write goes through :class:`dp.ledger.log.ChainedLog`, which refuses to write to a
    damaged ledger; :meth:`verify` re-checks the whole chain. ``location`` (a path, or a
    ``postgresql://`` URL as text), ``timeout`` and ``create``: see :func:`open_store`.
    """

    def __init__(self, location: str | Path, *, timeout: float = 30.0, create: bool = True) -> None:
        self.store: Store = open_store(location, timeout=timeout, create=create)
        self.log = ChainedLog(self.store)

    @property
    def name(self) -> str:
        """The ledger's name in messages (a URL without its password)."""
        return self.store.name

    # -- datasets ------------------------------------------------------------------------------

    def amend(self, *, data: DataIdentity, policy: BudgetPolicy, who: str, why: str) -> Declaration:
        """Record a deliberate change of a dataset's name, source or budget policy.

        The data is found by its source, else by its name (the data moved). Its spending carries
        over: the identity is the same, only its declaration changes.

        Raises:
            LedgerError: the ledger does not know the data, or nothing would change.
        """
        if not why.strip():
            raise ConfigError("an amendment needs a reason (--reason)")
        check_in_range("the budget", policy.total.epsilon)
        with self.log.write() as con:
            key, row = amendment_row(con, data, policy, who=who, why=why.strip())
            self.log.append(con, **row)
            return current_declarations(con)[key]

    def declarations(self) -> list[Declaration]:
        """Every data identity's current declaration, oldest first."""
        with self.store.connect() as con:
            return list(current_declarations(con).values())

    def declaration_of(self, data: DataIdentity) -> Declaration | None:
        """The current declaration of the identity now at ``data.source`` (None if new)."""
        with self.store.connect() as con:
            key = identity_key(con, data)
            return None if key is None else current_declarations(con)[key]

    def amendments(self, key: str) -> list[Declaration]:
        """Every recorded declaration of identity ``key`` (the first, then each amendment)."""
        with self.store.connect() as con:
            rows = con.execute(
                """SELECT * FROM entries WHERE event IN ('declare', 'amend') AND source = ?
                   ORDER BY seq""",
                (key,),
            ).fetchall()
        return [Declaration.from_row(r) for r in rows]

    # -- spending ------------------------------------------------------------------------------

    @staticmethod
    def _spent(
        con: Connection, key: str, *, scope: str | None = None, period: str | None = None
    ) -> PrivacyCost:
        """What runs of identity ``key`` cost: a run's terminal row if it ended, else its hold."""
        (row,) = con.execute(
            f"""SELECT COALESCE(SUM(COALESCE(t.epsilon, r.epsilon)), 0) AS epsilon,
                       COALESCE(SUM(COALESCE(t.delta, r.delta)), 0) AS delta
                FROM entries r LEFT JOIN entries t
                  ON t.run_id = r.run_id AND t.event IN {TERMINAL}
                WHERE r.event = 'reserve' AND r.source = ?
                  AND (CAST(? AS TEXT) IS NULL OR r.scope = ?)
                  AND (CAST(? AS TEXT) IS NULL OR r.period = ?)""",
            (key, scope, scope, period, period),
        ).fetchall()
        eps, delta = float(row["epsilon"]), float(row["delta"])
        if not math.isfinite(eps + delta):  # only rows an older dppub wrote can add up so
            raise LedgerError(
                f"the costs the ledger recorded for {key!r} add up to more than a float holds "
                f"(epsilon {eps!r}): it cannot be spent further; `dppub audit` shows its runs"
            )
        return PrivacyCost(epsilon=eps, delta=delta)

    def remaining(
        self, *, data: DataIdentity, policy: BudgetPolicy, when: datetime | None = None
    ) -> PrivacyCost:
        """What a run starting at ``when`` (default now) could still spend (writes nothing)."""
        period = period_label(policy.per, when)
        with self.store.connect() as con:
            key = identity_key(con, data)
            if key is None:
                return policy.total
            left = policy.total - self._spent(con, key, scope=policy.scope(period))
            if policy.cap is not None:
                in_period = policy.cap - self._spent(con, key, period=period)
                left = PrivacyCost(
                    epsilon=min(left.epsilon, in_period.epsilon),
                    delta=min(left.delta, in_period.delta),
                )
            return left

    def spent(
        self, key: str, *, scope: str | None = None, period: str | None = None
    ) -> PrivacyCost:
        """What identity ``key`` has spent (in one scope or calendar period, or in all)."""
        with self.store.connect() as con:
            return self._spent(con, key, scope=scope, period=period)

    # -- runs ----------------------------------------------------------------------------------

    @staticmethod
    def _run_events(con: Connection, run_id: str) -> set[str]:
        rows = con.execute("SELECT DISTINCT event FROM entries WHERE run_id = ?", (run_id,))
        return {r["event"] for r in rows}

    def reserve(
        self,
        *,
        run_id: str,
        data: DataIdentity,
        policy: BudgetPolicy,
        cost: PrivacyCost,
        config_hash: str,
        location: str = "",
        when: datetime | None = None,
    ) -> PrivacyCost:
        """Atomically hold ``cost`` against ``data``'s budget; returns what is left after it.

        Declares the data on its first run; refuses a config that disagrees with the recorded
        declaration (:class:`ConfigError`), a damaged ledger (:class:`LedgerError`), and a cost
        that does not fit the lifetime total or the period's cap
        (:class:`BudgetExceededError`). A refusal writes nothing.
        """
        check_in_range(f"the reservation of run {run_id!r}", cost.epsilon)
        period = period_label(policy.per, when)
        scope = policy.scope(period)
        with self.log.write() as con:
            if self._run_events(con, run_id):
                raise LedgerError(f"run id {run_id!r} is already in the ledger")
            key, spent = self._admit(con, self.log.append, data, policy, cost, when)
            self.log.append(
                con,
                event="reserve",
                dataset=data.name,
                source=key,
                scope=scope,
                run_id=run_id,
                epsilon=cost.epsilon,
                delta=cost.delta,
                is_dp=1,
                budget_epsilon=policy.total.epsilon,
                budget_delta=policy.total.delta,
                period=period,
                location=location,
                config_hash=config_hash,
            )
            return policy.total - (spent + cost)

    def check_reserve(
        self,
        *,
        data: DataIdentity,
        policy: BudgetPolicy,
        cost: PrivacyCost,
        when: datetime | None = None,
    ) -> None:
        """Raise what :meth:`reserve` would refuse ``cost`` with, writing nothing (``dppub
        plan``): the same checks, read-only."""
        with self.store.connect() as con:
            self._admit(con, None, data, policy, cost, when)

    def _admit(
        self,
        con: Connection,
        append: Append | None,
        data: DataIdentity,
        policy: BudgetPolicy,
        cost: PrivacyCost,
        when: datetime | None,
    ) -> tuple[str, PrivacyCost]:
        """The identity key and what its scope has spent, or the refusal of ``cost``: a config
        that disagrees with the declaration, or a cost over the total or the period's cap."""
        check_in_range("the budget", policy.total.epsilon)
        key = check_declared(con, append, data, policy)
        spent = admit(data.name, policy, cost, when, lambda **at: self._spent(con, key, **at))
        return key, spent

    def _reservation_row(self, con: Connection, run_id: str) -> Row:
        row: Row | None = con.execute(
            "SELECT * FROM entries WHERE run_id = ? AND event = 'reserve'", (run_id,)
        ).fetchone()
        if row is None:
            raise LedgerError(f"run {run_id!r} has no reservation")
        return row

    def _pending(self, con: Connection, run_id: str, action: str) -> tuple[Row, set[str]]:
        res = self._reservation_row(con, run_id)
        events = self._run_events(con, run_id)
        ended = events.intersection(TERMINAL)
        if ended:
            state = STATES[ended.pop()]
            raise LedgerError(f"run {run_id!r} is {state} and cannot {action}")
        return res, events

    def _run_row(self, res: Row, **values: object) -> dict[str, object]:
        return {
            "dataset": res["dataset"],
            "source": res["source"],
            "scope": res["scope"],
            "run_id": res["run_id"],
            "config_hash": res["config_hash"],
            **values,
        }

    def draw(self, *, run_id: str, release: str, cost: PrivacyCost, is_dp: bool = True) -> None:
        """Record that ``release`` of a pending run is about to draw noise on private data.

        Called before any noise is drawn: the run is then charged even if it never publishes,
        and a second attempt at the same release is refused, so no release is ever drawn twice.

        Raises:
            InvariantError: the release was already attempted in this run.
            LedgerError: the run is not pending, or has composed its releases already.
        """
        with self.log.write() as con:
            res, events = self._pending(con, run_id, "draw noise")
            if "release" in events:
                raise LedgerError(f"run {run_id!r} has composed its releases and cannot draw")
            seen = con.execute(
                "SELECT 1 FROM entries WHERE run_id = ? AND event = 'draw' AND release = ?",
                (run_id, release),
            ).fetchone()
            if seen is not None:
                raise InvariantError(
                    f"release {release!r} of run {run_id} was already attempted; a second "
                    "attempt would draw a second noisy answer, so it stops"
                )
            drawn = sum(d.cost.epsilon for d in self._drawn(con, run_id)) if is_dp else 0.0
            # What a charge would record (the draws' sum) stays in range: refused before noise.
            check_in_range(
                f"release {release!r} of run {run_id!r} (with the run's earlier draws)",
                drawn + cost.epsilon,
            )
            row = self._run_row(
                res,
                event="draw",
                release=release,
                epsilon=cost.epsilon,
                delta=cost.delta,
                is_dp=int(is_dp),
            )
            self.log.append(con, **row)

    def record_releases(self, *, run_id: str, releases: Sequence[ReleaseRecord]) -> str:
        """Append one ``release`` row per computed release; return the new head hash."""
        with self.log.write() as con:
            res, events = self._pending(con, run_id, "record releases")
            if "release" in events:
                raise LedgerError(f"run {run_id!r} has recorded its releases already")
            head = str(res["hash"])
            for r in releases:
                head = self.log.append(
                    con,
                    **self._run_row(
                        res,
                        event="release",
                        release=r.name,
                        kind=r.kind,
                        mechanism=r.mechanism,
                        epsilon=r.cost.epsilon,
                        delta=r.cost.delta,
                        sensitivity=r.sensitivity,
                        partition=partition_text(r.partition),
                        is_dp=int(r.is_dp),
                        output_hash=r.output_hash,
                        note=json.dumps({"neighbours": r.neighbours}, sort_keys=True),
                    ),
                )
            return head

    def recorded_cost(self, run_id: str) -> tuple[PrivacyCost, PrivacyCost]:
        """``(reserved, recomputed)``: the held cost and the composition of the release rows.

        The recomputation uses only what the ledger stores (not the planner's numbers).
        """
        with self.store.connect() as con:
            reserved = self._reservation_row(con, run_id)
            rows = con.execute(
                "SELECT * FROM entries WHERE run_id = ? AND event = 'release' AND is_dp = 1",
                (run_id,),
            ).fetchall()
        planned = [
            PlannedCost(
                name=r["release"],
                cost=PrivacyCost(epsilon=r["epsilon"], delta=r["delta"]),
                partition=None if r["partition"] is None else tuple(json.loads(r["partition"])),
            )
            for r in rows
        ]
        held = PrivacyCost(epsilon=reserved["epsilon"], delta=reserved["delta"])
        return held, compose(planned)

    @staticmethod
    def _drawn(con: Connection, run_id: str) -> list[PlannedCost]:
        rows = con.execute(
            "SELECT * FROM entries WHERE run_id = ? AND event = 'draw' AND is_dp = 1 ORDER BY seq",
            (run_id,),
        ).fetchall()
        return [
            PlannedCost(name=r["release"], cost=PrivacyCost(epsilon=r["epsilon"], delta=r["delta"]))
            for r in rows
        ]

    def drew(self, run_id: str) -> bool:
        """True if any release of ``run_id`` drew (or was about to draw) noise."""
        with self.store.connect() as con:
            return bool(self._drawn(con, run_id))

    def commit(self, *, run_id: str, output_hash: str) -> str:
        """Record that a run was published; it costs what it reserved. Returns the new head."""
        with self.log.write() as con:
            res, _ = self._pending(con, run_id, "be committed")
            row = self._run_row(
                res,
                event="commit",
                epsilon=res["epsilon"],
                delta=res["delta"],
                is_dp=1,
                output_hash=output_hash,
            )
            return self.log.append(con, **row)

    def charge(self, *, run_id: str) -> PrivacyCost:
        """End a run that drew noise but published nothing: it costs what its draws cost."""
        with self.log.write() as con:
            res, _ = self._pending(con, run_id, "be charged")
            drawn = self._drawn(con, run_id)
            if not drawn:
                raise LedgerError(f"run {run_id!r} drew no noise: abort it instead")
            cost = compose(drawn)
            row = self._run_row(
                res, event="charge", epsilon=cost.epsilon, delta=cost.delta, is_dp=1
            )
            self.log.append(con, **row)
            return cost

    def abort(self, *, run_id: str) -> None:
        """Release the hold of a run that drew no noise and published nothing."""
        with self.log.write() as con:
            res, _ = self._pending(con, run_id, "be aborted")
            if self._drawn(con, run_id):
                raise LedgerError(f"run {run_id!r} drew noise and must be charged, not aborted")
            self.log.append(
                con, **self._run_row(res, event="abort", epsilon=0.0, delta=0.0, is_dp=1)
            )

    def reservation(self, run_id: str) -> Reservation:
        """The reservation of ``run_id`` and the run's state."""
        with self.store.connect() as con:
            res = self._reservation_row(con, run_id)
            events = self._run_events(con, run_id)
        ended = events.intersection(TERMINAL)
        return Reservation(
            run_id=run_id,
            dataset=res["dataset"],
            source=res["source"],
            scope=res["scope"],
            period=res["period"],
            cost=PrivacyCost(epsilon=res["epsilon"], delta=res["delta"]),
            location=res["location"] or "",
            config_hash=res["config_hash"] or "",
            state=STATES[ended.pop()] if ended else "pending",
            recorded="release" in events,
        )

    def pending(self) -> list[Reservation]:
        """Runs that reserved budget and have not ended."""
        with self.store.connect() as con:
            ids = [
                r["run_id"]
                for r in con.execute(
                    f"""SELECT run_id FROM entries WHERE event = 'reserve' AND run_id NOT IN
                        (SELECT run_id FROM entries WHERE event IN {TERMINAL}) ORDER BY seq"""
                )
            ]
        return [self.reservation(i) for i in ids]

    # -- verification and reports ----------------------------------------------------------------

    def head(self) -> tuple[int, str]:
        """``(seq, hash)`` of the last row (``(0, GENESIS)`` when empty)."""
        return self.log.head()

    def missing(self, entries: Sequence[tuple[int, str]]) -> list[tuple[int, str]]:
        """Those of ``entries`` (``(seq, hash)`` pairs seen elsewhere) the ledger lacks."""
        return self.log.missing(entries)

    def verify(self, *, expected_head: tuple[int, str] | None = None) -> ChainReport:
        """Recompute the whole hash chain; optionally check it still contains a known head."""
        return self.log.verify(expected_head=expected_head)

    def runs(self, key: str | None = None) -> list[dict[str, Any]]:
        """Every run (of identity ``key``, or all): its reservation, state and final cost."""
        return run_rows(self.store, key)

    def published_neighbours(self, key: str) -> list[str]:
        """The neighbouring relations stated by the committed DP releases of identity ``key``."""
        return published_neighbours(self.store, key)

    def history(self, key: str | None = None) -> list[dict[str, object]]:
        """Every reservation, draw and release row, oldest first, with its run's state."""
        return history_rows(self.store, key)
