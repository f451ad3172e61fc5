"""Sufficient statistics of least squares, accumulated batch by batch.

Each batch goes through the very :func:`dp.regression.statistics.exact_moments` of the
in-memory path (clip into the declared domains, shift and scale by public constants, quantise,
form ``Z^T Z`` and ``Z^T y`` as exact integers), and the per-batch integer sums are added. The
finished result is the same :class:`~dp.regression.statistics.SufficientStatistics` object the
mechanisms (:func:`~dp.regression.functional.functional_release`,
:func:`~dp.regression.adassp.adassp_fit`) take as ``exact``, bit for bit the in-memory one:
integer sums do not depend on batch boundaries, partitions or merge order
(:mod:`dp.numerics.fixedpoint`).

A *response* maps the target to the ``y`` that is summed: identity for linear regression,
``label - 0.5`` for the logistic Taylor objective, where the label is ``target > threshold``
(numeric target) or ``target == positive`` (category target), as
:func:`~dp.engine.batches.binary_labels` makes it. Grouped statistics
(one per declared category of a column, for trace regression's tasks) are the same sums with the
rows of each group.

Category features: when the design carries a :class:`~dp.regression.encoding.FeatureEncoding`,
each batch's declared columns are encoded by it (one-hot indicators from the dictionary codes of
a category column, once per distinct value), exactly as the in-memory path encodes a frame.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from dppub.dp.engine.aggregate import Backend, StreamingBackend
from dppub.dp.engine.batches import DEFAULT_BATCH_SIZE, Batch, binary_labels
from dppub.dp.errors import ConfigError, InvariantError
from dppub.dp.regression.statistics import Design, ExactMoments, SufficientStatistics, exact_moments
from dppub.dp.schema import TableSchema

__all__ = [
    "Response",
    "StatisticsAggregate",
    "check_regression_columns",
    "design_rows",
    "regression_statistics_stream",
]

FloatArray = npt.NDArray[np.float64]
Response = Callable[[FloatArray], FloatArray]
"""Maps the raw (clamped) target values of a batch to the summed ``y``."""
_Acc = list[ExactMoments]


@dataclass(frozen=True, slots=True, kw_only=True)
class StatisticsAggregate:
    """``(G, m)`` of :func:`~dp.regression.statistics.exact_moments`, per group (one
    group when ``by`` is None), summed exactly."""

    features: tuple[str, ...]
    """Feature columns, in model order (numeric, or category with an encoding)."""
    target: str
    """Numeric target column."""
    design: Design
    """Declared domains, intercept and the public shifts."""
    response: Response | None = None
    """Optional map of the target (or of its labels) to ``y`` (identity when None)."""
    threshold: float | None = None
    """Binary target, numeric: the label is ``target > threshold``."""
    positive: str | None = None
    """Binary target, category: the label is ``target == positive``."""
    by: str | None = None
    """Optional text column whose declared ``labels`` split the rows into groups."""
    labels: tuple[str, ...] = ()
    """The groups' labels (declared categories of ``by``), in output order."""

    def __post_init__(self) -> None:
        check_design_columns(self.features, self.design)
        if (self.by is None) != (not self.labels):
            raise ConfigError("'by' and 'labels' must be given together")

    @property
    def columns(self) -> tuple[str, ...]:
        """Features, target and the grouping column."""
        extra = (self.by,) if self.by is not None else ()
        return tuple(dict.fromkeys((*self.features, self.target, *extra)))

    def empty(self) -> _Acc:
        """Zero sums for every group."""
        return [ExactMoments.zero(self.design.n_params)] * max(1, len(self.labels))

    def update(self, acc: _Acc, batch: Batch) -> _Acc:
        """Add one batch's clipped, shifted, quantised sums."""
        if batch.num_rows == 0:
            return acc
        X = design_rows(batch, self.features, self.design)
        if self.threshold is None and self.positive is None:
            y = batch.numeric[self.target].astype(np.float64)
        else:
            y = binary_labels(batch, self.target, threshold=self.threshold, positive=self.positive)
        if self.response is not None:
            y = np.asarray(self.response(y), dtype=np.float64)
        for g, rows in enumerate(self._groups(batch)):
            Xg, yg = (X, y) if rows is None else (X[rows], y[rows])
            if len(yg) == 0:
                continue
            acc[g] = acc[g] + exact_moments(Xg, yg, self.design)
        return acc

    def _groups(self, batch: Batch) -> list[npt.NDArray[np.bool_] | None]:
        if self.by is None:
            return [None]
        column = batch.text[self.by]
        lookup = {v: i for i, v in enumerate(self.labels)}
        dictionary = column.dictionary.to_pylist()
        codes = np.array([lookup.get(str(v), -1) for v in dictionary], dtype=np.int64)
        rows = codes[np.asarray(column.indices.to_numpy(zero_copy_only=False), dtype=np.int64)]
        return [rows == g for g in range(len(self.labels))]

    def merge(self, left: _Acc, right: _Acc) -> _Acc:
        """Group-wise exact sums, ``left + right`` (any order gives the same integers)."""
        return [a + b for a, b in zip(left, right, strict=True)]

    def finish(self, acc: _Acc) -> list[SufficientStatistics]:
        """One :class:`SufficientStatistics` per group, each sum rounded once.

        Raises:
            InputError: a group of more than :data:`dp.numerics.fixedpoint.MAX_ROWS` rows.
        """
        if len(acc) != max(1, len(self.labels)):
            raise InvariantError("lost a regression group")
        return [moments.statistics(self.design) for moments in acc]


