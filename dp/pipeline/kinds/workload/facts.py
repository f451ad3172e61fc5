"""What ``dppub plan`` shows of a planned workload (:meth:`WorkloadKind.describe`): its
strategy and expected accuracy, before any data."""

from __future__ import annotations

from dppub.dp.pipeline.kinds.plan_facts import PlanFacts

__all__ = ["WorkloadFacts"]


class WorkloadFacts(PlanFacts):
    """A planned workload, as ``dppub plan`` shows it."""

    queries: int
    cells: int
    """The histogram's cells the queries are over."""
    strategy: str
    """The strategy chosen (matrix mechanism)."""
    noise: str
    """``laplace`` or ``gaussian``."""
    expected_rmse: float
    """The expected per-query RMSE of the least-squares answers, at the unit-level cost."""
    svd_bound_rmse: float
    """The SVD lower bound on it for any strategy."""
    expected_rmse_one_row: float | None = None
    """With a privacy unit: the expected RMSE had no unit more than one row."""
