"""Value objects of the budget ledger (immutable)."""

from __future__ import annotations

from dataclasses import dataclass

from dp.budget import PrivacyCost
from dp.errors import ConfigError

__all__ = ["ChainReport", "DatasetSpending", "ReleaseRecord", "Reservation", "check_run_id"]


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


@dataclass(frozen=True, slots=True, kw_only=True)
class DatasetSpending:
    """What the ledger says about one dataset."""

    dataset: str
    period: str
    """Budget period (``all`` for a lifetime budget, else e.g. ``2026`` or ``2026-11``)."""
    budget: PrivacyCost | None
    """The budget declared by the most recent reservation in this period."""
    spent: PrivacyCost
    """Committed plus still-pending reservations (pending runs count until resolved)."""
    runs: int
    """Committed runs."""
    pending_runs: int
    """Reserved runs neither committed nor aborted."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Reservation:
    """A run's hold on the budget and where the run publishes."""

    run_id: str
    dataset: str
    period: str
    cost: PrivacyCost
    location: str
    """The dataset's publication folder (``OUT/<dataset>``)."""
    config_hash: str
    state: str
    """``pending``, ``committed`` or ``aborted``."""
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
