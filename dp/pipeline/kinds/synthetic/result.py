"""Synthetic data's typed result: what ``release.json`` states about it (rho, rounds, the
workload measured, the error range).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from dppub.dp.pipeline.kinds.base import Result
from dppub.dp.pipeline.kinds.release_file import UnitGuarantee


class SyntheticResult(Result):
    """A synthetic table's public account: its ``release.json`` details."""

    keep_null: ClassVar[frozenset[str]] = frozenset({"noisy_count"})

    rows: int
    columns: list[str]
    workload: list[list[str]]
    zcdp_rho: float = Field(ge=0)
    """The unit-level rho AIM ran at (sensitivity ``m``): the report's zCDP total reads it."""
    accounting: str
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
    guarantee: UnitGuarantee
    """Its guarantee as AIM ran it: the unit-level rho, and the unit with its row-level cost."""
