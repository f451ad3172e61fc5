"""The k-anonymous table's config item (section ``anonymize``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dppub.dp.pipeline.config import Flag, Integer, Model, Name, Number


class KAnonymityModel(Model):
    name: Name = "k_anonymous_table"
    quasi_identifiers: list[str] = Field(min_length=1)
    k: Integer = Field(ge=1)
    max_suppression: Number = Field(default=0.0, ge=0.0, le=1.0)
    metric: Literal["loss", "dm", "dm_star", "entropy"] = "loss"
    include: list[str] = Field(default_factory=list)
    """Further columns released unchanged beside the generalized quasi-identifiers."""
    publish: Flag = True
