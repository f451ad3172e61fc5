"""Measurement strategies: the matrix ``A`` whose noisy answers are released.

Every strategy knows its exact L1 sensitivity ``||A||_1`` (maximum column L1 norm: one individual
changes one cell by one), applies ``A`` and ``A^T`` without densifying, solves least squares in
closed form, and evaluates ``||W A^+||_F^2`` for a workload without ever forming ``A^T A`` at
large ``n`` (the error of the matrix mechanism, Li et al. VLDB J. 2015, Prop. 4).

* :class:`Tree`: weighted hierarchical strategies over interval trees, any branching ``b >= 2``
  and any ``n`` (Hay et al. VLDB 2010; Qardaji et al. VLDB 2013 for the branching); the identity
  is the tree with leaves only.
* :class:`dp.matrix.wavelet.Wavelet`: the Haar wavelet of Privelet (Xiao et al. ICDE 2010).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from dppub.dp.errors import ConfigError
from dppub.dp.matrix.workload import FloatArray, LinearOperator, Workload, as_columns, check_size

__all__ = [
    "Strategy",
    "Tree",
    "hierarchical",
    "identity_strategy",
    "intervals",
    "nested_blocks",
]

IntArray = npt.NDArray[np.int64]
# Columns of the Gram matrix evaluated per batch in error analysis (bounds memory to ~n * 512).
_BATCH = 512
# Beyond this many distinct row lengths the O(nnz) quadratic forms fall back to column batches.
_MAX_ROW_LENGTHS = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class Strategy(LinearOperator):
    """Base class of measurement strategies (linear operators with an exact sensitivity)."""

    _kind = "strategy"

    @property
    def sensitivity(self) -> float:
        """Exact ``||A||_1``, the maximum column L1 norm."""
        raise NotImplementedError

    @property
    def l2_sensitivity(self) -> float:
        """Exact ``||A||_{1->2}``, the maximum column L2 norm: one individual changes one cell by
        one, so this bounds the L2 change of the measurement (the Gaussian mechanism's
        sensitivity). Computed from the columns in batches; subclasses with closed forms override.
        """
        best = 0.0
        for start in range(0, self.n, _BATCH):
            stop = min(self.n, start + _BATCH)
            block = np.zeros((self.n, stop - start))
            block[np.arange(start, stop), np.arange(stop - start)] = 1.0
            cols = self._matmat(block)
            best = max(best, float(np.max(np.sum(cols * cols, axis=0))))
        return math.sqrt(best)

    def _lstsq(self, r: FloatArray) -> FloatArray:
        """``A^+ r`` for an ``m x k`` block of measurements."""
        raise NotImplementedError

    def squared_error_factor(self, workload: Workload) -> float:
        """``||W A^+||_F^2``: the workload's total squared error per unit noise variance."""
        raise NotImplementedError

    @property
    def T(self) -> _Transposed:
        """The transpose as an operator: ``A.T @ y``."""
        return _Transposed(base=self)

    def lstsq(self, r: npt.ArrayLike) -> FloatArray:
        """Least-squares estimate ``x_hat = A^+ r`` (structured; never a dense ``A^T A``)."""
        cols, vec = as_columns(r, self.m, what=f"least squares of strategy {self.name}")
        out = self._lstsq(cols)
        return out[:, 0] if vec else out

    def dense(self) -> FloatArray:
        """Dense ``A``; small strategies only (tests)."""
        if self.m * self.n > 1 << 26:
            raise ConfigError(f"strategy {self.name} is too large to materialize")
        return self._matmat(np.eye(self.n))


@dataclass(frozen=True, slots=True)
class _Transposed:
    base: Strategy

    def __matmul__(self, y: npt.ArrayLike) -> FloatArray:
        return self.base.rmatvec(y)


def quad_forms(workload: Workload, h: sp.csr_matrix) -> FloatArray:
    """``diag(H G H^T)`` for the rows of sparse ``h`` (``G = W^T W``): ``O(nnz)`` for prefix and
    range workloads (:meth:`Workload.semiseparable`), else in column batches."""
    ss = workload.semiseparable()
    if ss is not None:
        out_ss = _semiseparable_quad_forms(sp.csr_matrix(h), *ss)
        if out_ss is not None:
            return out_ss
    out = np.empty(h.shape[0])
    for start in range(0, h.shape[0], _BATCH):
        block = h[start : start + _BATCH]
        gh = workload._gram_matmat(block.T.toarray())
        out[start : start + _BATCH] = np.asarray(block.multiply(gh.T).sum(axis=1)).ravel()
    return out


