"""``method="auto"`` for linear regression: a release chosen before any data is read, then a solve
that shrinks the slopes towards the noisy mean by as much as the noisy statistics say they
should be.

Privacy. Three steps, of which only the second touches the data:

1. *Choice* (:func:`choose_release`, plan time): the functional mechanism, or -- when the
   release declares ``delta > 0`` -- AdaSSP, whichever puts less first-order risk-weighted noise
   on the sufficient statistics (:func:`release_risk`). The rule reads the declared design
   (domains, one-hot blocks, intercept), ``epsilon`` and ``delta`` only: not the data, not the
   row count. It is a constant of the configuration, so ``dppub plan`` can show it, and it
   costs nothing.
2. *Release*: the chosen mechanism on the exact statistics, epsilon-DP
   (:func:`~dp.regression.functional.functional_release`, with the intercept parts' shares
   floored at :data:`INTERCEPT_SHARE`) or ``(epsilon, delta)``-DP
   (:func:`~dp.regression.adassp.adassp_release`), both under add/remove neighbours.
3. *Solve* (:func:`auto_solve`): a function of the noisy statistics and of public noise scales
   only -- post-processing, free. In particular the amount of shrinkage towards the trivial model
   is chosen from the noisy statistics, never from the data.

Solve. With an intercept the noisy ``n, s = sum x, t = sum y, Q = sum x x^T, c = sum y x`` are
first given the structure every dataset has: inside a one-hot block ``x_j x_l = 0`` for
``j != l`` and ``x_j^2 = x_j``, so the block's off-diagonal entries are set to 0 and its diagonal
and feature sums to their inverse-variance weighted average (:func:`onehot_structure`). The
centred scatter ``C = Q - s s^T / n`` (``n`` raised to twice its noise standard deviation) is
shrunk and floored (:mod:`dp.regression.shrinkage`, with the noise energy left after the
structure) and solved for the slopes ``w``. Then the slopes are scaled by

    alpha = clip((w^T u - v_u tr(S^-1)) / (w^T C w), 0, 1),   u = c - s t / n,

the minimiser of the in-sample squared error of ``mean + alpha (x - mean)^T w`` with both terms
estimated without the noise's bias: the cross noise (variance ``v_u`` per entry) is independent
of the shrunk matrix ``S`` and makes ``w^T u`` overshoot by ``v_u tr(S^-1)`` in expectation,
while ``w^T C w`` is unbiased given ``w`` when ``C``'s noise is independent of ``w``. So
``alpha = 0`` is the trivial model (predict the noisy mean) and the published model is, to first
order, no worse than it in expectation (James & Stein 1961 for the idea; Ledoit & Wolf 2004 for
the shrunk spectrum). The mean of ``y`` is the posterior mean under a uniform prior on the
declared target interval (Gaussian approximation: ``n t / (n^2 + 3 v_t / B^2)``), the means of
the features are clipped into their declared box, and the intercept is
``mean_y - mean_x^T (alpha w)``.

Measured (``bench/regression.py --table auto``; the module of that table states the data):
see ``bench/RESULTS.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dppub.dp.calibration import gaussian_sigma
from dppub.dp.errors import InvariantError
from dppub.dp.regression.adassp import COUNT_WEIGHT
from dppub.dp.regression.functional import SHRUNK_QUADRATIC_WEIGHT, budget_shares, eigenvalue_floor
from dppub.dp.regression.sensitivity import PARTS, l1_sensitivity, l2_sensitivity
from dppub.dp.regression.shrinkage import shrink_spectrum
from dppub.dp.regression.statistics import Design, SufficientStatistics

__all__ = [
    "INTERCEPT_SHARE",
    "AutoSolution",
    "NoiseVariances",
    "ReleaseChoice",
    "adassp_variances",
    "auto_solve",
    "choose_release",
    "functional_variances",
    "onehot_structure",
    "release_risk",
    "variance_floor",
]

FloatArray = npt.NDArray[np.float64]

INTERCEPT_SHARE = 0.05
"""Floor on the functional mechanism's share of epsilon for the count and for the target sum.

