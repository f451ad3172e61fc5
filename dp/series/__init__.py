"""Series released period by period under one budget (continual release).

A series over a horizon of ``T`` periods is released as it arrives: each period a causal
strategy measures what the closed periods determine, and the published figures (per-period
values, running totals, year to date, moving sums) are estimated from the noisy measurements.
This is the matrix mechanism applied over time: a running total is the prefix workload.

Typical use::

    from dppub.dp.series import Relation, choose_strategy, running_total, stack, per_period
    choice = choose_strategy(stack(per_period(120), running_total(120)), Relation())
    choice.strategy, choice.table, choice.bound

References: Dwork, Naor, Pitassi & Rothblum, STOC 2010, and Chan, Shi & Song, TISSEC 2011 (the
binary tree); Honaker, TPDP 2015 (optimal estimation from the tree); Fichtenberger, Henzinger &
Upadhyay, ICML 2023, and Henzinger, Upadhyay & Upadhyay, SODA 2023 (the square-root
factorization); Denisov, McMahan, Rush, Smith & Thakurta, NeurIPS 2022 (optimised
lower-triangular factorizations); Li & Miklau, VLDB 2012 (the SVD bound).
"""

from dppub.dp.series.choose import Choice, candidates, choose_strategy
from dppub.dp.series.estimate import causal_estimates, estimator, next_value, revised_estimate
from dppub.dp.series.expected_error import (
    ErrorProfile,
    Noise,
    expected_errors,
    factorization_bound,
    svd_bound,
)
from dppub.dp.series.factorization import Optimized, optimized
from dppub.dp.series.period_release import Figures, SeriesRelease, certified
from dppub.dp.series.strategies import BinaryTree, CausalStrategy, Identity, SquareRoot
from dppub.dp.series.unit_sensitivity import Relation, Sensitivity, sensitivity
from dppub.dp.series.workloads import (
    SeriesWorkload,
    moving_sum,
    per_period,
    running_total,
    stack,
    year_to_date,
)

__all__ = [
    "BinaryTree",
    "CausalStrategy",
    "Choice",
    "ErrorProfile",
    "Figures",
    "Identity",
    "Noise",
    "Optimized",
    "Relation",
    "Sensitivity",
    "SeriesRelease",
    "SeriesWorkload",
    "SquareRoot",
    "candidates",
    "causal_estimates",
    "certified",
    "choose_strategy",
    "estimator",
    "expected_errors",
    "factorization_bound",
    "moving_sum",
    "next_value",
    "optimized",
    "per_period",
    "revised_estimate",
    "running_total",
    "sensitivity",
    "stack",
    "svd_bound",
    "year_to_date",
]
