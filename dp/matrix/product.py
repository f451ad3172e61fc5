"""Multi-dimensional workloads: Kronecker products, unions, k-way marginals and range boxes.

A Kronecker product ``W_1 (x) ... (x) W_d`` asks the product queries of a ``d``-dimensional
histogram stored in C order; it is applied one axis at a time, so a 2-D all-range workload over
``256 x 256`` cells never exists as a matrix. Unions stack workloads over the same domain; k-way
marginals are unions of Kronecker products of ``Identity`` and ``Total`` factors (HDMM, McKenna et
al. VLDB 2018, Sec. 4 and 6).

>>> w = marginals((2, 3), 1)
>>> w.shape
(5, 6)
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from dppub.dp.errors import ConfigError
from dppub.dp.matrix.workload import FloatArray, Identity, Total, Workload, check_size

__all__ = ["Kron", "Marginals", "RangeBoxes", "Union", "kron", "marginals", "range_boxes", "union"]


def along_axes(
    x: FloatArray, sizes: Sequence[int], ops: Sequence[object], method: str
) -> FloatArray:
    """Apply ``getattr(op, method)`` (an ``n_i x k -> r_i x k`` map) along each axis of ``x``."""
    k = x.shape[1]
    t = x.reshape(*sizes, k)
    for axis, op in enumerate(ops):
        moved = np.moveaxis(t, axis, 0)
        rest = moved.shape[1:]
        out = getattr(op, method)(moved.reshape(moved.shape[0], -1))
        t = np.moveaxis(out.reshape(out.shape[0], *rest), 0, axis)
    return np.ascontiguousarray(t).reshape(-1, k)


@dataclass(frozen=True, slots=True, kw_only=True)
class Kron(Workload):
    """Kronecker product of workloads, one per axis of the domain."""

    factors: tuple[Workload, ...]
    """One workload per axis (their domains concatenate)."""

    def __post_init__(self) -> None:
        if len(self.factors) < 1 or not all(isinstance(f, Workload) for f in self.factors):
            raise ConfigError(f"kron needs one or more workloads, got {len(self.factors)}")

    @property
    def domain(self) -> tuple[int, ...]:
        return tuple(d for f in self.factors for d in f.domain)

    @property
    def m(self) -> int:
        return math.prod(f.m for f in self.factors)

    @property
    def name(self) -> str:
        return " x ".join(f.name for f in self.factors)

    def _sizes(self) -> list[int]:
        return [f.n for f in self.factors]

    def _matmat(self, x: FloatArray) -> FloatArray:
        return along_axes(x, self._sizes(), self.factors, "_matmat")

    def _rmatmat(self, y: FloatArray) -> FloatArray:
        return along_axes(y, [f.m for f in self.factors], self.factors, "_rmatmat")

    def _gram_matmat(self, x: FloatArray) -> FloatArray:
        return along_axes(x, self._sizes(), self.factors, "_gram_matmat")

    @property
    def sensitivity(self) -> float:
        # Column L1 norms of a Kronecker product are products of the factors' column norms.
        return math.prod(f.sensitivity for f in self.factors)

    @property
    def frobenius_sq(self) -> float:
        return math.prod(f.frobenius_sq for f in self.factors)

    @property
    def key(self) -> str:
        return " x ".join(f.key for f in self.factors)

    def gram_diag(self) -> FloatArray:
        out = np.ones(1)
        for f in self.factors:
            out = np.outer(out, f.gram_diag()).ravel()
        return out

    def singular_values(self) -> FloatArray:
        out = np.ones(1)
        for f in self.factors:
            out = np.outer(out, f.singular_values()).ravel()
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Union(Workload):
    """Rows of several workloads over one domain, stacked, each scaled by a positive weight."""

    parts: tuple[Workload, ...]
    """The stacked workloads (same domain shape)."""
    weights: tuple[float, ...] = ()
    """One weight > 0 per part (default 1): how much each part's accuracy matters."""

    def __post_init__(self) -> None:
        if len(self.parts) < 1:
            raise ConfigError("union needs at least one workload, got 0")
        doms = {p.domain for p in self.parts}
        if len(doms) != 1:
            raise ConfigError(f"union needs one domain shape, got {sorted(doms)}")
        w = self.weights or tuple(1.0 for _ in self.parts)
        if len(w) != len(self.parts) or not all(math.isfinite(v) and v > 0 for v in w):
            raise ConfigError(f"union weights must be {len(self.parts)} numbers > 0, got {w!r}")
        object.__setattr__(self, "weights", tuple(float(v) for v in w))

    @property
    def domain(self) -> tuple[int, ...]:
        return self.parts[0].domain

    @property
    def m(self) -> int:
        return sum(p.m for p in self.parts)

    @property
    def name(self) -> str:
        return "Union(" + ", ".join(p.name for p in self.parts) + ")"

    def _matmat(self, x: FloatArray) -> FloatArray:
        return np.vstack([w * p._matmat(x) for p, w in zip(self.parts, self.weights, strict=True)])

    def _rmatmat(self, y: FloatArray) -> FloatArray:
        out = np.zeros((self.n, y.shape[1]))
        start = 0
        for p, w in zip(self.parts, self.weights, strict=True):
            out += w * p._rmatmat(y[start : start + p.m])
            start += p.m
        return out

    def _gram_matmat(self, x: FloatArray) -> FloatArray:
        return sum(
            (w * w * p._gram_matmat(x) for p, w in zip(self.parts, self.weights, strict=True)),
            np.zeros((self.n, x.shape[1])),
        )

    @property
    def key(self) -> str:
        pairs = zip(self.parts, self.weights, strict=True)
        return "Union(" + ", ".join(f"{w!r}*{p.key}" for p, w in pairs) + ")"

    def gram_diag(self) -> FloatArray:
        pairs = zip(self.parts, self.weights, strict=True)
        return sum((w * w * p.gram_diag() for p, w in pairs), np.zeros(self.n))


