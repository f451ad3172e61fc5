"""Differentially private regression: functional mechanism, AdaSSP (SPEC §3.4)."""

from dp.regression.domain import FeatureDomain, TargetDomain
from dp.regression.linear import LinearRegression
from dp.regression.sensitivity import BlockSensitivity, l1_sensitivity, l2_sensitivity

__all__ = [
    "BlockSensitivity",
    "FeatureDomain",
    "LinearRegression",
    "TargetDomain",
    "l1_sensitivity",
    "l2_sensitivity",
]
