"""k-anonymity by full-domain generalization: hierarchies, optimal lattice search,
utility and risk metrics.

A k-anonymous table is a syntactic, *not* differentially private release. DP stages may read
generalized columns only through :func:`generalize` with levels fixed in the config.
"""

from dp.anonymity.anonymize import anonymize
from dp.anonymity.generalize import generalize
from dp.anonymity.hierarchy import Hierarchy
from dp.anonymity.metrics import ARX_METRICS, METRICS
from dp.anonymity.mondrian import LocalRecodingResult, mondrian
from dp.anonymity.result import AnonymizationResult

__all__ = [
    "ARX_METRICS",
    "METRICS",
    "AnonymizationResult",
    "Hierarchy",
    "LocalRecodingResult",
    "anonymize",
    "generalize",
    "mondrian",
]
