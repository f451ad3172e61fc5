"""Least squares from the functional mechanism's noisy statistics, with a shrunk covariance.

Everything here reads only the noisy release and public Laplace scales: post-processing, so the
privacy of :func:`dp.regression.functional.functional_release` carries over unchanged.

Centring. With an intercept the noisy statistics are ``n``, ``s = sum x``, ``t = sum y``,
``Q = sum x x^T`` and ``c = sum y x``; the slope solves ``C w = u`` with the centred scatter
``C = Q - s s^T / n`` and moment ``u = c - s t / n``, and the intercept is ``(t - s^T w) / n``
(the block elimination of the full normal equations). The noisy count is raised to the
trimming floor ``tau`` first: a count drowned in its noise then shrinks the intercept towards
the midpoint instead of dividing by it.

Shrinkage (Ledoit & Wolf 2004, with the noise energy known). ``C`` carries iid Laplace noise of
scale ``b_Q`` on every entry of its upper triangle, so its expected squared Frobenius norm is
``2 b_Q^2 d^2``, a public number. With ``mbar = tr(C) / d`` (an average of ``d`` noisy entries,
accurate even when single entries are not) and eigenvalues ``mu_i`` of the noisy ``C``, the
linear shrinkage ``g_i = mbar + rho (mu_i - mbar)`` with ``rho = max(0, D - 2 b_Q^2 d^2) / D``,
``D = sum_i (mu_i - mbar)^2``, keeps the part of the spectrum's spread that the noise cannot
explain. When the noise dominates (``rho`` near 0) the estimate is ``mbar I``: its eigenvectors,
which the noise has randomised, are dropped instead of inverted. The eigenvalues are then raised
to the floor ``tau_rho = tau (1 + rho) / 2``, with ``tau`` the trimming floor of
:func:`~dp.regression.functional.eigenvalue_floor`: the full ``tau`` when nothing is shrunk
(``rho = 1``: the raw matrix and its noise), half of it when only the
averaged ``mbar`` is kept. So ``||w|| <= 2 ||u|| / tau`` and ``|w_0| <= (|t| + ||s|| ||w||) / tau``:
every fit is bounded.

The figures against OLS (before and after this solve and
:data:`~dp.regression.functional.SHRUNK_QUADRATIC_WEIGHT`) and the alternatives measured and
not used are in ``bench/RESULTS.md`` (DP regression).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dppub.dp.errors import InvariantError
from dppub.dp.regression.statistics import SufficientStatistics

__all__ = ["ShrunkSpectrum", "shrink_spectrum", "shrunk_solve"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class ShrunkSpectrum:
    """A noisy scatter matrix with its spectrum shrunk and floored: ``V diag(g) V^T``."""

    values: FloatArray
    """Shrunk, floored eigenvalues ``g`` (all ``>= tau / 2 > 0``)."""
    vectors: FloatArray
    """Orthonormal eigenvectors ``V`` (columns) of the noisy matrix."""
    rho: float
    """Weight kept on the noisy spectrum's spread (0: all noise, 1: no shrinkage)."""
    raised: int
    """Eigenvalues raised to the floor ``tau (1 + rho) / 2``."""

    def matrix(self) -> FloatArray:
        """``V diag(g) V^T``, positive definite."""
        return np.asarray((self.vectors * self.values) @ self.vectors.T, dtype=np.float64)

    def solve(self, rhs: FloatArray) -> FloatArray:
        """``V diag(g)^-1 V^T rhs``."""
        return np.asarray(self.vectors @ ((self.vectors.T @ rhs) / self.values), np.float64)


def shrink_spectrum(
    scatter: FloatArray,
    *,
    quadratic_scale: float,
    floor: float,
    noise_energy: float | None = None,
) -> ShrunkSpectrum:
    """Shrink the spectrum of a noisy ``d x d`` scatter matrix and floor it (module doc).

    Args:
        scatter: the noisy (centred) ``sum x x^T``.
        quadratic_scale: Laplace scale ``b_Q`` of its upper-triangle entries.
        floor: the public trimming floor ``tau > 0``.
        noise_energy: the expected squared Frobenius norm of the noise, when it is not
            ``2 b_Q^2 d^2`` (another noise distribution, or entries known exactly).

    >>> sp = shrink_spectrum(np.diag([4.0, 4.0]), quadratic_scale=0.0, floor=2.0)
    >>> sp.values.tolist(), sp.rho
    ([4.0, 4.0], 0.0)
    """
    if not floor > 0.0:
        raise InvariantError(f"the eigenvalue floor must be > 0, got {floor!r}")
    d = scatter.shape[0]
    mu, vecs = np.linalg.eigh((scatter + scatter.T) / 2.0)
    mbar = float(mu.mean())
    spread = float(((mu - mbar) ** 2).sum())
    noise = 2.0 * quadratic_scale**2 * d * d if noise_energy is None else noise_energy
    rho = max(0.0, spread - noise) / spread if spread > 0.0 else 0.0
    g = mbar + rho * (mu - mbar)
    tau_rho = floor * (1.0 + rho) / 2.0
    raised = g < tau_rho
    return ShrunkSpectrum(
        values=np.where(raised, tau_rho, g), vectors=vecs, rho=rho, raised=int(raised.sum())
    )


def shrunk_solve(
    noisy: SufficientStatistics, *, quadratic_scale: float, floor: float
) -> tuple[FloatArray, ShrunkSpectrum]:
    """Solve the noisy normal equations with a shrunk, floored covariance (module doc).

    Returns the coefficients in the shifted frame (the intercept last, if any) and the
    shrunk spectrum of the (centred) scatter.

    Args:
        noisy: the released statistics.
        quadratic_scale: Laplace scale ``b_Q`` of the entries of ``sum x x^T``.
        floor: the public trimming floor ``tau > 0`` (also the noisy count's floor).

    >>> stats = SufficientStatistics(gram=np.diag([4.0, 4.0]), moment=np.array([4.0, 2.0]),
    ...                              fit_intercept=False)
    >>> shrunk_solve(stats, quadratic_scale=0.0, floor=2.0)[0].tolist()
    [1.0, 0.5]
    """
    d = noisy.dim
    q, c = noisy.gram[:d, :d], noisy.moment[:d]
    n = max(float(noisy.gram[d, d]), floor) if noisy.fit_intercept else 1.0
    s = noisy.gram[:d, d] if noisy.fit_intercept else np.zeros(d)
    t = float(noisy.moment[d]) if noisy.fit_intercept else 0.0
    spec = shrink_spectrum(q - np.outer(s, s) / n, quadratic_scale=quadratic_scale, floor=floor)
    w = spec.solve(c - s * (t / n))
    theta = np.r_[w, (t - s @ w) / n] if noisy.fit_intercept else w
    if not np.all(np.isfinite(theta)):
        raise InvariantError("shrunk least squares produced a non-finite solution")
    return np.asarray(theta, dtype=np.float64), spec
