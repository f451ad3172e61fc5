"""DP k-means' typed result: what ``release.json`` states (features, k, sizes)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dppub.dp.pipeline.kinds.base import (
    JSON,
    as_float,
    as_int,
    as_object_or_none,
    as_str,
    as_strs,
)

SIZE_OF = (
    "the rows the last iteration assigned to the previous centres, whose noisy mean each "
    "published centre is; not the rows nearest the published centre, which can differ by "
    "more than the interval"
)
"""What ``size`` and its interval in ``clusters.csv`` count (``release.json``'s ``size_of``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusteringResult:
    """A k-means release's public account (``release.json``'s details, the clusters' metadata)."""

    features: tuple[str, ...]
    k: int
    interval_level: float
    privacy_unit: Mapping[str, JSON] | None = None
    """The unit its guarantee is stated for and its bound, if any."""
    interval_method: str = "exact Laplace interval of each noisy size (centres: none)"
    size_of: str = SIZE_OF
    """Which rows a cluster's size (and its interval) counts."""

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {
            "features": list(self.features),
            "k": self.k,
            "interval_method": self.interval_method,
            "interval_level": self.interval_level,
            "size_of": self.size_of,
        }
        if self.privacy_unit is not None:
            out["privacy_unit"] = dict(self.privacy_unit)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, JSON]) -> ClusteringResult:
        return cls(
            features=as_strs(data["features"]),
            k=as_int(data["k"]),
            interval_level=as_float(data["interval_level"]),
            privacy_unit=as_object_or_none(data.get("privacy_unit")),
            interval_method=as_str(data["interval_method"]),
            size_of=as_str(data.get("size_of", SIZE_OF)),
        )
