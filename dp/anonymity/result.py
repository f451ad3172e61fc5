"""The outcome of :func:`dp.anonymity.anonymize`: released table, chosen levels, review metrics.

A k-anonymous table is a *syntactic* release, not a differentially private one (SPEC 3.2): the
levels were chosen by looking at the data, so DP stages must not read this table's generalized
columns unless the same levels are fixed in the config. The report says so explicitly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

__all__ = ["AnonymizationReport", "AnonymizationResult"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AnonymizationReport:
    """The chosen generalization of a k-anonymous release and its disclosure-review metrics
    (the released table itself may have been written elsewhere, e.g. batch by batch)."""

    levels: dict[str, int]
    """Chosen generalization level per quasi-identifier (0 = original values)."""
    suppressed: int
    """Number of suppressed (removed) records; never more than ``floor(sigma * n)``."""
    score: float
    """Value of the optimized metric (lower is better)."""
    metrics: dict[str, Any] = field(repr=False)
    """Everything a reviewer needs: k achieved, class sizes, losses, DM/DM*, risks, search info."""

    def to_markdown(self) -> str:
        """A short report for ``report.md``: levels, guarantee, utility and risk."""
        m = self.metrics
        lines = [
            "## k-anonymity release",
            "",
            f"Not differentially private: a syntactic release (k={m['k']}"
            + (f", {m['l_diversity']}" if m.get("l_diversity") else "")
            + f"), search: {m['search']}.",
            "",
            "| quasi-identifier | level | labels | loss |",
            "|---|---:|---:|---:|",
        ]
        for col, lvl in self.levels.items():
            lines.append(
                f"| {col} | {lvl} | {m['labels_per_qi'][col]} | {m['loss_per_qi'][col]:.4f} |"
            )
        dist = m["class_size"]
        rows: list[tuple[str, str]] = [
            ("metric optimized", f"{m['metric']} = {self.score:.6g}"),
            ("k achieved", str(m["k_achieved"])),
            ("records in / released", f"{m['records']} / {m['released_records']}"),
            (
                "suppressed",
                f"{self.suppressed} ({m['suppression_rate']:.2%}; limit {m['suppression_limit']})",
            ),
            ("classes released", str(dist.get("classes", 0))),
            (
                "class size min / median / max",
                f"{dist.get('min', '-')} / {dist.get('median', '-')} / {dist.get('max', '-')}",
            ),
            ("average class size (C_avg)", f"{m['avg_class_size']:.2f} ({m['c_avg']:.3f})"),
            ("loss (ARX, geometric mean)", f"{m['loss']:.6f}"),
            ("DM / DM*", f"{m['dm']:.6g} / {m['dm_star']:.6g}"),
            ("non-uniform entropy (bits)", f"{m['entropy']:.6g}"),
            (
                "prosecutor risk max / avg, before",
                _risk(m["prosecutor_risk_before"]),
            ),
            ("prosecutor risk max / avg, after", _risk(m["prosecutor_risk_after"])),
            ("nodes checked / lattice", f"{m['nodes_checked']} / {m['lattice_size']}"),
            ("runtime (s)", f"{m['runtime_seconds']:.3f}"),
            ("input sha256", str(m["input_sha256"])[:16] + "…"),
        ]
        lines += ["", "| measure | value |", "|---|---|"]
        lines += [f"| {name} | {value} |" for name, value in rows]
        return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True, kw_only=True)
class AnonymizationResult(AnonymizationReport):
    """A k-anonymous release in memory: the report and the released table."""

    table: pd.DataFrame = field(repr=False)
    """The released table: QIs generalized (categorical over the hierarchy's labels at the chosen
    level), suppressed records removed, other columns unchanged, index reset."""


def _risk(r: Mapping[str, float]) -> str:
    return f"{r['max']:.4f} / {r['avg']:.4f}"