@dataclass(frozen=True, slots=True, kw_only=True)
class Marginals(Union):
    """All ``k``-way marginals of a ``d``-dimensional domain (a union of Kronecker products)."""

    dims: tuple[int, ...] = ()
    """Domain shape."""
    k: int = 1
    """Marginal order, ``0 <= k <= d``."""
    subsets: tuple[tuple[int, ...], ...] = field(default=(), init=False)
    """The attribute subsets, in ``itertools.combinations`` order."""

    @property
    def name(self) -> str:
        return f"Marginals({self.dims}, k={self.k})"

    def singular_values(self) -> FloatArray:
        # All terms are Kronecker products of I and J = 11^T, which share the eigenbasis
        # {constant, its complement} on every axis: the spectrum is a sum over subsets.
        d = len(self.dims)
        vals: list[FloatArray] = []
        for pattern in itertools.product([True, False], repeat=d):  # True: constant direction
            mult = math.prod(n - 1 for n, c in zip(self.dims, pattern, strict=True) if not c)
            if mult == 0:
                continue
            lam = sum(
                math.prod(self.dims[i] for i in range(d) if i not in s)
                for s in self.subsets
                if all(pattern[i] for i in range(d) if i not in s)
            )
            vals.append(np.full(mult, math.sqrt(lam)))
        return np.concatenate(vals)


def _check_shape(shape: Sequence[object]) -> tuple[int, ...]:
    if len(shape) < 1:
        raise ConfigError("shape must have at least one axis, got ()")
    return tuple(check_size(s, name="shape entry") for s in shape)


def kron(*workloads: Workload) -> Kron:
    """Kronecker product ``W_1 (x) W_2 (x) ...`` over the concatenated domain."""
    return Kron(factors=tuple(workloads))


def union(*workloads: Workload, weights: Sequence[float] = ()) -> Union:
    """Stack workloads over the same domain (optionally weighted)."""
    return Union(parts=tuple(workloads), weights=tuple(weights))


