"""Noise mechanisms: Laplace, Gaussian, randomized response and the exponential mechanism.

Release-grade noise (``rng=None``, what every flow uses) comes from OpenDP's samplers: discrete
constructions driven by the operating system's CSPRNG, so that the floating-point output does not
leak the input through its low-order bits (Mironov 2012). The Laplace scale is calibrated once per
(sensitivity, epsilon, length) for the whole vector and re-checked through OpenDP's own privacy
map, which also charges the rounding of the input to the sampler's grid. The vector is then
noised in chunks of :data:`CHUNK` coordinates, each one call of OpenDP's vector measurement with
that same scale and grid, checking the run's stop request between them
(:func:`dp.stopping.check_stop`): a million-cell draw takes about a minute on a loaded machine,
a chunk well under a second. Every coordinate's noise is drawn independently by the same sampler
at the same scale, so chunking changes neither the output's distribution nor the guarantee.

Passing a seeded ``numpy.random.Generator`` as ``rng`` selects a *reproducible* sampler with the
same discrete construction (a two-sided geometric on a power-of-two grid) but a non-cryptographic
bit source. It exists for tests and benchmarks only; flows never pass one, and a seed is never a
flow parameter.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt
import opendp.prelude as odp

from dppub.dp.calibration import gaussian_sigma, laplace_scale, zcdp_gaussian_sigma
from dppub.dp.errors import ConfigError, InvariantError
from dppub.dp.stopping import check_stop
from dppub.dp.validation import check_epsilon

__all__ = [
    "CHUNK",
    "exponential",
    "gaussian",
    "laplace",
    "noisy_max",
    "randomized_response",
    "rr_estimate_count",
    "rr_keep_probability",
]

odp.enable_features("contrib")

FloatArray = npt.NDArray[np.float64]
# Grid of the reproducible sampler: 2^-30 of the noise scale. Rounding the input to it adds at
# most one grid step per coordinate to the sensitivity, i.e. about 1e-9 of the scale.
_GRID_BITS = 30
# Grid of the release sampler (OpenDP's ``k``): 2^-50 of the noise scale; OpenDP's privacy map
# charges the rounding, n 2^-50 of the scale for n coordinates (see _calibrated_laplace).
_RELEASE_GRID_BITS = 50
CHUNK = 1024
"""Coordinates noised per call of an OpenDP sampler; the stop request is checked between calls.
About 0.1 s of Laplace and 0.4 s of Gaussian noise on a loaded 2-core machine."""


def _finite_array(value: npt.ArrayLike, *, name: str) -> FloatArray:
    arr = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ConfigError(f"{name} must be finite (no NaN or inf) before noise is added")
    return arr


@lru_cache(maxsize=64)
def _opendp_laplace(scale: float, size: int, k: int) -> Any:
    return odp.m.make_laplace(
        odp.vector_domain(odp.atom_domain(T=float, nan=False), size=size),
        odp.l1_distance(T=float),
        scale=scale,
        k=k,
    )


@lru_cache(maxsize=64)
def _calibrated_laplace(sensitivity: float, epsilon: float, size: int) -> tuple[float, int]:
    """Scale and grid exponent ``k`` of an OpenDP Laplace measurement on vectors of ``size``
    whose privacy map certifies ``epsilon``.

    OpenDP rounds the input to the grid ``2^k`` and adds discrete Laplace noise on it; its map
    charges the rounding (up to ``2^k`` per coordinate) on top of ``sensitivity``, which needs
    the vector's size. With ``2^k`` about ``2^-50`` of the scale that costs ``size * 2^-50`` of
    the scale, while sampling is ~3x faster than on OpenDP's default grid of ``2^-1074`` (whose
    integers have ~1,000 bits). Cached: calibrating may need a binary search over the scale,
    which cost more than the sampling itself.
    """
    nominal = laplace_scale(sensitivity=sensitivity, epsilon=epsilon)
    k = math.floor(math.log2(nominal)) - _RELEASE_GRID_BITS
    if _opendp_laplace(nominal, size, k).map(sensitivity) <= epsilon:
        return nominal, k
    # OpenDP accounts for its rounding to the grid; if that pushes epsilon over, widen the scale.
    scale = odp.binary_search_param(
        lambda s: _opendp_laplace(float(s), size, k), d_in=sensitivity, d_out=epsilon, T=float
    )
    if _opendp_laplace(float(scale), size, k).map(sensitivity) > epsilon:
        raise InvariantError("OpenDP Laplace calibration failed its own privacy map")
    return float(scale), k


def _in_chunks(x: FloatArray, sample: Callable[[FloatArray], list[float]]) -> FloatArray:
    """``sample`` applied to ``x`` (flattened) :data:`CHUNK` coordinates at a time, the stop
    request checked before each chunk; the same shape as ``x``."""
    flat, out = x.ravel(), np.empty(x.size, dtype=np.float64)
    for start in range(0, flat.size, CHUNK):
        check_stop("drawing noise")
        out[start : start + CHUNK] = sample(flat[start : start + CHUNK])
    return out.reshape(x.shape)


def _grid(scale: float) -> float:
    return 2.0 ** (math.floor(math.log2(scale)) - _GRID_BITS)


def _two_sided_geometric(
    shape: tuple[int, ...], *, scale_in_steps: float, rng: np.random.Generator
) -> npt.NDArray[np.int64]:
    # Discrete Laplace as the difference of two geometric variables (Inusah & Kozubowski 2006).
    p = -math.expm1(-1.0 / scale_in_steps)
    return rng.geometric(p, size=shape) - rng.geometric(p, size=shape)


def laplace(
    value: npt.ArrayLike,
    *,
    sensitivity: float,
    epsilon: float,
    rng: np.random.Generator | None = None,
) -> FloatArray:
    """Laplace mechanism: ``value + Lap(sensitivity / epsilon)`` per coordinate.

    Args:
        value: exact statistic (scalar or array), finite.
        sensitivity: L1 global sensitivity of the statistic, derived from declared bounds.
        epsilon: privacy parameter (> 0).
        rng: ``None`` for release-grade noise (OpenDP), drawn in chunks of :data:`CHUNK`
            independent coordinates at the scale certified for the whole vector (module doc:
            the same distribution as one call); a seeded generator for tests only.

    Returns:
        The noisy statistic, same shape as ``value``.

    Raises:
        Stopped: the run was interrupted between two chunks (:mod:`dp.stopping`).
    """
    eps = check_epsilon(epsilon)
    x = _finite_array(value, name="value")
    if rng is None:
        # Certified for the whole vector; each chunk is noised by the same scale and grid.
        scale, k = _calibrated_laplace(float(sensitivity), eps, max(1, x.size))
        return _in_chunks(x, lambda part: _opendp_laplace(scale, part.size, k)(part.tolist()))
    scale = laplace_scale(sensitivity=sensitivity, epsilon=eps)
    g = _grid(scale)
    steps = np.rint(x / g) + _two_sided_geometric(x.shape, scale_in_steps=scale / g, rng=rng)
    return np.asarray(steps * g, dtype=np.float64)


@lru_cache(maxsize=64)
def _opendp_gaussian(scale: float) -> Any:
    return odp.m.make_gaussian(
        odp.vector_domain(odp.atom_domain(T=float, nan=False)),
        odp.l2_distance(T=float),
        scale=scale,
    )


def gaussian(
    value: npt.ArrayLike,
    *,
    l2_sensitivity: float,
    epsilon: float | None = None,
    delta: float | None = None,
    rho: float | None = None,
    rng: np.random.Generator | None = None,
) -> FloatArray:
    """Gaussian mechanism calibrated to ``(epsilon, delta)`` (the analytic calibration, Balle &
    Wang 2018) or to rho-zCDP (``sigma = Delta_2 / sqrt(2 rho)``, Bun & Steinke 2016).

    The scale comes from :func:`dp.calibration.gaussian_sigma` or
    :func:`dp.calibration.zcdp_gaussian_sigma`; samples are OpenDP's discrete Gaussian
    (Canonne, Kamath & Steinke 2020) for releases, drawn independently per coordinate in chunks
    (module doc: the same distribution as one call), or a rounded seeded normal for tests.
    """
    if rho is not None and epsilon is None and delta is None:
        sigma = zcdp_gaussian_sigma(l2_sensitivity=l2_sensitivity, rho=rho)
    elif rho is None and epsilon is not None and delta is not None:
        sigma = gaussian_sigma(l2_sensitivity=l2_sensitivity, epsilon=epsilon, delta=delta)
    else:
        raise ConfigError("the Gaussian mechanism needs either epsilon and delta, or rho")
    x = _finite_array(value, name="value")
    if rng is None:
        return _in_chunks(x, lambda part: _opendp_gaussian(sigma)(part.tolist()))
    g = _grid(sigma)
    steps = np.rint(x / g) + np.rint(rng.normal(0.0, sigma / g, size=x.shape))
    return np.asarray(steps * g, dtype=np.float64)


@lru_cache(maxsize=64)
def _opendp_noisy_max(scale: float, *, pure: bool) -> Any:
    """OpenDP's report-noisy-max: exponential noise under ``max_divergence`` (pure), Gumbel
    noise under ``zero_concentrated_divergence``."""
    return odp.m.make_noisy_max(
        odp.vector_domain(odp.atom_domain(T=float, nan=False)),
        odp.linf_distance(T=float),
        odp.max_divergence() if pure else odp.zero_concentrated_divergence(),
        scale=scale,
    )


def _opendp_argmax(
    q: npt.NDArray[np.float64], scale: float, sensitivity: float, *, pure: bool, budget: float
) -> int:
    """OpenDP's draw, after checking its own privacy map against ``budget`` (epsilon or rho)."""
    meas = _opendp_noisy_max(scale, pure=pure)
    if meas.map(sensitivity) > budget * (1.0 + 1e-9):
        raise InvariantError(
            f"OpenDP's noisy max exceeds the {'epsilon' if pure else 'rho'} it was calibrated to"
        )
    return int(meas(q.tolist()))


