"""DP k-means: Lloyd's algorithm with Laplace noise on counts and sums.

Each of ``T`` iterations assigns rows to the nearest current centre and releases, per cluster, a
noisy count and a noisy coordinate sum; the new centre is ``noisy sum / noisy count``, or a fresh
uniform draw from the declared domain when the noisy count is below 1 (re-seeding).

Privacy (add/remove-one neighbours, the dppub-wide convention; rows clipped into the declared
domain and shifted by its public midpoint so that ``|x_j| <= a_j``). For fixed centres, adding
or removing one row ``x`` changes exactly one cluster's count by 1 (L1 sensitivity 1; replace-one
needed 2) and that cluster's sum by ``x``: an L1 change of ``||x||_1 <= min(sum_j a_j, sqrt(d) R)``
(replace-one needed ``||x||_1 + ||x'||_1``, twice that). Per iteration the counts and the sums
each get ``epsilon / (2T)`` with their *own* sensitivity (diffprivlib's KMeans swaps the two
budgets), so an iteration is ``epsilon / T``-DP and ``T`` iterations are epsilon-DP by sequential
composition; the assignment step only uses the previous (already private) centres, and the
number of rows is never used (only noisy counts are). Initial and re-seeded centres are
data-independent.

Exact sums (:mod:`dp.numerics.fixedpoint`). Each centred coordinate is quantised toward zero
on a grid of ``2^-16`` of its magnitude bound ``a_j`` (a quantised row keeps ``|x_j| <= a_j``
and, on a ball, ``||x|| <= R``, checked exactly), the per-cluster sums are integers, and each is
rounded to float64 once: the counts exactly, the sums within ``2^-16 a_j`` of their exact
difference between neighbours (up to ``MAX_ROWS`` rows), which :func:`sum_sensitivity` adds.
The aggregates therefore do not depend on the order of the rows, batches or partitions.

The exact per-iteration aggregates come from any fold over the rows (:meth:`KMeans.fit_steps`,
e.g. the streaming engine's
:class:`dp.engine.folds.lloyd_sums.LloydAggregate` over Parquet batches, which adds
:func:`lloyd_partial` integer sums and finishes them with :func:`lloyd_finish`): the noise is
then added here, once per iteration, to the combined exact counts and sums -- never per batch or
partition. (Rows in memory: the reference fit of :mod:`dp.reference.frame_kmeans`.)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dppub.dp.budget import PrivacyCost
from dppub.dp.errors import ConfigError, InvariantError
from dppub.dp.mechanisms import laplace
from dppub.dp.numerics.domains import (
    BoundLike,
    FeatureDomain,
    check_n_features,
    declared_feature_bounds,
    feature_domain,
    read_only,
)
from dppub.dp.numerics.fixedpoint import (
    CONVERSION_ALLOWANCE,
    FRACTION_BITS,
    ONE,
    IntArray,
    check_norms,
    check_rows,
    fixed_point_record,
    int_zeros,
    quantise,
    to_float,
)
from dppub.dp.validation import check_epsilon

__all__ = [
    "COUNT_SENSITIVITY",
    "KMeans",
    "KMeansFit",
    "Step",
    "lloyd_finish",
    "lloyd_partial",
    "lloyd_step",
    "nearest",
    "sum_sensitivity",
]

FloatArray = npt.NDArray[np.float64]
Step = Callable[[FloatArray], tuple[FloatArray, FloatArray]]
"""Maps centres (in the centred frame) to the exact per-cluster counts and sums of the rows
clipped into the declared domain and shifted by its midpoint (:func:`lloyd_step` of those rows)."""


def _magnitudes(domain: FeatureDomain) -> FloatArray:
    a = np.maximum(np.abs(np.asarray(domain.lower)), np.abs(np.asarray(domain.upper)))
    return np.asarray(a, dtype=np.float64)


def sum_sensitivity(domain: FeatureDomain) -> float:
    """L1 sensitivity of the per-cluster sums of centred rows: ``max ||x||_1`` plus the float64
    rounding allowance ``2^-16 sum_j a_j`` (module doc).

    >>> sum_sensitivity(FeatureDomain.box(-0.5, 0.5, d=3)) - 1.5 == 1.5 * 2.0**-16
    True
    >>> round(sum_sensitivity(FeatureDomain.ball(1.0, d=4)), 4)
    2.0001
    """
    a = _magnitudes(domain)
    box = float(a.sum())
    exact = min(box, math.sqrt(domain.dim) * domain.radius) if domain.kind == "ball" else box
    return exact + CONVERSION_ALLOWANCE * box


COUNT_SENSITIVITY = 1.0
"""Adding or removing one row changes one cluster's count by one."""


