"""Noise calibration: solve for the noise scale, then re-check the forward privacy map.

Gaussian mechanism (Dwork & Roth 2014, Thm A.1; Balle & Wang 2018, "Improving the Gaussian
mechanism", Thm 8): adding ``N(0, sigma^2)`` to a function of L2 sensitivity ``Delta`` is
``(epsilon, delta)``-DP iff

    delta >= Phi(D/(2 s) - eps s/D) - e^eps Phi(-D/(2 s) - eps s/D),

with ``D`` the L2 sensitivity and ``s`` = sigma.

The classic bound ``sigma = sqrt(2 ln(1.25/delta)) Delta / epsilon`` holds only for epsilon < 1;
the analytic calibration is exact for every epsilon and never larger.

zero-concentrated DP (Bun & Steinke, TCC 2016, Prop. 1.6): the same mechanism with
``sigma = Delta / sqrt(2 rho)`` is exactly rho-zCDP. A release declared in rho is calibrated
this way, not through an ``(epsilon, delta)`` conversion: the analytic Gaussian at the
converted ``(epsilon, delta)`` adds less noise, i.e. spends more than rho (1.3-1.5x).
"""

from __future__ import annotations

import math

from scipy.special import log_ndtr

from dppub.dp.errors import ConfigError, InvariantError
from dppub.dp.validation import check_delta, check_epsilon, check_level, check_positive

__all__ = [
    "gaussian_delta",
    "gaussian_sigma",
    "laplace_half_width",
    "laplace_scale",
    "zcdp_gaussian_sigma",
]


def laplace_scale(*, sensitivity: float, epsilon: float) -> float:
    """Laplace scale ``b = Delta_1 / epsilon`` (Dwork et al. 2006).

    >>> laplace_scale(sensitivity=2.0, epsilon=0.5)
    4.0
    """
    return check_positive(sensitivity, name="sensitivity") / check_epsilon(epsilon)


def laplace_half_width(scale: float, level: float) -> float:
    """Half-width of the central ``level`` interval of Laplace noise of ``scale``:
    ``P(|X| > t) = exp(-t / scale)``, so ``t = scale ln(1 / (1 - level))``.

    >>> round(laplace_half_width(1.0, 0.95), 6)
    2.995732
    """
    return check_positive(scale, name="scale") * math.log(1.0 / (1.0 - check_level(level)))


def zcdp_gaussian_sigma(*, l2_sensitivity: float, rho: float) -> float:
    """The sigma making the Gaussian mechanism exactly rho-zCDP: ``Delta_2 / sqrt(2 rho)``.

    >>> zcdp_gaussian_sigma(l2_sensitivity=3.0, rho=0.5)
    3.0
    """
    d = check_positive(l2_sensitivity, name="l2_sensitivity")
    return d / math.sqrt(2.0 * check_positive(rho, name="rho"))


def gaussian_delta(*, sigma: float, l2_sensitivity: float, epsilon: float) -> float:
    """The exact delta of the Gaussian mechanism at ``epsilon`` (Balle & Wang 2018, Thm 8)."""
    s = check_positive(sigma, name="sigma")
    d = check_positive(l2_sensitivity, name="l2_sensitivity")
    eps = check_epsilon(epsilon)
    a, b = d / (2.0 * s), eps * s / d
    first = math.exp(log_ndtr(a - b))
    second = math.exp(eps + log_ndtr(-a - b))
    return max(0.0, first - second)


def gaussian_sigma(
    *, l2_sensitivity: float, epsilon: float, delta: float, method: str = "analytic"
) -> float:
    """Smallest sigma making the Gaussian mechanism ``(epsilon, delta)``-DP.

    Args:
        l2_sensitivity: L2 global sensitivity of the released function.
        epsilon: target epsilon (> 0).
        delta: target delta (in (0, 1)).
        method: ``"analytic"`` (Balle & Wang, exact) or ``"classic"`` (epsilon < 1 only).

    >>> round(gaussian_sigma(l2_sensitivity=1.0, epsilon=0.5, delta=1e-5, method="classic"), 4)
    9.6896
    """
    d = check_positive(l2_sensitivity, name="l2_sensitivity")
    eps = check_epsilon(epsilon)
    dl = check_delta(delta)
    if dl == 0.0:
        raise ConfigError("the Gaussian mechanism needs delta > 0, got 0.0")
    if method == "classic":
        if eps >= 1.0:
            raise ConfigError(f"the classic Gaussian bound needs epsilon < 1, got {eps!r}")
        sigma = math.sqrt(2.0 * math.log(1.25 / dl)) * d / eps
    elif method == "analytic":
        lo, hi = 1e-12 * d, d
        while gaussian_delta(sigma=hi, l2_sensitivity=d, epsilon=eps) > dl:
            hi *= 2.0
        for _ in range(200):  # bisection on a monotone function; 200 halvings reach float precision
            mid = 0.5 * (lo + hi)
            if gaussian_delta(sigma=mid, l2_sensitivity=d, epsilon=eps) > dl:
                lo = mid
            else:
                hi = mid
        sigma = hi
    else:
        raise ConfigError(f"method must be 'analytic' or 'classic', got {method!r}")
    # Re-check the forward map: the returned sigma must satisfy the target.
    if gaussian_delta(sigma=sigma, l2_sensitivity=d, epsilon=eps) > dl * (1 + 1e-9):
        raise InvariantError(f"Gaussian calibration failed the forward check at sigma={sigma!r}")
    return sigma
