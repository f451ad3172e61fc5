"""DP k-means in ``report.html``: the published centres and cluster sizes.

Cluster sizes come from the published cluster table (``cluster``, ``size``...) when there is
one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dppub.dp.pipeline.html.figures import (
    PALETTE,
    new_figure,
    to_svg,
)
from dppub.dp.pipeline.html.sections import (
    Section,
    Table,
    find_table,
    frame_table,
    read_json,
)
from dppub.dp.pipeline.kinds.base import ReleaseSummary
from dppub.dp.pipeline.kinds.clustering.result import ClusteringResult


def clustering_plot(summary: ReleaseSummary, result: ClusteringResult, folder: Path) -> Section:
    """The centres inside the declared feature box (the first two features; more as lines)."""
    model = read_json(folder, summary, "model.json")
    if model is None:
        raise ValueError("no model.json")
    features = [str(f) for f in model["features"]]
    centres = np.asarray(model["centres"], dtype=float).reshape(len(model["centres"]), -1)
    box = model.get("feature_bounds") or {}
    lower = np.asarray(box.get("lower", centres.min(axis=0)), dtype=float)
    upper = np.asarray(box.get("upper", centres.max(axis=0)), dtype=float)
    sizes = find_table(folder, summary, ("cluster", "size"))
    n = sizes["size"].to_numpy(float) if sizes is not None else None
    fig = new_figure(7.0, 3.4, left=0.8)
    ax = fig.subplots()
    if len(features) == 2:
        area = 40.0 if n is None else 40.0 + 400.0 * np.clip(n, 0, None) / max(n.max(), 1.0)
        ax.scatter(centres[:, 0], centres[:, 1], s=area, c=PALETTE[: len(centres)], alpha=0.8)
        for i, (x, y) in enumerate(centres):
            tag = f"centre {i}" + ("" if n is None else f" (≈{n[i]:.0f})")
            ax.annotate(tag, (x, y), textcoords="offset points", xytext=(6, 6), fontsize=8)
        ax.set_xlim(lower[0], upper[0])
        ax.set_ylim(lower[1], upper[1])
        ax.set_xlabel(features[0])
        ax.set_ylabel(features[1])
    else:  # parallel coordinates, each feature scaled to its declared bounds
        scaled = (centres - lower) / np.where(upper > lower, upper - lower, 1.0)
        for i, row in enumerate(scaled):
            ax.plot(range(len(features)), row, "o-", color=PALETTE[i % len(PALETTE)])
        ax.set_xticks(range(len(features)), features)
        ax.set_ylim(0.0, 1.0)
        ax.set_ylabel("position within the declared bounds")
    ax.set_title(f"{summary.name}: {len(centres)} centres")
    caption = "The released centres within the declared bounds of the features" + (
        "; marker area follows the published noisy cluster size." if n is not None else "."
    )
    tables: tuple[Table, ...] = ()
    if sizes is not None:
        tables = (frame_table(sizes, caption="Clusters", columns=[str(c) for c in sizes.columns]),)
    return Section(figures=(to_svg(fig, key=summary.name),), captions=(caption,), tables=tables)