def exponential(
    scores: npt.ArrayLike,
    *,
    sensitivity: float,
    rho: float,
    rng: np.random.Generator | None = None,
) -> int:
    """Exponential mechanism (McSherry & Talwar 2007) as report-noisy-max with Gumbel noise:
    the index ``i`` with probability proportional to ``exp(epsilon q_i / (2 sensitivity))``.

    Calibrated to rho-zCDP: as an ``epsilon``-DP bounded-range mechanism it is
    ``epsilon^2 / 8``-zCDP (Cesar & Rogers 2021), so ``epsilon = sqrt(8 rho)`` and the Gumbel
    scale is ``2 sensitivity / epsilon``; ``sensitivity`` bounds how far one neighbour moves any
    single score. Releases use OpenDP's ``make_noisy_max``, whose own zCDP map is checked.
    """
    q = _finite_array(scores, name="scores").ravel()
    if q.size == 0:
        raise ConfigError("the exponential mechanism needs at least one candidate")
    if not (sensitivity > 0.0 and rho > 0.0 and math.isfinite(sensitivity * rho)):
        raise ConfigError(
            f"the exponential mechanism needs sensitivity > 0 and rho > 0, got {sensitivity!r}, "
            f"{rho!r}"
        )
    scale = 2.0 * sensitivity / math.sqrt(8.0 * rho)
    if rng is None:
        return _opendp_argmax(q, scale, sensitivity, pure=False, budget=rho)
    return int(np.argmax(q / scale + rng.gumbel(size=q.size)))


