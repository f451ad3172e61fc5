"""``release.json``, typed: what every release states about itself, written once and read back
once (:meth:`dp.pipeline.kinds.base.ReleaseSummary.to_json` and ``from_json``), and its JSON
Schema (:func:`release_schema`, committed as ``docs/release.schema.json``).

Its ``details`` are the kind's own result (:class:`dp.pipeline.kinds.base.Result`): a JSON
object, typed by the kind that reads it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue

__all__ = ["PartFile", "ReleaseFile", "StatedAccounting", "release_schema"]

_FROZEN = ConfigDict(extra="forbid", frozen=True)


class PartFile(BaseModel):
    """One of a release's costs as composition sees them (a disjoint partition it spans)."""

    model_config = _FROZEN

    name: str = Field(description="The part's name in the ledger (``release[label]``).")
    epsilon: float = Field(ge=0)
    delta: float = Field(ge=0, le=1)
    partition: tuple[str, str] | None = Field(
        description="The column and value its rows have, or null for the whole table."
    )


class ReleaseFile(BaseModel):
    """A release's ``release.json``: written when it completed, read back by a later attempt
    of the run (which reuses it, never recomputes it), the manifest and both reports."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="release.json")

    name: str = Field(description="Unique within the run; the release's folder name.")
    kind: str = Field(description="Its kind's label (``workload``, ``k-anonymity``...).")
    mechanism: str = Field(description="What the ledger records (``laplace``...).")
    epsilon: float = Field(ge=0, description="Its own epsilon; 0 for a non-DP release.")
    delta: float = Field(ge=0, le=1)
    is_dp: bool = Field(description="False for a syntactic release (a k-anonymous table).")
    sensitivity: float | None = Field(
        description="The L1 sensitivity the noise was calibrated to, where one number says it."
    )
    parts: list[PartFile] = Field(
        description="Its costs per disjoint partition; empty for one whole-table part."
    )
    files: list[str] = Field(description="Released files, relative to the run folder.")
    output_hash: str = Field(description="SHA-256 of the release's files.")
    neighbours: str = Field(
        default="one row", description="The neighbouring relation its guarantee is stated for."
    )
    details: dict[str, JsonValue] = Field(
        description="The kind's typed result: public facts (strategy, expected error...)."
    )


class StatedAccounting(BaseModel):
    """What every kind's result may state about its own accounting, under these names in its
    ``details`` (the run's zCDP total and the budget table read them here, typed)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    zcdp_rho: float | None = Field(
        default=None, ge=0, description="The unit-level rho-zCDP its noise satisfies, if proven."
    )
    accounting: str | None = Field(
        default=None, description="How its cost was accounted, where the kind says (zCDP...)."
    )


def release_schema() -> dict[str, Any]:
    """The JSON Schema of ``release.json``, generated from :class:`ReleaseFile`."""
    return ReleaseFile.model_json_schema()
