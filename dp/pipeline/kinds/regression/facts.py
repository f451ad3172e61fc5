"""What ``dppub plan`` shows of a planned regression (:meth:`RegressionKind.describe`): a
linear model's method and the release it makes (:meth:`dp.regression.LinearRegression.plan`),
chosen before any data; nothing for the other models."""

from __future__ import annotations

from dppub.dp.pipeline.kinds.plan_facts import PlanFacts

__all__ = ["RegressionFacts"]


class RegressionFacts(PlanFacts):
    """A planned regression, as ``dppub plan`` shows it (empty but for a linear model)."""

    method: str | None = None
    """``auto``, ``functional`` or ``adassp``."""
    release: str | None = None
    """What is released: ``functional`` or ``adassp``."""
    expected_noise_risk: dict[str, float] | None = None
    """``auto``: each candidate release's first-order risk-weighted noise."""
    solve: str | None = None
    """``auto``: how the released statistics are solved."""
    features: tuple[str, ...] | None = None
    """The encoded features (a category column: one indicator per level but the reference)."""
