"""Differentially private regression: functional mechanism, AdaSSP, objective perturbation,
trace regression; numeric and one-hot category features. Neighbours add or remove one record
throughout.

The public names are imported on first use (PEP 562): planning needs only the domains
(:mod:`dp.numerics.domains`) and sensitivities, and the estimators pull in scipy.stats and cvxpy
(~0.7 s of a ``dppub plan``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dppub.dp.regression.encoding import FeatureEncoding
    from dppub.dp.regression.linear import LinearRegression
    from dppub.dp.regression.logistic import LogisticRegression
    from dppub.dp.regression.sensitivity import l1_sensitivity, l2_sensitivity
    from dppub.dp.regression.trace import TraceRegression

_HOME = {
    "FeatureEncoding": "encoding",
    "LinearRegression": "linear",
    "LogisticRegression": "logistic",
    "l1_sensitivity": "sensitivity",
    "l2_sensitivity": "sensitivity",
    "TraceRegression": "trace",
}

__all__ = [
    "FeatureEncoding",
    "LinearRegression",
    "LogisticRegression",
    "TraceRegression",
    "l1_sensitivity",
    "l2_sensitivity",
]


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'dppub.dp.regression' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"dppub.dp.regression.{home}"), name)
    globals()[name] = value  # later look-ups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
