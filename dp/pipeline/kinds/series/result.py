"""A series run's typed result: what ``release.json`` states (the periods it published, the
strategy, the noise, what the series has cost so far and what this run charged)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dppub.dp.pipeline.kinds.base import JSON, as_float, as_float_or_none, as_int, as_str, as_strs

__all__ = ["SeriesResult"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SeriesResult:
    """One run of a series, public values only."""

    series: str
    period: str
    """The last period this run published."""
    published: tuple[str, ...]
    """The periods this run published (more than one when it caught up skipped ones)."""
    periods: tuple[str, ...]
    """Every period the series has published, oldest first."""
    horizon: int
    strategy: str
    noise: str
    std: float
    """The noise's standard deviation per measurement, per measure (sums: over ``/ hi``)."""
    sensitivity: float
    relation: str
    revisions: bool
    budget: float
    """The whole horizon's epsilon (Laplace) or rho (Gaussian)."""
    loss: float
    """Everything published so far: epsilon (Laplace) or rho (Gaussian)."""
    figures: int
    state_digest: str
    zcdp_rho: float | None = None
    """With Gaussian noise: the rho this run added (the zCDP total adds these up)."""

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {
            "series": self.series,
            "period": self.period,
            "published": list(self.published),
            "periods": list(self.periods),
            "horizon": self.horizon,
            "strategy": self.strategy,
            "noise": self.noise,
            "std": self.std,
            "sensitivity": self.sensitivity,
            "relation": self.relation,
            "revisions": self.revisions,
            "budget": self.budget,
            "loss": self.loss,
            "figures": self.figures,
            "state_digest": self.state_digest,
        }
        if self.zcdp_rho is not None:
            out["zcdp_rho"] = self.zcdp_rho
            out["accounting"] = "zCDP: the series' rho converted to (epsilon, delta)"
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, JSON]) -> SeriesResult:
        return cls(
            series=as_str(data["series"]),
            period=as_str(data["period"]),
            published=as_strs(data["published"]),
            periods=as_strs(data["periods"]),
            horizon=as_int(data["horizon"]),
            strategy=as_str(data["strategy"]),
            noise=as_str(data["noise"]),
            std=as_float(data["std"]),
            sensitivity=as_float(data["sensitivity"]),
            relation=as_str(data["relation"]),
            revisions=bool(data["revisions"]),
            budget=as_float(data["budget"]),
            loss=as_float(data["loss"]),
            figures=as_int(data["figures"]),
            state_digest=as_str(data["state_digest"]),
            zcdp_rho=as_float_or_none(data.get("zcdp_rho")),
        )
