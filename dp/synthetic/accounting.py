"""zCDP <-> (epsilon, delta) for AIM: the Canonne-Kamath-Steinke conversion (NeurIPS 2020,
Prop. 12 / Cor. 13), tighter than Bun & Steinke's ``rho + 2 sqrt(rho log 1/delta)``.

A synthetic release is configured and charged as ``(epsilon, delta)``; inside, AIM spends
``rho = cdp_rho(epsilon, delta)``, the largest rho whose conversion gives back at most
``delta`` at ``epsilon``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from dppub.dp.errors import ConfigError

__all__ = ["cdp_delta", "cdp_epsilon", "cdp_rho"]

_STEPS = 200  # bisection steps: far below double precision


def cdp_delta(rho: float, epsilon: float) -> float:
    """The delta of ``(epsilon, delta)``-DP implied by rho-zCDP (Canonne, Kamath & Steinke 2020):
    ``min over a > 1 of exp((a-1)(a rho - epsilon) + a log(1 - 1/a)) / (a - 1)``.

    >>> round(cdp_delta(0.5, 5.7565), 8) < 1e-6  # tighter than Bun & Steinke's conversion
    True
    """
    if rho < 0.0 or epsilon < 0.0:
        raise ConfigError(f"cdp_delta needs rho >= 0 and epsilon >= 0, got {rho!r}, {epsilon!r}")
    if rho == 0.0:
        return 0.0
    # The objective is convex in a; its derivative's sign says which side the minimum is on.
    lo, hi = 1.01, (epsilon + 1.0) / (2.0 * rho) + 2.0
    for _ in range(_STEPS):
        a = (lo + hi) / 2.0
        if (2.0 * a - 1.0) * rho - epsilon + math.log1p(-1.0 / a) < 0.0:
            lo = a
        else:
            hi = a
    a = (lo + hi) / 2.0
    log_delta = (a - 1.0) * (a * rho - epsilon) + a * math.log1p(-1.0 / a) - math.log(a - 1.0)
    return min(math.exp(log_delta), 1.0)


def cdp_epsilon(rho: float, delta: float) -> float:
    """The smallest epsilon with ``cdp_delta(rho, epsilon) <= delta``.

    >>> round(cdp_epsilon(cdp_rho(1.0, 1e-9), 1e-9), 6)
    1.0
    """
    if not 0.0 < delta < 1.0:
        raise ConfigError(f"converting zCDP to (epsilon, delta) needs 0 < delta < 1, got {delta!r}")
    hi = rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta)) + 1e-12  # Bun & Steinke
    return _bisect(0.0, hi, lambda eps: cdp_delta(rho, eps) > delta)[1]


def cdp_rho(epsilon: float, delta: float) -> float:
    """The largest rho whose rho-zCDP implies ``(epsilon, delta)``-DP (rounded down).

    >>> round(cdp_rho(1.0, 1e-9), 6)
    0.014973
    """
    if epsilon <= 0.0 or not 0.0 < delta < 1.0:
        raise ConfigError(
            f"AIM needs epsilon > 0 and 0 < delta < 1, got epsilon={epsilon!r}, delta={delta!r}"
        )
    return _bisect(0.0, epsilon + 1.0, lambda rho: cdp_delta(rho, epsilon) <= delta)[0]


def _bisect(lo: float, hi: float, below: Callable[[float], bool]) -> tuple[float, float]:
    """``(lo, hi)`` after bisecting ``_STEPS`` times: ``below`` holds at ``lo``, not at ``hi``."""
    for _ in range(_STEPS):
        mid = (lo + hi) / 2.0
        if below(mid):
            lo = mid
        else:
            hi = mid
    return lo, hi
