"""The measurement step of the matrix mechanism: ``r = A x + Lap(||A||_1 / epsilon)``.

This is the only place where the private histogram is touched. One individual changes one cell
by one, so ``||A (x - x')||_1 <= ||A||_1`` and adding Laplace noise of scale ``||A||_1 / epsilon``
to every row is ``epsilon``-DP (Dwork et al. 2006; Li et al. 2015, Prop. 2). Everything computed
from the returned :class:`Measurement` is post-processing and costs nothing more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dp.budget import PrivacyCost
from dp.errors import ConfigError
from dp.matrix.strategy import Strategy
from dp.matrix.workload import FloatArray
from dp.mechanisms import laplace
from dp.validation import check_epsilon

__all__ = ["Measurement", "check_histogram", "measure"]


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
    """Laplace scale ``||A||_1 / epsilon`` of every row."""

    @property
    def cost(self) -> PrivacyCost:
        """The release's privacy cost (pure epsilon-DP)."""
        return PrivacyCost(epsilon=self.epsilon)


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


def measure(
    strategy: Strategy,
    x: npt.ArrayLike,
    *,
    epsilon: float,
    rng: np.random.Generator | None = None,
) -> Measurement:
    """Answer ``strategy`` on histogram ``x`` with Laplace noise (the only private step).

    Args:
        strategy: measurement strategy ``A``.
        x: histogram over the strategy's domain (finite, >= 0).
        epsilon: privacy parameter (> 0).
        rng: ``None`` for release-grade OpenDP noise; a seeded generator in tests only.

    Returns:
        The :class:`Measurement`.
    """
    eps = check_epsilon(epsilon)
    if not isinstance(strategy, Strategy):
        raise ConfigError(f"strategy must be a dp.matrix strategy, got {type(strategy).__name__}")
    hist = check_histogram(x, strategy.n)
    sens = strategy.sensitivity
    if not math.isfinite(sens) or sens <= 0:
        raise ConfigError(f"strategy sensitivity must be finite and > 0, got {sens!r}")
    noisy = laplace(strategy @ hist, sensitivity=sens, epsilon=eps, rng=rng)
    return Measurement(strategy=strategy, values=noisy, epsilon=eps, noise_scale=sens / eps)
