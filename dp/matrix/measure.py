"""The measurement step of the matrix mechanism: ``r = A x + noise``.

This is the only place where the private histogram is touched. One individual changes one cell
by one, so ``||A (x - x')||_1 <= ||A||_1`` and adding Laplace noise of scale ``||A||_1 / epsilon``
to every row is ``epsilon``-DP (Dwork et al. 2006; Li et al. 2015, Prop. 2). Likewise
``||A (x - x')||_2 <= ||A||_{1->2}`` (the largest column L2 norm), and Gaussian noise calibrated
to that L2 sensitivity is ``(epsilon, delta)``-DP (Balle & Wang 2018). Everything computed from
the returned :class:`Measurement` is post-processing and costs nothing more.

zero-concentrated DP (Bun & Steinke, TCC 2016): the Gaussian mechanism with
``sigma = Delta_2 / sqrt(2 rho)`` is rho-zCDP, hence ``(rho + 2 sqrt(rho ln(1/delta)), delta)``-DP
for every ``delta > 0``; :func:`zcdp_cost` and :func:`zcdp_rho` convert between the two.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dppub.dp.budget import PrivacyCost, zcdp_to_dp
from dppub.dp.calibration import gaussian_sigma, zcdp_gaussian_sigma
from dppub.dp.errors import ConfigError
from dppub.dp.matrix.exact import certified_sensitivity, exact_answers
from dppub.dp.matrix.strategy import Strategy
from dppub.dp.matrix.workload import FloatArray
from dppub.dp.mechanisms import gaussian, laplace
from dppub.dp.validation import check_delta, check_epsilon, check_positive

__all__ = [
    "Measurement",
    "check_histogram",
    "measure",
    "measure_gaussian",
    "zcdp_cost",
    "zcdp_rho",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Measurement:
    """Noisy strategy answers: safe to keep, log and post-process."""

    strategy: Strategy
    """The strategy ``A`` that was measured."""
    values: FloatArray
    """``A x + noise``, one value per strategy row."""
    epsilon: float
    """Privacy parameter spent."""
    noise_scale: float
    """Noise scale of every row: Laplace ``||A||_1 / epsilon``, or the Gaussian ``sigma``."""
    delta: float = 0.0
    """Approximate-DP parameter spent (``0`` for Laplace)."""
    mechanism: str = "laplace"
    """``"laplace"`` or ``"gaussian"``."""

    @property
    def cost(self) -> PrivacyCost:
        """The release's privacy cost ``(epsilon, delta)``."""
        return PrivacyCost(epsilon=self.epsilon, delta=self.delta)


