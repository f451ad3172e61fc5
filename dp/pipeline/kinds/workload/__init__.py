"""The kind workload: linear-query workloads answered by the matrix mechanism
(section ``workloads``).

Its modules: `kind` (the :class:`~dp.pipeline.kinds.base.ReleaseKind`), and beside it what
the kind alone uses (its item model, planning, result, plot).
"""

from dppub.dp.pipeline.kinds.workload.kind import WorkloadKind

__all__ = ["WorkloadKind"]