def _uniform(domain: FeatureDomain, k: int, rng: np.random.Generator) -> FloatArray:
    if domain.kind == "box":
        return rng.uniform(np.asarray(domain.lower), np.asarray(domain.upper), size=(k, domain.dim))
    z = rng.normal(size=(k, domain.dim))
    z /= np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-300)
    return np.asarray(z * domain.radius * rng.random(k)[:, None] ** (1.0 / domain.dim))


class KMeans:
    """Epsilon-DP k-means by noisy Lloyd iterations.

    Args:
        n_clusters: number of centres ``k``.
        epsilon: total privacy parameter of one ``fit``.
        bounds_X: per-feature box ``(lo, hi)``; or
        data_norm: L2 bound on each row. Exactly one must be given.
        n_iter: number of Lloyd iterations ``T`` (each spends ``epsilon / T``).

    The estimator is configuration only: a fit returns a frozen :class:`KMeansFit` and changes
    nothing here.
    """

    def __init__(
        self,
        n_clusters: int,
        epsilon: float,
        *,
        bounds_X: tuple[BoundLike, BoundLike] | None = None,
        data_norm: float | None = None,
        n_iter: int = 5,
    ) -> None:
        if isinstance(n_clusters, bool) or not isinstance(n_clusters, int) or n_clusters < 1:
            raise ConfigError(f"n_clusters must be an integer >= 1, got {n_clusters!r}")
        if isinstance(n_iter, bool) or not isinstance(n_iter, int) or n_iter < 1:
            raise ConfigError(f"n_iter must be an integer >= 1, got {n_iter!r}")
        self.n_clusters = n_clusters
        self.epsilon = check_epsilon(epsilon)
        self.bounds_X, self.data_norm = declared_feature_bounds(bounds_X, data_norm)
        self.n_iter = n_iter

    @property
    def privacy_cost(self) -> PrivacyCost:
        """The epsilon one ``fit`` spends."""
        return PrivacyCost(epsilon=self.epsilon)

    def domain(self, d: int) -> FeatureDomain:
        """The declared domain of ``d`` features: rows are clipped into it, then shifted by its
        :meth:`~dp.regression.FeatureDomain.midpoint` (what a :data:`Step` must sum)."""
        return feature_domain(self.bounds_X, self.data_norm, d=check_n_features(d))

    def fit_steps(self, step: Step, *, d: int, rng: np.random.Generator | None = None) -> KMeansFit:
        """Run ``n_iter`` noisy Lloyd iterations whose exact aggregates ``step`` computes.

        The same mechanism, and for the same aggregates and seeded ``rng`` the same centres, as the
        row fit of :mod:`dp.reference.frame_kmeans`. Privacy rests on ``step`` summing rows clipped
        into
        :meth:`domain` ``(d)`` and shifted by its midpoint (the sensitivities assume it).

        Args:
            step: exact counts and sums for given centres (see :data:`Step`).
            d: number of features.
            rng: ``None`` for release-grade noise (and fresh public randomness for
                initialisation); a seeded generator for tests only.
        """
        domain = self.domain(d)
        shift = domain.midpoint()
        centred = domain.translated(shift)
        public = rng if rng is not None else np.random.default_rng()
        centres = _uniform(centred, self.n_clusters, public)
        eps_half = self.epsilon / (2.0 * self.n_iter)
        s_sum = sum_sensitivity(centred)
        reseeded = 0
        for _ in range(self.n_iter):
            counts, sums = step(centres)
            if counts.shape != (self.n_clusters,) or sums.shape != centres.shape:
                raise InvariantError("a Lloyd step returned aggregates of the wrong shape")
            noisy_counts = laplace(counts, sensitivity=COUNT_SENSITIVITY, epsilon=eps_half, rng=rng)
            noisy_sums = laplace(sums, sensitivity=s_sum, epsilon=eps_half, rng=rng)
            small = noisy_counts < 1.0
            reseeded += int(small.sum())
            safe = np.where(small, 1.0, noisy_counts)
            centres = np.where(
                small[:, None],
                _uniform(centred, self.n_clusters, public),
                centred.clip(noisy_sums / safe[:, None]),  # post-processing: stay in the domain
            )
        reseeded_now = np.array(small, dtype=bool)
        reseeded_now.setflags(write=False)
        record = {
            "laplace_scale": {"counts": COUNT_SENSITIVITY / eps_half, "sums": s_sum / eps_half},
            "epsilon_per_release": eps_half,
            "reseeded": reseeded,
            "sampler": "opendp" if rng is None else "seeded-test-only",
            "feature_bounds": domain.to_dict(),
        }
        return KMeansFit(
            model=self,
            centres=read_only(centres + shift),
            sizes=read_only(noisy_counts),
            reseeded=reseeded_now,
            record=record,
        )


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class KMeansFit:
    """One fit of a :class:`KMeans`: the published centres and how they were made (frozen)."""

    model: KMeans
    """The configured estimator that made it."""
    centres: FloatArray
    """``k x d`` centres (read-only)."""
    sizes: FloatArray
    """The last iteration's noisy counts: the noisy size of the cluster whose noisy sum each
    centre divides (below 1 when the centre was re-seeded)."""
    reseeded: npt.NDArray[np.bool_]
    """Clusters whose centre the last iteration re-drew at random (noisy size below 1)."""
    record: Mapping[str, Any]
    """Noise scales, re-seeds, sampler, feature bounds."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable description of the published centres."""
        return {
            "model": "KMeans",
            "method": "dp-lloyd",
            "centres": self.centres.tolist(),
            "n_iter": self.model.n_iter,
            "epsilon": self.model.epsilon,
            "delta": 0.0,
            "neighbours": "add/remove one record",
            "exact_sums": fixed_point_record(),
            **self.record,
        }


