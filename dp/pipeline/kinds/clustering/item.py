"""A k-means config item (one entry of ``clustering:``) and its declared feature box."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from dppub.dp.errors import ConfigError
from dppub.dp.pipeline.config import Cost, Integer, Name, PipelineConfig
from dppub.dp.pipeline.declared_domains import declared_columns
from dppub.dp.pipeline.limits import MAX_CLUSTERS, MAX_ITERATIONS


class ClusteringModel(Cost):
    """DP k-means (DP Lloyd) over declared numeric features."""

    name: Name
    features: list[str] = Field(min_length=1)
    k: Integer = Field(ge=1, le=MAX_CLUSTERS)
    iterations: Integer = Field(default=5, ge=1, le=MAX_ITERATIONS)


def feature_box(
    cfg: PipelineConfig, name: str, features: Sequence[str]
) -> tuple[list[float], list[float]]:
    """Per-feature box from the declared column bounds only."""
    lows, highs = [], []
    for f in declared_columns(cfg, features):
        bounds = cfg.dataset.columns[f].bounds
        if bounds is None:
            raise ConfigError(f"{name!r}: feature {f!r} must be numeric with declared bounds")
        lows.append(bounds[0])
        highs.append(bounds[1])
    return lows, highs
