"""Synthetic data's typed result: what ``release.json`` states about it (rho, rounds, the
workload measured, the error range).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dppub.dp.pipeline.kinds.base import (
    JSON,
    as_float,
    as_float_or_none,
    as_int,
    as_list,
    as_object,
    as_str,
    as_strs,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SyntheticResult:
    """A synthetic table's public account: its ``release.json`` details."""

    rows: int
    columns: list[str]
    workload: list[list[str]]
    zcdp_rho: float
    """The unit-level rho AIM ran at (sensitivity ``m``): the report's zCDP total reads it."""
    rho_used: float
    count_rho: float
    noisy_count: float | None
    rounds: int
    measured: list[list[str]]
    sensitivity: float
    max_model_size: float
    error: float
    """The published rows' mean normalized L1 error over the workload marginals, estimated
    from public values only: the middle of ``error_low`` and ``error_high``."""
    error_low: float
    """The bootstrap with its refit warm-started at the model (it starts at the answer)."""
    error_high: float
    """The bootstrap with its refit from scratch (:func:`dp.synthetic.utility.bootstrap_errors`)."""
    covered_marginals: int
    """How many workload marginals a measurement covers (``check_low``/``check_high`` in
    ``utility.csv``)."""
    accounting: str
    guarantee: dict[str, JSON]

    def to_json(self) -> dict[str, JSON]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, data: Mapping[str, JSON]) -> SyntheticResult:
        def cliques(value: JSON) -> list[list[str]]:
            return [list(as_strs(c)) for c in as_list(value)]

        return cls(
            rows=as_int(data["rows"]),
            columns=list(as_strs(data["columns"])),
            workload=cliques(data["workload"]),
            zcdp_rho=as_float(data["zcdp_rho"]),
            rho_used=as_float(data["rho_used"]),
            count_rho=as_float(data["count_rho"]),
            noisy_count=as_float_or_none(data["noisy_count"]),
            rounds=as_int(data["rounds"]),
            measured=cliques(data["measured"]),
            sensitivity=as_float(data["sensitivity"]),
            max_model_size=as_float(data["max_model_size"]),
            error=as_float(data["error"]),
            error_low=as_float(data["error_low"]),
            error_high=as_float(data["error_high"]),
            covered_marginals=as_int(data["covered_marginals"]),
            accounting=as_str(data["accounting"]),
            guarantee=dict(as_object(data["guarantee"])),
        )
