"""Exact per-query noise variance of least-squares workload answers.

With Laplace noise of scale ``b`` on every strategy answer, the least-squares answer to query
``w_i`` is ``w_i^T A^+ r`` and its error ``w_i^T A^+ z`` has variance
``2 b^2 ||w_i^T A^+||_2^2 = 2 b^2 w_i^T (A^T A)^+ w_i`` (Li et al., "The matrix mechanism", VLDB
J. 2015, Prop. 4 gives the sum over ``i``; this is each term). :func:`query_variance_factors`
returns the factors ``w_i^T (A^T A)^+ w_i`` without forming ``W A^+``:

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

>>> from dp.matrix.workload import identity
>>> from dp.matrix.strategy import identity_strategy
>>> query_variance_factors(identity(3), identity_strategy(3)).tolist()
[1.0, 1.0, 1.0]
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from types import SimpleNamespace

import numpy as np
import scipy.linalg as sla

from dp.errors import ConfigError
from dp.matrix.optimize import PIdentity
from dp.matrix.product import Kron, Union, along_axes
from dp.matrix.select import KronStrategy, WorkloadStrategy
from dp.matrix.strategy import Strategy, Tree
from dp.matrix.wavelet import Wavelet
from dp.matrix.workload import (
    AllRange,
    FloatArray,
    Identity,
    Prefix,
    Total,
    WidthRange,
    Workload,
)

__all__ = ["gram_inverse", "query_variance_factors"]

Apply = Callable[[FloatArray], FloatArray]
# Query vectors per block: bounds the dense work arrays to n x 512.
_BLOCK = 512
# Dense fallbacks (and the all-range prefix covariance) stay below this many cells.
_DENSE_MAX_N = 4096


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


def _quad_blocks(vectors: Callable[[int, int], FloatArray], count: int, sig: Apply) -> FloatArray:
    """``v_i^T Sigma v_i`` for ``count`` query vectors produced in column blocks."""
    out = np.empty(count)
    for start in range(0, count, _BLOCK):
        stop = min(count, start + _BLOCK)
        v = vectors(start, stop)
        out[start:stop] = np.einsum("ij,ij->j", v, sig(v))
    return out


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


def _one_dim(workload: Workload, sig: Apply) -> FloatArray:
    n = workload.n
    cells = np.arange(n)
    if isinstance(workload, Total):
        ones = np.ones((n, 1))
        return np.array([float(ones[:, 0] @ sig(ones)[:, 0])])
    if isinstance(workload, Identity):
        return _quad_blocks(lambda a, b: np.eye(n, b - a, -a), n, sig)
    if isinstance(workload, Prefix):
        return _quad_blocks(
            lambda a, b: (cells[:, None] <= np.arange(a, b)[None, :]).astype(np.float64), n, sig
        )
    if isinstance(workload, WidthRange):
        w = workload.width

        def windows(a: int, b: int) -> FloatArray:
            first = np.arange(a, b)[None, :]
            return ((cells[:, None] >= first) & (cells[:, None] < first + w)).astype(np.float64)

        return _quad_blocks(windows, workload.m, sig)
    if isinstance(workload, AllRange):
        c = _prefix_covariance(n, sig)
        i, j = np.triu_indices(n)
        diag = np.diag(c)
        before = np.maximum(i - 1, 0)
        head = i > 0
        return np.asarray(diag[j] + head * (diag[before] - 2.0 * c[before, j]))
    return _generic(workload, sig)


def _generic(workload: Workload, sig: Apply) -> FloatArray:
    """Any workload, its rows taken from ``W^T E`` in blocks (``O(m)`` per block)."""
    if workload.n > _DENSE_MAX_N or workload.m * workload.n > 1 << 26:
        raise ConfigError(f"no structured variance for workload {workload.name}")

    def rows(a: int, b: int) -> FloatArray:
        e = np.zeros((workload.m, b - a))
        e[np.arange(a, b), np.arange(b - a)] = 1.0
        return workload.rmatvec(e)

    return _quad_blocks(rows, workload.m, sig)


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


def query_variance_factors(workload: Workload, strategy: Strategy) -> FloatArray:
    """``w_i^T (A^T A)^+ w_i`` for every row of ``workload``: the variance of the least-squares
    answer ``i`` is ``2 b^2`` times this, for Laplace noise of scale ``b``.

    Args:
        workload: the answered workload ``W``.
        strategy: the measured strategy ``A`` (same domain).

    Returns:
        A vector of length ``W.m``; its sum is :meth:`Strategy.squared_error_factor`.
    """
    if workload.domain != strategy.domain:
        raise ConfigError(
            f"workload domain {workload.domain} does not match strategy domain {strategy.domain}"
        )
    if isinstance(strategy, KronStrategy) and len(strategy.factors) > 1:
        axes = [f.domain for f in strategy.factors]
        if isinstance(workload, Union):
            return np.concatenate(
                [
                    w * w * query_variance_factors(p, strategy)
                    for p, w in zip(workload.parts, workload.weights, strict=True)
                ]
            )
        if isinstance(workload, Kron) and [f.domain for f in workload.factors] == axes:
            out = np.ones(1)
            for w, a in zip(workload.factors, strategy.factors, strict=True):
                out = np.outer(out, query_variance_factors(w, a)).ravel()
            return out
    elif isinstance(strategy, KronStrategy):
        return query_variance_factors(workload, strategy.factors[0])
    if isinstance(strategy, WorkloadStrategy):
        closed = _self_measured_marginals(workload, strategy.workload)
        if closed is not None:
            return closed
    sig = gram_inverse(strategy)
    if len(workload.domain) == 1:
        return _one_dim(workload, sig)
    return _generic(workload, sig)
