"""The logistic loss sums of objective perturbation at one iterate ``w``, folded batch by batch.

Objective perturbation (:mod:`dp.regression.objective`) needs no sufficient statistics -- but
Newton's method only ever asks for the loss, gradient and Hessian *sums* over the rows at one
iterate ``w`` at a time. Each batch goes through the very
:func:`dp.regression.logistic.normalised_rows` and :func:`dp.regression.losssums.loss_partial`
of the in-memory fit, and the per-batch *integer* sums are added, then rounded once: the result
is bit for bit the whole-table computation, whatever the batches, partitions or merge order.
:meth:`dp.regression.LogisticRegression.fit_loss_sums` calls :func:`logistic_sums_stream` once per
evaluated point (one pass over the source each); the noise is drawn once, by the estimator.

Labels are those of the in-memory task: ``target > threshold`` for a numeric target (after the
schema's clamping), ``target == positive`` for a category target.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from dppub.dp.engine.aggregate import Backend, StreamingBackend
from dppub.dp.engine.batches import DEFAULT_BATCH_SIZE, Batch, binary_labels
from dppub.dp.engine.folds.regression_sums import (
    check_design_columns,
    check_regression_columns,
    design_rows,
)
from dppub.dp.errors import ConfigError
from dppub.dp.regression.logistic import normalised_rows
from dppub.dp.regression.losssums import LossPartial, LossSums, loss_partial
from dppub.dp.regression.statistics import Design
from dppub.dp.schema import TableSchema

__all__ = ["LogisticLossAggregate", "logistic_sums_stream"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class LogisticLossAggregate:
    """``(sum l, sum grad l, sum hess l)`` at ``w`` over the normalised rows and their labels."""

    features: tuple[str, ...]
    """Numeric feature columns, in model order."""
    target: str
    """The label column: numeric with ``threshold``, category with ``positive``."""
    design: Design
    """Declared feature domain and intercept (the rows are normalised with it)."""
    w: FloatArray = field(repr=False)
    """The iterate, in the normalised frame (``design.n_params`` entries). It depends on the
    data and the secret noise and is never released: kept out of ``repr`` (dask logs task
    specs on failure)."""
    threshold: float | None = None
    """Numeric target: values above it are class 1."""
    positive: str | None = None
    """Category target: the class-1 category."""

    def __post_init__(self) -> None:
        check_design_columns(self.features, self.design)
        if (self.threshold is None) == (self.positive is None):
            raise ConfigError("give exactly one of threshold, positive")
        if self.w.shape != (self.design.n_params,):
            raise ConfigError(f"w must have {self.design.n_params} entries, got {self.w.shape}")

    @property
    def columns(self) -> tuple[str, ...]:
        """Features and the label column."""
        return tuple(dict.fromkeys((*self.features, self.target)))

    def empty(self) -> LossPartial:
        """Zero sums."""
        return LossPartial.zero(self.design.n_params, self.w)

    def update(self, acc: LossPartial, batch: Batch) -> LossPartial:
        """Add one batch's integer sums."""
        if batch.num_rows == 0:
            return acc
        Z, _ = normalised_rows(design_rows(batch, self.features, self.design), self.design)
        y = binary_labels(batch, self.target, threshold=self.threshold, positive=self.positive)
        return acc + loss_partial(Z, y, self.w)

    def merge(self, left: LossPartial, right: LossPartial) -> LossPartial:
        """``left + right``, exactly (any order gives the same integers)."""
        return left + right

    def finish(self, acc: LossPartial) -> LossSums:
        """The loss, gradient and Hessian sums, each rounded once."""
        return acc.finish()


def logistic_sums_stream(
    source: str | Path,
    schema: TableSchema,
    *,
    features: Sequence[str],
    target: str,
    design: Design,
    w: FloatArray,
    threshold: float | None = None,
    positive: str | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    backend: Backend | None = None,
) -> LossSums:
    """Logistic loss sums at ``w`` over a Parquet file or folder (one pass), as
    :func:`dp.regression.losssums.logistic_sums` of the whole table.

    Args:
        source: a Parquet file or a folder of Parquet files.
        schema: the declared schema (numeric columns are clamped to its bounds first).
        features: numeric feature columns, in model order.
        target: the label column (numeric with ``threshold``, category with ``positive``).
        design: as built by the estimator (:meth:`dp.regression.LogisticRegression.design`).
        w: the iterate, in the normalised frame (never released).
        threshold: numeric target: values above it are class 1.
        positive: category target: the class-1 category (exactly one of the two).
        batch_size: upper bound on rows held per batch (ignored when ``backend`` is given).
        backend: where to run; default a :class:`StreamingBackend` of ``batch_size``.

    Raises:
        ConfigError: a feature is not numeric, or the target does not fit the label rule.
        InputError: as :func:`dp.reference.frame.read_table` would.
    """
    check_regression_columns(
        schema, features, target, positive=positive, categories=design.encoding is not None
    )
    agg = LogisticLossAggregate(
        features=tuple(features),
        target=target,
        design=design,
        w=np.asarray(w, dtype=np.float64),
        threshold=threshold,
        positive=positive,
    )
    runner = backend if backend is not None else StreamingBackend(batch_size=batch_size)
    result: LossSums = runner.run(agg, source, schema)
    return result
