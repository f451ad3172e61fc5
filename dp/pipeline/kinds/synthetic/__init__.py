"""The kind synthetic: DP synthetic microdata by AIM (section ``synthetic``).

Its modules: `kind` (the :class:`~dp.pipeline.kinds.base.ReleaseKind`), and beside it what
the kind alone uses (its item model, planning, result, plot).
"""

from dppub.dp.pipeline.kinds.synthetic.kind import SyntheticKind

__all__ = ["SyntheticKind"]
