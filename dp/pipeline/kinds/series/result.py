"""A series run's typed result: what ``release.json`` states (the periods it published, the
strategy, the noise, what the series has cost so far and what this run charged)."""

from __future__ import annotations

from dppub.dp.pipeline.kinds.base import Result
from dppub.dp.pipeline.kinds.series.publishing import PRECISION

__all__ = ["SeriesResult"]


class SeriesResult(Result):
    """One run of a series, public values only."""

    series: str
    period: str
    """The last period this run published."""
    published: tuple[str, ...]
    """The periods this run published (more than one when it caught up skipped ones)."""
    periods: tuple[str, ...]
    """Every period the series has published, oldest first."""
    horizon: int
    strategy: str
    noise: str
    std: float
    """The noise's standard deviation per measurement, per measure (sums: over ``/ hi``)."""
    sensitivity: float
    relation: str
    revisions: bool
    budget: float
    """The whole horizon's epsilon (Laplace) or rho (Gaussian)."""
    loss: float
    """Everything published so far: epsilon (Laplace) or rho (Gaussian)."""
    figures: int
    state_digest: str
    precision: str = PRECISION
    """How many digits the published figures carry (post-processing, no privacy cost)."""
    # zcdp_rho (the base's): with Gaussian noise, the rho this run added (the zCDP total adds
    # these up), and accounting says how it converts.
