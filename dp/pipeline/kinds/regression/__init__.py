"""The kind regression: DP linear, logistic and trace regression (section ``regressions``).

Its modules: `kind` (the :class:`~dp.pipeline.kinds.base.ReleaseKind`), and beside it what
the kind alone uses (its item model, planning, result, plot).
"""

from dppub.dp.pipeline.kinds.regression.kind import RegressionKind

__all__ = ["RegressionKind"]
