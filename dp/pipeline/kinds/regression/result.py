"""A regression's typed result: what ``release.json`` states (model, intervals, zCDP rho)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dppub.dp.pipeline.kinds.base import (
    JSON,
    as_float_or_none,
    as_int,
    as_object_or_none,
    as_str,
    as_strs,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RegressionResult:
    """A fitted model's public account: its ``release.json`` details."""

    model: str
    target: str
    features: tuple[str, ...]
    """The model's features as published (category features one-hot, by level)."""
    tasks: int
    """Disjoint tasks of a trace regression (0 otherwise)."""
    zcdp_rho: float | None
    """The unit-level zCDP of a Gaussian mechanism, else None."""
    intervals: Mapping[str, JSON]
    """How the coefficient table's intervals were computed (``interval_method``...)."""
    outcome: Mapping[str, JSON] | None = None
    """A logistic model's ``y = 1``."""
    privacy_unit: Mapping[str, JSON] | None = None

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {
            "model": self.model,
            "target": self.target,
            "features": list(self.features),
            "tasks": self.tasks,
            "zcdp_rho": self.zcdp_rho,
        }
        if self.outcome is not None:
            out["outcome"] = dict(self.outcome)
        if self.privacy_unit is not None:
            out["privacy_unit"] = dict(self.privacy_unit)
        return {**out, **self.intervals}

    @classmethod
    def from_json(cls, data: Mapping[str, JSON]) -> RegressionResult:
        named = {f for f in cls.__dataclass_fields__ if f != "intervals"}
        return cls(
            model=as_str(data["model"]),
            target=as_str(data["target"]),
            features=as_strs(data["features"]),
            tasks=as_int(data["tasks"]),
            zcdp_rho=as_float_or_none(data["zcdp_rho"]),
            intervals={k: v for k, v in data.items() if k not in named},
            outcome=as_object_or_none(data.get("outcome")),
            privacy_unit=as_object_or_none(data.get("privacy_unit")),
        )
