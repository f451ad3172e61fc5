"""The functional mechanism for least squares (Zhang et al., VLDB 2012), with spectral trimming.

Privacy. The objective ``theta^T G theta - 2 m^T theta + const`` is determined by the five parts
of the sufficient statistics (:meth:`SufficientStatistics.parts`): the upper triangle of
``sum x x^T`` and ``sum y x``, and with an intercept ``sum x``, ``sum y`` and the row count ``n``
(the corner of ``G``). Neighbours add or remove one record, so ``n`` is private: it is released
like every other coefficient, and only its noisy value is used downstream. Each part gets Laplace
noise scaled to its own add/remove L1 sensitivity
(:func:`dp.regression.sensitivity.l1_sensitivity`) over its own share ``epsilon_k`` with
``sum_k epsilon_k = epsilon``. With an intercept, ``n`` and ``sum y`` are released first and their
noisy values steer the split of the rest; choosing later shares from earlier DP outputs, with a
fixed total, is covered by basic sequential composition for pure DP (Dwork & Roth 2014,
Thm 3.16; as a privacy filter, Rogers et al. 2016). The whole release is therefore epsilon-DP,
and everything after it (trimming, solving, un-shifting, clipping predictions) is
post-processing. Noise goes on each unordered pair once and is mirrored (diffprivlib draws both
triangles of the matrix, paying for each entry twice).

Budget split. To first order the excess risk is ``|| G^-1 (e_m - E theta) ||^2`` in the feature
covariance metric. Per unit of noise variance the parts weigh ``||w||^2 T`` (quadratic), ``T``
(cross), ``ybar^2 T + ||w||^2`` (feature sum: it enters the centred moment as ``-e_x ybar``),
``1`` (target sum: it moves only the intercept) and ``w_0^2`` (count: an error ``e`` in the
corner moves the intercept as an error ``-e w_0`` in ``sum y`` would), with
``T = tr(Sigma^-1) >= d^2 / R^2``. Minimising ``sum_k a_k^2 / epsilon_k^2`` under
``sum_k epsilon_k = epsilon`` gives ``epsilon_k`` proportional to ``a_k^(2/3)``. Public proxies:
``||w|| = B / R`` (the largest coefficient norm whose predictions on the declared domain stay in
the declared target range, ``B = max |y - shift|``), ``T = d^2 / R^2``, and for ``ybar`` and
``w_0`` first the worst case ``B``, then ``|noisy sum y| / noisy n`` padded by two noise standard
deviations. The count therefore gets the same small share as ``sum y`` (about 2.7% of epsilon
on the unit ball at ``d = 10``, 1.3% at ``d = 30``): its noise is ``O(1 / epsilon)`` against
``n`` rows, a negligible relative error. That analysis assumes the noisy ``G`` is inverted as
released; :class:`~dp.regression.LinearRegression` shrinks its spectrum first
(:mod:`dp.regression.shrinkage`), which damps the quadratic part's noise, and so weighs that part
by :data:`SHRUNK_QUADRATIC_WEIGHT` (``quadratic_weight``); the split stays a function of public
quantities and earlier noisy releases only.

Boundedness. The noisy ``G`` can be indefinite, and then the objective has no minimum. We
eigendecompose it and raise every eigenvalue below a floor ``tau`` to ``tau`` (spectral trimming,
Zhang et al. §6, raising rather than dropping): ``tau`` is *half* the typical spectral norm of
the noise on the feature block, ``FLOOR_FRACTION * (2 sqrt(2 d) b_Q + sqrt(2 d) b_x)`` for iid
Laplace entries of scales ``b_Q`` (quadratic) and ``b_x`` (feature sums) (Bai-Yin), a function of
public quantities only. The full norm is the noise along its *worst* direction; along a typical
direction ``v^T E v`` is ``O(b_Q)``, and raising every eigenvalue to the full edge over-shrinks.
The fraction 1/2 was chosen by measurement (``bench/regression.py``, 21 seeds, against the
full edge, with the trimmed solve below, which ``LinearRegression`` used before
:mod:`dp.regression.shrinkage` and the functional logistic regression still uses): at
``d = 30``, ``epsilon = 0.1`` the median MSE ratio drops from 2.76 to 2.03 (sigma = 0.1) and
from 1.44 to 1.25 (sigma = 0.2), randhie at ``epsilon = 1`` from 1.35 to 1.11; ``d = 30``,
``epsilon = 0.5`` moves from 1.12 to 1.14 and diabetes at ``epsilon = 0.1`` from 2.32 to 2.34;
the ``d = 10`` cells are unchanged (the floor does not bind there). 0.3 was no better.
(The corner's noise is left out: the curvature along the intercept is the count itself, far
above its own noise; a noisy count that is small or negative is raised to ``tau`` like any other
eigenvalue.) Directions whose curvature is far above the noise are untouched (no ridge bias at
large ``n``), directions drowned in noise are shrunk to zero, and
``||theta|| <= ||m_noisy|| / tau`` is always finite.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dppub.dp.errors import InvariantError
from dppub.dp.mechanisms import laplace
from dppub.dp.regression.sensitivity import PARTS, BlockSensitivity, l1_sensitivity
from dppub.dp.regression.statistics import Design, SufficientStatistics

__all__ = [
    "SHRUNK_QUADRATIC_WEIGHT",
    "FunctionalRelease",
    "budget_shares",
    "eigenvalue_floor",
    "functional_release",
    "trimmed_solve",
]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class FunctionalRelease:
    """Everything the functional mechanism released, and the public parameters it used."""

    noisy: SufficientStatistics
    """The perturbed statistics (the only data-dependent output)."""
    sensitivity: BlockSensitivity
    """L1 sensitivity of each part."""
    epsilons: dict[str, float]
    """Share of epsilon spent on each part (0 for parts not released); they sum to epsilon."""
    scales: dict[str, float]
    """Laplace scale of each part (0 for parts not released)."""


SHRUNK_QUADRATIC_WEIGHT = 0.25
"""Weight on the quadratic part's risk term when the solve shrinks the noisy spectrum.

