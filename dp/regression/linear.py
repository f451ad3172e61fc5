"""Differentially private linear regression with a scikit-learn-like interface.

Two methods share one pipeline (clip into declared bounds, shift by public midpoints, sum the
sufficient statistics, perturb, solve a bounded problem, un-shift):

* ``"functional"`` (default, pure epsilon-DP): the functional mechanism with derived L1
  sensitivities (:mod:`dp.regression.functional`), solved with a shrunk, floored covariance
  (:mod:`dp.regression.shrinkage`).
* ``"adassp"`` (``(epsilon, delta)``-DP): AdaSSP, Gaussian noise with an adaptive private ridge
  (:mod:`dp.regression.adassp`).

Neighbouring datasets differ by adding or removing one record (unbounded DP, the dppub-wide
convention): the row count ``n`` is private, released with noise as the corner of the quadratic
form, and only that noisy value is used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from dp.budget import PrivacyCost, zcdp_of_gaussian, zcdp_of_pure
from dp.calibration import gaussian_sigma
from dp.errors import ConfigError
from dp.regression.adassp import adassp_fit
from dp.regression.domain import (
    BoundLike,
    FeatureDomain,
    TargetDomain,
    check_fitted,
    check_n_features,
    check_training_data,
    declared_feature_bounds,
    design_matrix,
    feature_domain,
)
from dp.regression.functional import (
    SHRUNK_QUADRATIC_WEIGHT,
    eigenvalue_floor,
    functional_release,
)
from dp.regression.sensitivity import NEIGHBOURS, PARTS, BlockSensitivity
from dp.regression.shrinkage import shrunk_solve
from dp.regression.statistics import (
    Design,
    SufficientStatistics,
    check_statistics,
    sufficient_statistics,
)
from dp.validation import check_delta, check_epsilon

__all__ = ["LinearRegression"]

FloatArray = npt.NDArray[np.float64]
_METHODS = ("functional", "adassp")


class LinearRegression:
    """Epsilon-DP (or ``(epsilon, delta)``-DP) least squares on declared bounds.

    Args:
        epsilon: total privacy parameter of one ``fit``.
        bounds_X: per-feature box ``(lo, hi)``, each a scalar or a length-``d`` sequence.
        data_norm: L2 bound on each feature vector. Exactly one of ``bounds_X``/``data_norm``.
        bounds_y: declared target interval ``(lo, hi)``; required.
        fit_intercept: fit a constant term.
        method: ``"functional"`` (pure epsilon, Zhang et al. 2012) or ``"adassp"`` (Wang 2018).
        delta: 0 for ``"functional"``; in ``(0, 1)`` for ``"adassp"``.

    Rows are clipped into the declared box/ball and targets into ``bounds_y`` on every fit, with
    or without an intercept; predictions are clipped to ``bounds_y`` (the declared range of the
    target, so clipping never increases a squared error).

    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(20_000, 2)); y = np.clip(X @ [0.5, -0.25], -1, 1)
    >>> model = LinearRegression(5.0, bounds_X=(-1, 1), bounds_y=(-1, 1)).fit(X, y, rng=rng)
    >>> bool(np.allclose(model.coef_, [0.5, -0.25], atol=0.05)), model.privacy_cost
    (True, PrivacyCost(epsilon=5.0, delta=0.0))
    """

    def __init__(
        self,
        epsilon: float,
        *,
        bounds_X: tuple[BoundLike, BoundLike] | None = None,
        data_norm: float | None = None,
        bounds_y: Sequence[float] | None = None,
        fit_intercept: bool = True,
        method: str = "functional",
        delta: float = 0.0,
    ) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.delta = check_delta(delta)
        if method not in _METHODS:
            raise ConfigError(f"method must be one of {list(_METHODS)}, got {method!r}")
        if method == "functional" and self.delta != 0.0:
            raise ConfigError(
                f"method 'functional' is pure epsilon-DP: delta must be 0, got {delta!r}"
            )
        if method == "adassp" and self.delta == 0.0:
            raise ConfigError("method 'adassp' needs delta > 0, got 0.0")
        self.bounds_X, self.data_norm = declared_feature_bounds(bounds_X, data_norm)
        self.target = TargetDomain.from_bounds(bounds_y)
        self.fit_intercept = bool(fit_intercept)
        self.method = method
        self._fitted: dict[str, Any] | None = None
        self.coef_: FloatArray = np.zeros(0)
        self.intercept_: float = 0.0

    @property
    def privacy_cost(self) -> PrivacyCost:
        """The ``(epsilon, delta)`` that one ``fit`` spends."""
        return PrivacyCost(epsilon=self.epsilon, delta=self.delta)

    @property
    def zcdp_rho(self) -> float:
        """The fit's cost as rho-zCDP, for tighter accounting of Gaussian releases.

        AdaSSP makes three analytic-Gaussian releases at ``(epsilon/3, delta/3)`` each; a
        pure-epsilon method costs ``epsilon^2 / 2``.
        """
        if self.method != "adassp":
            return zcdp_of_pure(self.epsilon)
        s = gaussian_sigma(l2_sensitivity=1.0, epsilon=self.epsilon / 3, delta=self.delta / 3)
        return 3.0 * zcdp_of_gaussian(sigma_over_sensitivity=s)

    def _feature_domain(self, d: int) -> FeatureDomain:
        return feature_domain(self.bounds_X, self.data_norm, d=d)

    def design(self, d: int) -> Design:
        """The public preprocessing of a fit on ``d`` features.

        Pass it as ``design`` to :func:`dp.engine.regression.regression_statistics_stream`
        (identity ``response``) to compute the ``exact`` statistics :meth:`fit_statistics` takes.
        """
        return Design(
            features=self._feature_domain(d), target=self.target, fit_intercept=self.fit_intercept
        )

    def fit(
        self, X: object, y: object, *, rng: np.random.Generator | None = None
    ) -> LinearRegression:
        """Fit on private data; spends :attr:`privacy_cost`.

        Args:
            X: features, shape ``(n, d)``.
            y: targets, shape ``(n,)``.
            rng: ``None`` for release-grade noise; a seeded generator for tests only.
        """
        Xa, ya = check_training_data(X, y)
        d = Xa.shape[1]
        return self.fit_statistics(sufficient_statistics(Xa, ya, self.design(d)), d=d, rng=rng)

    def fit_statistics(
        self, exact: SufficientStatistics, *, d: int, rng: np.random.Generator | None = None
    ) -> LinearRegression:
        """Fit from exact sufficient statistics instead of rows; spends :attr:`privacy_cost`.

        Same mechanism, and for the same statistics and seeded ``rng`` the same coefficients,
        as :meth:`fit`. Privacy rests on ``exact`` having been summed from rows clipped and
        shifted by :meth:`design` ``(d)`` (:func:`~dp.regression.statistics.sufficient_statistics`
        or the streaming engine given that design): the sensitivities assume it.

        Args:
            exact: ``G`` and ``m`` of the private rows, in the frame of ``self.design(d)``.
            d: number of features.
            rng: ``None`` for release-grade noise; a seeded generator for tests only.
        """
        design = self.design(check_n_features(d))
        check_statistics(exact, design)
        info: dict[str, Any] = {"sampler": "opendp" if rng is None else "seeded-test-only"}
        if self.method == "functional":
            rel = functional_release(
                exact,
                design,
                epsilon=self.epsilon,
                rng=rng,
                quadratic_weight=SHRUNK_QUADRATIC_WEIGHT,
            )
            floor = eigenvalue_floor(rel.scales, design.features.dim)
            theta, spec = shrunk_solve(
                rel.noisy, quadratic_scale=rel.scales["quadratic"], floor=floor
            )
            info |= {
                "l1_sensitivity": _parts_dict(rel.sensitivity),
                "epsilon_split": rel.epsilons,
                "laplace_scale": rel.scales,
                "eigenvalue_floor": floor,
                "eigenvalues_raised": spec.raised,
                "spectrum_shrinkage": spec.rho,
                "ridge": 0.0,
            }
        else:
            ada = adassp_fit(exact, design, epsilon=self.epsilon, delta=self.delta, rng=rng)
            theta, trimmed = ada.theta, ada.trimmed
            info |= {
                "l2_sensitivity": _parts_dict(ada.sensitivity),
                "epsilon_split": "thirds: lambda_min, gram, moment",
                "gaussian_sigma": {"gram": ada.gram_sigma, "moment": ada.moment_sigma},
                "eigenvalue_floor": ada.gram_sigma,
                "eigenvalues_raised": trimmed,
                "ridge": ada.ridge,
            }
        coef, intercept = design.unshift(theta)
        self.coef_, self.intercept_ = coef, intercept
        info["feature_bounds"] = design.features.to_dict()
        self._fitted = info
        return self

    def predict(self, X: object) -> FloatArray:
        """Predictions ``X coef + intercept``, clipped to ``bounds_y``."""
        check_fitted(self._fitted, "LinearRegression")
        Xa = design_matrix(X, self.coef_.shape[0])
        return self.target.clip(Xa @ self.coef_ + self.intercept_)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable description of the published model and how it was made private."""
        fitted = check_fitted(self._fitted, "LinearRegression")
        return {
            "model": "LinearRegression",
            "method": self.method,
            "coefficients": [float(v) for v in self.coef_],
            "intercept": float(self.intercept_),
            "fit_intercept": self.fit_intercept,
            "bounds_y": [self.target.lower, self.target.upper],
            "predictions": "x . coefficients + intercept, clipped to bounds_y",
            "epsilon": self.epsilon,
            "delta": self.delta,
            "neighbours": NEIGHBOURS,
            **fitted,
        }


def _parts_dict(sens: BlockSensitivity) -> dict[str, float]:
    return {k: sens.part(k) for k in PARTS}
