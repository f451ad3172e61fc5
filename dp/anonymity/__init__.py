"""k-anonymity by full-domain generalization: hierarchies, optimal lattice search,
utility and risk metrics.

A k-anonymous table is a syntactic, *not* differentially private release. DP stages may read
generalized columns only through hierarchy axes with levels fixed in the config
(:func:`dp.axes.hierarchy_axis`). The release is :mod:`dp.engine.folds.k_anonymous_table`; the same
on an in-memory frame, and Mondrian local recoding, are in :mod:`dp.reference`.
"""

from dppub.dp.anonymity.hierarchy import Hierarchy
from dppub.dp.anonymity.metrics import METRICS

__all__ = ["METRICS", "Hierarchy"]
