"""The outcome of a k-anonymous release: chosen levels and review metrics.

A k-anonymous table is a *syntactic* release, not a differentially private one: the
levels were chosen by looking at the data, so DP stages must not read this table's generalized
columns unless the same levels are fixed in the config. The report says so explicitly.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from dppub.dp.anonymity.hierarchy import Hierarchy
from dppub.dp.anonymity.metrics import class_size_summary

__all__ = [
    "AnonymizationReport",
    "Generalization",
    "empty_generalization",
]


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


def _risk(r: Mapping[str, float]) -> str:
    return f"{r['max']:.4f} / {r['avg']:.4f}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Generalization:
    """The node chosen on a table's base rows, before the released records are written."""

    levels: tuple[int, ...]
    """Chosen level per QI, in QI order."""
    suppress: npt.NDArray[np.bool_]
    """Per base row (in the order given): whether its records are suppressed."""
    suppressed: int
    score: float
    metrics: dict[str, Any]
    """The report, still without ``input_sha256`` and ``runtime_seconds``."""
    qis: tuple[str, ...]
    started: float

    def report(self, input_sha256: str) -> AnonymizationReport:
        """The finished report, once the input has been read for its digest."""
        metrics = {**self.metrics, "input_sha256": input_sha256}
        metrics["runtime_seconds"] = time.perf_counter() - self.started
        return AnonymizationReport(
            levels={col: int(lvl) for col, lvl in zip(self.qis, self.levels, strict=True)},
            suppressed=self.suppressed,
            score=self.score,
            metrics=metrics,
        )


def empty_generalization(
    hier: Mapping[str, Hierarchy], *, k: int, sigma: float, metric: str, started: float
) -> Generalization:
    """The release of an empty table: the top node, no records, no classes."""
    levels = tuple(h.height - 1 for h in hier.values())
    zero_risk = {"max": 0.0, "avg": 0.0}
    metrics: dict[str, Any] = {
        "levels": dict(zip(hier, levels, strict=True)),
        "labels_per_qi": {c: len(h.labels(h.height - 1)) for c, h in hier.items()},
        "k_achieved": 0,
        "records": 0,
        "released_records": 0,
        "suppressed": 0,
        "suppression_rate": 0.0,
        "suppression_limit": 0,
        "class_size": class_size_summary(np.zeros(0), k),
        "avg_class_size": 0.0,
        "c_avg": 0.0,
        "loss": 0.0,
        "loss_per_qi": dict.fromkeys(hier, 0.0),
        "dm": 0.0,
        "dm_star": 0.0,
        "entropy": 0.0,
        "prosecutor_risk_before": zero_risk,
        "prosecutor_risk_after": zero_risk,
        "metric": metric,
        "score": 0.0,
        "k": k,
        "max_suppression": sigma,
        "l_diversity": None,
        "search": "empty table: nothing to generalize",
        "optimal": True,
        "nodes_checked": 0,
        "lattice_size": math.prod(h.height for h in hier.values()),
        "search_seconds": time.perf_counter() - started,
        "input_sha256": "",
        "hierarchy_sha256": {col: h.digest() for col, h in hier.items()},
        "differentially_private": False,
    }
    return Generalization(
        levels=levels,
        suppress=np.zeros(0, dtype=bool),
        suppressed=0,
        score=0.0,
        metrics=metrics,
        qis=tuple(hier),
        started=started,
    )
