"""The kind k_anonymity: the k-anonymous table (section ``anonymize``, label ``k-anonymity``).

Its modules: `kind` (the :class:`~dp.pipeline.kinds.base.ReleaseKind`), and beside it what
the kind alone uses (its item model, planning, result, plot).
"""

from dppub.dp.pipeline.kinds.k_anonymity.kind import KAnonymityKind

__all__ = ["KAnonymityKind"]
