"""AdaSSP: sufficient-statistics perturbation with an adaptive, privately chosen ridge.

Wang, "Revisiting differentially private linear regression: optimal and adaptive prediction &
estimation in unbounded domain", UAI 2018, Algorithm 2. Three Gaussian releases, each
``(epsilon/3, delta/3)``-DP, so ``(epsilon, delta)`` in total by sequential composition:

1. ``lambda_min(G)`` of the gram matrix. Adding or removing a row changes ``G`` by ``+-z z^T``,
   whose eigenvalues lie in ``[0, ||z||^2]`` (or its negative), so by Weyl's inequality
   ``lambda_min`` moves by at most ``R_z^2`` (``R_z^2 = R^2 + 1`` with the constant column). In
   float64: the statistics' rounding moves neighbours' matrices apart by at most
   ``A R_z^2`` more in Frobenius norm (``A = 2^-16``, :mod:`dp.regression.sensitivity`: per
   touched coordinate ``A c_j c_l``), and the eigenvalue is computed to within ``A R_z^2`` of
   the float matrix's exact one (:func:`dp.regression.eigen.certified_min_eigenvalue`), so the
   sensitivity is ``R_z^2 (1 + 3 A)``. The released value is shifted down by
   ``sigma * z_{0.95}`` so that it underestimates the truth with probability 0.95.
2. The gram block: upper triangle of ``sum x x^T``, ``sum x`` and, with an intercept, the row
   count ``n`` (private under add/remove neighbours). The count enters as ``c n`` with
   ``c = 1/2``: L2 sensitivities add in squares, so the block costs
   ``sqrt(q^2 + f^2 + c^2)`` (``q``, ``f`` from :func:`dp.regression.sensitivity.l2_sensitivity`),
   i.e. 1.50 instead of 1.41 on the unit ball, and ``n`` gets noise ``sigma / c``, still a
   negligible relative error; ``c = 1`` would cost 1.73. Only the noisy count is used.
3. The moment block ``sum y z``, likewise.

The ridge ``lambda = max(0, tau - lambda_min_noisy)`` with ``tau`` a high-probability bound on the
spectral norm of the Gaussian noise matrix (``sigma (2 sqrt(p) + sqrt(2 log(1/rho)))``,
Bandeira & van Handel 2016, ``rho = 0.05``) makes ``G_noisy + lambda I`` positive definite with
high probability. As a last guard the solve still raises eigenvalues below ``sigma`` (trimming),
so the objective is bounded on every draw. :func:`adassp_release` makes the three releases and
:func:`adassp_fit` adds the ridge solve; ``method="auto"`` (:mod:`dp.regression.auto`) solves the
same releases with a shrunk spectrum instead (post-processing either way).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from dppub.dp.calibration import gaussian_sigma
from dppub.dp.mechanisms import gaussian
from dppub.dp.numerics.fixedpoint import CONVERSION_ALLOWANCE
from dppub.dp.regression.eigen import certified_min_eigenvalue
from dppub.dp.regression.functional import trimmed_solve
from dppub.dp.regression.sensitivity import BlockSensitivity, l2_sensitivity
from dppub.dp.regression.statistics import Design, SufficientStatistics

__all__ = ["COUNT_WEIGHT", "AdaSSPRelease", "AdaSSPStatistics", "adassp_fit", "adassp_release"]

FloatArray = npt.NDArray[np.float64]
_RHO = 0.05  # failure probability of the ridge's positive-definiteness bound (Wang 2018)
COUNT_WEIGHT = 0.5
"""``c`` in the module doc: the count is released as ``c n`` inside the gram block."""


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class AdaSSPStatistics:
    """The three Gaussian releases of AdaSSP and their public parameters."""

    noisy: SufficientStatistics
    """The perturbed statistics (the count un-weighted: ``noisy count / c``)."""
    ridge: float
    """The privately chosen ridge ``lambda`` (from the noisy ``lambda_min``)."""
    sensitivity: BlockSensitivity
    """L2 sensitivities of the parts."""
    gram_sigma: float
    """Gaussian standard deviation on the gram entries (the count's is ``gram_sigma / c``)."""
    moment_sigma: float
    """Gaussian standard deviation on the moment entries."""
    count_weight: float
    """``c``: the count is released as ``c n`` inside the gram block."""


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class AdaSSPRelease:
    """The AdaSSP solution and the public parameters of its three releases."""

    theta: FloatArray
    """Solution in the shifted frame."""
    noisy: SufficientStatistics
    """The perturbed statistics the solve read (for post-processing, e.g. intervals)."""
    ridge: float
    """The privately chosen ridge ``lambda``."""
    sensitivity: BlockSensitivity
    """L2 sensitivities of the gram and moment blocks."""
    gram_sigma: float
    """Gaussian standard deviation on the gram entries."""
    moment_sigma: float
    """Gaussian standard deviation on the moment entries."""
    trimmed: int
    """Eigenvalues raised by the final guard (usually 0)."""


def adassp_release(
    exact: SufficientStatistics,
    design: Design,
    *,
    epsilon: float,
    delta: float,
    rng: np.random.Generator | None = None,
) -> AdaSSPStatistics:
    """AdaSSP's three releases on exact statistics; ``(epsilon, delta)``-DP in total."""
    eps3, delta3 = epsilon / 3.0, delta / 3.0
    sens = l2_sensitivity(
        design.shifted_features, design.shifted_target, fit_intercept=exact.fit_intercept
    )
    p = exact.gram.shape[0]
    r2 = design.shifted_features.radius**2 + (1.0 if exact.fit_intercept else 0.0)

    lam_min = certified_min_eigenvalue(exact.gram, tolerance=CONVERSION_ALLOWANCE * r2)
    lam_sens = r2 * (1.0 + 3.0 * CONVERSION_ALLOWANCE)
    sig_l = gaussian_sigma(l2_sensitivity=lam_sens, epsilon=eps3, delta=delta3)
    noisy_l = float(gaussian(lam_min, l2_sensitivity=lam_sens, epsilon=eps3, delta=delta3, rng=rng))
    lam_min_low = max(0.0, noisy_l - sig_l * NormalDist().inv_cdf(1.0 - _RHO))

    parts = exact.parts()
    c = COUNT_WEIGHT
    gram_sens = float(np.sqrt(sens.quadratic**2 + sens.feature_sum**2 + (c * sens.count) ** 2))
    sig_g = gaussian_sigma(l2_sensitivity=gram_sens, epsilon=eps3, delta=delta3)
    gram_block = np.concatenate([parts["quadratic"], parts["feature_sum"], c * parts["count"]])
    noisy_g = gaussian(gram_block, l2_sensitivity=gram_sens, epsilon=eps3, delta=delta3, rng=rng)
    sig_m = gaussian_sigma(l2_sensitivity=sens.moment, epsilon=eps3, delta=delta3)
    noisy_m = gaussian(
        exact.moment, l2_sensitivity=sens.moment, epsilon=eps3, delta=delta3, rng=rng
    )
    k, d = len(parts["quadratic"]), exact.dim
    noisy = exact.with_parts(
        {
            "quadratic": noisy_g[:k],
            "feature_sum": noisy_g[k : k + len(parts["feature_sum"])],
            "count": noisy_g[k + len(parts["feature_sum"]) :] / c,
            "cross": noisy_m[:d],
            "target_sum": noisy_m[d:],
        }
    )

    tau = sig_g * (2.0 * math.sqrt(p) + math.sqrt(2.0 * math.log(1.0 / _RHO)))
    return AdaSSPStatistics(
        noisy=noisy,
        ridge=max(0.0, tau - lam_min_low),
        sensitivity=sens,
        gram_sigma=sig_g,
        moment_sigma=sig_m,
        count_weight=c,
    )


def adassp_fit(
    exact: SufficientStatistics,
    design: Design,
    *,
    epsilon: float,
    delta: float,
    rng: np.random.Generator | None = None,
) -> AdaSSPRelease:
    """Run AdaSSP on exact statistics (releases, then the ridge solve); ``(epsilon, delta)``-DP."""
    rel = adassp_release(exact, design, epsilon=epsilon, delta=delta, rng=rng)
    p = rel.noisy.gram.shape[0]
    theta, trimmed = trimmed_solve(
        rel.noisy.gram + rel.ridge * np.eye(p), rel.noisy.moment, floor=rel.gram_sigma
    )
    return AdaSSPRelease(
        theta=theta,
        noisy=rel.noisy,
        ridge=rel.ridge,
        sensitivity=rel.sensitivity,
        gram_sigma=rel.gram_sigma,
        moment_sigma=rel.moment_sigma,
        trimmed=trimmed,
    )
