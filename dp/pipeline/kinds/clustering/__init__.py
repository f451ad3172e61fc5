"""The kind clustering: DP k-means (section ``clustering``).

Its modules: `kind` (the :class:`~dp.pipeline.kinds.base.ReleaseKind`), and beside it what
the kind alone uses (its item model, planning, result, plot).
"""

from dppub.dp.pipeline.kinds.clustering.kind import ClusteringKind

__all__ = ["ClusteringKind"]
