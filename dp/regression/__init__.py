"""Differentially private regression: functional mechanism, AdaSSP, objective perturbation,
trace regression; numeric and one-hot category features. Neighbours add or remove one record
throughout."""

from dp.regression.domain import FeatureDomain, TargetDomain
from dp.regression.encoding import FeatureEncoding
from dp.regression.linear import LinearRegression
from dp.regression.logistic import LogisticRegression
from dp.regression.sensitivity import (
    NEIGHBOURS,
    BlockSensitivity,
    l1_sensitivity,
    l2_sensitivity,
)
from dp.regression.trace import TraceRegression

__all__ = [
    "NEIGHBOURS",
    "BlockSensitivity",
    "FeatureDomain",
    "FeatureEncoding",
    "LinearRegression",
    "LogisticRegression",
    "TargetDomain",
    "TraceRegression",
    "l1_sensitivity",
    "l2_sensitivity",
]