def check_histogram(x: npt.ArrayLike, n: int) -> FloatArray:
    """Return ``x`` as a flat float vector if it is a finite non-negative histogram of ``n`` cells.

    Raises :class:`~dp.errors.ConfigError` (a bad function argument); messages name the
    problem and the expected shape, never a data value.
    """
    arr = np.asarray(x)
    if arr.dtype.kind not in "biuf":
        raise ConfigError(f"histogram must be numeric, got dtype {arr.dtype}")
    arr = arr.astype(np.float64).ravel()
    if arr.size != n:
        raise ConfigError(f"histogram must have {n} cells (the workload domain), got {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise ConfigError("histogram must be finite (no NaN or inf)")
    if np.any(arr < 0):
        raise ConfigError("histogram counts must be >= 0")
    return arr


def _validated(
    strategy: Strategy, x: npt.ArrayLike, *, l2: bool, group: int
) -> tuple[FloatArray, float]:
    """The histogram and the L1 (or L2) sensitivity of ``A x`` when neighbours differ by up to
    ``group`` records (``group`` times the strategy's, by the triangle inequality), checked
    before any noise: certified for the answers as computed (:mod:`dp.matrix.exact`)."""
    if not isinstance(strategy, Strategy):
        raise ConfigError(f"strategy must be a dp.matrix strategy, got {type(strategy).__name__}")
    if isinstance(group, bool) or not isinstance(group, int) or group < 1:
        raise ConfigError(f"group must be a positive integer, got {group!r}")
    hist = check_histogram(x, strategy.n)
    sens = certified_sensitivity(strategy, l2=l2)
    if not math.isfinite(sens) or sens <= 0:
        raise ConfigError(f"strategy sensitivity must be finite and > 0, got {sens!r}")
    return hist, group * sens


def measure(
    strategy: Strategy,
    x: npt.ArrayLike,
    *,
    epsilon: float,
    rng: np.random.Generator | None = None,
    group: int = 1,
) -> Measurement:
    """Answer ``strategy`` on histogram ``x`` with Laplace noise (the only private step).

    Args:
        strategy: measurement strategy ``A``.
        x: histogram over the strategy's domain (finite, >= 0).
        epsilon: privacy parameter (> 0).
        rng: ``None`` for release-grade OpenDP noise; a seeded generator in tests only.
        group: neighbours differ by up to this many records (a privacy unit's bound).

    Returns:
        The :class:`Measurement`.
    """
    eps = check_epsilon(epsilon)
    hist, sens = _validated(strategy, x, l2=False, group=group)
    noisy = laplace(exact_answers(strategy, hist), sensitivity=sens, epsilon=eps, rng=rng)
    return Measurement(strategy=strategy, values=noisy, epsilon=eps, noise_scale=sens / eps)


def measure_gaussian(
    strategy: Strategy,
    x: npt.ArrayLike,
    *,
    epsilon: float,
    delta: float,
    rng: np.random.Generator | None = None,
    group: int = 1,
    rho: float | None = None,
) -> Measurement:
    """Answer ``strategy`` on histogram ``x`` with Gaussian noise (``(epsilon, delta)``-DP).

    The noise is calibrated to the strategy's L2 sensitivity ``||A||_{1->2}`` with the analytic
    Gaussian mechanism (:func:`dp.mechanisms.gaussian`, Balle & Wang 2018), which is exact for
    every epsilon and never noisier than the classic bound or than a rho-zCDP calibration
    converted with :func:`zcdp_cost`.

    Args:
        strategy: measurement strategy ``A``.
        x: histogram over the strategy's domain (finite, >= 0).
        epsilon: privacy parameter (> 0).
        delta: privacy parameter (in (0, 1)).
        rng: ``None`` for release-grade OpenDP noise; a seeded generator in tests only.
        group: neighbours differ by up to this many records: the noise is calibrated to
            ``group`` times the L2 sensitivity, which is tighter than group privacy over an
            ``(epsilon / group, ...)`` measurement.
        rho: a zCDP budget: then ``sigma = group ||A||_{1->2} / sqrt(2 rho)``, exactly
            rho-zCDP, and ``(epsilon, delta)`` is what it is charged as, which must be at
            least :func:`zcdp_cost` of rho.

    Returns:
        The :class:`Measurement` (``mechanism="gaussian"``, ``noise_scale`` = sigma).
    """
    eps = check_epsilon(epsilon)
    dl = check_delta(delta)
    hist, sens = _validated(strategy, x, l2=True, group=group)
    if rho is None:
        sigma = gaussian_sigma(l2_sensitivity=sens, epsilon=eps, delta=dl)
        answers = exact_answers(strategy, hist)
        noisy = gaussian(answers, l2_sensitivity=sens, epsilon=eps, delta=dl, rng=rng)
    else:
        if zcdp_cost(rho, dl).epsilon > eps * (1.0 + 1e-12):
            raise ConfigError(f"rho {rho!r} at delta {dl!r} costs more than epsilon {eps!r}")
        sigma = zcdp_gaussian_sigma(l2_sensitivity=sens, rho=rho)
        noisy = gaussian(exact_answers(strategy, hist), l2_sensitivity=sens, rho=rho, rng=rng)
    return Measurement(
        strategy=strategy,
        values=noisy,
        epsilon=eps,
        noise_scale=sigma,
        delta=dl,
        mechanism="gaussian",
    )


def zcdp_cost(rho: float, delta: float) -> PrivacyCost:
    """The ``(epsilon, delta)`` cost of a rho-zCDP release (Bun & Steinke 2016, Prop. 1.3).

    >>> cost = zcdp_cost(0.5, 1e-6)
    >>> round(cost.epsilon, 4), cost.delta
    (5.7565, 1e-06)
    """
    r = check_positive(rho, name="rho")
    dl = check_delta(delta)
    return PrivacyCost(epsilon=zcdp_to_dp(r, dl), delta=dl)


def zcdp_rho(epsilon: float, delta: float) -> float:
    """The rho whose :func:`zcdp_cost` at ``delta`` is ``epsilon`` (never more, to rounding).

    ``rho + 2 sqrt(rho L) = epsilon`` with ``L = ln(1/delta)`` is a quadratic in ``sqrt(rho)``:
    ``sqrt(rho) = sqrt(epsilon + L) - sqrt(L) = epsilon / (sqrt(epsilon + L) + sqrt(L))`` (the
    second form avoids cancellation at small epsilon). The result is rounded down until the
    forward conversion stays within ``epsilon``.

    >>> round(zcdp_rho(1.0, 1e-6), 6)
    0.017469
    """
    eps = check_epsilon(epsilon)
    dl = check_delta(delta)
    if dl == 0.0:
        raise ConfigError("converting zCDP to (epsilon, delta) needs delta > 0, got 0.0")
    big_l = math.log(1.0 / dl)
    rho = (eps / (math.sqrt(eps + big_l) + math.sqrt(big_l))) ** 2
    while zcdp_to_dp(rho, dl) > eps:
        rho = math.nextafter(rho, 0.0)
    return rho
