"""A workload's config item (one entry of ``workloads:``): its axes and query family."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from dppub.dp import matrix
from dppub.dp.pipeline.config import Cost, Integer, Model, Name, Rho
from dppub.dp.pipeline.limits import MAX_DOMAIN_CELLS


class AxisModel(Model):
    """One histogram axis: bins of a numeric column, categories, or a fixed hierarchy level."""

    column: str
    bins: Integer | None = Field(default=None, ge=1, le=MAX_DOMAIN_CELLS)
    level: Integer | None = Field(default=None, ge=0)


class WorkloadModel(Cost):
    name: Name
    attributes: list[AxisModel] = Field(min_length=1)
    workload: Literal["identity", "total", "prefix", "all_range", "marginals"] = "identity"
    marginal_k: Integer = Field(default=1, ge=1)
    strategy: Literal["auto", "identity", "hierarchical"] = "auto"
    reconstruction: Literal["nonneg-l1", "least-squares", "l1"] = "nonneg-l1"
    noise: Literal["laplace", "gaussian"] = "laplace"
    """``gaussian``: the analytic Gaussian mechanism at ``(epsilon, delta)``, which wins for
    many overlapping queries (marginals); it needs ``delta > 0``."""
    rho: Rho | None = None
    """A zCDP budget instead of ``epsilon``: with ``delta``, charged as the ``(epsilon, delta)``
    of the standard conversion (Bun & Steinke 2016, Prop. 1.3); implies Gaussian noise."""

    @model_validator(mode="before")
    @classmethod
    def _rho(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("rho") is None:
            return data
        if "epsilon" in data:
            raise ValueError("give either epsilon or rho, not both")
        if data.get("noise", "gaussian") != "gaussian":
            raise ValueError("a rho budget is for Gaussian noise (noise: gaussian)")
        delta = data.get("delta")
        if not isinstance(delta, int | float) or isinstance(delta, bool) or not 0 < delta < 1:
            raise ValueError("a rho budget needs delta in (0, 1), to charge it as (epsilon, delta)")
        rho = data["rho"]
        if not isinstance(rho, int | float) or isinstance(rho, bool) or not 0 < rho <= 1e6:
            raise ValueError(f"rho must be a number in (0, 1e6], got {rho!r}")
        return {**data, "noise": "gaussian", "epsilon": matrix.zcdp_cost(rho, delta).epsilon}

    @model_validator(mode="after")
    def _noise(self) -> WorkloadModel:
        if self.noise == "gaussian" and self.delta == 0:
            raise ValueError("noise: gaussian needs delta > 0 (or a rho budget with delta)")
        if self.noise == "laplace" and self.delta > 0:
            raise ValueError("delta is spent only by Gaussian noise: add noise: gaussian")
        return self
