"""What ``dppub plan`` shows of a planned rows-per-unit histogram
(:meth:`ContributionsKind.describe`): its bins and its noise, before any data."""

from __future__ import annotations

from dppub.dp.pipeline.kinds.plan_facts import PlanFacts

__all__ = ["ContributionsFacts"]


class ContributionsFacts(PlanFacts):
    """A planned contributions histogram, as ``dppub plan`` shows it."""

    column: str
    """The column whose values' rows are counted (the privacy unit's, or ``unit:``)."""
    bins: tuple[str, ...]
    """The bins' labels (``1``, ``5-9``, ..., ``>= cap``)."""
    sensitivity: int
    """The histogram's L1 sensitivity (:func:`dp.contributions.histogram_sensitivity`)."""
    noise_scale: float
    """The Laplace scale per bin: ``sensitivity / epsilon``."""
