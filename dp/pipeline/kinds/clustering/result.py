"""DP k-means' typed result: what ``release.json`` states (features, k, sizes)."""

from __future__ import annotations

from dppub.dp.pipeline.kinds.base import Result

SIZE_OF = (
    "the rows the last iteration assigned to the previous centres, whose noisy mean each "
    "published centre is; not the rows nearest the published centre, which can differ by "
    "more than the interval"
)
"""What ``size`` and its interval in ``clusters.csv`` count (``release.json``'s ``size_of``)."""


class ClusteringResult(Result):
    """A k-means release's public account (``release.json``'s details, the clusters' metadata)."""

    features: tuple[str, ...]
    k: int
    interval_level: float
    interval_method: str = "exact Laplace interval of each noisy size (centres: none)"
    size_of: str = SIZE_OF
    """Which rows a cluster's size (and its interval) counts."""
