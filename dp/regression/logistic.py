"""Differentially private logistic regression with a scikit-learn-like interface.

Two pure epsilon-DP methods, add/remove-one neighbours, rows clipped into declared bounds:

* ``"functional"`` (Zhang et al., VLDB 2012, §5): the second-order Taylor expansion of
  ``l(s; y) = log(1 + e^s) - y s`` at ``s = 0`` is ``log 2 + (1/2 - y) s + s^2 / 8``. Summed over
  rows ``z = (x, 1)`` with ``s = z^T w`` it is ``w^T G w / 8 - m^T w + const`` with
  ``G = sum z z^T`` and ``m = sum (y - 1/2) z``: exactly the least-squares statistics of the
  target ``y - 1/2`` in ``[-1/2, 1/2]``, whose minimiser is ``4 G^-1 m``. We therefore reuse the
  linear pipeline (:mod:`dp.regression.functional`: five parts, their add/remove sensitivities,
  the count released as the corner, spectral trimming so the objective is always bounded) and
  scale by 4. Add/remove L1 sensitivity of all polynomial coefficients of the expansion
  (off-diagonal ``w_j w_l`` coefficients counted with their factor 2): with ``||z||_1 <= a``,
  ``a^2 / 8 + a / 2`` -- 4.2 for the unit ball at ``d = 10`` (``a = sqrt(10) + 1``), where the
  seed's replace-one bound is ``d^2/4 + 3d = 55``.
* ``"objective"``: approximate minima perturbation (Iyengar et al. 2019): objective perturbation
  (Chaudhuri et al. 2011) solved to a certified gradient norm, then output perturbation,
  :mod:`dp.regression.objective`.

Default: ``"objective"``, chosen by measurement (``bench/regression.py``, 21 seeds, n = 20,000
training rows in the unit ball, excess misclassification over the non-private fit, median
points): d = 10 -- objective 0.18 / 0.02 / 0.00 at epsilon = 0.1 / 0.5 / 1 against functional
1.32 / 0.14 / 0.00; d = 30 -- objective 2.52 / 0.18 / 0.08 against 6.96 / 0.74 / 0.98 (equal
within noise at epsilon = 10). Objective perturbation adds a ``Gamma(p, 1/eps)``-norm vector to a
gradient of norm <= 1 and fits the true logistic loss; the functional mechanism adds Laplace
noise to ``O(d^2)`` coefficients of a Taylor surrogate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dppub.dp.budget import PrivacyCost
from dppub.dp.errors import ConfigError, InputError
from dppub.dp.numerics.domains import (
    BoundLike,
    TargetDomain,
    feature_domain,
    read_only,
)
from dppub.dp.numerics.fixedpoint import ONE, check_norms, fixed_point_record, quantise
from dppub.dp.regression.encoding import FeatureEncoding, declared_features, resolve_d
from dppub.dp.regression.functional import eigenvalue_floor, functional_release, trimmed_solve
from dppub.dp.regression.objective import LossSumsAt, ObjectiveRelease, minimise_objective
from dppub.dp.regression.sensitivity import NEIGHBOURS, PARTS
from dppub.dp.regression.statistics import (
    Design,
    SufficientStatistics,
    check_statistics,
)
from dppub.dp.validation import check_delta, check_epsilon

__all__ = ["LogisticFit", "LogisticRegression", "normalised_rows", "row_norm_bound"]

FloatArray = npt.NDArray[np.float64]
_METHODS = ("objective", "functional")
MECHANISM = (
    "approximate minima perturbation (Iyengar et al. 2019): objective perturbation "
    "(Chaudhuri et al. 2011) solved to a certified gradient norm <= gradient_tolerance, "
    "then output noise of density exp(-eps ||v|| / l2_sensitivity); epsilon = linear_noise "
    "+ curvature + output_noise; coefficients in the frame of rows divided by row_norm_bound"
)
_TAYLOR_TARGET = TargetDomain(lower=-0.5, upper=0.5)  # y - 1/2 for labels in {0, 1}


class LogisticRegression:
    """Epsilon-DP binary logistic regression on declared feature bounds.

    Args:
        epsilon: total privacy parameter of one ``fit``.
        bounds_X: per-feature box ``(lo, hi)``, each a scalar or a length-``d`` sequence.
        data_norm: L2 bound on each feature vector.
        encoding: declared feature columns (numeric and category, one-hot); ``X`` is then
            ``encoding.encode(frame)``. Exactly one of ``bounds_X``/``data_norm``/``encoding``.
        fit_intercept: fit a constant term (must match ``encoding``'s reference levels).
        method: ``"objective"`` (default, Chaudhuri et al. 2011) or ``"functional"``
            (Zhang et al. 2012); both pure epsilon-DP.
        delta: must be 0 (both methods are pure epsilon-DP); kept for a uniform surface.

    The estimator is configuration only: a fit returns a frozen :class:`LogisticFit` and
    changes nothing here. Fitting on rows in memory, and predicting, are reference code
    (:mod:`dp.reference.frame_regression`).
    """

    def __init__(
        self,
        epsilon: float,
        *,
        bounds_X: tuple[BoundLike, BoundLike] | None = None,
        data_norm: float | None = None,
        encoding: FeatureEncoding | None = None,
        fit_intercept: bool = True,
        method: str = "objective",
        delta: float = 0.0,
    ) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.delta = check_delta(delta)
        if method not in _METHODS:
            raise ConfigError(f"method must be one of {list(_METHODS)}, got {method!r}")
        if self.delta != 0.0:
            raise ConfigError(
                f"LogisticRegression is pure epsilon-DP: delta must be 0, got {delta!r}"
            )
        self.encoding = encoding
        self.fit_intercept = bool(fit_intercept)
        self.bounds_X, self.data_norm = declared_features(
            bounds_X, data_norm, encoding, fit_intercept=self.fit_intercept
        )
        self.method = method

    @property
    def privacy_cost(self) -> PrivacyCost:
        """The ``(epsilon, 0)`` that one ``fit`` spends."""
        return PrivacyCost(epsilon=self.epsilon, delta=0.0)

    def design(self, d: int | None = None) -> Design:
        """The public preprocessing of a fit on ``d`` features (``None``: the encoding's;
        target: the Taylor ``y - 1/2``).

        Pass it as ``design``, with :meth:`response` as ``response``, to
        :func:`dp.engine.folds.regression_sums.regression_statistics_stream` to compute the
        ``exact`` statistics :meth:`fit_statistics` takes (method ``"functional"``). For
        ``"objective"`` its features and intercept define the rows :func:`normalised_rows` feeds
        the loss (:func:`dp.engine.folds.logistic_sums.logistic_sums_stream`,
        :meth:`fit_loss_sums`).
        """
        d = resolve_d(d, self.encoding)
        if self.encoding is not None:
            dom = self.encoding.domain()
        else:
            dom = feature_domain(self.bounds_X, self.data_norm, d=d)
        return Design(
            features=dom,
            target=_TAYLOR_TARGET,
            fit_intercept=self.fit_intercept,
            encoding=self.encoding,
        )

    @staticmethod
    def response(labels: FloatArray) -> FloatArray:
        """The summed target of the Taylor objective: ``y - 1/2`` for labels ``y`` in {0, 1}.

        Raises InputError on any other label (the message names no value).

        >>> LogisticRegression.response(np.array([0.0, 1.0])).tolist()
        [-0.5, 0.5]
        """
        ya = np.asarray(labels, dtype=np.float64)
        if not np.all((ya == 0.0) | (ya == 1.0)):
            raise InputError("y must contain only the labels 0 and 1")
        return np.asarray(ya - 0.5, dtype=np.float64)

    def fit_loss_sums(
        self, sums: LossSumsAt, *, d: int | None = None, rng: np.random.Generator | None = None
    ) -> LogisticFit:
        """Fit objective perturbation from the loss sums ``sums(w)``; spends :attr:`privacy_cost`.

        The same mechanism (the same Newton iterations on the same perturbed objective, the same
        release bit for bit) as the row fit of :mod:`dp.reference.frame_regression` with
        ``method="objective"``, which passes the sums over its in-memory rows. Privacy rests on
        ``sums`` being :func:`dp.regression.losssums.logistic_sums` of the rows
        :func:`normalised_rows` makes with :meth:`design` ``(d)`` and of labels in {0, 1}: the proof
        assumes ``||z|| <= 1`` and the certificate the error bound of that exact computation.

        Args:
            sums: the loss, gradient and Hessian sums at an iterate ``w``
                (:data:`dp.regression.objective.LossSumsAt`; called once per evaluated point).
            d: number of features.
            rng: ``None`` for release-grade noise; a seeded generator for tests only.

        Raises:
            ConfigError: for ``method="functional"``, which fits from sufficient statistics.
        """
        if self.method != "objective":
            raise ConfigError(
                f"fit_loss_sums needs method 'objective', got {self.method!r}: the functional "
                "mechanism fits from sufficient statistics; call fit_statistics instead"
            )
        design = self.design(d)
        obj = minimise_objective(sums, p=design.n_params, epsilon=self.epsilon, rng=rng)
        return self.objective_fit(obj, design, rng)

    def objective_fit(
        self, obj: ObjectiveRelease, design: Design, rng: np.random.Generator | None
    ) -> LogisticFit:
        """The fit objective perturbation released as ``obj`` (drawn with ``rng``) on rows of
        ``design``."""
        norm = row_norm_bound(design)
        par = obj.parameters
        info = {
            "mechanism": MECHANISM,
            "sampler": _sampler(rng),
            "epsilon_split": {
                "linear_noise": par.epsilon_noise,
                "curvature": par.epsilon_curvature,
                "output_noise": par.output.epsilon,
            },
            "ridge_on_sum": par.ridge,
            "gradient_tolerance": par.gradient_tolerance,
            "output_noise": {
                "l2_sensitivity": par.output.sensitivity,
                "scale": par.output.scale,
                "grid": par.output.grid,
            },
            "row_norm_bound": norm,
        }
        return self._publish(obj.theta / norm, design, info, released=None)

    def fit_statistics(
        self,
        exact: SufficientStatistics,
        *,
        d: int | None = None,
        rng: np.random.Generator | None = None,
    ) -> LogisticFit:
        """Fit the functional mechanism from exact statistics; spends :attr:`privacy_cost`.

        The same mechanism, and for the same statistics and seeded ``rng`` the same
        coefficients, as the row fit of :mod:`dp.reference.frame_regression` with
        ``method="functional"``. Privacy rests on ``exact`` having been
        summed from rows clipped and shifted by :meth:`design` ``(d)``, with targets
        :meth:`response` ``(labels)``: the sensitivities assume it.

        Args:
            exact: ``G`` and ``m`` of the private rows, in the frame of ``self.design(d)``.
            d: number of features.
            rng: ``None`` for release-grade noise; a seeded generator for tests only.

        Raises:
            ConfigError: for ``method="objective"``, which perturbs a loss over the rows
                themselves and has no sufficient statistics.
        """
        if self.method != "functional":
            raise ConfigError(
                f"fit_statistics needs method 'functional', got {self.method!r}: objective "
                "perturbation fits the logistic loss; call fit_loss_sums instead"
            )
        design = self.design(d)
        check_statistics(exact, design)
        rel = functional_release(exact, design, epsilon=self.epsilon, rng=rng)
        floor = eigenvalue_floor(rel.scales, design.features.dim)
        theta, trimmed = trimmed_solve(rel.noisy.gram, rel.noisy.moment, floor=floor)
        info = {
            "sampler": _sampler(rng),
            "l1_sensitivity": {k: rel.sensitivity.part(k) for k in PARTS},
            "epsilon_split": rel.epsilons,
            "laplace_scale": rel.scales,
            "eigenvalue_floor": floor,
            "eigenvalues_raised": trimmed,
        }
        # 4 theta minimises w^T G w / 8 - m^T w (module doc).
        return self._publish(4.0 * theta, design, info, released=rel.noisy)

    def _publish(
        self,
        theta: FloatArray,
        design: Design,
        info: dict[str, Any],
        *,
        released: SufficientStatistics | None,
    ) -> LogisticFit:
        coef, intercept = design.unshift(theta)
        info["feature_bounds"] = design.features.to_dict()
        if self.encoding is not None:
            info |= self.encoding.to_dict()
        return LogisticFit(
            model=self, coef=read_only(coef), intercept=intercept, released=released, info=info
        )


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class LogisticFit:
    """One fit of a :class:`LogisticRegression`: what it published and how (frozen)."""

    model: LogisticRegression
    """The configured estimator that made it."""
    coef: FloatArray
    """The log-odds slopes, one per feature (read-only)."""
    intercept: float
    released: SufficientStatistics | None
    """The noisy statistics a functional fit released and solved from (None for objective
    perturbation, which releases only its minimiser)."""
    info: Mapping[str, Any]
    """How it was made private."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable description of the published model and how it was made private."""
        m = self.model
        return {
            "model": "LogisticRegression",
            "method": m.method,
            "coefficients": [float(v) for v in self.coef],
            "intercept": float(self.intercept),
            "fit_intercept": m.fit_intercept,
            "predictions": "P(y=1) = 1 / (1 + exp(-(x . coefficients + intercept)))",
            "epsilon": m.epsilon,
            "delta": 0.0,
            "neighbours": NEIGHBOURS,
            "exact_sums": fixed_point_record(),
            **self.info,
        }


def _sampler(rng: np.random.Generator | None) -> str:
    return "opendp" if rng is None else "seeded-test-only"


def row_norm_bound(design: Design) -> float:
    """The public bound ``sqrt(R^2 + 1)`` on the norm of a shifted, scaled row with its constant
    column (``R``, the shifted domain's radius, without an intercept)."""
    bound = design.shifted_features.radius
    return float(np.hypot(bound, 1.0)) if design.fit_intercept else bound


def normalised_rows(X: FloatArray, design: Design) -> tuple[FloatArray, float]:
    """Clipped, centred, scaled rows with the constant column, divided by their public norm
    bound :func:`row_norm_bound` and quantised toward zero on the ``2^-16`` grid
    (:mod:`dp.numerics.fixedpoint`), so that every row has norm <= 1 *exactly* (objective
    perturbation's premise; checked in integers). Row by row, so a batch's rows are those of
    the whole table."""
    Z = (design.features.clip(X) - design.feature_shift) / design.feature_scale
    bound = row_norm_bound(design)
    if design.fit_intercept:
        Z = np.hstack([Z, np.ones((Z.shape[0], 1))])
    # Guard against float rounding pushing a clipped row a hair past the bound; truncation on
    # the grid then absorbs any last ulp (the integer squared norm is at most 2^32).
    norms = np.linalg.norm(Z, axis=1)
    V = quantise(Z / np.maximum(bound, norms)[:, None], 1.0)
    check_norms(V)
    return np.ascontiguousarray(V / ONE, dtype=np.float64), bound
