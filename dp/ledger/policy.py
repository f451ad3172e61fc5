"""What a budget covers: the data it is tied to and the rule that spends it.

A budget is a *lifetime* total on one body of data. The data is identified by its source (the
resolved path the config reads) and carries a name; the ledger records both on first use, so a
new name on already-charged data, or a familiar name on new data, is noticed instead of
starting from zero. Calendar periods can only do two things:

* ``cap``: at most this much may be spent inside any one period (e.g. to pace a schedule);
  the lifetime total still bounds everything;
* ``renew``: each period reads its own, disjoint rows -- the source path names the period
  (``{period}`` in the path) -- so by parallel composition each period's data has its own
  lifetime budget. The config must say so; the path template makes the disjointness visible.

Changing any of this for data the ledger knows is an explicit, recorded act
(:meth:`dp.ledger.Ledger.amend`), never a silent config edit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, get_args

from dppub.dp.budget import PrivacyCost
from dppub.dp.errors import ConfigError
from dppub.dp.periods import LIFETIME, Period, period_label

__all__ = ["PERIOD_FIELD", "BudgetPolicy", "DataIdentity"]

PERIOD_FIELD = "{period}"
"""The placeholder a renewing budget's source path must contain."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DataIdentity:
    """The data a budget is tied to: its name and its source (a resolved path template)."""

    name: str
    """The dataset's name (letters, digits, ``-`` and ``_``)."""
    source: str
    """The resolved file or folder the config reads (with ``{period}`` for renewing budgets)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetPolicy:
    """A dataset's allowance and how periods may spend it.

    >>> BudgetPolicy(total=PrivacyCost(epsilon=4.0), per="month",
    ...              cap=PrivacyCost(epsilon=1.0)).describe()
    'epsilon=4 delta=0 lifetime, at most epsilon=1 delta=0 per month'
    """

    total: PrivacyCost
    """The lifetime total (per period's data when ``renew``)."""
    per: Period | None = None
    """Calendar period (UTC) for ``cap`` or ``renew``."""
    cap: PrivacyCost | None = None
    """At most this much inside one period; requires ``per``, not with ``renew``."""
    renew: bool = False
    """Each period reads disjoint rows (the source names ``{period}``): a budget per period."""

    def __post_init__(self) -> None:
        if self.total.epsilon <= 0.0:
            raise ConfigError(f"budget epsilon must be > 0, got {self.total.epsilon!r}")
        if self.per is not None and self.per not in get_args(Period):
            raise ConfigError(f"budget period must be one of {list(get_args(Period))}")
        if (self.cap is not None or self.renew) and self.per is None:
            raise ConfigError("budget: cap and renew need a period ('per')")
        if self.per is not None and self.cap is None and not self.renew:
            raise ConfigError(
                "budget: a period ('per') either caps spending inside it (cap: {epsilon: ...}) "
                "or renews the budget for data that names the period (renew: true)"
            )
        if self.cap is not None and self.renew:
            raise ConfigError("budget: give cap or renew, not both")
        if self.cap is not None and not self.cap.fits_within(self.total):
            raise ConfigError("budget: the cap exceeds the lifetime total")

    def scope(self, period: str) -> str:
        """The spending scope of a run charged in ``period``: the period itself when the
        budget renews, else the lifetime (``all``)."""
        return period if self.renew else LIFETIME

    def period(self) -> str:
        """The label of the current calendar period (``all`` without ``per``)."""
        return period_label(self.per)

    def describe(self) -> str:
        """One line for messages and reports."""
        t = self.total
        text = f"epsilon={t.epsilon:g} delta={t.delta:g}"
        if self.renew:
            return f"{text} per {self.per} (each {self.per} reads its own rows)"
        text += " lifetime"
        if self.cap is not None:
            text += (
                f", at most epsilon={self.cap.epsilon:g} delta={self.cap.delta:g} per {self.per}"
            )
        return text

    def to_json(self) -> dict[str, Any]:
        """A canonical, JSON-ready form (stored in the ledger)."""
        cap = None if self.cap is None else [self.cap.epsilon, self.cap.delta]
        return {
            "epsilon": self.total.epsilon,
            "delta": self.total.delta,
            "per": self.per,
            "cap": cap,
            "renew": self.renew,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BudgetPolicy:
        cap = data.get("cap")
        return cls(
            total=PrivacyCost(epsilon=data["epsilon"], delta=data["delta"]),
            per=data.get("per"),
            cap=None if cap is None else PrivacyCost(epsilon=cap[0], delta=cap[1]),
            renew=bool(data.get("renew", False)),
        )

    def differences(self, recorded: BudgetPolicy) -> list[str]:
        """How this policy differs from the ``recorded`` one, as ``what: recorded -> this``."""
        mine, theirs = self.to_json(), recorded.to_json()
        return [
            f"{key} {_show(theirs[key])} -> {_show(mine[key])}"
            for key in ("epsilon", "delta", "per", "cap", "renew")
            if mine[key] != theirs[key]
        ]


def _show(value: object) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return json.dumps(value)
