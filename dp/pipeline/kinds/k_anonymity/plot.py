"""The k-anonymous table in ``report.html``: its class sizes."""

from __future__ import annotations

import re
from pathlib import Path

from dppub.dp.pipeline.html.figures import (
    INK,
    MUTED,
    WARN,
    new_figure,
    to_svg,
)
from dppub.dp.pipeline.html.sections import (
    Section,
    read_json,
)
from dppub.dp.pipeline.kinds.base import ReleaseSummary
from dppub.dp.pipeline.kinds.k_anonymity.result import KAnonymityResult


def _low_end(label: str) -> float:
    match = re.search(r"\d+", label)
    return float(match.group()) if match else float("inf")


def k_anonymity_plot(summary: ReleaseSummary, result: KAnonymityResult, folder: Path) -> Section:
    """Equivalence-class sizes and suppressed records (``metrics.json``)."""
    metrics = read_json(folder, summary, "metrics.json")
    if metrics is None:
        raise ValueError("no metrics.json")
    histogram: dict[str, int] = metrics["class_size"]["histogram"]
    bins = sorted(histogram, key=_low_end)
    fig = new_figure(7.0, 2.8, left=0.75, gap=0.3)
    left, right = fig.subplots(1, 2, width_ratios=[3, 2])
    left.bar(bins, [histogram[b] for b in bins], color=INK)
    left.set_xlabel("records in the class")
    left.set_ylabel("equivalence classes")
    left.set_title(f"class sizes (k = {metrics['k']})")
    records, suppressed = int(metrics["records"]), int(metrics["suppressed"])
    limit = int(metrics.get("suppression_limit") or 0)
    right.barh([0], [suppressed], color=WARN, height=0.5, label="suppressed")
    right.axvline(limit, color=MUTED, linestyle="--", label=f"limit ({limit})")
    right.set_xlim(0, max(limit, suppressed, 1) * 1.15)
    right.set_ylim(-1, 1)
    right.set_yticks([])
    right.set_xlabel("records")
    right.set_title(f"suppressed: {suppressed} of {records} records")
    right.legend(loc="upper right")
    caption = (
        "How many equivalence classes of the released table have each size, and how many "
        "records were suppressed against the limit. A syntactic release: not differentially "
        "private."
    )
    return Section(figures=(to_svg(fig, key=summary.name),), captions=(caption,))
