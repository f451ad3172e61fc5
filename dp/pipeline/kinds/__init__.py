"""Release kinds: the contract (:mod:`~dp.pipeline.kinds.base`) and one module per kind.

* :mod:`~dp.pipeline.kinds.anonymity` -- the k-anonymous table (section ``anonymize``);
* :mod:`~dp.pipeline.kinds.workload.kind` -- linear-query workloads (the matrix mechanism);
* :mod:`~dp.pipeline.kinds.regression.kind` -- DP linear, logistic and trace regression;
* :mod:`~dp.pipeline.kinds.clustering.kind` -- DP k-means;
* :mod:`~dp.pipeline.kinds.tables.kind` -- statistical tables (counts, sums, means, quantiles).
* :mod:`~dp.pipeline.kinds.synthetic.kind` -- DP synthetic microdata (AIM, section ``synthetic``).

They are registered, in run order, in :data:`dp.pipeline.registry.KINDS`.
"""

from dppub.dp.pipeline.kinds.base import (
    JSON,
    Executed,
    ReleaseKind,
    ReleasePlan,
    ReleaseSummary,
    Scan,
)

__all__ = ["JSON", "Executed", "ReleaseKind", "ReleasePlan", "ReleaseSummary", "Scan"]
