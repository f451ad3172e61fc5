"""Admission: whether a reservation fits its data's budget (lifetime and per period), and the
range a cost or budget must lie in before anything is written."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from dppub.dp.budget import PrivacyCost
from dppub.dp.errors import BudgetExceededError, ConfigError
from dppub.dp.ledger.chain import MAX_EPSILON
from dppub.dp.ledger.policy import BudgetPolicy
from dppub.dp.periods import next_period_start, period_label


def check_in_range(what: str, epsilon: float) -> None:
    """Refuse (before writing) a cost or budget above what the ledger holds: ``MAX_EPSILON``
    keeps every sum it computes finite."""
    if not epsilon <= MAX_EPSILON:
        raise ConfigError(
            f"{what} has epsilon={epsilon:g}, above the ledger's range (at most "
            f"{MAX_EPSILON:g}): refused, nothing was written"
        )


def admit(
    name: str,
    policy: BudgetPolicy,
    cost: PrivacyCost,
    when: datetime | None,
    spent: Callable[..., PrivacyCost],
) -> PrivacyCost:
    """What the run's scope has spent (``spent(scope=...)`` / ``spent(period=...)`` say what
    the data spent); raises :class:`BudgetExceededError` when ``cost`` does not fit the lifetime
    total or the period's cap. With no ledger yet, ``spent`` is zero everywhere."""
    period = period_label(policy.per, when)
    in_scope = spent(scope=policy.scope(period))
    _check_fits(name, period if policy.renew else None, in_scope, cost, policy.total, policy, when)
    if policy.cap is not None:
        _check_fits(name, period, spent(period=period), cost, policy.cap, policy, when)
    return in_scope


def _check_fits(
    name: str,
    period: str | None,
    spent: PrivacyCost,
    cost: PrivacyCost,
    budget: PrivacyCost,
    policy: BudgetPolicy,
    when: datetime | None,
) -> None:
    if (spent + cost).fits_within(budget):
        return
    message = (
        f"budget exceeded for dataset {name!r}{'' if period is None else f' in period {period}'}"
        f": budget epsilon={budget.epsilon:g} "
        f"delta={budget.delta:g}, spent epsilon={spent.epsilon:g} delta={spent.delta:g}, "
        f"requested epsilon={cost.epsilon:g} delta={cost.delta:g}"
    )
    if period is not None:
        opens = next_period_start(policy.per, when)
        if opens is not None:
            message += f"; the next period opens {opens.isoformat()}"
    raise BudgetExceededError(message)
