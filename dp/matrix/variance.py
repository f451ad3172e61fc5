"""Exact per-query noise moments of least-squares workload answers.

With Laplace noise of scale ``b`` on every strategy answer, the least-squares answer to query
``w_i`` is ``w_i^T A^+ r`` and its error ``c_i^T z`` (``c_i = (W A^+)_i``) has variance
``2 b^2 ||c_i||_2^2 = 2 b^2 w_i^T (A^T A)^+ w_i`` (Li et al., "The matrix mechanism", VLDB
J. 2015, Prop. 4 gives the sum over ``i``; this is each term) and fourth cumulant
``12 b^4 ||c_i||_4^4``, which says how far from Gaussian it is. :func:`query_noise_moments`
computes both without forming ``W A^+`` (the fourth moments from blocks of its rows,
``c_i = A (A^T A)^+ w_i``, when it has at most 2^27 entries; products multiply per axis):

* ``(A^T A)^-1`` is applied in the strategy's own structure: Sherman-Morrison levels for trees,
  ``A^T D^-2 A`` for the orthogonal Haar rows, the push-through identity for p-Identity
  (HDMM, McKenna et al. VLDB 2018), one axis at a time for Kronecker products;
* 1-D workloads need only the query vectors in column blocks (cells, prefixes, windows); all
  ranges ``[i, j]`` read the prefix covariance ``C = L (A^T A)^-1 L^T`` (``n x n``) as
  ``C_jj - 2 C_{i-1,j} + C_{i-1,i-1}``;
* Kronecker workloads under Kronecker strategies factorize (``(x) w_k`` against ``(x) Sigma_k``):
  the factor is the product of the per-axis factors, and unions (marginals) stack their parts;
* marginals measured by themselves (``A = W``) use the common eigenbasis of ``I`` and ``J = 11^T``
  on every axis, where ``(W^T W)^+`` is diagonal: every cell of one marginal has the same
  factor, a sum over ``2^d`` constant/zero-mean patterns.

Anything else falls back to dense matrices on domains of at most 4,096 cells.

>>> from dppub.dp.matrix.workload import identity
>>> from dppub.dp.matrix.strategy import identity_strategy
>>> query_variance_factors(identity(3), identity_strategy(3)).tolist()
[1.0, 1.0, 1.0]
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import scipy.linalg as sla

from dppub.dp.errors import ConfigError
from dppub.dp.matrix.optimize import PIdentity
from dppub.dp.matrix.product import Kron, Union, along_axes
from dppub.dp.matrix.select import KronStrategy, WorkloadStrategy
from dppub.dp.matrix.strategy import Strategy, Tree
from dppub.dp.matrix.wavelet import Wavelet
from dppub.dp.matrix.workload import (
    AllRange,
    FloatArray,
    Identity,
    Prefix,
    Total,
    WidthRange,
    Workload,
)

__all__ = ["NoiseMoments", "gram_inverse", "query_noise_moments", "query_variance_factors"]

Apply = Callable[[FloatArray], FloatArray]
# Query vectors per block: bounds the dense work arrays to n x 512.
_BLOCK = 512
# Dense fallbacks (and the all-range prefix covariance) stay below this many cells.
_DENSE_MAX_N = 4096
# Fourth moments need the rows of W A^+: computed when it has at most this many entries.
_MAX_FOURTH = 1 << 27


def gram_inverse(strategy: Strategy) -> Apply:
    """``Y -> (A^T A)^+ Y`` for an ``n x k`` block, in the strategy's structure where known."""
    if isinstance(strategy, Tree):
        return strategy.inv_gram
    if isinstance(strategy, Wavelet):
        mat = strategy.matrix
        norm4 = np.asarray(mat.multiply(mat).sum(axis=1)).ravel() ** 2
        return lambda y: np.asarray(mat.T @ ((mat @ y) / norm4[:, None]))
    if isinstance(strategy, PIdentity):
        # A^T A = S^-1 (I + T^T T) S^-1 with S = diag(1 + 1^T T); invert by push-through.
        theta = strategy.theta
        scale = (1.0 + theta.sum(axis=0))[:, None]
        chol = sla.cho_factor(np.eye(theta.shape[0]) + theta @ theta.T)

        def pident(y: FloatArray) -> FloatArray:
            u = scale * y
            return np.asarray(scale * (u - theta.T @ sla.cho_solve(chol, theta @ u)))

        return pident
    if isinstance(strategy, KronStrategy):
        ops = [SimpleNamespace(apply=gram_inverse(f)) for f in strategy.factors]
        sizes = [f.n for f in strategy.factors]
        return lambda y: along_axes(y, sizes, ops, "apply")
    n = strategy.n
    if n > _DENSE_MAX_N:
        raise ConfigError(f"no structured variance for strategy {strategy.name} over {n} cells")
    a = strategy.dense()
    pinv = sla.pinvh(a.T @ a)
    return lambda y: np.asarray(pinv @ y)


