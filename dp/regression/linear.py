"""Differentially private linear regression with a scikit-learn-like interface.

Three methods share one pipeline (clip into declared bounds, shift by public midpoints, sum the
sufficient statistics, perturb, solve a bounded problem, un-shift):

* ``"auto"`` (default): the functional mechanism, or AdaSSP when ``delta > 0`` and it puts less
  noise on the statistics -- chosen from the declaration alone, before any data is read -- then
  a solve that shrinks the slopes towards the noisy mean (:mod:`dp.regression.auto`).
* ``"functional"`` (pure epsilon-DP): the functional mechanism with derived L1
  sensitivities (:mod:`dp.regression.functional`), solved with a shrunk, floored covariance
  (:mod:`dp.regression.shrinkage`).
* ``"adassp"`` (``(epsilon, delta)``-DP): AdaSSP, Gaussian noise with an adaptive private ridge
  (:mod:`dp.regression.adassp`).

Features are numeric columns in a declared box or ball, or declared columns encoded by a
:class:`~dp.regression.encoding.FeatureEncoding` (category columns one-hot, coefficients named
``column=category``).

Neighbouring datasets differ by adding or removing one record (unbounded DP, the dppub-wide
convention): the row count ``n`` is private, released with noise as the corner of the quadratic
form, and only that noisy value is used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dppub.dp.budget import PrivacyCost, zcdp_of_gaussian, zcdp_of_pure
from dppub.dp.calibration import gaussian_sigma
from dppub.dp.errors import ConfigError
from dppub.dp.numerics.domains import (
    BoundLike,
    FeatureDomain,
    TargetDomain,
    feature_domain,
    read_only,
)
from dppub.dp.numerics.fixedpoint import fixed_point_record
from dppub.dp.regression.adassp import adassp_fit, adassp_release
from dppub.dp.regression.auto import (
    INTERCEPT_SHARE,
    NoiseVariances,
    ReleaseChoice,
    auto_solve,
    choose_release,
    variance_floor,
)
from dppub.dp.regression.encoding import FeatureEncoding, declared_features, resolve_d
from dppub.dp.regression.functional import (
    SHRUNK_QUADRATIC_WEIGHT,
    eigenvalue_floor,
    functional_release,
)
from dppub.dp.regression.sensitivity import NEIGHBOURS, PARTS, BlockSensitivity
from dppub.dp.regression.shrinkage import shrunk_solve
from dppub.dp.regression.statistics import (
    Design,
    SufficientStatistics,
    check_statistics,
)
from dppub.dp.validation import check_delta, check_epsilon

__all__ = ["LinearFit", "LinearRegression"]

FloatArray = npt.NDArray[np.float64]
_METHODS = ("auto", "functional", "adassp")


class LinearRegression:
    """Epsilon-DP (or ``(epsilon, delta)``-DP) least squares on declared bounds.

    Args:
        epsilon: total privacy parameter of one ``fit``.
        bounds_X: per-feature box ``(lo, hi)``, each a scalar or a length-``d`` sequence.
        data_norm: L2 bound on each feature vector.
        encoding: declared feature columns (numeric and category); ``X`` is then
            ``encoding.encode(frame)``. Exactly one of ``bounds_X``/``data_norm``/``encoding``.
        bounds_y: declared target interval ``(lo, hi)``; required.
        fit_intercept: fit a constant term (must match ``encoding``'s reference levels).
        method: ``"auto"`` (default, :mod:`dp.regression.auto`), ``"functional"`` (pure
            epsilon, Zhang et al. 2012) or ``"adassp"`` (Wang 2018).
        delta: 0 for ``"functional"``; in ``(0, 1)`` for ``"adassp"``; either for ``"auto"``
            (AdaSSP is a candidate only when ``delta > 0``).

    Rows are clipped into the declared box/ball and targets into ``bounds_y`` on every fit, with
    or without an intercept; predictions are clipped to ``bounds_y`` (the declared range of the
    target, so clipping never increases a squared error).

    The estimator is configuration only: a fit returns a frozen :class:`LinearFit` and changes
    nothing here, so one configured estimator (in a cached plan) serves any number of fits.
    Fitting on rows in memory is reference code (:mod:`dp.reference.frame_regression`).
    """

    def __init__(
        self,
        epsilon: float,
        *,
        bounds_X: tuple[BoundLike, BoundLike] | None = None,
        data_norm: float | None = None,
        encoding: FeatureEncoding | None = None,
        bounds_y: Sequence[float] | None = None,
        fit_intercept: bool = True,
        method: str = "auto",
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
        self.encoding = encoding
        self.fit_intercept = bool(fit_intercept)
        self.bounds_X, self.data_norm = declared_features(
            bounds_X, data_norm, encoding, fit_intercept=self.fit_intercept
        )
        self.target = TargetDomain.from_bounds(bounds_y)
        self.method = method

    @property
    def privacy_cost(self) -> PrivacyCost:
        """The ``(epsilon, delta)`` that one ``fit`` spends."""
        return PrivacyCost(epsilon=self.epsilon, delta=self.delta)

    @property
    def zcdp_rho(self) -> float:
        """The fit's cost as rho-zCDP, for tighter accounting of Gaussian releases.

        AdaSSP makes three analytic-Gaussian releases at ``(epsilon/3, delta/3)`` each; a
        pure-epsilon release costs ``epsilon^2 / 2``. ``"auto"`` before the number of features
        is known (scalar bounds): the larger of the two.
        """
        return self.zcdp_rho_at(self._declared_d())

    def zcdp_rho_at(self, d: int | None) -> float:
        """:attr:`zcdp_rho` of a fit on ``d`` features (``None``: not known)."""
        pure = zcdp_of_pure(self.epsilon)
        if self.delta == 0.0:
            return pure
        s = gaussian_sigma(l2_sensitivity=1.0, epsilon=self.epsilon / 3, delta=self.delta / 3)
        gauss = 3.0 * zcdp_of_gaussian(sigma_over_sensitivity=s)
        if self.method != "auto":
            return gauss if self.method == "adassp" else pure
        if d is None:
            return max(pure, gauss)
        return gauss if self.release_choice(d).release == "adassp" else pure

    def _declared_d(self) -> int | None:
        if self.encoding is not None:
            return self.encoding.dim
        if self.bounds_X is not None and np.ndim(self.bounds_X[0]) == 1:
            return len(np.asarray(self.bounds_X[0]))
        return None

    def _feature_domain(self, d: int) -> FeatureDomain:
        if self.encoding is not None:
            return self.encoding.domain()
        return feature_domain(self.bounds_X, self.data_norm, d=d)

    def design(self, d: int | None = None) -> Design:
        """The public preprocessing of a fit on ``d`` features (``None``: the encoding's).

        Pass it as ``design`` to
        :func:`dp.engine.folds.regression_sums.regression_statistics_stream` (identity
        ``response``) to compute the ``exact`` statistics :meth:`fit_statistics` takes.
        """
        d = resolve_d(d, self.encoding)
        return Design(
            features=self._feature_domain(d),
            target=self.target,
            fit_intercept=self.fit_intercept,
            encoding=self.encoding,
        )

    def release_choice(self, d: int | None = None) -> ReleaseChoice:
        """The release a ``fit`` on ``d`` features makes: for ``"auto"``, chosen from the
        declaration, epsilon and delta only (:func:`dp.regression.auto.choose_release`)."""
        if self.method != "auto":
            return ReleaseChoice(release=self.method, risk={})
        return choose_release(self.design(d), epsilon=self.epsilon, delta=self.delta)

    def plan(self, d: int | None = None) -> dict[str, Any]:
        """What ``dppub plan`` shows: the method, the release it makes and why (no data read)."""
        choice = self.release_choice(d)
        out: dict[str, Any] = {"method": self.method, **choice.to_dict()}
        if self.method == "auto":
            out["solve"] = "shrunk spectrum, slopes shrunk towards the noisy mean (post-processing)"
        if self.encoding is not None:
            out["features"] = list(self.encoding.names)
        return out

    def fit_statistics(
        self,
        exact: SufficientStatistics,
        *,
        d: int | None = None,
        rng: np.random.Generator | None = None,
    ) -> LinearFit:
        """Fit from exact sufficient statistics; spends :attr:`privacy_cost`.

        The same mechanism, and for the same statistics and seeded ``rng`` the same coefficients, as
        the row fit of :mod:`dp.reference.frame_regression`. Privacy rests on ``exact`` having been
        summed from rows clipped and shifted by :meth:`design` ``(d)``
        (:func:`~dp.regression.statistics.exact_moments` or the streaming engine given that
        design): the sensitivities assume it.

        Args:
            exact: ``G`` and ``m`` of the private rows, in the frame of ``self.design(d)``.
            d: number of features (``None``: the encoding's).
            rng: ``None`` for release-grade noise; a seeded generator for tests only.
        """
        design = self.design(d)
        check_statistics(exact, design)
        info: dict[str, Any] = {"sampler": "opendp" if rng is None else "seeded-test-only"}
        if self.method == "auto":
            theta, released, more = self._fit_auto(exact, design, rng)
            info |= more
        elif self.method == "functional":
            rel = functional_release(
                exact,
                design,
                epsilon=self.epsilon,
                rng=rng,
                quadratic_weight=SHRUNK_QUADRATIC_WEIGHT,
            )
            floor = eigenvalue_floor(rel.scales, design.features.dim)
            released = rel.noisy
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
            theta, trimmed, released = ada.theta, ada.trimmed, ada.noisy
            info |= {
                "l2_sensitivity": _parts_dict(ada.sensitivity),
                "epsilon_split": "thirds: lambda_min, gram, moment",
                "gaussian_sigma": {"gram": ada.gram_sigma, "moment": ada.moment_sigma},
                "eigenvalue_floor": ada.gram_sigma,
                "eigenvalues_raised": trimmed,
                "ridge": ada.ridge,
            }
        coef, intercept = design.unshift(theta)
        info["feature_bounds"] = design.features.to_dict()
        if self.encoding is not None:
            info |= self.encoding.to_dict()
        return LinearFit(
            model=self, coef=read_only(coef), intercept=intercept, released=released, info=info
        )

    def _fit_auto(
        self, exact: SufficientStatistics, design: Design, rng: np.random.Generator | None
    ) -> tuple[FloatArray, SufficientStatistics, dict[str, Any]]:
        choice = choose_release(design, epsilon=self.epsilon, delta=self.delta)
        d = design.features.dim
        if choice.release == "functional":
            rel = functional_release(
                exact,
                design,
                epsilon=self.epsilon,
                rng=rng,
                quadratic_weight=SHRUNK_QUADRATIC_WEIGHT,
                intercept_share=INTERCEPT_SHARE,
            )
            noisy = rel.noisy
            var = NoiseVariances(**{k: 2.0 * rel.scales[k] ** 2 for k in PARTS})
            info: dict[str, Any] = {
                "l1_sensitivity": _parts_dict(rel.sensitivity),
                "epsilon_split": rel.epsilons,
                "laplace_scale": rel.scales,
            }
        else:
            ada = adassp_release(exact, design, epsilon=self.epsilon, delta=self.delta, rng=rng)
            noisy = ada.noisy
            sg, sm, c = ada.gram_sigma, ada.moment_sigma, ada.count_weight
            var = NoiseVariances(
                quadratic=sg**2,
                feature_sum=sg**2,
                count=(sg / c) ** 2,
                cross=sm**2,
                target_sum=sm**2,
            )
            info = {
                "l2_sensitivity": _parts_dict(ada.sensitivity),
                "epsilon_split": "thirds: lambda_min (unused by this solve), gram, moment",
                "gaussian_sigma": {"gram": sg, "moment": sm},
            }
        sol = auto_solve(noisy, design, var, floor=variance_floor(var, d))
        info |= {
            **choice.to_dict(),
            "eigenvalue_floor": sol.floor,
            "spectrum_shrinkage": sol.rho,
            "mean_shrinkage": sol.alpha,
        }
        return sol.theta, noisy, info


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class LinearFit:
    """One fit of a :class:`LinearRegression`: what it published and how (frozen)."""

    model: LinearRegression
    """The configured estimator that made it."""
    coef: FloatArray
    """The slopes, one per feature (read-only)."""
    intercept: float
    released: SufficientStatistics
    """The noisy statistics the fit released and solved from (post-processing input, e.g.
    :func:`dp.regression.uncertainty.coefficient_table`)."""
    info: Mapping[str, Any]
    """How it was made private (sensitivities, noise scales, the solve)."""

    @property
    def zcdp_rho(self) -> float:
        """The fit's cost as rho-zCDP (:attr:`LinearRegression.zcdp_rho`, on its features)."""
        return self.model.zcdp_rho_at(int(self.coef.shape[0]))

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable description of the published model and how it was made private."""
        m = self.model
        return {
            "model": "LinearRegression",
            "method": m.method,
            "coefficients": [float(v) for v in self.coef],
            "intercept": float(self.intercept),
            "fit_intercept": m.fit_intercept,
            "bounds_y": [m.target.lower, m.target.upper],
            "predictions": "x . coefficients + intercept, clipped to bounds_y",
            "epsilon": m.epsilon,
            "delta": m.delta,
            "neighbours": NEIGHBOURS,
            "exact_sums": fixed_point_record(),
            **self.info,
        }


def _parts_dict(sens: BlockSensitivity) -> dict[str, float]:
    return {k: sens.part(k) for k in PARTS}
