"""Row fits and predictions of the DP regressions: what the tests and benchmarks compare
the live fits against, never used by a release.

A release fits from exact sufficient statistics or loss sums that the engine folds over the
data (:meth:`dp.regression.LinearRegression.fit_statistics`...). Here the same estimators fit
rows held in memory: the subclasses add ``fit(X, y)``, which sums the statistics of the rows
(:func:`sufficient_statistics`, :func:`objective_perturbation`'s loss over
:func:`~dp.regression.logistic.normalised_rows`) and hands them to the live fit, so both paths
make the same release bit for bit. A fit returns the live frozen result
(:class:`~dp.regression.linear.LinearFit`...); :func:`predict` and friends read it.

>>> rng = np.random.default_rng(0)
>>> X = rng.uniform(-1, 1, size=(20_000, 2)); y = np.clip(X @ [0.5, -0.25], -1, 1)
>>> model = LinearRegression(5.0, bounds_X=(-1, 1), bounds_y=(-1, 1), method="functional")
>>> fit = model.fit(X, y, rng=rng)
>>> bool(np.allclose(fit.coef, [0.5, -0.25], atol=0.05)), model.privacy_cost
(True, PrivacyCost(epsilon=5.0, delta=0.0))
>>> labels = (rng.random(20_000) < 1 / (1 + np.exp(-4 * X[:, 0]))).astype(float)
>>> logit = LogisticRegression(1.0, bounds_X=(-1, 1)).fit(X, labels, rng=rng)
>>> bool(abs(logit.coef[0] - 4.0) < 0.5), predict(logit, [[0.5, 0.0], [-0.5, 0.0]]).tolist()
(True, [1, 0])
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.special import expit

from dppub.dp.errors import ConfigError, InputError
from dppub.dp.regression import linear, logistic, trace
from dppub.dp.regression.linear import LinearFit
from dppub.dp.regression.logistic import LogisticFit, normalised_rows
from dppub.dp.regression.losssums import logistic_sums
from dppub.dp.regression.objective import ObjectiveRelease, minimise_objective
from dppub.dp.regression.statistics import Design, SufficientStatistics, exact_moments
from dppub.dp.regression.trace import TraceFit

__all__ = [
    "LinearRegression",
    "LogisticRegression",
    "TraceRegression",
    "check_training_data",
    "decision_function",
    "design_matrix",
    "objective_perturbation",
    "predict",
    "predict_proba",
    "sufficient_statistics",
]

FloatArray = npt.NDArray[np.float64]


def sufficient_statistics(X: FloatArray, y: FloatArray, design: Design) -> SufficientStatistics:
    """The statistics of rows in memory (:func:`~dp.regression.statistics.exact_moments`),
    rounded once to float64: what the engine's folds must equal."""
    return exact_moments(X, y, design).statistics(design)


def objective_perturbation(
    Z: FloatArray, y: FloatArray, *, epsilon: float, rng: np.random.Generator | None = None
) -> ObjectiveRelease:
    """Epsilon-DP logistic regression on normalised rows in memory (``||z|| <= 1``, on the
    fixed-point grid of :func:`dp.regression.logistic.normalised_rows`) and labels in {0, 1}:
    :func:`~dp.regression.objective.minimise_objective` on their loss sums.

    Args:
        Z: normalised design (the caller clips, scales and quantises).
        y: labels in {0, 1}.
        epsilon: total privacy parameter.
        rng: ``None`` for release-grade (OpenDP) noise; a seeded generator for tests only.
    """
    return minimise_objective(
        lambda w: logistic_sums(Z, y, w), p=Z.shape[1], epsilon=epsilon, rng=rng
    )


def check_training_data(X: object, y: object) -> tuple[FloatArray, FloatArray]:
    """Return ``(X, y)`` as float arrays of shapes ``(n, d)`` and ``(n,)``, or raise InputError.

    Messages name shapes only, never a data value.
    """
    Xa = np.asarray(X, dtype=np.float64)
    ya = np.asarray(y, dtype=np.float64)
    if Xa.ndim != 2:
        raise InputError(f"X must be a 2-d array (n, d), got shape {Xa.shape}")
    if ya.ndim != 1 or ya.shape[0] != Xa.shape[0]:
        raise InputError(f"y must be a 1-d array of length {Xa.shape[0]}, got shape {ya.shape}")
    if Xa.shape[1] == 0:  # zero rows are fine: the noisy statistics of an empty table
        raise InputError(f"X must have at least one column, got shape {Xa.shape}")
    if not (np.all(np.isfinite(Xa)) and np.all(np.isfinite(ya))):
        raise InputError("X and y must be finite (no NaN or inf)")
    return Xa, ya


def design_matrix(X: object, d: int) -> FloatArray:
    """``X`` as a float ``(n, d)`` array, or a one-line :class:`InputError`."""
    Xa = np.asarray(X, dtype=np.float64)
    if Xa.ndim != 2 or Xa.shape[1] != d:
        raise InputError(f"X must have shape (n, {d}), got {Xa.shape}")
    return Xa