def _vectors(workload: Workload) -> Callable[[int, int], FloatArray]:
    """Query vectors ``w_a .. w_{b-1}`` as the columns of an ``n x k`` block: built directly for
    1-D cells, prefixes and ranges, read off ``W^T E`` otherwise (``O(m)`` per block)."""
    n = workload.n
    cells = np.arange(n)[:, None]
    if isinstance(workload, Total):
        return lambda a, b: np.ones((n, b - a))
    if isinstance(workload, Identity):
        return lambda a, b: np.eye(n, b - a, -a)
    if isinstance(workload, Prefix):
        return lambda a, b: (cells <= np.arange(a, b)[None, :]).astype(np.float64)
    if isinstance(workload, WidthRange | AllRange):
        if isinstance(workload, AllRange):
            first, last = np.triu_indices(n)
        else:
            first = np.arange(workload.m)
            last = first + workload.width - 1
        return lambda a, b: ((cells >= first[a:b]) & (cells <= last[a:b])).astype(np.float64)
    if workload.n > _DENSE_MAX_N or workload.m * workload.n > 1 << 26:
        raise ConfigError(f"no structured variance for workload {workload.name}")

    def rows(a: int, b: int) -> FloatArray:
        e = np.zeros((workload.m, b - a))
        e[np.arange(a, b), np.arange(b - a)] = 1.0
        return workload.rmatvec(e)

    return rows


def _prefix_covariance(n: int, sig: Apply) -> FloatArray:
    """``C = L Sigma L^T`` (``L`` lower-triangular ones): covariances of the prefix answers."""
    if n > _DENSE_MAX_N:
        raise ConfigError(f"all-range variances need n <= {_DENSE_MAX_N} cells, got {n}")
    cells = np.arange(n)
    c = np.empty((n, n))
    for start in range(0, n, _BLOCK):
        cols = np.arange(start, min(n, start + _BLOCK))
        lt = (cells[:, None] <= cols[None, :]).astype(np.float64)  # columns of L^T
        c[:, cols] = np.cumsum(sig(lt), axis=0)
    return c


def _blockwise(workload: Workload, strategy: Strategy, sig: Apply) -> NoiseMoments:
    """Both moments from query-vector blocks ``V``: ``sum(V * Sigma V)`` and, with the rows
    ``c_i = A Sigma w_i`` of ``(W A^+)``, ``sum(c_i^4)``. All ranges read their variances off the
    prefix covariance instead, and skip the fourth moments when ``m x rows(A)`` is too large."""
    m = workload.m
    fourth_ok = m * strategy.m <= _MAX_FOURTH
    second, fourth = np.empty(m), np.empty(m) if fourth_ok else None
    if isinstance(workload, AllRange):
        c = _prefix_covariance(workload.n, sig)
        i, j = np.triu_indices(workload.n)
        diag, before = np.diag(c), np.maximum(i - 1, 0)
        second = np.asarray(diag[j] + (i > 0) * (diag[before] - 2.0 * c[before, j]))
        if fourth is None:
            return NoiseMoments(second=second, fourth=None)
    if isinstance(workload, Identity) and isinstance(strategy, Tree):
        # the cells' factors are the diagonal: linear in n (blocks of columns are n^2)
        second = strategy.inv_gram_diag()
        if fourth is None:
            return NoiseMoments(second=second, fourth=None)
    vectors = _vectors(workload)
    for start in range(0, m, _BLOCK):
        stop = min(m, start + _BLOCK)
        v = vectors(start, stop)
        sv = sig(v)
        if not isinstance(workload, AllRange | Identity) or not isinstance(strategy, Tree):
            second[start:stop] = np.einsum("ij,ij->j", v, sv)
        if fourth is not None:
            fourth[start:stop] = np.sum((strategy @ sv) ** 4, axis=0)
    return NoiseMoments(second=second, fourth=fourth)


def _identity_total_parts(workload: Workload) -> list[tuple[float, tuple[bool, ...]]] | None:
    """``(weight, axes kept)`` of each part if ``workload`` is a union of ``Identity``/``Total``
    Kronecker products (marginals), else ``None``."""
    parts: list[tuple[Workload, float]]
    if isinstance(workload, Union):
        parts = list(zip(workload.parts, workload.weights, strict=True))
    else:
        parts = [(workload, 1.0)]
    out = []
    for part, weight in parts:
        factors = part.factors if isinstance(part, Kron) else (part,)
        if not all(isinstance(f, Identity | Total) and len(f.domain) == 1 for f in factors):
            return None
        out.append((weight, tuple(isinstance(f, Identity) for f in factors)))
    return out