def marginals(shape: Sequence[int], k: int) -> Marginals:
    """All ``k``-way marginals over a domain of the given ``shape``."""
    dims = _check_shape(shape)
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= len(dims):
        raise ConfigError(f"k must be an integer in [0, {len(dims)}], got {k!r}")
    subsets = tuple(itertools.combinations(range(len(dims)), k))
    parts = tuple(
        Kron(
            factors=tuple(Identity(size=n) if i in s else Total(size=n) for i, n in enumerate(dims))
        )
        for s in subsets
    )
    out = Marginals(parts=parts, dims=dims, k=k)
    object.__setattr__(out, "subsets", subsets)
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class RangeBoxes(Workload):
    """Custom axis-aligned boxes ``lo <= cell <= hi`` (inclusive) over a multi-D domain."""

    dims: tuple[int, ...]
    """Domain shape."""
    lo: npt.NDArray[np.int64]
    """``m x d`` lower corners."""
    hi: npt.NDArray[np.int64]
    """``m x d`` upper corners (inclusive)."""

    @property
    def domain(self) -> tuple[int, ...]:
        return self.dims

    @property
    def m(self) -> int:
        return int(self.lo.shape[0])

    @property
    def name(self) -> str:
        return f"RangeBoxes({self.dims}, m={self.m})"

    @property
    def key(self) -> str:
        digest = hashlib.sha256(self.lo.tobytes() + b"|" + self.hi.tobytes()).hexdigest()[:16]
        return f"{self.name}#{digest}"

    def _corners(self) -> list[tuple[int, npt.NDArray[np.int64]]]:
        # Inclusion-exclusion over the 2^d corners of each box in the zero-padded prefix-sum grid.
        d = len(self.dims)
        out = []
        for bits in itertools.product([0, 1], repeat=d):
            idx = np.where(np.array(bits, dtype=bool), self.hi + 1, self.lo)
            flat = np.ravel_multi_index(tuple(idx.T), tuple(s + 1 for s in self.dims))
            out.append(((-1) ** (d - sum(bits)), flat.astype(np.int64)))
        return out

    def _matmat(self, x: FloatArray) -> FloatArray:
        k = x.shape[1]
        t = x.reshape(*self.dims, k)
        for axis in range(len(self.dims)):
            pad = [(1, 0) if a == axis else (0, 0) for a in range(t.ndim)]
            t = np.cumsum(np.pad(t, pad), axis=axis)
        flat = t.reshape(-1, k)
        return sum((sign * flat[idx] for sign, idx in self._corners()), np.zeros((self.m, k)))

    def _rmatmat(self, y: FloatArray) -> FloatArray:
        k = y.shape[1]
        padded = tuple(s + 1 for s in self.dims)
        acc = np.zeros((math.prod(padded), k))
        for sign, idx in self._corners():
            np.add.at(acc, idx, sign * y)
        # The adjoint of "pad then prefix-sum" is "suffix-sum then drop the pad".
        t = acc.reshape(*padded, k)
        for axis in range(len(self.dims)):
            t = np.flip(np.cumsum(np.flip(t, axis), axis=axis), axis)
            t = np.take(t, np.arange(1, padded[axis]), axis=axis)
        return np.ascontiguousarray(t).reshape(-1, k)


def range_boxes(shape: Sequence[int], lo: npt.ArrayLike, hi: npt.ArrayLike) -> RangeBoxes:
    """Custom range queries: box ``r`` counts cells with ``lo[r] <= cell <= hi[r]`` per axis."""
    dims = _check_shape(shape)
    lo_a = np.atleast_2d(np.asarray(lo, dtype=np.int64))
    hi_a = np.atleast_2d(np.asarray(hi, dtype=np.int64))
    if lo_a.shape != hi_a.shape or lo_a.shape[1] != len(dims) or lo_a.shape[0] < 1:
        raise ConfigError(f"lo and hi must both be m x {len(dims)}, got {lo_a.shape}, {hi_a.shape}")
    bad = (lo_a < 0) | (lo_a > hi_a) | (hi_a >= np.array(dims))
    if bad.any():
        r = int(np.argmax(bad.any(axis=1)))
        raise ConfigError(
            f"box {r} must satisfy 0 <= lo <= hi < shape {dims}, got {lo_a[r]!r}..{hi_a[r]!r}"
        )
    return RangeBoxes(dims=dims, lo=lo_a, hi=hi_a)
