"""Local recoding: hierarchy-aware Mondrian (a reference, benchmarked against other tools).

Mondrian (LeFevre, DeWitt & Ramakrishnan, "Mondrian multidimensional k-anonymity", ICDE 2006)
partitions the records top-down: start with one partition holding everything, and split a
partition on one quasi-identifier while every part keeps at least ``k`` records. With
generalization hierarchies (the categorical variant of the same paper) a split on attribute ``i``
specializes the partition's common ancestor one level: the parts are the child groups present.
Unlike full-domain generalization, each equivalence class gets its own recoding: its cells are
generalized to the lowest common hierarchy node of the values it holds.

Heuristic choices (the paper leaves them open): split first the attribute whose current node is
widest relative to its domain (GenILoss of the node, the analogue of "widest normalized range"),
falling back to the next widest when a split would leave a part below ``k``; strict partitioning
(a split is all-or-nothing, no record suppression). The result is *not* differentially private,
and, as for any local recoding, the same value can appear at different levels in different
classes.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from dppub.dp.anonymity.classes import CodedTable
from dppub.dp.anonymity.hierarchy import Hierarchy
from dppub.dp.anonymity.metrics import class_size_summary, genil_loss
from dppub.dp.errors import ConfigError, InputError
from dppub.dp.reference.frame_anonymity import encode_columns

__all__ = ["LocalRecodingResult", "mondrian"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalRecodingResult:
    """A k-anonymous release by local recoding and its disclosure-review metrics."""

    table: pd.DataFrame = field(repr=False)
    """The released table: every record kept, QI cells replaced by their class's common node
    (labels from the hierarchy, possibly of different levels per class), index reset."""
    class_levels: pd.DataFrame = field(repr=False)
    """One row per equivalence class: the level of every QI and the class ``size``."""
    score: float
    """ARX Loss of the release (geometric mean of per-QI GenILoss; nothing is suppressed)."""
    metrics: dict[str, Any] = field(repr=False)
    """k achieved, class sizes, per-QI loss, DM, prosecutor risk, runtime."""


def _lca_levels(table: CodedTable, rows: IntArray, start: Sequence[int]) -> list[int]:
    """Per QI, the lowest level at which all ``rows`` share one group (at most ``start``)."""
    out = []
    for i, top in enumerate(start):
        lvl = 0
        while lvl < top:
            g = table.group[i][lvl][rows]
            if (g == g[0]).all():
                break
            lvl += 1
        out.append(lvl)
    return out


def mondrian(
    df: pd.DataFrame,
    hierarchies: Mapping[str, Hierarchy],
    *,
    k: int,
    quasi_identifiers: Sequence[str] | None = None,
) -> LocalRecodingResult:
    """Partition the table top-down into classes of at least ``k`` records (module docstring).

    Args:
        df: The private table. QI values must be leaves of their hierarchies (compared as text).
        hierarchies: Column -> hierarchy; these columns are the quasi-identifiers.
        k: Minimum size of every released class.
        quasi_identifiers: Optional subset/order of QIs; each must have a hierarchy.

    Returns:
        The release; no record is suppressed.

    Raises:
        ConfigError: invalid ``k`` or a QI without hierarchy.
        InputError: missing columns, non-leaf values, or fewer than ``k`` records.
    """
    started = time.perf_counter()
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ConfigError(f"k must be an integer >= 1, got {k!r}")
    qis = list(hierarchies) if quasi_identifiers is None else list(quasi_identifiers)
    for col in qis:
        if col not in hierarchies:
            raise ConfigError(f"quasi-identifier {col!r} has no hierarchy")
    hier = {col: hierarchies[col] for col in qis}
    leaf_codes = encode_columns(df, hier)
    if len(df) < k:
        raise InputError(f"the table has {len(df)} records, fewer than k={k}")
    table = CodedTable.build(leaf_codes, list(hier.values()), None)
    hs = table.hierarchies
    node_loss = [[genil_loss(h, lvl) for lvl in range(h.height)] for h in hs]
    counts = table.counts
    everything = np.arange(len(counts), dtype=np.int64)
    stack = [(everything, _lca_levels(table, everything, [h.height - 1 for h in hs]))]
    final: list[tuple[IntArray, list[int]]] = []
    while stack:
        rows, levels = stack.pop()
        parts = _split(table, rows, levels, node_loss, k)
        if parts is None:
            final.append((rows, levels))
        else:
            stack.extend((sub, _lca_levels(table, sub, levels)) for sub in parts)
    return _release(df, hier, table, final, node_loss, k=k, started=started)


def _split(
    table: CodedTable,
    rows: IntArray,
    levels: list[int],
    node_loss: list[list[FloatArray]],
    k: int,
) -> list[IntArray] | None:
    """Split ``rows`` on the widest attribute whose children all keep ``k`` records."""
    widths = [
        (float(node_loss[i][lvl][table.group[i][lvl][rows[0]]]), i)
        for i, lvl in enumerate(levels)
        if lvl > 0
    ]
    for _, i in sorted(widths, key=lambda wi: (-wi[0], wi[1])):
        child = table.group[i][levels[i] - 1][rows]
        # At the LCA level the rows share a node, so one level down there are >= 2 children.
        codes, inverse = np.unique(child, return_inverse=True)
        weight = np.bincount(inverse, weights=table.counts[rows])
        if len(codes) > 1 and weight.min() >= k:
            order = np.argsort(inverse, kind="stable")
            cuts = np.cumsum(np.bincount(inverse))[:-1]
            return list(np.split(rows[order], cuts))
    return None


def _release(
    df: pd.DataFrame,
    hier: Mapping[str, Hierarchy],
    table: CodedTable,
    final: list[tuple[IntArray, list[int]]],
    node_loss: list[list[FloatArray]],
    *,
    k: int,
    started: float,
) -> LocalRecodingResult:
    n = table.n
    cols = list(hier)
    d = len(cols)
    m = len(table.counts)
    row_class = np.empty(m, dtype=np.int64)
    class_level = np.empty((len(final), d), dtype=np.int64)
    for c, (rows, levels) in enumerate(final):
        row_class[rows] = c
        class_level[c] = levels
    sizes = np.bincount(row_class, weights=table.counts, minlength=len(final)).astype(np.float64)
    out = df.reset_index(drop=True).copy()
    per_qi = np.empty(d)
    for i, (col, h) in enumerate(hier.items()):
        lvl = class_level[row_class, i]  # per base row
        label_of = np.empty(m, dtype=object)
        loss_row = np.empty(m)
        for level in np.unique(lvl):
            sel = lvl == level
            g = table.group[i][level][sel]
            label_of[sel] = np.asarray(h.labels(int(level)), dtype=object)[g]
            loss_row[sel] = node_loss[i][level][g]
        out[col] = label_of[table.records()]
        per_qi[i] = float(np.multiply(table.counts, loss_row).sum()) / n
    loss = float(np.prod(1.0 + per_qi) ** (1.0 / d) - 1.0)
    class_levels = pd.DataFrame(class_level, columns=cols)
    class_levels["size"] = sizes.astype(np.int64)
    before = table.counts.astype(np.float64)
    metrics: dict[str, Any] = {
        "method": "mondrian (hierarchy-aware, strict, LeFevre et al. 2006)",
        "k": k,
        "k_achieved": int(sizes.min()),
        "records": n,
        "released_records": n,
        "suppressed": 0,
        "class_size": class_size_summary(sizes, k),
        "avg_class_size": n / len(sizes),
        "c_avg": n / len(sizes) / k,
        "loss": loss,
        "loss_per_qi": {c: float(x) for c, x in zip(cols, per_qi, strict=True)},
        "dm": float(np.square(sizes).sum()),
        "prosecutor_risk_before": {"max": float(1.0 / before.min()), "avg": m / n},
        "prosecutor_risk_after": {"max": float(1.0 / sizes.min()), "avg": len(sizes) / n},
        "differentially_private": False,
        "runtime_seconds": time.perf_counter() - started,
    }
    return LocalRecodingResult(table=out, class_levels=class_levels, score=loss, metrics=metrics)