def _semiseparable_quad_forms(h: sp.csr_matrix, u: FloatArray, v: FloatArray) -> FloatArray | None:
    """``h_r G h_r^T`` for ``G[a, b] = u[min(a, b)] v[max(a, b)]`` in ``O(nnz)``.

    With sorted columns, ``h G h^T = sum_b h_b (v_b L_b + u_b R_b)`` where
    ``L_b = sum_{a <= b} h_a u_a`` and ``R_b = sum_{a > b} h_a v_a``: two running sums per row.
    Rows are processed in groups of equal length (a few per tree level), so every running sum
    restarts exactly at its row. ``None`` if there are too many distinct lengths.
    """
    h = h.copy()
    h.sort_indices()
    lengths = np.diff(h.indptr)
    sizes = np.unique(lengths[lengths > 0])
    if sizes.size > _MAX_ROW_LENGTHS:
        return None
    out = np.zeros(h.shape[0])
    for length in sizes:
        rows = np.flatnonzero(lengths == length)
        idx = h.indptr[rows][:, None] + np.arange(length)
        cols, vals = h.indices[idx], h.data[idx]
        left = np.cumsum(vals * u[cols], axis=1)
        cum_v = np.cumsum(vals * v[cols], axis=1)
        right = cum_v[:, -1:] - cum_v
        out[rows] = np.sum(vals * (v[cols] * left + u[cols] * right), axis=1)
    return out


def gram_diag(workload: Workload) -> FloatArray:
    """``diag(W^T W)``, the squared column norms."""
    return workload.gram_diag()


def check_1d(workload: Workload, n: int, name: str) -> None:
    if workload.domain != (n,):
        raise ConfigError(f"strategy {name} needs a workload over ({n},), got {workload.domain}")


@dataclass(frozen=True, slots=True, kw_only=True)
class SparseStrategy(Strategy):
    """A 1-D strategy held as a sparse matrix ``A`` (built by the subclass's __post_init__)."""

    _matrix: sp.csr_matrix = field(init=False, repr=False)

    @property
    def domain(self) -> tuple[int, ...]:
        return (int(self._matrix.shape[1]),)

    @property
    def m(self) -> int:
        return int(self._matrix.shape[0])

    @property
    def matrix(self) -> sp.csr_matrix:
        """``A`` as a sparse matrix."""
        return self._matrix

    @property
    def sensitivity(self) -> float:
        return float(np.max(abs(self._matrix).sum(axis=0)))

    @property
    def l2_sensitivity(self) -> float:
        return math.sqrt(float(np.max(self._matrix.multiply(self._matrix).sum(axis=0))))

    def _matmat(self, x: FloatArray) -> FloatArray:
        return np.asarray(self._matrix @ x)

    def _rmatmat(self, y: FloatArray) -> FloatArray:
        return np.asarray(self._matrix.T @ y)


