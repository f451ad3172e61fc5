"""Value objects of the budget ledger (immutable)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dppub.dp.budget import PrivacyCost
from dppub.dp.errors import ConfigError
from dppub.dp.ledger.policy import BudgetPolicy

__all__ = ["ChainReport", "Declaration", "ReleaseRecord", "Reservation", "check_run_id"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleaseRecord:
    """One computed release, as the ledger records it."""

    name: str
    """Release name, unique within the run."""
    kind: str
    """What was released: ``workload``, ``regression``, ``k-anonymity``..."""
    mechanism: str
    """The mechanism, e.g. ``laplace`` or ``generalization``."""
    cost: PrivacyCost
    """The release's own (epsilon, delta); zero for non-DP releases."""
    sensitivity: float | None = None
    """Sensitivity the noise was calibrated to (None for non-DP releases)."""
    partition: tuple[str, str] | None = None
    """Disjoint row partition ``(key, part)`` the release reads, for parallel composition."""
    is_dp: bool = True
    """False for syntactic releases (a k-anonymous table), which are *not* DP."""
    output_hash: str = ""
    """SHA-256 of the released files."""
    neighbours: str = "one row"
    """The neighbouring relation its guarantee is stated for (one row, or one privacy unit)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Declaration:
    """What the ledger records about one body of data: its name, where it is, its budget."""

    key: str
    """The identity's stable key: the source it was first declared with."""
    name: str
    """The dataset's current name."""
    path: str
    """Where the data is now (a resolved path; ``{period}`` for renewing budgets)."""
    policy: BudgetPolicy
    """The budget policy in force."""
    ts: str
    """When this declaration was recorded (UTC, ISO 8601)."""
    event: str
    """``declare`` (the first run) or ``amend`` (an explicit, recorded change)."""
    who: str = ""
    """Who made the amendment."""
    why: str = ""
    """Why (the amendment's reason)."""
    changes: tuple[str, ...] = ()
    """What the amendment changed, as ``what old -> new``."""

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Declaration:
        note: dict[str, Any] = json.loads(row["note"])
        return cls(
            key=str(row["source"]),
            name=str(row["dataset"]),
            path=str(note["path"]),
            policy=BudgetPolicy.from_json(note["budget"]),
            ts=str(row["ts"]),
            event=str(row["event"]),
            who=str(note.get("who", "")),
            why=str(note.get("why", "")),
            changes=tuple(note.get("changes", ())),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Reservation:
    """A run's hold on the budget and where the run publishes."""

    run_id: str
    dataset: str
    source: str
    """The data identity's key."""
    scope: str
    """The budget scope charged: ``all`` (lifetime) or a period of a renewing budget."""
    period: str
    """The calendar period the run reserved in (``all`` without ``per``)."""
    cost: PrivacyCost
    location: str
    """The dataset's publication folder (``OUT/<dataset>``)."""
    config_hash: str
    state: str
    """``pending``, ``committed``, ``charged`` or ``aborted``."""
    recorded: bool
    """True once the run's release rows are written."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChainReport:
    """Result of :meth:`Ledger.verify`."""

    ok: bool
    rows: int
    head: str
    problems: tuple[str, ...]


def check_run_id(run_id: str) -> str:
    """Run ids become folder names: letters, digits, ``-`` and ``_`` only."""
    if not run_id or not all(c.isalnum() or c in "-_" for c in run_id):
        raise ConfigError(f"run id must be letters, digits, '-' or '_', got {run_id!r}")
    return run_id