class LinearRegression(linear.LinearRegression):
    """:class:`dp.regression.LinearRegression` with a fit on rows in memory."""

    def fit(self, X: object, y: object, *, rng: np.random.Generator | None = None) -> LinearFit:
        """Fit on rows ``X`` ``(n, d)`` and targets ``y`` ``(n,)``; spends the privacy cost.

        ``rng``: ``None`` for release-grade noise; a seeded generator for tests only.
        """
        Xa, ya = check_training_data(X, y)
        d = Xa.shape[1]
        return self.fit_statistics(sufficient_statistics(Xa, ya, self.design(d)), d=d, rng=rng)


class LogisticRegression(logistic.LogisticRegression):
    """:class:`dp.regression.LogisticRegression` with a fit on rows in memory."""

    def fit(self, X: object, y: object, *, rng: np.random.Generator | None = None) -> LogisticFit:
        """Fit on rows ``X`` ``(n, d)`` with labels ``y`` in {0, 1}; spends the privacy cost."""
        Xa, ya = check_training_data(X, y)
        target = self.response(ya)
        d = Xa.shape[1]
        design = self.design(d)
        if self.method == "functional":
            return self.fit_statistics(sufficient_statistics(Xa, target, design), d=d, rng=rng)
        Z, _ = normalised_rows(Xa, design)
        obj = objective_perturbation(Z, ya, epsilon=self.epsilon, rng=rng)
        return self.objective_fit(obj, design, rng)


class TraceRegression(trace.TraceRegression):
    """:class:`dp.regression.TraceRegression` with a fit on rows in memory."""

    def fit(
        self,
        X: object,
        y: object,
        *,
        tasks: object = None,
        rng: np.random.Generator | None = None,
    ) -> TraceFit:
        """Fit on multi-task rows ``X`` ``(n, d)`` with ``tasks`` (each row's task index in
        ``0 .. n_tasks - 1``), or on matrix covariates ``X`` ``(n, d, T)``."""
        Xa = np.asarray(X, dtype=np.float64)
        multitask = Xa.ndim != 3
        if not multitask:
            if tasks is not None:
                raise InputError("tasks must be None for matrix covariates X of shape (n, d, T)")
            if Xa.shape[2] != self.n_tasks or self.data_norm is None:
                raise ConfigError(
                    f"matrix covariates need shape (n, d, {self.n_tasks}) and data_norm, "
                    f"got shape {Xa.shape}"
                )
            d = Xa.shape[1]
            flat = Xa.transpose(0, 2, 1).reshape(Xa.shape[0], -1)  # column-major vec(X_i)
            flat, ya = check_training_data(flat, y)
            blocks = [(flat, ya)]
        else:
            Xa, ya = check_training_data(X, y)
            d = Xa.shape[1]
            t_idx = np.asarray(tasks)
            if tasks is None or t_idx.shape != ya.shape:
                raise InputError(f"tasks must be a 1-d array of length {len(ya)}")
            if not np.issubdtype(t_idx.dtype, np.integer) or np.any(
                (t_idx < 0) | (t_idx >= self.n_tasks)
            ):
                raise InputError(f"tasks must be integers in [0, {self.n_tasks - 1}]")
            blocks = [(Xa[t_idx == t], ya[t_idx == t]) for t in range(self.n_tasks)]
        design = self.design(d, matrix=not multitask)
        exact = [sufficient_statistics(Xb, yb, design) for Xb, yb in blocks]
        return self.fit_statistics(exact, d=d, rng=rng, matrix=not multitask)


def decision_function(fit: LogisticFit, X: object) -> FloatArray:
    """Log-odds ``X coef + intercept``."""
    Xa = design_matrix(X, fit.coef.shape[0])
    return np.asarray(Xa @ fit.coef + fit.intercept, dtype=np.float64)


def predict_proba(fit: LogisticFit, X: object) -> FloatArray:
    """Class probabilities, shape ``(n, 2)``: columns ``P(y=0)`` and ``P(y=1)``."""
    p1 = expit(decision_function(fit, X))
    return np.column_stack([1.0 - p1, p1])


def predict(
    fit: LinearFit | LogisticFit | TraceFit, X: object, *, tasks: object = None
) -> FloatArray | npt.NDArray[np.int64]:
    """A fit's predictions: linear, ``X coef + intercept`` clipped to ``bounds_y``; logistic,
    labels 0/1 (1 where the log-odds are positive); trace, ``x^T b_t`` for multi-task rows
    with their ``tasks``, or ``tr(X_i^T B)`` for matrix covariates."""
    if isinstance(fit, LogisticFit):
        return (decision_function(fit, X) > 0.0).astype(np.int64)
    if isinstance(fit, LinearFit):
        Xa = design_matrix(X, fit.coef.shape[0])
        return fit.model.target.clip(Xa @ fit.coef + fit.intercept)
    Xa = np.asarray(X, dtype=np.float64)
    if Xa.ndim == 3:
        return np.asarray(np.einsum("ndt,dt->n", Xa, fit.coef), dtype=np.float64)
    t_idx = np.asarray(tasks, dtype=np.int64)
    return np.asarray(np.einsum("nd,dn->n", Xa, fit.coef[:, t_idx]), dtype=np.float64)
