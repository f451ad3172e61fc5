"""An independent brute-force oracle for the lattice search: pandas groupby per node, computing
every metric from its textbook definition, sharing no code with :mod:`dp.anonymity` beyond
``Hierarchy.generalize`` (tested on its own). Plus a small synthetic table."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from dppub.dp.anonymity import Hierarchy

Table = dict[tuple[int, ...], dict[int, dict[str, Any]]]
Dataset = tuple[pd.DataFrame, dict[str, Hierarchy]]
"""A table and a hierarchy per quasi-identifier (the ``small``, ``adult``... fixtures)."""


def small_table(n: int = 300, seed: int = 7) -> tuple[pd.DataFrame, dict[str, Hierarchy]]:
    """4 QIs (bands, prefix mask, taxonomy, binary) plus a sensitive column; 120-node lattice."""
    rng = np.random.default_rng(seed)
    zips = ["101", "102", "111", "112", "201", "202"]
    jobs = {
        "nurse": ["health", "*"],
        "doctor": ["health", "*"],
        "clerk": ["office", "*"],
        "manager": ["office", "*"],
        "cook": ["service", "*"],
        "driver": ["service", "*"],
    }
    df = pd.DataFrame(
        {
            "age": rng.integers(0, 20, n),
            "zip": rng.choice(zips, n, p=[0.4, 0.2, 0.15, 0.1, 0.1, 0.05]),
            "job": rng.choice(list(jobs), n),
            "sex": rng.choice(["F", "M"], n),
            "disease": rng.choice(["flu", "cold", "ulcer", "cancer"], n, p=[0.5, 0.3, 0.15, 0.05]),
        }
    )
    hs = {
        "age": Hierarchy.from_bands(0, 19, [5, 10], name="age"),
        "zip": Hierarchy.from_prefix_mask(zips, name="zip"),
        "job": Hierarchy.from_levels(jobs, name="job"),
        "sex": Hierarchy.from_levels({"F": ["*"], "M": ["*"]}, name="sex"),
    }
    return df, hs


def _columns(
    df: pd.DataFrame, hs: Mapping[str, Hierarchy]
) -> dict[tuple[str, int], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Per (column, level): labels, per-record GenILoss, entropy cost, suppressed entropy cost."""
    n = len(df)
    out = {}
    for c, h in hs.items():
        raw = df[c].astype(str)
        f_leaf = raw.map(raw.value_counts()).to_numpy(float)
        for lv in range(h.height):
            lab = pd.Series(h.generalize(df[c].rename(c), lv).astype(str).to_numpy())
            under = lab.map(pd.Series(Counter(h.levels[lv]))).to_numpy(float)
            f_group = lab.map(lab.value_counts()).to_numpy(float)
            out[(c, lv)] = (
                lab.to_numpy(),
                (under - 1) / max(len(h.leaves) - 1, 1),
                -np.log2(f_leaf / f_group),
                -np.log2(f_leaf / n),
            )
    return out


def node_scores(
    df: pd.DataFrame,
    cols: list[str],
    cache: dict[tuple[str, int], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
    levels: tuple[int, ...],
    ks: list[int],
    l_div: tuple[str, int] | None,
) -> dict[int, dict[str, Any]]:
    """Suppressed count and every metric of one node, from the definitions."""
    n = len(df)
    g = pd.DataFrame({c: cache[(c, lv)][0] for c, lv in zip(cols, levels, strict=True)})
    size = g.groupby(cols)[cols[0]].transform("size").to_numpy()
    distinct = None
    if l_div is not None:
        g2 = g.assign(_s=df[l_div[0]].to_numpy())
        distinct = g2.groupby(cols)["_s"].transform("nunique").to_numpy()
    out = {}
    for k in ks:
        bad = size < k
        if distinct is not None and l_div is not None:  # distinct is set exactly when l_div is
            bad |= distinct < l_div[1]
        s = int(bad.sum())
        per = []
        ent = 0.0
        ent_all = 0.0
        for c, lv in zip(cols, levels, strict=True):
            _, loss, cost, top = cache[(c, lv)]
            per.append(np.where(bad, 1.0, loss).mean())
            ent += np.where(bad, top, cost).sum()
            ent_all += cost.sum()
        out[k] = {
            # ARX's RANK aggregate: per-QI losses rounded to 10 decimals, sorted descending.
            "loss_rank": tuple(sorted((round(float(x), 10) for x in per), reverse=True)),
            "entropy_monotone": ent_all,
            "suppressed": s,
            "loss": math.prod(1 + x for x in per) ** (1 / len(per)) - 1,
            "dm": float(size[~bad].sum() + n * s),
            "dm_star": float(size.sum()),
            "entropy": ent,
        }
    return out


def run_oracle(
    df: pd.DataFrame,
    hs: Mapping[str, Hierarchy],
    ks: list[int],
    l_div: tuple[str, int] | None = None,
) -> Table:
    """Every node's suppressed count and metric values, per k."""
    cache = _columns(df, hs)
    heights = [h.height for h in hs.values()]
    return {
        node: node_scores(df, list(hs), cache, node, ks, l_div)
        for node in itertools.product(*(range(h) for h in heights))
    }


def best_of(table: Table, k: int, limit: int, metric: str) -> Any:
    """Optimum score over admissible nodes of an oracle table (inf if none)."""
    scores = [v[k][metric] for v in table.values() if v[k]["suppressed"] <= limit]
    return min(scores, default=math.inf)