def check_design_columns(features: Sequence[str], design: Design) -> None:
    """``features`` are the design's columns: its encoding's, or ``dim`` numeric ones.

    Raises:
        ConfigError: otherwise.
    """
    if not features:
        raise ConfigError("a regression needs at least one feature")
    enc = design.encoding
    if enc is not None and tuple(features) != enc.column_names:
        raise ConfigError(
            f"features {list(features)} are not the encoding's columns {list(enc.column_names)}"
        )
    if enc is None and len(features) != design.features.dim:
        raise ConfigError(f"{len(features)} features but the design declares {design.features.dim}")


def design_rows(batch: Batch, features: Sequence[str], design: Design) -> FloatArray:
    """The batch's rows of the design matrix: numeric columns as they are, category columns
    one-hot by the design's encoding (from the dictionary codes, once per distinct value)."""
    enc = design.encoding
    if enc is None:
        return np.column_stack([batch.numeric[c].astype(np.float64) for c in features])
    parts: list[FloatArray] = []
    for spec, levels in zip(enc.columns, enc.levels, strict=True):
        if levels is None:
            parts.append(batch.numeric[spec.name].astype(np.float64).reshape(-1, 1))
            continue
        column = batch.text[spec.name]
        lookup = enc.level_codes(spec.name, column.dictionary.to_pylist())
        indices = np.asarray(column.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
        parts.append(enc.indicators_from_codes(spec.name, lookup[indices]))
    return np.asarray(np.hstack(parts), dtype=np.float64)


def check_regression_columns(
    schema: TableSchema,
    features: Sequence[str],
    target: str,
    *,
    positive: str | None,
    categories: bool = False,
) -> None:
    """Numeric features (or category ones, with ``categories``); a numeric target, or a
    category target when ``positive`` names a class.

    Raises:
        ConfigError: otherwise.
    """
    for name in features:
        spec = schema[name]
        if not spec.is_numeric and not (categories and spec.categories is not None):
            kinds = "numeric (int or float) or category" if categories else "numeric (int or float)"
            raise ConfigError(f"column {name!r} must be {kinds} for a regression")
    if positive is None and not schema[target].is_numeric:
        raise ConfigError(f"column {target!r} must be numeric (int or float) for a regression")
    if positive is not None and schema[target].categories is None:
        raise ConfigError(f"column {target!r} must be a category column to name a positive class")


def regression_statistics_stream(
    source: str | Path,
    schema: TableSchema,
    *,
    features: Sequence[str],
    target: str,
    design: Design,
    response: Response | None = None,
    threshold: float | None = None,
    positive: str | None = None,
    by: str | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    backend: Backend | None = None,
) -> list[SufficientStatistics]:
    """Exact sufficient statistics of ``target ~ features`` over a Parquet file or folder.

    Args:
        source: a Parquet file or a folder of Parquet files.
        schema: the declared schema (numeric features and target are clamped to its bounds
            first, then clipped into ``design``'s domains, as on the pandas path).
        features: feature columns, in model order (the design's encoding's columns, if any).
        target: the target column: numeric, or a category column with ``positive``.
        design: as built by the estimator (:class:`~dp.regression.statistics.Design`), with
            its :class:`~dp.regression.encoding.FeatureEncoding` for category features.
        response: optional map of the target values (or labels) to the summed ``y``.
        threshold: binary numeric target: the label is ``target > threshold``.
        positive: binary category target: the label is ``target == positive``.
        by: optional category column: one result per declared category, in declared order.
        batch_size: upper bound on rows held per batch (ignored when ``backend`` is given).
        backend: where to run; default a :class:`StreamingBackend` of ``batch_size``.

    Returns:
        ``[stats]`` without ``by``; else one entry per declared category of ``by``.
    """
    check_regression_columns(
        schema, features, target, positive=positive, categories=design.encoding is not None
    )
    labels: tuple[str, ...] = ()
    if by is not None:
        spec = schema[by]
        if spec.categories is None:
            raise ConfigError(f"column {by!r} must be a category column to group by")
        labels = spec.categories
    agg = StatisticsAggregate(
        features=tuple(features),
        target=target,
        design=design,
        response=response,
        threshold=threshold,
        positive=positive,
        by=by,
        labels=labels,
    )
    runner = backend if backend is not None else StreamingBackend(batch_size=batch_size)
    result: list[SufficientStatistics] = runner.run(agg, source, schema)
    return result
