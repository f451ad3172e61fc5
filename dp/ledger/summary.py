"""What an audit reports about each dataset: declaration, lifetime spending, periods, runs.

Computed from the ledger rows alone (:meth:`Ledger.runs`, :meth:`Ledger.declarations`), as plain
JSON-ready values for ``dppub audit --json`` and the audit page.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from dppub.dp.budget import PrivacyCost
from dppub.dp.ledger.book import Ledger

__all__ = ["spending_summary"]

_COUNTS = {"committed": "runs", "charged": "charged_runs", "pending": "pending_runs"}


def _tally(runs: list[dict[str, Any]]) -> dict[str, Any]:
    eps = sum(float(r["epsilon"]) for r in runs)
    delta = sum(float(r["delta"]) for r in runs)
    out: dict[str, Any] = {"spent_epsilon": eps, "spent_delta": delta}
    for state, field in _COUNTS.items():
        out[field] = sum(r["state"] == state for r in runs)
    out["aborted_runs"] = sum(r["state"] == "aborted" for r in runs)
    return out


def spending_summary(ledger: Ledger, name: str | None = None) -> dict[str, dict[str, Any]]:
    """Per dataset (by current name): its declaration, amendments, lifetime and current
    spending, what is left, spending per calendar period, runs charged but not published, and
    the neighbouring relations its published DP releases were stated for.

    A run counts what it finally cost: committed runs their reservation, charged runs the
    composition of their draws, pending runs their whole hold, aborted runs nothing.
    """
    out: dict[str, dict[str, Any]] = {}
    for d in ledger.declarations():
        if name is not None and d.name != name:
            continue
        runs = ledger.runs(d.key)
        policy = d.policy
        period = policy.period()
        scope = policy.scope(period)
        lifetime = _tally(runs)
        current = _tally([r for r in runs if r["scope"] == scope])
        left = policy.total - PrivacyCost(
            epsilon=current["spent_epsilon"], delta=current["spent_delta"]
        )
        if policy.cap is not None:
            in_period = _tally([r for r in runs if r["period"] == period])
            capped = policy.cap - PrivacyCost(
                epsilon=in_period["spent_epsilon"], delta=in_period["spent_delta"]
            )
            left = PrivacyCost(
                epsilon=min(left.epsilon, capped.epsilon), delta=min(left.delta, capped.delta)
            )
        by_period: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in runs:
            by_period[str(r["period"])].append(r)
        out[d.name] = {
            "source": d.path,
            "neighbours": ledger.published_neighbours(d.key),
            "budget": policy.to_json(),
            "budget_text": policy.describe(),
            "budget_epsilon": policy.total.epsilon,
            "budget_delta": policy.total.delta,
            "period": period,
            "scope": scope,
            "lifetime_spent_epsilon": lifetime["spent_epsilon"],
            "lifetime_spent_delta": lifetime["spent_delta"],
            **current,
            "remaining_epsilon": left.epsilon,
            "remaining_delta": left.delta,
            "periods": {p: _tally(rs) for p, rs in by_period.items()},
            "charged": [
                {k: r[k] for k in ("run_id", "ts", "epsilon", "delta")}
                for r in runs
                if r["state"] == "charged"
            ],
            "amendments": [
                {"ts": a.ts, "who": a.who, "why": a.why, "changes": list(a.changes)}
                for a in ledger.amendments(d.key)
                if a.event == "amend"
            ],
        }
    return out