def nearest(X: FloatArray, centres: FloatArray) -> npt.NDArray[np.int64]:
    """Index of the nearest centre (squared distance; ties to the lowest index, as argmin).

    Column by column, centre by centre: no BLAS call (whose thread pool is slow on a shared
    machine) and no argmin over a short axis.
    """
    columns = np.ascontiguousarray(X.T)
    best = np.full(len(X), np.inf)
    label = np.zeros(len(X), dtype=np.int64)
    dist = np.empty(len(X))
    diff = np.empty(len(X))
    for j, centre in enumerate(centres):
        dist.fill(0.0)
        for values, c in zip(columns, centre, strict=True):
            np.subtract(values, c, out=diff)
            np.multiply(diff, diff, out=diff)
            dist += diff
        closer = dist < best
        label[closer] = j
        np.minimum(best, dist, out=best)
    return label


def lloyd_partial(
    rows: FloatArray,
    domain: FeatureDomain,
    centres: FloatArray,
    weights: npt.NDArray[np.int64] | None = None,
) -> tuple[IntArray, IntArray]:
    """Per-cluster row counts and quantised coordinate sums of centred ``rows``, as integers.

    ``rows`` are clipped into ``domain``'s uncentred version and shifted by its midpoint, so
    ``domain`` is the centred domain (:meth:`KMeans.fit_steps`). Each row is assigned to its
    nearest centre, then quantised (module doc); sums of disjoint row sets add exactly.
    ``weights``: how many equal rows each row stands for (the integers are those of the rows
    repeated).

    Raises:
        InputError: the weights add up to more than :data:`MAX_ROWS` rows.
    """
    a = _magnitudes(domain)
    V = quantise(rows, a)
    if domain.kind == "ball":
        check_norms(V)
    k = centres.shape[0]
    label = nearest(rows, centres)
    if weights is not None:
        return _weighted_sums(V, label, np.asarray(weights, dtype=np.int64), k)
    counts = np.bincount(label, minlength=k).astype(object)
    sums = int_zeros(centres.shape)
    chunk = 2 ** (53 - FRACTION_BITS)  # float partial sums of |V| <= 2^16 stay exact
    for start in range(0, len(V), chunk):
        part, lab = V[start : start + chunk], label[start : start + chunk]
        for j in range(centres.shape[1]):
            column = np.bincount(lab, weights=part[:, j], minlength=k)
            sums[:, j] += column.astype(np.int64).astype(object)
    return np.asarray(counts, dtype=object), sums


def _weighted_sums(
    V: FloatArray, label: npt.NDArray[np.int64], weights: npt.NDArray[np.int64], k: int
) -> tuple[IntArray, IntArray]:
    """Weighted counts and sums in int64: exact, as sum(w) <= 2^36 and |V| <= 2^16."""
    check_rows(int(weights.sum()))
    counts = int_zeros(k)
    sums = int_zeros((k, V.shape[1]))
    scaled = V.astype(np.int64) * weights[:, None]
    for c in range(k):
        mine = label == c
        counts[c] = int(weights[mine].sum())
        sums[c, :] = [int(v) for v in scaled[mine].sum(axis=0)]
    return counts, sums


def lloyd_finish(
    counts: IntArray, sums: IntArray, domain: FeatureDomain
) -> tuple[FloatArray, FloatArray]:
    """The float64 counts and sums of :func:`lloyd_partial` totals (each rounded once).

    Raises:
        InputError: more than :data:`dp.numerics.fixedpoint.MAX_ROWS` rows.
    """
    check_rows(int(sum(counts)))
    grid = _magnitudes(domain) / ONE
    return np.asarray(counts, dtype=np.float64), to_float(sums, grid[None, :])


def lloyd_step(
    rows: FloatArray, domain: FeatureDomain, centres: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Exact per-cluster counts and sums of centred ``rows`` (in ``domain``, the centred
    domain) for the current centres (exact: never publish them; :class:`KMeans` adds the
    noise)."""
    return lloyd_finish(*lloyd_partial(rows, domain, centres), domain)