@dataclass(frozen=True, slots=True, kw_only=True)
class Tree(SparseStrategy):
    """Weighted interval tree over ``n`` cells: one row ``w_v 1_[lo_v, hi_v)`` per node.

    Nodes are stored top-down; children partition their parent and leaves are single cells, so
    ``A^T A = sum_v w_v^2 1_v 1_v^T`` is inverted by Sherman-Morrison from the leaves up: for a
    node with children Gram ``B``, ``(B + c 11^T)^-1 = B^-1 - a g g^T`` with ``g = B^-1 1`` and
    ``a = c / (1 + c 1^T g)``. This gives ``O(n depth)`` least squares (the closed form of Hay et
    al. 2010, for any weights and uneven trees) and an exact error formula.
    """

    size: int
    """Domain size ``n``."""
    lo: IntArray
    """First cell of each node."""
    hi: IntArray
    """One past the last cell of each node."""
    depth: IntArray
    """Depth of each node (roots are 0)."""
    weight: FloatArray
    """Row weight of each node (> 0)."""
    parent: IntArray
    """Index of each node's parent row (-1 for roots); children partition their parent."""
    label: str = "Tree"
    """Name shown in plans."""
    _levels: list[tuple[IntArray, sp.csr_matrix, FloatArray]] = field(init=False, repr=False)
    _leaf_c: FloatArray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        lengths = self.hi - self.lo
        rows = np.repeat(np.arange(self.lo.size), lengths)
        # Each node's cells lo..hi-1, for every node at once (no Python loop over a million
        # nodes): position in the concatenation, shifted by where the node's run starts.
        starts = np.cumsum(lengths) - lengths
        cols = np.arange(int(lengths.sum())) + np.repeat(self.lo - starts, lengths)
        vals = np.repeat(self.weight, lengths)
        mat = sp.csr_matrix((vals, (rows, cols)), shape=(self.lo.size, self.size))
        object.__setattr__(self, "_matrix", mat)
        self._factorize()

    def _factorize(self) -> None:
        # Rows measuring the same interval add their weights^2 in A^T A: merge them first.
        n = self.size
        key, first, inv = np.unique(
            self.lo * (n + 1) + self.hi, return_index=True, return_inverse=True
        )
        c = np.bincount(inv, weights=self.weight**2)
        lo, hi = self.lo[first], self.hi[first]
        depth = np.full(key.size, np.iinfo(np.int64).max)
        np.minimum.at(depth, inv, self.depth)
        leaf = (hi - lo) == 1
        leaf_c = np.zeros(n)
        leaf_c[lo[leaf]] = c[leaf]
        if np.count_nonzero(leaf) != n or np.any(leaf_c <= 0):
            raise ConfigError(f"strategy {self.label} must measure every single cell")
        # Bottom-up Sherman-Morrison; g holds B^-1 1 restricted to each processed subtree.
        g = 1.0 / leaf_c
        levels = []
        for d in np.unique(depth[~leaf])[::-1]:
            nodes = np.flatnonzero((depth == d) & ~leaf)
            sizes = hi[nodes] - lo[nodes]
            cells = np.concatenate(
                [np.arange(a, b) for a, b in zip(lo[nodes], hi[nodes], strict=True)]
            )
            local = np.repeat(np.arange(nodes.size), sizes)
            qb = np.bincount(local, weights=g[cells], minlength=nodes.size)
            alpha = c[nodes] / (1.0 + c[nodes] * qb)
            h = sp.csr_matrix((g[cells], (local, cells)), shape=(nodes.size, n))
            levels.append((nodes, h, alpha))
            g[cells] = g[cells] / np.repeat(1.0 + c[nodes] * qb, sizes)
        object.__setattr__(self, "_levels", levels)
        object.__setattr__(self, "_leaf_c", leaf_c)

    @property
    def name(self) -> str:
        return self.label

    def inv_gram(self, y: FloatArray) -> FloatArray:
        """``(A^T A)^-1 Y`` in ``O(n depth)`` per column."""
        out = y / self._leaf_c[:, None]
        for _, h, alpha in self._levels:
            out -= h.T @ (alpha[:, None] * (h @ y))
        return out

    def inv_gram_diag(self) -> FloatArray:
        """The diagonal of ``(A^T A)^-1`` in ``O(n depth)``: each level subtracts
        ``sum_v alpha_v h_vj^2`` (the cells' variance factors, without forming columns)."""
        out = 1.0 / self._leaf_c
        for _, h, alpha in self._levels:
            out -= np.asarray(h.multiply(h).T @ alpha, dtype=np.float64)
        return out

    def _lstsq(self, r: FloatArray) -> FloatArray:
        return self.inv_gram(self._rmatmat(r))

    def squared_error_factor(self, workload: Workload) -> float:
        # tr(G (A^T A)^-1) = sum_j G_jj / c_j - sum_v a_v g_v^T G g_v.
        check_1d(workload, self.size, self.name)
        total = float(np.sum(gram_diag(workload) / self._leaf_c))
        for _, h, alpha in self._levels:
            total -= float(np.dot(alpha, quad_forms(workload, h)))
        return total


