"""A regression's config item (one entry of ``regressions:``): model, method, target, features."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from dppub.dp.pipeline.config import Cost, Flag, Name, Number

METHODS = {
    "linear": ("auto", "functional", "adassp"),
    "logistic": ("objective", "functional"),
    "trace": ("functional",),
}


DEFAULT_METHOD = {"linear": "auto", "logistic": "objective", "trace": "functional"}


class RegressionModel(Cost):
    """A DP regression. Numeric features and target take their bounds from the declared
    columns; category features are one-hot encoded from their declared categories."""

    name: Name
    target: str
    features: list[str] = Field(min_length=1)
    model: Literal["linear", "logistic", "trace"] = "linear"
    method: Literal["auto", "functional", "adassp", "objective"] | None = None
    """linear: auto (default: chosen at plan time, never worse than the noisy mean in
    expectation), functional (pure epsilon) or adassp (Gaussian, needs delta > 0); logistic:
    objective (default) or functional; trace: functional."""
    fit_intercept: Flag = True
    positive: str | None = None
    """logistic with a category target: the category that is class 1."""
    threshold: Number | None = None
    """logistic with a numeric target: values above it are class 1."""
    tasks: str | None = None
    """trace: the category column naming each row's task (tasks are disjoint partitions)."""

    @model_validator(mode="after")
    def _method_fits_model(self) -> RegressionModel:
        allowed = METHODS[self.model]
        if self.method is not None and self.method not in allowed:
            raise ValueError(f"a {self.model} regression's method must be one of {list(allowed)}")
        if self.method == "adassp" and self.delta <= 0:
            raise ValueError("method adassp adds Gaussian noise and needs delta > 0")
        if self.resolved_method not in ("adassp", "auto") and self.delta > 0:
            raise ValueError(f"the {self.resolved_method} method is pure epsilon-DP; set delta 0")
        if self.model == "logistic" and (self.positive is None) == (self.threshold is None):
            raise ValueError("a logistic regression needs exactly one of positive, threshold")
        if self.model == "trace" and self.tasks is None:
            raise ValueError("a trace regression needs 'tasks', a category column")
        return self

    @property
    def resolved_method(self) -> str:
        return self.method or DEFAULT_METHOD[self.model]
