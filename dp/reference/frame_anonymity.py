"""k-anonymity of an in-memory frame: the reference the streaming release is compared with.

:func:`anonymize` encodes a frame's quasi-identifiers to leaf codes, collapses them to base rows
(:meth:`dp.anonymity.classes.CodedTable.build`), runs the release's own lattice search
(:func:`dp.anonymity.full_domain.search`), optionally with l-diversity, and writes the released
table with the release's :func:`dp.anonymity.released_rows.release_rows`. Record suppression
follows ARX: every record of a class smaller than k (or violating l) is removed, and a node is
admissible only if that is at most ``floor(sigma * n)`` records.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pandas as pd

from dppub.dp.anonymity.classes import CodedTable, LDiversity
from dppub.dp.anonymity.full_domain import check_search, search
from dppub.dp.anonymity.hierarchy import Hierarchy
from dppub.dp.anonymity.released_rows import InputDigest, release_rows
from dppub.dp.anonymity.result import AnonymizationReport
from dppub.dp.errors import ConfigError, InputError

__all__ = ["AnonymizationResult", "anonymize", "encode_columns"]

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True, kw_only=True)
class AnonymizationResult(AnonymizationReport):
    """A k-anonymous release in memory: the report and the released table."""

    table: pd.DataFrame = field(repr=False)
    """The released table: QIs generalized (categorical over the hierarchy's labels at the chosen
    level), suppressed records removed, other columns unchanged, index reset."""


def _check_columns(df: pd.DataFrame, hierarchies: Mapping[str, Hierarchy]) -> list[str]:
    if not isinstance(df, pd.DataFrame):
        raise ConfigError(f"expected a pandas DataFrame, got {type(df).__name__}")
    if not hierarchies:
        raise ConfigError("at least one quasi-identifier hierarchy is required")
    for col, h in hierarchies.items():
        if not isinstance(h, Hierarchy):
            raise ConfigError(
                f"hierarchy of column {col!r} must be a Hierarchy, got {type(h).__name__}"
            )
        if col not in df.columns:
            raise InputError(f"column {col!r} has a hierarchy but is not in the table")
    return list(hierarchies)


def encode_columns(df: pd.DataFrame, hierarchies: Mapping[str, Hierarchy]) -> IntArray:
    """Leaf codes of every QI as an ``(n, d)`` array, in ``hierarchies`` order.

    Raises:
        InputError: a column is missing, or holds values that are not leaves (the message
            names neither the values nor how many).
    """
    cols = _check_columns(df, hierarchies)
    out = np.empty((len(df), len(cols)), dtype=np.int64)
    for i, col in enumerate(cols):
        out[:, i] = hierarchies[col].encode(df[col].rename(col))
    return out


def _check_l(
    spec: Mapping[str, object] | None, df: pd.DataFrame, qis: Sequence[str]
) -> tuple[str, LDiversity] | None:
    if spec is None:
        return None
    unknown = set(spec) - {"column", "l", "kind"}
    if unknown:
        raise ConfigError(f"l_diversity has unknown keys {sorted(unknown)}")
    col, l_value, kind = spec.get("column"), spec.get("l"), spec.get("kind", "distinct")
    if not isinstance(col, str):
        raise ConfigError(f"l_diversity column must be a column name, got {col!r}")
    if col in qis:
        raise ConfigError(f"l_diversity column {col!r} must not be a quasi-identifier")
    if col not in df.columns:
        raise InputError(f"l_diversity column {col!r} is not in the table")
    if isinstance(l_value, bool) or not isinstance(l_value, int) or l_value < 1:
        raise ConfigError(f"l_diversity l must be an integer >= 1, got {l_value!r}")
    if kind not in ("distinct", "entropy"):
        raise ConfigError(f"l_diversity kind must be 'distinct' or 'entropy', got {kind!r}")
    return col, LDiversity(l=l_value, kind=str(kind))


def anonymize(
    df: pd.DataFrame,
    hierarchies: Mapping[str, Hierarchy],
    *,
    k: int,
    max_suppression: float,
    metric: str = "loss",
    l_diversity: Mapping[str, object] | None = None,
    quasi_identifiers: Sequence[str] | None = None,
    suppress_if_impossible: bool = False,
) -> AnonymizationResult:
    """Find the globally optimal full-domain generalization and release the table.

    Args:
        df: The private table. QI values must be leaves of their hierarchies (compared as text).
        hierarchies: Column -> hierarchy; these columns are the quasi-identifiers.
        k: Minimum size of every released equivalence class.
        max_suppression: Fraction sigma in [0, 1]; at most ``floor(sigma * n)`` records removed.
        metric: ``"loss"`` (ARX Loss), ``"dm"``, ``"dm_star"`` or ``"entropy"``; lower is better.
            Also ARX's configurations ``"loss_rank"`` (ARX's default Loss aggregate; ``score``
            is the worst attribute's loss, ``metrics["score_vector"]`` the ranked vector) and
            ``"entropy_monotone"`` (see :mod:`dp.anonymity.metrics`).
        l_diversity: Optional ``{"column": name, "l": int, "kind": "distinct" | "entropy"}``.
        quasi_identifiers: Optional subset/order of QIs; each must have a hierarchy.
        suppress_if_impossible: When no node is admissible (even the top node needs more
            suppression than allowed, e.g. ``n < k``) or the table is empty, release the top
            node with every record suppressed (no rows) instead of raising -- what a publishing
            run wants, so that one record more or less never changes whether it succeeds.

    Returns:
        The release; ``metrics["search"]`` says whether the node is proven optimal.

    Raises:
        ConfigError: invalid k, sigma, metric, l-diversity spec, or a QI without hierarchy.
        InputError: missing columns, non-leaf values, and (unless ``suppress_if_impossible``)
            an empty table or no admissible node.
    """
    started = time.perf_counter()
    k, sigma, hier = check_search(k, max_suppression, metric, hierarchies, quasi_identifiers)
    leaf_codes = encode_columns(df, hier)
    ldiv = _check_l(l_diversity, df, list(hier))
    sensitive = None
    if ldiv is not None:
        sensitive, _ = pd.factorize(df[ldiv[0]])
        if (sensitive < 0).any():
            raise InputError(
                f"l_diversity column {ldiv[0]!r}: {int((sensitive < 0).sum())} values are missing"
            )
        sensitive = sensitive.astype(np.int64)
    table = CodedTable.build(leaf_codes, list(hier.values()), sensitive)
    found = search(
        table,
        hier,
        k=k,
        sigma=sigma,
        metric=metric,
        ldiv=ldiv,
        started=started,
        suppress_if_impossible=suppress_if_impossible,
    )
    rest = df[[c for c in df.columns if c not in hier]]
    released = release_rows(
        rest, list(df.columns), hier, leaf_codes, found.levels, ~found.suppress[table.records()]
    )
    digest = InputDigest()
    digest.update(leaf_codes, rest)
    report = found.report(digest.hexdigest(hier, list(df.columns)))
    return AnonymizationResult(
        levels=report.levels,
        suppressed=report.suppressed,
        score=report.score,
        metrics=report.metrics,
        table=released,
    )
