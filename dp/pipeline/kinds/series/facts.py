"""What ``dppub plan`` shows of a planned series period (:meth:`SeriesKind.describe`): the
period due, the strategy chosen by expected error, what the series will have spent, and each
figure's expected error against the SVD bound."""

from __future__ import annotations

from typing import ClassVar

from dppub.dp.pipeline.kinds.plan_facts import PlanFacts
from dppub.dp.pipeline.kinds.release_file import Stated

__all__ = ["FigureFacts", "SeriesFacts"]


class FigureFacts(Stated):
    """One published figure's expected error over the horizon."""

    figure: str
    """``per_period``, ``running_total``, ``moving_sum_12``..."""
    rmse: float
    """The chosen strategy's expected RMSE (root mean square over the horizon's figures)."""
    bound_rmse: float
    """The SVD lower bound on it for any strategy."""


class SeriesFacts(PlanFacts):
    """A planned series period, as ``dppub plan`` shows it."""

    keep_null: ClassVar[frozenset[str]] = frozenset({"nothing_due", "last_published"})

    nothing_due: str | None
    """Why nothing is due (the run would be refused, at no cost), or None."""
    series: str
    period: str
    """The period due (or ``--period``), as its label (``2027-03``)."""
    last_published: str | None
    """The last period published before, or None."""
    horizon: int
    relation: str
    """The neighbouring relation across periods."""
    strategy: str
    """The strategy chosen by expected error."""
    candidates: dict[str, float]
    """Each candidate strategy's total expected error."""
    svd_bound: float
    budget: float
    """The series' budget for its horizon (rho, or epsilon for Laplace noise)."""
    spent_after: float
    """What the series will have spent after this period, in the budget's unit."""
    charge_epsilon: float
    """What the ledger charges this run."""
    figures: tuple[FigureFacts, ...]