Chosen by measurement (the data of ``bench/regression.py``, 6-20 seeds, solved by
:mod:`dp.regression.shrinkage` with the floor at ``tau / 2``; MSE / OLS medians at weights 1 /
0.4 / 0.25 / 0.125): ball ``d = 30``, ``epsilon = 0.1``: 1.96 /
1.50 / 1.39 / 1.32; ``d = 10``, ``epsilon = 0.1``: 1.04 / 1.03 / 1.02 / 1.02; diabetes
``epsilon = 1``: 1.61 / 1.61 / 1.64 / 1.73; randhie ``epsilon = 0.1``: 1.74 / 1.44 / 1.36 / 1.30
(randhie ``epsilon = 1``: 1.05 / 1.03 / 1.02 / 1.02). 0.25 keeps enough of ``Q`` for
anisotropic designs (shrinkage weight ``rho`` 0.65 / 0.48 / 0.29 on randhie at ``epsilon = 0.1``
and weights 1 / 0.5 / 0.25).
"""


def budget_shares(
    sens: BlockSensitivity,
    design: Design,
    *,
    ybar: float | None,
    quadratic_weight: float = 1.0,
    intercept_share: float = 0.0,
) -> dict[str, float]:
    """Fractions of epsilon per part, minimising the first-order excess risk (module doc).

    ``ybar`` is a public proxy for the mean shifted target (``None``: its worst case); it also
    stands in for the shifted intercept ``w_0``. ``quadratic_weight`` scales the quadratic
    part's risk term (1: the noisy ``G`` is inverted as released). ``intercept_share`` is a
    public floor on the shares of the count and of the target sum each (with an intercept):
    when the slopes are shrunk towards zero (:mod:`dp.regression.auto`) the noisy mean is the
    model, and the first-order split, which assumes the slopes are kept, starves it.

    >>> from dppub.dp.numerics.domains import FeatureDomain, TargetDomain
    >>> dsg = Design(features=FeatureDomain.ball(1.0, d=10),
    ...              target=TargetDomain(lower=-1.0, upper=1.0), fit_intercept=True)
    >>> s = l1_sensitivity(dsg.shifted_features, dsg.shifted_target, fit_intercept=True)
    >>> {k: round(v, 3) for k, v in budget_shares(s, dsg, ybar=None).items()}
    {'quadratic': 0.396, 'feature_sum': 0.275, 'count': 0.027, 'cross': 0.274, 'target_sum': 0.027}
    >>> shares = budget_shares(s, dsg, ybar=None, quadratic_weight=SHRUNK_QUADRATIC_WEIGHT)
    >>> {k: round(v, 3) for k, v in shares.items()}
    {'quadratic': 0.207, 'feature_sum': 0.361, 'count': 0.036, 'cross': 0.36, 'target_sum': 0.036}
    """
    d, r = design.features.dim, design.shifted_features.radius
    t = design.shifted_target
    b = max(abs(t.lower), abs(t.upper))
    w = b / r
    yb = b if ybar is None else min(b, abs(ybar))
    weights = {
        "quadratic": sens.quadratic * w * quadratic_weight,
        "cross": sens.cross,
        "feature_sum": sens.feature_sum * math.sqrt(yb * yb + (b / d) ** 2),
        "target_sum": sens.target_sum * r / d,
        "count": sens.count * b * r / d,
    }
    if not design.fit_intercept:
        weights["feature_sum"] = weights["target_sum"] = weights["count"] = 0.0
    powered = {k: weights[k] ** (2.0 / 3.0) for k in PARTS}
    total = sum(powered.values())
    shares = {k: v / total for k, v in powered.items()}
    if not design.fit_intercept or intercept_share <= 0.0:
        return shares
    fixed = {k: max(shares[k], intercept_share) for k in ("count", "target_sum")}
    rest = [k for k in PARTS if k not in fixed]
    scale = (1.0 - sum(fixed.values())) / sum(shares[k] for k in rest)
    return {k: fixed[k] if k in fixed else shares[k] * scale for k in PARTS}


def functional_release(
    exact: SufficientStatistics,
    design: Design,
    *,
    epsilon: float,
    rng: np.random.Generator | None = None,
    quadratic_weight: float = 1.0,
    intercept_share: float = 0.0,
) -> FunctionalRelease:
    """Perturb the five parts with Laplace noise; epsilon-DP in total (add/remove neighbours).

    Args:
        exact: statistics of the clipped, shifted rows
            (:func:`~dp.regression.statistics.exact_moments`).
        design: the public design the statistics were computed under.
        epsilon: total privacy parameter of the release.
        rng: ``None`` for release-grade OpenDP noise; a seeded generator in tests only.
        quadratic_weight: public weight of the quadratic part in the split
            (:func:`budget_shares`); it moves shares only, never a sensitivity.
        intercept_share: public floor on the count's and target sum's shares
            (:func:`budget_shares`).
    """
    sens = l1_sensitivity(
        design.shifted_features, design.shifted_target, fit_intercept=exact.fit_intercept
    )
    exact_parts = exact.parts()
    noisy: dict[str, FloatArray] = {k: np.zeros(0) for k in PARTS}
    eps = dict.fromkeys(PARTS, 0.0)
    scales = dict.fromkeys(PARTS, 0.0)

    def release(part: str, share: float) -> None:
        eps[part] = share
        scales[part] = sens.part(part) / share
        noisy[part] = laplace(
            exact_parts[part], sensitivity=sens.part(part), epsilon=share, rng=rng
        )

    remaining, ybar = epsilon, None
    if exact.fit_intercept:
        first = budget_shares(
            sens,
            design,
            ybar=None,
            quadratic_weight=quadratic_weight,
            intercept_share=intercept_share,
        )
        for part in ("count", "target_sum"):
            release(part, epsilon * first[part])
            remaining -= eps[part]
        # Post-processing of the two noisy releases: a proxy for |mean y| that errs on the
        # large side (two noise standard deviations on the sum, two below on the count).
        pad = 2.0 * math.sqrt(2.0)
        n_low = max(1.0, float(noisy["count"][0]) - pad * scales["count"])
        ybar = (abs(float(noisy["target_sum"][0])) + pad * scales["target_sum"]) / n_low
    shares = budget_shares(
        sens, design, ybar=ybar, quadratic_weight=quadratic_weight, intercept_share=intercept_share
    )
    rest = [k for k in PARTS if k not in ("count", "target_sum") and shares[k] > 0.0]
    norm = sum(shares[k] for k in rest)
    for k in rest:
        release(k, remaining * shares[k] / norm)
    if not math.isclose(sum(eps.values()), epsilon, rel_tol=1e-12):
        raise InvariantError(f"epsilon shares sum to {sum(eps.values())!r}, not {epsilon!r}")
    return FunctionalRelease(
        noisy=exact.with_parts(noisy), sensitivity=sens, epsilons=eps, scales=scales
    )


FLOOR_FRACTION = 0.5
"""Fraction of the noise's spectral norm used as the trimming floor (module doc)."""


