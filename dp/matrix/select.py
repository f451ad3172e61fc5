"""Strategy products and automatic, data-independent strategy selection.

:func:`select_strategy` evaluates every candidate's expected error ``||A||_1^2 ||W A^+||_F^2``
(Li et al., "The matrix mechanism", VLDB J. 2015) and returns the smallest. The choice never looks
at the data, so it costs no privacy budget. For Kronecker workloads the error factorizes over the
axes (HDMM, McKenna et al. VLDB 2018, Thm. 3), so each axis is selected independently. Workloads
with marginal structure also compete against HDMM's optimized marginal weights
(:mod:`dp.matrix.opt_marginals`); for Gaussian noise the sensitivity is the L2 one and the
residual strategy (:mod:`dp.matrix.residual`) joins the candidates.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse.linalg as spla

from dppub.dp.errors import ConfigError
from dppub.dp.matrix.marginal_basis import marginal_spectrum, pattern_weights
from dppub.dp.matrix.opt_blocks import block_start, opt_blocks
from dppub.dp.matrix.opt_marginals import opt_marginals
from dppub.dp.matrix.optimize import opt0, tuned_hierarchy
from dppub.dp.matrix.product import Kron, Marginals, Union, along_axes
from dppub.dp.matrix.residual import residual_planner
from dppub.dp.matrix.strategy import Strategy, hierarchical, identity_strategy
from dppub.dp.matrix.wavelet import wavelet
from dppub.dp.matrix.workload import FloatArray, Workload

__all__ = [
    "NOISES",
    "KronStrategy",
    "WorkloadStrategy",
    "cached_error_factor",
    "candidate_strategies",
    "kron_strategy",
    "select_strategy",
    "workload_strategy",
]

# Dense OPT0 costs O(n p^2) per iteration with dense products: used up to 1024 cells; the
# block-sparse variant takes over up to 8192; beyond, the tuned hierarchy is the optimized one.
_OPT0_MAX_N = 1024
_OPT_BLOCKS_MAX_N = 8192
# Block OPT0's iteration cost grows with its row count p: iterations = work / p, capped (n = 4096:
# prefix p = 274 runs 299 iterations, all-range p = 296 runs 277; n = 2048 (p = 146) runs 561,
# n = 8192 (p ~ 550) about 150).
_OPT_BLOCKS_WORK = 82_000
_OPT_BLOCKS_MAX_ITER = 600
# HDMM's random start (p = n / 16) wins up to ~256 cells; beyond, the hierarchy start is better.
_OPT0_RANDOM_MAX_N = 512


@dataclass(frozen=True, slots=True, kw_only=True)
class KronStrategy(Strategy):
    """Kronecker product of per-axis strategies (HDMM's OPT-Kron for product workloads).

    ``||A||_1 = prod ||A_i||_1`` and ``A^+ = (x) A_i^+``, so for ``W = (x) W_i`` the error is the
    product of the per-axis errors, and for a union of products it is their weighted sum.
    """

    factors: tuple[Strategy, ...]
    """One strategy per axis."""

    @property
    def name(self) -> str:
        return " x ".join(f.name for f in self.factors)

    @property
    def domain(self) -> tuple[int, ...]:
        return tuple(d for f in self.factors for d in f.domain)

    @property
    def m(self) -> int:
        return math.prod(f.m for f in self.factors)

    @property
    def sensitivity(self) -> float:
        return math.prod(f.sensitivity for f in self.factors)

    @property
    def l2_sensitivity(self) -> float:
        # Column norms of a Kronecker product are products of the factors' column norms.
        return math.prod(f.l2_sensitivity for f in self.factors)

    def _matmat(self, x: FloatArray) -> FloatArray:
        return along_axes(x, [f.n for f in self.factors], self.factors, "_matmat")

    def _rmatmat(self, y: FloatArray) -> FloatArray:
        return along_axes(y, [f.m for f in self.factors], self.factors, "_rmatmat")

    def _lstsq(self, r: FloatArray) -> FloatArray:
        return along_axes(r, [f.m for f in self.factors], self.factors, "_lstsq")

    def squared_error_factor(self, workload: Workload) -> float:
        if isinstance(workload, Union):
            pairs = zip(workload.parts, workload.weights, strict=True)
            return sum(w * w * self.squared_error_factor(p) for p, w in pairs)
        axes = [f.domain for f in self.factors]
        if isinstance(workload, Kron) and [f.domain for f in workload.factors] == axes:
            pairs2 = zip(self.factors, workload.factors, strict=True)
            return math.prod(a.squared_error_factor(w) for a, w in pairs2)
        if len(self.factors) == 1:
            return self.factors[0].squared_error_factor(workload)
        raise ConfigError(f"strategy {self.name} cannot evaluate workload {workload.name}")


def kron_strategy(*factors: Strategy) -> KronStrategy:
    """Kronecker product of strategies, one per axis."""
    if len(factors) < 1:
        raise ConfigError("kron_strategy needs at least one strategy, got 0")
    return KronStrategy(factors=tuple(factors))


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadStrategy(Strategy):
    """Measure the workload itself (``A = W``): best for low-order marginals over big domains,
    where ``||W W^+||_F^2 = rank(W)`` is far below the identity's ``||W||_F^2``."""

    workload: Workload
    """The measured workload."""

    @property
    def name(self) -> str:
        return f"Workload[{self.workload.name}]"

    @property
    def domain(self) -> tuple[int, ...]:
        return self.workload.domain

    @property
    def m(self) -> int:
        return self.workload.m

    @property
    def sensitivity(self) -> float:
        if isinstance(self.workload, Marginals):  # one cell of each marginal holds each cell
            return math.fsum(self.workload.weights)
        return self.workload.sensitivity

    @property
    def l2_sensitivity(self) -> float:
        if isinstance(self.workload, Marginals):
            return math.sqrt(math.fsum(w * w for w in self.workload.weights))
        return math.sqrt(float(np.max(self.workload.gram_diag())))

    def _matmat(self, x: FloatArray) -> FloatArray:
        return self.workload._matmat(x)

    def _rmatmat(self, y: FloatArray) -> FloatArray:
        return self.workload._rmatmat(y)

    def _lstsq(self, r: FloatArray) -> FloatArray:
        # LSMR from zero converges to the minimum-norm solution; W x_hat is unique either way.
        op = spla.LinearOperator(
            (self.m, self.n),
            matvec=lambda v: self._matmat(v.reshape(-1, 1))[:, 0],
            rmatvec=lambda v: self._rmatmat(v.reshape(-1, 1))[:, 0],
            dtype=np.float64,
        )
        cols = [
            spla.lsmr(op, r[:, j], atol=1e-12, btol=1e-12, maxiter=10 * self.n)[0]
            for j in range(r.shape[1])
        ]
        return np.column_stack(cols)

    def squared_error_factor(self, workload: Workload) -> float:
        same = workload is self.workload or (
            isinstance(workload, Marginals) and workload.name == self.workload.name
        )
        if not same:
            raise ConfigError(f"strategy {self.name} cannot evaluate workload {workload.name}")
        # ||W W^+||_F^2 = rank(W); marginals count it from 2^d distinct eigenvalues.
        spectrum = marginal_spectrum(workload)
        if spectrum is not None:
            lam, mult = spectrum
            return float(np.sum(mult[lam > 1e-18 * lam.max()]))
        sv = workload.singular_values()
        return float(np.count_nonzero(sv > 1e-9 * sv.max()))


def workload_strategy(workload: Workload) -> WorkloadStrategy:
    """The strategy that measures ``workload`` itself."""
    return WorkloadStrategy(workload=workload)


NOISES = ("laplace", "gaussian")
"""Noise distributions a strategy can be selected for: the score is ``||A||_1^2 ||W A^+||_F^2``
under Laplace noise and ``||A||_{1->2}^2 ||W A^+||_F^2`` under Gaussian noise (whose scale is
proportional to the L2 sensitivity at any fixed (epsilon, delta) or rho)."""


def _check_noise(noise: str) -> str:
    if noise not in NOISES:
        raise ConfigError(f"noise must be one of {list(NOISES)}, got {noise!r}")
    return noise


def _marginal_candidates(workload: Workload, noise: str) -> list[Strategy]:
    """Strategies in the eigenbasis that marginals share (:mod:`dp.matrix.marginal_basis`).

    Laplace: HDMM's optimized marginal weights. Gaussian: the residual strategy, which is
    optimal among all strategies whose Gram matrix is diagonal in that basis (weighted marginals
    and the identity included), and attains the SVD bound for marginal workloads.
    """
    if len(workload.domain) < 2 or pattern_weights(workload) is None:
        return []
    if noise == "gaussian":
        return [residual_planner(workload)]
    opt = opt_marginals(workload)
    return [] if opt is None else [opt]


def candidate_strategies(workload: Workload, *, noise: str = "laplace") -> list[Strategy]:
    """Data-independent candidate strategies for a workload (see :func:`select_strategy`).

    1-D: identity, Haar, H_b (b = 2, 4, 8, 16), the tuned nested-block hierarchy, and an
    optimized p-Identity: dense OPT0 from HDMM's random start (n <= 512) and from the tuned
    hierarchy (n <= 1024), block-sparse OPT0 up to 8192 cells. Kronecker products of 1-D
    workloads: the product of the per-axis selections (the error factorizes). Other
    multi-dimensional workloads: the identity, and for marginals the marginals themselves.
    Multi-dimensional workloads with marginal structure (marginals, Kronecker products of 1-D
    workloads, unions of those) also get HDMM's optimized marginal weights (Laplace) or the
    residual strategy (Gaussian).
    """
    _check_noise(noise)
    if len(workload.domain) == 1:
        n = workload.n
        out: list[Strategy] = [identity_strategy(n), wavelet(n)]
        out += [hierarchical(n, b) for b in (2, 4, 8, 16) if b < n]
        tree = tuned_hierarchy(workload) if n >= 4 else None
        if tree is not None:
            out.append(tree)
        if 16 <= n <= _OPT0_RANDOM_MAX_N:
            out.append(opt0(workload, init="random"))
        if 16 <= n <= _OPT0_MAX_N:
            out.append(opt0(workload, init="hierarchy", maxiter=500))
        elif _OPT0_MAX_N < n <= _OPT_BLOCKS_MAX_N:
            start = block_start(tree if tree is not None else tuned_hierarchy(workload))
            rows = int(np.count_nonzero(start.hi - start.lo > 1))
            iters = min(_OPT_BLOCKS_MAX_ITER, _OPT_BLOCKS_WORK // max(1, rows))
            out.append(opt_blocks(workload, maxiter=iters, start=start))
        return out
    if isinstance(workload, Kron) and all(len(f.domain) == 1 for f in workload.factors):
        per_axis = (select_strategy(f, noise=noise) for f in workload.factors)
        return [kron_strategy(*per_axis), *_marginal_candidates(workload, noise)]
    out = [kron_strategy(*(identity_strategy(d) for d in workload.domain))]
    if isinstance(workload, Marginals):
        out.append(workload_strategy(workload))
    return out + _marginal_candidates(workload, noise)


# Data-independent results, reused across releases of the same workload in one process.
_CACHE_SIZE = 64
_selected: dict[tuple[str, str], tuple[Strategy, float]] = {}
_factors: dict[tuple[str, int], tuple[Strategy, float]] = {}
# Scores within this relative margin of the best count as ties (keep the earlier, simpler
# candidate): optimizers that converge to a simple strategy land within rounding of it.
_TIE = 1e-9


def _remember(
    cache: dict[Any, tuple[Strategy, float]], key: Any, value: tuple[Strategy, float]
) -> None:
    cache[key] = value
    while len(cache) > _CACHE_SIZE:
        cache.pop(next(iter(cache)))


def cached_error_factor(workload: Workload, strategy: Strategy) -> float:
    """``||W A^+||_F^2``, cached per (workload, strategy object) since it never depends on data."""
    key = (workload.key, id(strategy))
    hit = _factors.get(key)
    if hit is not None and hit[0] is strategy:
        return hit[1]
    value = strategy.squared_error_factor(workload)
    _remember(_factors, key, (strategy, value))
    return value


def select_strategy(
    workload: Workload,
    *,
    candidates: Callable[[Workload], list[Strategy]] | None = None,
    noise: str = "laplace",
) -> Strategy:
    """The candidate strategy with the lowest expected error for ``workload`` (no data used).

    Args:
        workload: the workload to answer.
        candidates: optional generator of candidates (default :func:`candidate_strategies`).
        noise: ``"laplace"`` (default) or ``"gaussian"``: which sensitivity scales the noise.

    Returns:
        The strategy minimizing ``||A||^2 ||W A^+||_F^2`` (L1 or L2 sensitivity); scores within
        a relative ``1e-9`` of the best are ties, and ties keep the earlier candidate.
    """
    if not isinstance(workload, Workload):
        raise ConfigError(f"workload must be a dp.matrix workload, got {type(workload).__name__}")
    _check_noise(noise)
    key = (noise, workload.key)
    if candidates is None and key in _selected:
        return _selected[key][0]
    pool = (
        candidates(workload)
        if candidates is not None
        else candidate_strategies(workload, noise=noise)
    )
    factors = [cached_error_factor(workload, a) for a in pool]
    sens = [a.sensitivity if noise == "laplace" else a.l2_sensitivity for a in pool]
    scores = np.array([s * s * f for s, f in zip(sens, factors, strict=True)])
    best = int(np.flatnonzero(scores <= scores.min() * (1.0 + _TIE))[0])
    if candidates is None:
        _remember(_selected, key, (pool[best], factors[best]))
    return pool[best]
