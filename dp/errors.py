"""The small error vocabulary of dppub.

Every error a user can cause is a :class:`DPPubError` whose message is one line that names the
bad value (never a private data value). The CLI prints that line and exits non-zero instead of
showing a traceback.
"""

from __future__ import annotations

__all__ = [
    "BudgetExceededError",
    "ConfigError",
    "DPPubError",
    "InputError",
    "InvariantError",
    "LedgerError",
    "PrivacyLeakWarning",
    "SolverError",
    "Stopped",
]


class DPPubError(Exception):
    """Base class of the errors dppub raises on purpose."""


class ConfigError(DPPubError, ValueError):
    """A configuration value or a function argument is invalid."""


class InputError(DPPubError, ValueError):
    """The private input (a file, a table) does not match what the config declares."""


class BudgetExceededError(DPPubError):
    """A planned release does not fit the remaining privacy budget."""


class LedgerError(DPPubError):
    """The budget ledger cannot be used (locked, read-only, corrupted, tampered)."""


class SolverError(DPPubError):
    """A convex solver did not return an optimal solution."""


class Stopped(DPPubError):
    """A long computation stopped at a safe point because the run was interrupted (what it
    drew stays charged); the interrupted command reports the run, not this error."""


class InvariantError(DPPubError, AssertionError):
    """An internal invariant failed: a bug in dppub, never the user's fault."""


class PrivacyLeakWarning(UserWarning):
    """Something would weaken the privacy guarantee (e.g. a seeded, non-release sampler)."""