def noisy_max(
    scores: npt.ArrayLike,
    *,
    sensitivity: float,
    epsilon: float,
    rng: np.random.Generator | None = None,
) -> int:
    """Pure epsilon-DP report-noisy-max with exponential noise of scale ``2 sensitivity /
    epsilon`` (OpenDP's ``make_noisy_max`` under ``max_divergence``; equivalent to
    permute-and-flip, McKenna & Sheldon 2020, never worse than the exponential mechanism's
    expected score at the same epsilon). ``sensitivity`` bounds how far one neighbour moves any
    single score; the map is checked against ``epsilon``.
    """
    q = _finite_array(scores, name="scores").ravel()
    eps = check_epsilon(epsilon)
    if q.size == 0:
        raise ConfigError("report-noisy-max needs at least one candidate")
    if not (sensitivity > 0.0 and math.isfinite(sensitivity)):
        raise ConfigError(f"report-noisy-max needs sensitivity > 0, got {sensitivity!r}")
    scale = 2.0 * sensitivity / eps
    if rng is None:
        return _opendp_argmax(q, scale, sensitivity, pure=True, budget=eps)
    return int(np.argmax(q / scale + rng.exponential(size=q.size)))


def rr_keep_probability(epsilon: float) -> float:
    """Probability of reporting the true bit: ``e^eps / (1 + e^eps)`` (Warner 1965).

    >>> round(rr_keep_probability(math.log(2)), 6)  # the seeds' 2/3 example is ln(2)-DP
    0.666667
    """
    eps = check_epsilon(epsilon)
    return 1.0 / (1.0 + math.exp(-eps))


@lru_cache(maxsize=16)
def _opendp_rr(p_keep: float) -> Any:
    return odp.m.make_randomized_response_bool(prob=p_keep)


def randomized_response(
    bits: npt.ArrayLike, *, epsilon: float, rng: np.random.Generator | None = None
) -> npt.NDArray[np.bool_]:
    """Randomized response: each bit is kept with probability ``e^eps/(1+e^eps)``, else flipped.

    Each respondent's report is ``epsilon``-DP (local model).
    """
    b = np.asarray(bits)
    if b.dtype != np.bool_:
        raise ConfigError(f"randomized_response needs boolean bits, got dtype {b.dtype}")
    p = rr_keep_probability(epsilon)
    if rng is None:
        meas = _opendp_rr(p)
        return np.fromiter((meas(bool(v)) for v in b.ravel()), dtype=np.bool_).reshape(b.shape)
    keep = rng.random(b.shape) < p
    return np.where(keep, b, ~b)


def rr_estimate_count(observed_ones: float, n: int, *, epsilon: float) -> float:
    """Unbiased estimate of the true number of ones from ``observed_ones`` reports out of ``n``.

    ``E[observed] = p t + (1 - p)(n - t)``, so ``t_hat = (observed - (1 - p) n) / (2p - 1)``.

    >>> round(rr_estimate_count(2 / 3 * 90 + 1 / 3 * 10, 100, epsilon=math.log(2)), 6)
    90.0
    """
    p = rr_keep_probability(epsilon)
    return (observed_ones - (1.0 - p) * n) / (2.0 * p - 1.0)
