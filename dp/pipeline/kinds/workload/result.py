"""A workload's typed result: what ``release.json`` states (strategy, noise, expected error,
intervals).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dppub.dp.pipeline.kinds.base import (
    JSON,
    as_float,
    as_float_or_none,
    as_int,
    as_str,
    as_str_or_none,
)

MAX_INTERVAL_CELLS = 2048
"""Workloads over more cells publish answers without intervals: their variances need the
strategy's Gram inverse (seconds to minutes, or no structured form at all)."""

NO_INTERVALS: dict[str, JSON] = {
    "interval_method": f"none: intervals are computed for up to {MAX_INTERVAL_CELLS} cells",
    "interval_level": None,
    "bootstrap_replicates": 0,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadResult:
    """An answered workload's public account: its ``release.json`` details."""

    workload: str
    strategy: str
    reconstruction: str
    queries: int
    cells: int
    expected_rmse: float
    svd_bound_rmse: float
    noise: str
    noise_scale: float
    intervals: Mapping[str, JSON]
    """How the answers' intervals were computed (``interval_method``, ``interval_level``...)."""
    zcdp_rho: float | None = None
    """With Gaussian noise: the unit-level zCDP the measurement satisfies."""
    accounting: str | None = None
    """With a ``rho`` budget: how it was accounted."""

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {
            "workload": self.workload,
            "strategy": self.strategy,
            "reconstruction": self.reconstruction,
            "queries": self.queries,
            "cells": self.cells,
            "expected_rmse": self.expected_rmse,
            "svd_bound_rmse": self.svd_bound_rmse,
            "noise": self.noise,
            "noise_scale": self.noise_scale,
            **self.intervals,
        }
        if self.zcdp_rho is not None:
            out["zcdp_rho"] = self.zcdp_rho
        if self.accounting is not None:
            out["accounting"] = self.accounting
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, JSON]) -> WorkloadResult:
        named = {f for f in cls.__dataclass_fields__ if f != "intervals"}
        return cls(
            workload=as_str(data["workload"]),
            strategy=as_str(data["strategy"]),
            reconstruction=as_str(data["reconstruction"]),
            queries=as_int(data["queries"]),
            cells=as_int(data["cells"]),
            expected_rmse=as_float(data["expected_rmse"]),
            svd_bound_rmse=as_float(data["svd_bound_rmse"]),
            noise=as_str(data["noise"]),
            noise_scale=as_float(data["noise_scale"]),
            intervals={k: v for k, v in data.items() if k not in named},
            zcdp_rho=as_float_or_none(data.get("zcdp_rho")),
            accounting=as_str_or_none(data.get("accounting")),
        )
