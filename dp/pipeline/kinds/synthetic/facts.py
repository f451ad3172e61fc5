"""What ``dppub plan`` shows of planned synthetic data (:meth:`SyntheticKind.describe`): AIM's
workload, its rho and the noise part of the expected error per marginal, before any data."""

from __future__ import annotations

from dppub.dp.pipeline.kinds.plan_facts import PlanFacts

__all__ = ["SyntheticFacts"]


class SyntheticFacts(PlanFacts):
    """Planned synthetic data, as ``dppub plan`` shows it."""

    workload: tuple[tuple[str, ...], ...]
    """The workload marginals, each its columns."""
    candidates: int
    """The marginals AIM may select from."""
    rho: float
    """AIM's zCDP budget."""
    expected_l1_low: float
    """The noise's expected L1 error per marginal, in rows, with all of rho on one marginal."""
    expected_l1_high: float
    """The same with rho split evenly over every workload marginal."""
    rows: int | None = None
    """The public row count (``rows:``), if given."""
