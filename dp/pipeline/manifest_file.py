"""``manifest.json``, typed: what a published run states about itself (its releases, the
guarantee, its cost against the budget, the ledger head), built once by
:func:`dp.pipeline.report.manifest`, written as JSON and read back by ``report.html`` through
this model, never by key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dppub.dp.pipeline.kinds.json_values import JSON

__all__ = ["BudgetFile", "Guarantee", "LedgerHead", "ManifestFile", "ManifestRelease"]

_FROZEN = ConfigDict(extra="forbid", frozen=True)


class ManifestRelease(BaseModel):
    """One release as the manifest lists it (its ``release.json`` has the rest)."""

    model_config = _FROZEN

    name: str
    kind: str
    mechanism: str
    epsilon: float = Field(ge=0)
    delta: float = Field(ge=0, le=1)
    sensitivity: float | None
    is_dp: bool
    neighbours: str
    files: list[str]
    accounting: str
    """How its cost was accounted (:func:`dp.pipeline.report.accounting`)."""
    output_hash: str


class Guarantee(BaseModel):
    """Which releases the differential-privacy guarantee covers, in words and as lists."""

    model_config = _FROZEN

    dp_releases: list[str]
    not_dp_releases: list[str]
    statement: str


class BudgetFile(BaseModel):
    """The budget policy in force (:meth:`dp.ledger.BudgetPolicy.to_json`)."""

    model_config = _FROZEN

    epsilon: float
    delta: float
    per: str | None
    cap: list[float] | None
    renew: bool


class LedgerHead(BaseModel):
    """The ledger's last entry after the run's releases were recorded."""

    model_config = _FROZEN

    seq: int
    hash: str


class ManifestFile(BaseModel):
    """A published run's ``manifest.json``."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="manifest.json")

    run_id: str
    dataset: str
    created: str
    """When it was composed (ISO 8601, UTC, seconds)."""
    config_hash: str
    releases: list[ManifestRelease]
    guarantee: Guarantee
    total_epsilon: float
    total_delta: float
    budget: BudgetFile
    budget_epsilon: float
    budget_delta: float
    remaining_epsilon: float
    """What the next run may spend."""
    budget_period: str
    budget_scope: str
    """``all`` (lifetime) or the period of a renewing budget charged."""
    ledger_head: LedgerHead

    @classmethod
    def read(cls, manifest: ManifestFile | Mapping[str, Any]) -> ManifestFile:
        """``manifest`` typed (checked against this model if it is its JSON)."""
        return manifest if isinstance(manifest, ManifestFile) else cls.model_validate(manifest)

    def to_json(self) -> dict[str, JSON]:
        """Its JSON, as ``manifest.json`` holds it."""
        out: dict[str, JSON] = self.model_dump(mode="json")
        return out
