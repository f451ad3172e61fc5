"""Release kinds: the contract (:mod:`~dp.pipeline.kinds.base`, with ``release.json``'s model in
:mod:`~dp.pipeline.kinds.release_file`) and one package per kind, none importing another.

* :mod:`~dp.pipeline.kinds.k_anonymity` -- the k-anonymous table (section ``anonymize``);
* :mod:`~dp.pipeline.kinds.workload` -- linear-query workloads (the matrix mechanism);
* :mod:`~dp.pipeline.kinds.regression` -- DP linear, logistic and trace regression;
* :mod:`~dp.pipeline.kinds.clustering` -- DP k-means;
* :mod:`~dp.pipeline.kinds.tables` -- statistical tables (counts, sums, means, quantiles);
* :mod:`~dp.pipeline.kinds.synthetic` -- DP synthetic microdata (AIM, section ``synthetic``).

They are registered, in run order, in :data:`dp.pipeline.registry.KINDS`.
"""

from dppub.dp.pipeline.kinds.base import (
    JSON,
    Executed,
    ReleaseKind,
    ReleasePlan,
    ReleaseSummary,
    Result,
    Scan,
)

__all__ = ["JSON", "Executed", "ReleaseKind", "ReleasePlan", "ReleaseSummary", "Result", "Scan"]
