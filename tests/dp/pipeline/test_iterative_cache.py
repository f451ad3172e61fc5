"""DP k-means reads its Lloyd steps from the shared scan's projection, not from the source,
whenever the projection fits; when it does not, every step is one pass, and the release is
published either way."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

import dppub.dp.pipeline.kinds.clustering.kind as clustering_kind
from dppub.dp.engine import ProjectionAggregate
from dppub.dp.engine.folds.lloyd_sums import lloyd_statistics_stream
from tests.dp.pipeline.published_run import demo_config, publish_in_process


@pytest.mark.parametrize("engine", ["stream", "memory"])
@pytest.mark.parametrize("fits", [True, False])
@pytest.mark.slow
def test_kmeans_passes_over_the_source(
    tmp_path: Path,
    census_small: Path,
    monkeypatch: pytest.MonkeyPatch,
    engine: str,
    fits: bool,
) -> None:
    config = demo_config(tmp_path, census_small)
    raw = yaml.safe_load(config.read_text())
    raw["dataset"]["engine"] = engine
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    if not fits:
        small = functools.partial(ProjectionAggregate, max_rows=10)
        monkeypatch.setattr(clustering_kind, "ProjectionAggregate", small)
    passes: list[int] = []
    streamed = lloyd_statistics_stream  # the function the kind calls, patched there below

    def counting(*args: Any, **kwargs: Any) -> Any:
        passes.append(1)
        return streamed(*args, **kwargs)

    monkeypatch.setattr(clustering_kind, "lloyd_statistics_stream", counting)
    published = publish_in_process(config, tmp_path / "ledger.sqlite", tmp_path / "out")
    iterations = 5  # the demo's k-means keeps the default
    assert len(passes) == (0 if fits else iterations)
    table = pd.read_csv(published.folder / "work_patterns" / "clusters.csv")
    assert len(table) == 3
    assert "work_patterns" in {r["name"] for r in published.manifest["releases"]}
