"""Comparisons between the releases of one run, for ``report.html``: run-level, they see every
release's typed summary; no release's plot looks for another release or reads its files.

One so far: synthetic data against the run's k-anonymous table, on the synthetic workload's
marginals (:func:`synthetic_against_k_anonymous`). A comparison names the releases whose
section it draws (with the other releases' files in hand); the others keep their kind's plot.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from dppub.dp.pipeline.html.sections import Section
from dppub.dp.pipeline.kinds.base import ReleaseSummary
from dppub.dp.pipeline.kinds.k_anonymity import KAnonymityKind
from dppub.dp.pipeline.kinds.synthetic import SyntheticKind

__all__ = ["COMPARISONS", "Plot", "comparison_plots", "synthetic_against_k_anonymous"]

Plot = Callable[[ReleaseSummary, Path], Section]


def synthetic_against_k_anonymous(
    summaries: Sequence[ReleaseSummary], folder: Path
) -> dict[str, Plot]:
    """Each synthetic release's plot with the run's (first) k-anonymous table beside it."""
    k_anonymous = next((s for s in summaries if s.kind == KAnonymityKind.label), None)
    if k_anonymous is None:
        return {}
    table = next((f for f in k_anonymous.files if f.endswith("/table.parquet")), None)

    def plot(summary: ReleaseSummary, folder: Path) -> Section:
        import pandas as pd

        from dppub.dp.pipeline.kinds.synthetic.plot import synthetic_plot  # matplotlib: lazily
        from dppub.dp.pipeline.kinds.synthetic.result import SyntheticResult

        path = None if table is None else folder / table
        frame = pd.read_parquet(path) if path is not None and path.is_file() else None
        result = summary.result_as(SyntheticResult)
        return synthetic_plot(summary, result, folder, k_anonymous=frame)

    return {s.name: plot for s in summaries if s.kind == SyntheticKind.label}


COMPARISONS: tuple[Callable[[Sequence[ReleaseSummary], Path], dict[str, Plot]], ...] = (
    synthetic_against_k_anonymous,
)


def comparison_plots(summaries: Sequence[ReleaseSummary], folder: Path) -> dict[str, Plot]:
    """The releases a comparison draws, by name, and how (the rest: their kind's plot)."""
    plots: dict[str, Plot] = {}
    for compare in COMPARISONS:
        plots.update(compare(summaries, folder))
    return plots