When the slopes are shrunk away the noisy mean is the whole model, and the first-order split
(which assumes the slopes are kept) gives the two parts 1.7% each on 45 indicators. Measured on
Adult (age on six category columns, 20-30 seeds, in-sample MSE / variance, median / p90):
at n = 30,162 and epsilon = 0.1, 0.754 / 0.924 without the floor, 0.748 / 0.774 with 0.05,
0.754 / 0.771 with 0.1; at n = 3,000 and epsilon = 0.1, 1.15 / 3.28, 1.03 / 1.18, 1.01 / 1.09;
at epsilon = 1 all three are within 0.005.
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleaseChoice:
    """The release ``method="auto"`` uses, chosen from public quantities only."""

    release: str
    """``"functional"`` or ``"adassp"``."""
    risk: dict[str, float]
    """First-order risk-weighted noise of each candidate (:func:`release_risk`)."""

    def to_dict(self) -> dict[str, object]:
        """JSON-ready description (for ``model.json`` and ``dppub plan``)."""
        return {"release": self.release, "expected_noise_risk": dict(self.risk)}


@dataclass(frozen=True, slots=True, kw_only=True)
class NoiseVariances:
    """Per-entry noise variance of each released part (public: from the noise scales)."""

    quadratic: float
    feature_sum: float
    count: float
    cross: float
    target_sum: float


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class AutoSolution:
    """The shrunk solution and what the solve decided (all post-processing)."""

    theta: FloatArray
    """Slopes then intercept, in the shifted frame."""
    alpha: float
    """Weight kept on the slopes (0: predict the noisy mean)."""
    rho: float
    """Spectrum shrinkage of the centred scatter."""
    floor: float
    """Eigenvalue floor used."""


def _risk_factors(design: Design) -> dict[str, float]:
    # The per-part first-order risk weights of budget_shares (without the sensitivities).
    d, r = design.features.dim, design.shifted_features.radius
    t = design.shifted_target
    b = max(abs(t.lower), abs(t.upper))
    out = {
        "quadratic": b / r * SHRUNK_QUADRATIC_WEIGHT,
        "cross": 1.0,
        "feature_sum": math.sqrt(b * b + (b / d) ** 2),
        "target_sum": r / d,
        "count": b * r / d,
    }
    if not design.fit_intercept:
        out["feature_sum"] = out["target_sum"] = out["count"] = 0.0
    return out


def functional_variances(design: Design, epsilon: float) -> NoiseVariances:
    """Per-entry Laplace variances ``2 b^2`` at the plan-time split (worst-case mean)."""
    sens = l1_sensitivity(
        design.shifted_features, design.shifted_target, fit_intercept=design.fit_intercept
    )
    shares = budget_shares(
        sens,
        design,
        ybar=None,
        quadratic_weight=SHRUNK_QUADRATIC_WEIGHT,
        intercept_share=INTERCEPT_SHARE,
    )
    var = {
        k: 2.0 * (sens.part(k) / (epsilon * shares[k])) ** 2 if shares[k] > 0 else 0.0
        for k in PARTS
    }
    return NoiseVariances(**var)


def adassp_variances(design: Design, epsilon: float, delta: float) -> NoiseVariances:
    """Per-entry Gaussian variances of AdaSSP's releases (:mod:`dp.regression.adassp`)."""
    c = COUNT_WEIGHT
    sens = l2_sensitivity(
        design.shifted_features, design.shifted_target, fit_intercept=design.fit_intercept
    )
    gram = math.sqrt(sens.quadratic**2 + sens.feature_sum**2 + (c * sens.count) ** 2)
    sg = gaussian_sigma(l2_sensitivity=gram, epsilon=epsilon / 3, delta=delta / 3)
    sm = gaussian_sigma(l2_sensitivity=sens.moment, epsilon=epsilon / 3, delta=delta / 3)
    return NoiseVariances(
        quadratic=sg**2, feature_sum=sg**2, count=(sg / c) ** 2, cross=sm**2, target_sum=sm**2
    )


def variance_floor(var: NoiseVariances, d: int) -> float:
    """The eigenvalue floor of :func:`~dp.regression.functional.eigenvalue_floor` for noise of
    these variances (a Laplace scale ``b`` has variance ``2 b^2``)."""
    scales = {
        "quadratic": math.sqrt(var.quadratic / 2.0),
        "feature_sum": math.sqrt(var.feature_sum / 2.0),
    }
    return eigenvalue_floor(scales, d)


def release_risk(design: Design, variances: NoiseVariances) -> float:
    """``sum_k f_k^2 v_k``: the first-order excess risk of the noise (the weights ``f_k`` of
    :func:`~dp.regression.functional.budget_shares`, the per-entry variances ``v_k``)."""
    f = _risk_factors(design)
    return float(sum(f[k] ** 2 * getattr(variances, k) for k in PARTS))


