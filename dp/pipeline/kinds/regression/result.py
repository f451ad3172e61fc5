"""A regression's typed result: what ``release.json`` states (model, intervals, zCDP rho)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import JsonValue

from dppub.dp.pipeline.kinds.base import Result


class RegressionResult(Result):
    """A fitted model's public account: its ``release.json`` details. Its ``zcdp_rho`` is the
    unit-level zCDP of a Gaussian mechanism, else None (written as ``null``)."""

    keep_null: ClassVar[frozenset[str]] = frozenset(
        {"zcdp_rho", "interval_level", "interval_covers"}
    )

    model: str
    target: str
    features: tuple[str, ...]
    """The model's features as published (category features one-hot, by level)."""
    tasks: int
    """Disjoint tasks of a trace regression (0 otherwise)."""
    outcome: dict[str, JsonValue] | None = None
    """A logistic model's ``y = 1``."""
    interval_method: str
    """How the coefficient table's intervals were computed."""
    interval_level: float | None
    bootstrap_replicates: int
    bootstrap_replicates_dropped: int
    interval_covers: str | None
    """What the intervals are for (which coefficients they hold)."""
    interval_columns: tuple[str, ...]
    """The coefficient table's columns that hold them."""
