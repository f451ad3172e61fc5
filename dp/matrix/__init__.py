"""The matrix mechanism: workloads, strategies, error analysis and reconstruction.

Typical use::

    from dppub.dp.matrix import all_range, answer
    result = answer(all_range(1024), histogram, epsilon=0.5)
    result.answers, result.estimate, result.expected_rmse

References: Li, Miklau, Hay, McGregor & Rastogi, "The matrix mechanism", VLDB J. 2015 (PODS
2010); Hay, Rastogi, Miklau & Suciu, VLDB 2010 (hierarchies, consistency); Xiao, Wang & Gehrke,
ICDE 2010 (Privelet); McKenna, Miklau, Hay & Machanavajjhala, HDMM, VLDB 2018; Zhang et al.,
Ektelo, SIGMOD 2018.
"""

from dppub.dp.matrix.error import (
    expected_rmse,
    expected_rmse_gaussian,
    expected_tse,
    svd_bound_rmse,
)
from dppub.dp.matrix.marginal_basis import MarginalsStrategy, marginals_strategy, pattern_weights
from dppub.dp.matrix.measure import Measurement, measure, measure_gaussian, zcdp_cost, zcdp_rho
from dppub.dp.matrix.opt_blocks import opt_blocks
from dppub.dp.matrix.opt_marginals import opt_marginals
from dppub.dp.matrix.optimize import PIdentity, opt0, p_identity, tuned_hierarchy
from dppub.dp.matrix.product import (
    Kron,
    Marginals,
    RangeBoxes,
    Union,
    kron,
    marginals,
    range_boxes,
    union,
)
from dppub.dp.matrix.project import workload_projection
from dppub.dp.matrix.reconstruct import RECONSTRUCTIONS, l1_fit, least_squares, reconstruct
from dppub.dp.matrix.release import WorkloadAnswer, answer
from dppub.dp.matrix.residual import ResidualStrategy, residual_planner
from dppub.dp.matrix.select import (
    KronStrategy,
    WorkloadStrategy,
    candidate_strategies,
    kron_strategy,
    select_strategy,
    workload_strategy,
)
from dppub.dp.matrix.strategy import (
    Strategy,
    Tree,
    hierarchical,
    identity_strategy,
    nested_blocks,
)
from dppub.dp.matrix.wavelet import Wavelet, wavelet
from dppub.dp.matrix.workload import (
    AllRange,
    Identity,
    Prefix,
    Total,
    WidthRange,
    Workload,
    all_range,
    identity,
    prefix,
    total,
    width_range,
)

__all__ = [
    "RECONSTRUCTIONS",
    "AllRange",
    "Identity",
    "Kron",
    "KronStrategy",
    "Marginals",
    "MarginalsStrategy",
    "Measurement",
    "PIdentity",
    "Prefix",
    "RangeBoxes",
    "ResidualStrategy",
    "Strategy",
    "Total",
    "Tree",
    "Union",
    "Wavelet",
    "WidthRange",
    "Workload",
    "WorkloadAnswer",
    "WorkloadStrategy",
    "all_range",
    "answer",
    "candidate_strategies",
    "expected_rmse",
    "expected_rmse_gaussian",
    "expected_tse",
    "hierarchical",
    "identity",
    "identity_strategy",
    "kron",
    "kron_strategy",
    "l1_fit",
    "least_squares",
    "marginals",
    "marginals_strategy",
    "measure",
    "measure_gaussian",
    "nested_blocks",
    "opt0",
    "opt_blocks",
    "opt_marginals",
    "p_identity",
    "pattern_weights",
    "prefix",
    "range_boxes",
    "reconstruct",
    "residual_planner",
    "select_strategy",
    "svd_bound_rmse",
    "total",
    "tuned_hierarchy",
    "union",
    "wavelet",
    "width_range",
    "workload_projection",
    "workload_strategy",
    "zcdp_cost",
    "zcdp_rho",
]