def _self_measured_marginals(workload: Workload, measured: Workload) -> FloatArray | None:
    """Factors for identity/total products answered from measured marginals (module doc)."""
    asked, basis = _identity_total_parts(workload), _identity_total_parts(measured)
    dims = measured.domain
    if asked is None or basis is None or workload.domain != dims:
        return None
    # Per axis, P0 = J / n (constant) and P1 = I - P0; pattern p picks one of them per axis.
    patterns = list(itertools.product((0, 1), repeat=len(dims)))
    lam = [
        sum(
            w * w * math.prod(n for n, k, q in zip(dims, kept, p, strict=True) if not k and not q)
            for w, kept in basis
            if all(k or q == 0 for k, q in zip(kept, p, strict=True))
        )
        for p in patterns
    ]
    out = []
    for weight, kept in asked:
        total = 0.0
        for p, value in zip(patterns, lam, strict=True):
            # e^T P0 e = 1/n, e^T P1 e = 1 - 1/n; 1^T P0 1 = n, 1^T P1 1 = 0.
            quad = math.prod(
                (1.0 / n if q == 0 else 1.0 - 1.0 / n) if k else (float(n) if q == 0 else 0.0)
                for n, k, q in zip(dims, kept, p, strict=True)
            )
            if quad > 0.0 and value > 1e-12:
                total += quad / value
        size = math.prod(n for n, k in zip(dims, kept, strict=True) if k)
        out.append(np.full(size, weight * weight * total))
    return np.concatenate(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class NoiseMoments:
    """Per-query moments of the least-squares answer noise, per unit Laplace scale: with
    ``c_i = (W A^+)_i``, the variance is ``2 b^2 second_i`` and the fourth cumulant
    ``12 b^4 fourth_i``."""

    second: FloatArray
    """``||c_i||_2^2 = w_i^T (A^T A)^+ w_i``."""
    fourth: FloatArray | None
    """``||c_i||_4^4``, or ``None`` where it is not computed (too many rows of ``W A^+``)."""

    def kurtosis(self) -> FloatArray | None:
        """Excess kurtosis ``3 ||c||_4^4 / ||c||_2^4`` of each answer's noise (3: one Laplace
        term; near 0: many comparable terms), or ``None``."""
        if self.fourth is None:
            return None
        safe = np.where(self.second > 0.0, self.second, 1.0)
        return np.asarray(3.0 * self.fourth / (safe * safe))


def _kron_moments(parts: list[NoiseMoments]) -> NoiseMoments:
    """Moments of a Kronecker product: ``||(x) c_k||_p^p = prod_k ||c_k||_p^p``."""
    second = np.ones(1)
    fourth: FloatArray | None = np.ones(1)
    for p in parts:
        second = np.outer(second, p.second).ravel()
        fourth = None if fourth is None or p.fourth is None else np.outer(fourth, p.fourth).ravel()
    return NoiseMoments(second=second, fourth=fourth)


def _union_moments(parts: list[NoiseMoments], weights: tuple[float, ...]) -> NoiseMoments:
    """Moments of stacked parts whose rows are scaled by ``w`` (``w^2`` and ``w^4``)."""
    second = np.concatenate([w * w * p.second for p, w in zip(parts, weights, strict=True)])
    fourths = [p.fourth for p in parts]
    if any(f is None for f in fourths):
        return NoiseMoments(second=second, fourth=None)
    fourth = np.concatenate(
        [w**4 * f for f, w in zip(fourths, weights, strict=True) if f is not None]
    )
    return NoiseMoments(second=second, fourth=fourth)


def query_noise_moments(workload: Workload, strategy: Strategy) -> NoiseMoments:
    """The second and fourth moments of every least-squares answer's noise (module doc).

    Args:
        workload: the answered workload ``W``.
        strategy: the measured strategy ``A`` (same domain).
    """
    if workload.domain != strategy.domain:
        raise ConfigError(
            f"workload domain {workload.domain} does not match strategy domain {strategy.domain}"
        )
    if isinstance(strategy, KronStrategy) and len(strategy.factors) > 1:
        axes = [f.domain for f in strategy.factors]
        if isinstance(workload, Union):
            parts = [query_noise_moments(p, strategy) for p in workload.parts]
            return _union_moments(parts, workload.weights)
        if isinstance(workload, Kron) and [f.domain for f in workload.factors] == axes:
            pairs = zip(workload.factors, strategy.factors, strict=True)
            return _kron_moments([query_noise_moments(w, a) for w, a in pairs])
    elif isinstance(strategy, KronStrategy):
        return query_noise_moments(workload, strategy.factors[0])
    if isinstance(strategy, WorkloadStrategy):
        closed = _self_measured_marginals(workload, strategy.workload)
        if closed is not None:
            return NoiseMoments(second=closed, fourth=None)
    return _blockwise(workload, strategy, gram_inverse(strategy))


def query_variance_factors(workload: Workload, strategy: Strategy) -> FloatArray:
    """``w_i^T (A^T A)^+ w_i`` for every row of ``workload``: the variance of the least-squares
    answer ``i`` is ``2 b^2`` times this, for Laplace noise of scale ``b``.

    Returns:
        A vector of length ``W.m``; its sum is :meth:`Strategy.squared_error_factor`.
    """
    return query_noise_moments(workload, strategy).second