def eigenvalue_floor(scales: dict[str, float], d: int) -> float:
    """The trimming floor ``tau`` from the public Laplace scales (module doc).

    >>> eigenvalue_floor({"quadratic": 1.0, "feature_sum": 0.0}, 2)
    2.0
    """
    root = math.sqrt(2.0 * d)
    return FLOOR_FRACTION * (2.0 * root * scales["quadratic"] + root * scales["feature_sum"])


def trimmed_solve(gram: FloatArray, moment: FloatArray, *, floor: float) -> tuple[FloatArray, int]:
    """Minimise ``w^T G w - 2 m^T w`` after raising the eigenvalues of ``G`` to at least ``floor``.

    Returns the minimiser and the number of eigenvalues that were raised.

    >>> w, k = trimmed_solve(np.diag([4.0, -1.0]), np.array([4.0, 1.0]), floor=2.0)
    >>> w.tolist(), k
    ([1.0, 0.5], 1)
    """
    if not floor > 0.0:
        raise InvariantError(f"the eigenvalue floor must be > 0, got {floor!r}")
    mu, vecs = np.linalg.eigh((gram + gram.T) / 2.0)
    raised = mu < floor
    theta = vecs @ ((vecs.T @ moment) / np.where(raised, floor, mu))
    if not np.all(np.isfinite(theta)):
        raise InvariantError("trimmed least squares produced a non-finite solution")
    return np.asarray(theta, dtype=np.float64), int(raised.sum())
