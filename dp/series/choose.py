"""Choosing the causal strategy for a series: the candidate with the least expected error.

The candidates are the per-period releases summed (:class:`Identity`), the binary tree with
Honaker's estimate in causal form (:class:`BinaryTree`), the square-root factorization
(:class:`SquareRoot`) and the optimised factorization for the declared figures
(:func:`dp.series.factorization.optimized`). The choice minimises the expected total squared error
of the declared figures under the declared relation and noise, so it is never worse than the better
of the identity and the square root on any figure set: both are candidates. The choice reads only
the config (figures, horizon, relation, noise), never data.

>>> from dppub.dp.series.workloads import running_total
>>> choice = choose_strategy(running_total(24), Relation())
>>> choice.strategy.name
'Optimized'
>>> [row.strategy for row in choice.table]
['Identity', 'BinaryTree', 'SquareRoot', 'Optimized']
"""

from __future__ import annotations

from dataclasses import dataclass

from dppub.dp.series.expected_error import (
    ErrorProfile,
    Noise,
    expected_errors,
    factorization_bound,
    svd_bound,
)
from dppub.dp.series.factorization import optimized
from dppub.dp.series.strategies import BinaryTree, CausalStrategy, Identity, SquareRoot
from dppub.dp.series.unit_sensitivity import Relation
from dppub.dp.series.workloads import SeriesWorkload

__all__ = ["Choice", "candidates", "choose_strategy"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Choice:
    """The chosen strategy, every candidate's expected error, and the bound beside them."""

    strategy: CausalStrategy
    """The candidate with the least expected total squared error (the first on a tie)."""
    strategies: tuple[CausalStrategy, ...]
    """The candidates, in table order."""
    table: tuple[ErrorProfile, ...]
    """Each candidate's expected error, in candidate order."""
    bound: float
    """The SVD lower bound on the expected total squared error (:func:`svd_bound`)."""
    factorization_bound: float
    """A second lower bound, from contiguous windows of periods (attained row-level; the larger
    of the two bounds is the one to compare with):
    :func:`dp.series.expected_error.factorization_bound`."""

    @property
    def profile(self) -> ErrorProfile:
        """The chosen strategy's row of the table."""
        return next(row for row in self.table if row.strategy == self.strategy.name)


def candidates(workload: SeriesWorkload) -> tuple[CausalStrategy, ...]:
    """The causal strategies considered for ``workload`` (the optimised one is fitted to it)."""
    horizon = workload.horizon
    return (
        Identity(horizon=horizon),
        BinaryTree(horizon=horizon),
        SquareRoot(horizon=horizon),
        optimized(workload),
    )


def choose_strategy(
    workload: SeriesWorkload,
    relation: Relation,
    *,
    noise: Noise = "gaussian",
    revisions: bool = False,
) -> Choice:
    """The candidate with the least expected total squared error for ``workload``."""
    strategies = candidates(workload)
    table = tuple(
        expected_errors(s, workload, relation, noise=noise, revisions=revisions) for s in strategies
    )
    best = min(range(len(table)), key=lambda i: table[i].total)
    return Choice(
        strategy=strategies[best],
        strategies=strategies,
        table=table,
        bound=svd_bound(workload, relation, noise=noise),
        factorization_bound=factorization_bound(workload, relation, noise=noise),
    )