def _split(lo: int, hi: int, parts: int) -> list[tuple[int, int]]:
    # Split as evenly as possible; the larger pieces come first so the tree is deterministic.
    size = hi - lo
    k = min(parts, size)
    bounds = [lo + (size * i) // k for i in range(k + 1)]
    return list(itertools.pairwise(bounds))


def intervals(n: int, b: int) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    lo, hi, depth, parent = [0], [n], [0], [-1]
    frontier = [0]
    d = 0
    while frontier:
        d += 1
        nxt = []
        for v in frontier:
            if hi[v] - lo[v] > 1:
                for a, z in _split(lo[v], hi[v], b):
                    nxt.append(len(lo))
                    lo.append(a)
                    hi.append(z)
                    depth.append(d)
                    parent.append(v)
        frontier = nxt
    return np.array(lo), np.array(hi), np.array(depth), np.array(parent)


def hierarchical(n: int, b: int = 2, *, level_weights: npt.ArrayLike | None = None) -> Tree:
    """b-ary hierarchical strategy H_b over ``n`` cells (Hay et al. VLDB 2010).

    Intervals are split into ``b`` near-equal parts down to single cells, so any ``n`` works.

    Args:
        n: domain size.
        b: branching factor (>= 2).
        level_weights: optional weight per depth (root first); default all ones.
    """
    n = check_size(n)
    if isinstance(b, bool) or not isinstance(b, int) or b < 2:
        raise ConfigError(f"branching factor b must be an integer >= 2, got {b!r}")
    lo, hi, depth, parent = intervals(n, b)
    levels = int(depth.max()) + 1
    w = np.ones(levels) if level_weights is None else np.asarray(level_weights, dtype=np.float64)
    if w.shape != (levels,) or not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise ConfigError(f"level_weights must be {levels} numbers > 0, got shape {w.shape}")
    return Tree(size=n, lo=lo, hi=hi, depth=depth, weight=w[depth], parent=parent, label=f"H{b}")


def nested_blocks(n: int, sizes: npt.ArrayLike, weights: npt.ArrayLike, *, label: str = "") -> Tree:
    """Weighted hierarchy whose level ``l`` measures aligned blocks of ``sizes[l]`` cells.

    Sizes run from coarse to fine, each dividing the previous one and ending with 1 (the last
    block of a level may be partial). Hay et al.'s ``H_b`` is ``sizes = (b^L, ..., b, 1)`` with unit
    weights; workload-tuned weights and sizes come from :func:`dp.matrix.optimize.tuned_hierarchy`.
    """
    n = check_size(n)
    k = np.asarray(sizes, dtype=np.int64)
    w = np.asarray(weights, dtype=np.float64)
    if (
        k.ndim != 1
        or k.size < 1
        or k[-1] != 1
        or np.any(k[:-1] % k[1:] != 0)
        or np.any(k[:-1] <= k[1:])
    ):
        raise ConfigError(f"sizes must decrease to 1, each dividing the previous, got {k.tolist()}")
    if w.shape != k.shape or not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise ConfigError(f"weights must be {k.size} numbers > 0, got {w.tolist()}")
    starts = [np.arange(0, n, int(b)) for b in k]
    lo = np.concatenate(starts)
    hi = np.concatenate([np.minimum(st + b, n) for st, b in zip(starts, k, strict=True)])
    depth = np.concatenate([np.full(st.size, d) for d, st in enumerate(starts)])
    # Block i of level l sits in block (i k_l) // k_{l-1} of level l - 1.
    offsets = np.cumsum([0] + [st.size for st in starts])
    parent = np.concatenate(
        [np.full(starts[0].size, -1)]
        + [offsets[d - 1] + starts[d] // k[d - 1] for d in range(1, k.size)]
    )
    name = label or "Blocks(" + ",".join(str(int(b)) for b in k) + ")"
    return Tree(size=n, lo=lo, hi=hi, depth=depth, weight=w[depth], parent=parent, label=name)


def identity_strategy(n: int) -> Tree:
    """The identity strategy: measure every cell once (sensitivity 1)."""
    n = check_size(n)
    cells = np.arange(n)
    return Tree(
        size=n,
        lo=cells,
        hi=cells + 1,
        depth=np.zeros(n, np.int64),
        weight=np.ones(n),
        parent=np.full(n, -1),
        label="Identity",
    )
