"""The ledger's rows as audits read them: runs with their final cost, and the event history.

Plain queries over the entries (one SQL text for every store); a run counts what its terminal
row says it cost, or its whole hold while it is pending.
"""

from __future__ import annotations

import json
from typing import Any

from dppub.dp.ledger.chain import TERMINAL
from dppub.dp.ledger.store import Store

__all__ = ["STATES", "committed_releases", "history_rows", "published_neighbours", "run_rows"]

STATES = {"commit": "committed", "charge": "charged", "abort": "aborted"}
"""The state a run's terminal event puts it in."""


def committed_releases(store: Store, dataset: str | None, kind: str) -> list[dict[str, Any]]:
    """The release rows of kind ``kind`` of dataset ``dataset`` (None: any) in committed runs,
    oldest first: run, release, cost and the output hash the chain seals (a series reads what
    it published here)."""
    with store.connect() as con:
        rows = con.execute(
            """SELECT e.seq, e.ts, e.dataset, e.run_id, e.release, e.epsilon, e.delta,
                      e.output_hash
               FROM entries e JOIN entries t ON t.run_id = e.run_id AND t.event = 'commit'
               WHERE e.event = 'release' AND e.kind = ?
                 AND (CAST(? AS TEXT) IS NULL OR e.dataset = ?)
               ORDER BY e.seq""",
            (kind, dataset, dataset),
        ).fetchall()
    return [dict(r) for r in rows]


def published_neighbours(store: Store, key: str) -> list[str]:
    """The neighbouring relations the committed DP releases of identity ``key`` were stated
    for (one DISTINCT query: an audit of many releases reads no release row twice)."""
    with store.connect() as con:
        rows = con.execute(
            """SELECT DISTINCT e.note
               FROM entries e JOIN entries t ON t.run_id = e.run_id AND t.event = 'commit'
               WHERE e.event = 'release' AND e.is_dp = 1 AND e.source = ?""",
            (key,),
        ).fetchall()
    notes = [json.loads(r["note"]) if r["note"] else {} for r in rows]
    return sorted({str(n.get("neighbours") or "one row") for n in notes})


def run_rows(store: Store, key: str | None = None) -> list[dict[str, Any]]:
    """Every run (of identity ``key``, or all): its reservation, state and final cost."""
    with store.connect() as con:
        rows = con.execute(
            f"""SELECT r.seq, r.ts, r.dataset, r.source, r.scope, r.period, r.run_id,
                       r.epsilon AS reserved_epsilon, r.delta AS reserved_delta,
                       COALESCE(t.epsilon, r.epsilon) AS epsilon,
                       COALESCE(t.delta, r.delta) AS delta,
                       COALESCE(t.event, 'pending') AS state
                FROM entries r LEFT JOIN entries t
                  ON t.run_id = r.run_id AND t.event IN {TERMINAL}
                WHERE r.event = 'reserve' AND (CAST(? AS TEXT) IS NULL OR r.source = ?)
                ORDER BY r.seq""",
            (key, key),
        ).fetchall()
    return [{**r, "state": STATES.get(r["state"], "pending")} for r in rows]


def history_rows(store: Store, key: str | None = None) -> list[dict[str, object]]:
    """Every reservation, draw and release row, oldest first, with its run's state and, for a
    release, the neighbouring relation its guarantee is stated for."""
    with store.connect() as con:
        rows = con.execute(
            f"""SELECT e.ts, e.event, e.dataset, e.source, r.period, e.run_id, e.release,
                       e.kind, e.mechanism, e.epsilon, e.delta, e.is_dp, e.note,
                       COALESCE(t.event, 'pending') AS state
                FROM entries e
                JOIN entries r ON r.run_id = e.run_id AND r.event = 'reserve'
                LEFT JOIN entries t ON t.run_id = e.run_id AND t.event IN {TERMINAL}
                WHERE e.event IN ('reserve', 'draw', 'release')
                  AND (CAST(? AS TEXT) IS NULL OR e.source = ?)
                ORDER BY e.seq""",
            (key, key),
        ).fetchall()
    out: list[dict[str, object]] = []
    for r in rows:
        note = json.loads(r["note"]) if r["event"] == "release" and r["note"] else {}
        row = {k: v for k, v in r.items() if k != "note"}
        row["neighbours"] = note.get("neighbours") if isinstance(note, dict) else None
        row["state"] = STATES.get(r["state"], "pending")
        out.append(row)
    return out
