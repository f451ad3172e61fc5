"""Data identities in the ledger: the first run declares them, amendments change them.

A declaration row's ``source`` is the identity's stable key (the path it was first declared
with); its note holds the current path and budget policy. Spending is keyed by that stable key,
so a recorded rename or move carries the spending over, while a config that silently renames
the data, points a known name at other data, or edits the budget is refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from dppub.dp.errors import ConfigError, LedgerError
from dppub.dp.ledger.policy import BudgetPolicy, DataIdentity
from dppub.dp.ledger.records import Declaration
from dppub.dp.ledger.store import Connection

__all__ = ["amendment_row", "check_declared", "current_declarations", "identity_key", "note"]

Append = Callable[..., str]


def note(**values: object) -> str:
    """Canonical JSON for a row's ``note``."""
    return json.dumps(values, sort_keys=True, separators=(",", ":"))


def current_declarations(con: Connection) -> dict[str, Declaration]:
    """The current declaration of every data identity, by identity key, oldest first."""
    rows = con.execute(
        """SELECT * FROM entries WHERE seq IN (SELECT MAX(seq) FROM entries
           WHERE event IN ('declare', 'amend') GROUP BY source) ORDER BY seq"""
    ).fetchall()
    return {r["source"]: Declaration.from_row(r) for r in rows}


def identity_key(con: Connection, data: DataIdentity) -> str | None:
    """The key of the identity whose current path is ``data.source`` (None: not declared)."""
    return next((k for k, d in current_declarations(con).items() if d.path == data.source), None)


def _row(
    event: str, key: str, data: DataIdentity, policy: BudgetPolicy, **extra: object
) -> dict[str, object]:
    return {
        "event": event,
        "dataset": data.name,
        "source": key,
        "epsilon": 0.0,
        "delta": 0.0,
        "is_dp": 0,
        "budget_epsilon": policy.total.epsilon,
        "budget_delta": policy.total.delta,
        "note": note(path=data.source, budget=policy.to_json(), **extra),
    }


def check_declared(
    con: Connection, append: Append | None, data: DataIdentity, policy: BudgetPolicy
) -> str:
    """The identity key of ``data``: declared now if new (unless ``append`` is None: a
    read-only check), refused if the config disagrees.

    Raises:
        ConfigError: one line naming each difference from the recorded declaration.
    """
    current = current_declarations(con)
    key = next((k for k, d in current.items() if d.path == data.source), None)
    if key is None:
        other = next((d for d in current.values() if d.name == data.name), None)
        if other is not None:
            raise ConfigError(
                f"dataset {data.name!r} is recorded for {other.path}, the config reads "
                f"{data.source}: if the data moved, record it with `dppub budget amend`"
            )
        if append is not None:
            append(con, **_row("declare", data.source, data, policy))
        return data.source
    recorded = current[key]
    diffs = policy.differences(recorded.policy)
    if recorded.name != data.name:
        diffs.insert(0, f"name {recorded.name!r} -> {data.name!r}")
    if diffs:
        raise ConfigError(
            f"dataset {recorded.name!r} ({data.source}): the config differs from what the "
            f"ledger recorded: {', '.join(diffs)}; make the change with `dppub budget amend "
            "CONFIG --reason TEXT`, which records it"
        )
    return key


def amendment_row(
    con: Connection, data: DataIdentity, policy: BudgetPolicy, *, who: str, why: str
) -> tuple[str, dict[str, object]]:
    """The identity key and the ``amend`` row recording a change to ``data``'s declaration.

    The data is found by its source, else by its name (the data moved).

    Raises:
        LedgerError: the ledger does not know the data, the name is taken, or nothing changes.
    """
    current = current_declarations(con)
    key = next((k for k, d in current.items() if d.path == data.source), None)
    if key is None:
        key = next((k for k, d in current.items() if d.name == data.name), None)
    if key is None:
        raise LedgerError(
            f"the ledger has no dataset {data.name!r} or source {data.source}: nothing to "
            "amend (a first run records the dataset)"
        )
    old = current[key]
    clash = [d for k, d in current.items() if k != key and d.name == data.name]
    if clash:
        raise LedgerError(f"dataset name {data.name!r} is taken by {clash[0].path}")
    changes = policy.differences(old.policy)
    if old.name != data.name:
        changes.insert(0, f"name {old.name!r} -> {data.name!r}")
    if old.path != data.source:
        changes.insert(0, f"source {old.path} -> {data.source}")
    if not changes:
        raise LedgerError(f"dataset {data.name!r}: the config matches the ledger already")
    return key, _row("amend", key, data, policy, who=who, why=why, changes=changes)