def choose_release(design: Design, *, epsilon: float, delta: float) -> ReleaseChoice:
    """The release with the smaller :func:`release_risk`; AdaSSP only when ``delta > 0``.

    A function of the declared design, ``epsilon`` and ``delta`` only (module doc).
    """
    risk = {"functional": release_risk(design, functional_variances(design, epsilon))}
    if delta > 0.0:
        risk["adassp"] = release_risk(design, adassp_variances(design, epsilon, delta))
    return ReleaseChoice(release=min(risk, key=lambda k: risk[k]), risk=risk)


def onehot_structure(
    noisy: SufficientStatistics, blocks: tuple[tuple[int, int], ...], var: NoiseVariances
) -> tuple[SufficientStatistics, FloatArray]:
    """Impose what one-hot blocks make true of every dataset (module doc); post-processing.

    Returns the structured statistics and the per-entry noise variance left in the feature
    block of the gram matrix (0 where an entry is known exactly).
    """
    d = noisy.dim
    gram = noisy.gram.copy()
    noise = np.full((d, d), var.quadratic)
    vq, vs = var.quadratic, var.feature_sum
    for start, stop in blocks:
        diag = np.diag(gram[start:stop, start:stop]).copy()
        noise[start:stop, start:stop] = 0.0
        gram[start:stop, start:stop] = 0.0
        if noisy.fit_intercept and vq > 0.0 and vs > 0.0:
            # x_j^2 = x_j on an indicator: two noisy releases of one sum, combined.
            both = (diag / vq + gram[start:stop, d] / vs) / (1.0 / vq + 1.0 / vs)
            gram[start:stop, d] = gram[d, start:stop] = both
            v = 1.0 / (1.0 / vq + 1.0 / vs)
        else:
            both, v = diag, vq
        idx = np.arange(start, stop)
        gram[idx, idx] = both
        noise[idx, idx] = v
    out = SufficientStatistics(
        gram=gram, moment=noisy.moment.copy(), fit_intercept=noisy.fit_intercept
    )
    return out, noise


def auto_solve(
    noisy: SufficientStatistics, design: Design, var: NoiseVariances, *, floor: float
) -> AutoSolution:
    """Structure, shrunk spectrum, shrinkage towards the noisy mean (module doc).

    Args:
        noisy: the released statistics.
        design: the public design they were computed under.
        var: per-entry noise variances of the parts (public).
        floor: the public eigenvalue floor ``tau > 0``.
    """
    stats, noise = onehot_structure(noisy, design.features.blocks, var)
    d, fi = stats.dim, stats.fit_intercept
    q, c = stats.gram[:d, :d], stats.moment[:d]
    n = max(float(stats.gram[d, d]), 2.0 * math.sqrt(var.count), 1.0) if fi else 1.0
    s = stats.gram[:d, d] if fi else np.zeros(d)
    t = float(stats.moment[d]) if fi else 0.0
    scatter = q - np.outer(s, s) / n
    u = c - s * (t / n)
    spec = shrink_spectrum(
        scatter, quadratic_scale=0.0, floor=floor, noise_energy=float(noise.sum())
    )
    w = spec.solve(u)
    curvature = float(w @ scatter @ w)
    v_u = var.cross + var.feature_sum * (t / n) ** 2
    gain = float(w @ u) - v_u * float(np.sum(1.0 / spec.values))
    alpha = min(1.0, max(0.0, gain / curvature)) if curvature > 0.0 else 0.0
    w = alpha * w
    if fi:
        tgt, box = design.shifted_target, design.shifted_features
        b = max(abs(tgt.lower), abs(tgt.upper))
        mean_y = n * t / (n * n + 3.0 * var.target_sum / (b * b))
        mean_y = min(tgt.upper, max(tgt.lower, mean_y))
        mean_x = np.clip(s / n, np.asarray(box.lower), np.asarray(box.upper))
        theta = np.r_[w, mean_y - float(mean_x @ w)]
    else:
        theta = w
    if not np.all(np.isfinite(theta)):
        raise InvariantError("the auto solve produced a non-finite solution")
    return AutoSolution(
        theta=np.asarray(theta, dtype=np.float64), alpha=alpha, rho=spec.rho, floor=floor
    )
