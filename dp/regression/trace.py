"""Differentially private trace regression with a nuclear-norm penalty.

Model: ``y_i = tr(X_i^T B) + e_i`` with a low-rank ``d x T`` coefficient matrix ``B``, estimated by

    min_B  sum_k ( vec_k(B)^T G_k vec_k(B) - 2 m_k^T vec_k(B) ) + lam ||B||_*

where each block ``k`` holds the sufficient statistics ``G_k = sum u u^T``, ``m_k = sum y u`` of
its rows. Two designs:

* **Multi-task** (``X_i = x_i e_t^T``: row ``i`` belongs to task ``t``): one block per task, with
  ``u = x`` and ``vec_t(B) = b_t`` (column ``t``). Tasks are *disjoint row partitions*: adding or
  removing a record changes one task's statistics only, so releasing every task's statistics at
  ``epsilon`` costs ``epsilon`` in total by parallel composition (McSherry 2009), not
  ``T epsilon``. :meth:`TraceRegression.partition_costs` exposes the per-task costs so that the
  ledger can record the partition. All ``T`` tasks are always released (even empty ones: whether
  a task has rows is private).
* **General** matrix covariates ``X_i`` (``||X_i||_F <= data_norm``): one block over
  ``vec(B)`` (column-major), with ``u = vec(X_i)``; sequential composition, cost ``epsilon``.

Privacy. Each block is released by the functional mechanism of :mod:`dp.regression.functional`
(Laplace on the upper triangle of ``G_k`` and on ``m_k``, add/remove L1 sensitivities of
:mod:`dp.regression.sensitivity`, rows and targets clipped into the declared bounds). Trimming,
the penalty and the cvxpy solve only read the noisy statistics: post-processing.

Solve. Each noisy ``G_k`` is shrunk and floored (below), hence positive definite, and written
as ``||L_k^T vec_k(B)||^2``; the
problem is convex and solved by cvxpy with a pinned solver (CLARABEL). The penalty
``lam = kappa * 2 (sqrt(d) + sqrt(T)) * sqrt(2) (b_m + rho b_Q B / R)`` is a function of the
Laplace scales ``b_m`` (moments) and ``b_Q`` (quadratic) and of the largest spread ``rho`` kept by
the shrinkage (post-processing of the release): twice the typical spectral norm of the
noise in the gradient ``2 (G_k b_k - m_k)`` (Bai-Yin for a ``d x T`` matrix of independent
entries; ``B / R`` is the largest coefficient norm the declared bounds allow), so that singular
directions carried by noise alone are thresholded away (Negahban & Wainwright 2011 choose ``lam``
at the noise's dual norm in the same way). The nuclear norm also shrinks the singular values it
keeps, so the fit is finished by an unpenalised refit inside the selected subspace
(:func:`dp.regression.lowrank.refit_in_subspace`); on the rank-2, 20-task benchmark this halves
the error of the penalised solution, and ``kappa = 1`` selected the true rank at every
epsilon >= 0.5 tried; at epsilon = 0.1 the noise swamps the signal and it selects rank 0.

Shrinkage. The per-task releases use the budget split and the shrunk, floored spectra of
:class:`~dp.regression.LinearRegression` (:mod:`dp.regression.shrinkage`): the penalised problem,
the refit and the per-task solutions all read ``V_k diag(g_k) V_k^T`` instead of the raw noisy
``G_k``, and the quadratic part of the penalty's noise is weighted by the largest kept spread
``rho_k`` (the noise left in the shrunk matrices): with the mean ``rho_k``, or without it, the
penalty selects spurious ranks (figures: ``bench/RESULTS.md``, DP regression and History).
When the penalty selects rank 0 the estimate is the per-task shrunk solutions,
not 0: at epsilon = 0.1 their error is 0.8 ``||B||_F`` against ``||B||_F`` for 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dppub.dp.budget import PlannedCost, PrivacyCost, parallel
from dppub.dp.errors import ConfigError, InputError
from dppub.dp.numerics.domains import (
    BoundLike,
    FeatureDomain,
    TargetDomain,
    feature_domain,
    read_only,
)
from dppub.dp.numerics.fixedpoint import fixed_point_record
from dppub.dp.regression.encoding import FeatureEncoding, declared_features, resolve_d
from dppub.dp.regression.functional import (
    SHRUNK_QUADRATIC_WEIGHT,
    FunctionalRelease,
    eigenvalue_floor,
    functional_release,
)
from dppub.dp.regression.lowrank import SOLVER, refit_in_subspace, solve_nuclear
from dppub.dp.regression.sensitivity import NEIGHBOURS
from dppub.dp.regression.shrinkage import shrink_spectrum
from dppub.dp.regression.statistics import (
    Design,
    SufficientStatistics,
    check_statistics,
)
from dppub.dp.validation import check_epsilon, check_positive

__all__ = ["TraceFit", "TraceRegression"]

FloatArray = npt.NDArray[np.float64]


class TraceRegression:
    """Epsilon-DP low-rank trace / multi-task regression.

    Args:
        epsilon: privacy parameter of one ``fit`` (per task, and in total by parallel
            composition, for the multi-task design).
        n_tasks: number of tasks ``T`` (declared, not read from data).
        bounds_X: per-feature box ``(lo, hi)`` for multi-task rows; or
        data_norm: L2 bound on each row ``x`` (multi-task) or Frobenius bound on ``X_i``.
        encoding: declared feature columns of multi-task rows (numeric and category, one-hot;
            no intercept, so the first category column keeps all its levels); ``X`` is then
            ``encoding.encode(frame)``. Exactly one of ``bounds_X``/``data_norm``/``encoding``.
        bounds_y: declared target interval ``(lo, hi)``, required; it must contain 0 (no
            intercept: the model is ``y = tr(X^T B) + e``).
        penalty_scale: ``kappa`` in the module doc (1 by default).

    The estimator is configuration only: a fit returns a frozen :class:`TraceFit` and changes
    nothing here. Fitting on rows in memory, and predicting, are reference code
    (:mod:`dp.reference.frame_regression`).
    """

    def __init__(
        self,
        epsilon: float,
        *,
        n_tasks: int,
        bounds_X: tuple[BoundLike, BoundLike] | None = None,
        data_norm: float | None = None,
        encoding: FeatureEncoding | None = None,
        bounds_y: Sequence[float] | None = None,
        penalty_scale: float = 1.0,
    ) -> None:
        self.epsilon = check_epsilon(epsilon)
        if isinstance(n_tasks, bool) or not isinstance(n_tasks, int) or n_tasks < 1:
            raise ConfigError(f"n_tasks must be an integer >= 1, got {n_tasks!r}")
        self.n_tasks = n_tasks
        self.encoding = encoding
        self.bounds_X, self.data_norm = declared_features(
            bounds_X, data_norm, encoding, fit_intercept=False
        )
        self.target = TargetDomain.from_bounds(bounds_y)
        if not self.target.lower <= 0.0 <= self.target.upper:
            bounds = [self.target.lower, self.target.upper]
            raise ConfigError(f"bounds_y must contain 0 (no intercept), got {bounds}")
        self.penalty_scale = check_positive(penalty_scale, name="penalty_scale")

    @property
    def privacy_cost(self) -> PrivacyCost:
        """Total cost of one ``fit``: the maximum over the disjoint tasks, i.e. ``epsilon``."""
        return parallel(c.cost for c in self.partition_costs("trace-regression", key="task"))

    def partition_costs(self, name: str, *, key: str) -> list[PlannedCost]:
        """One planned cost per task, tagged with partition ``(key, task)`` for the ledger."""
        cost = PrivacyCost(epsilon=self.epsilon)
        return [
            PlannedCost(name=f"{name}[{t}]", cost=cost, partition=(key, str(t)))
            for t in range(self.n_tasks)
        ]

    def design(self, d: int | None = None, *, matrix: bool = False) -> Design:
        """The public preprocessing of a fit on ``d`` features (no intercept).

        Multi-task (default): the box or ball of one row ``x``; pass it as ``design`` to
        :func:`dp.engine.folds.regression_sums.regression_statistics_stream` with ``by`` the task
        column (its ``n_tasks`` declared categories, in order, are the tasks). ``matrix=True``: the
        Frobenius ball of ``vec(X_i)`` (column-major, ``d * n_tasks`` entries) of matrix
        covariates, which needs ``data_norm``.
        """
        if not matrix:
            d = resolve_d(d, self.encoding)
            if self.encoding is not None:
                return Design(
                    features=self.encoding.domain(),
                    target=self.target,
                    fit_intercept=False,
                    encoding=self.encoding,
                )
            dom = self._box_or_ball(d)
        elif self.data_norm is None or d is None:
            raise ConfigError("matrix covariates need data_norm (a Frobenius bound on X_i)")
        else:
            dom = FeatureDomain.ball(self.data_norm, d=d * self.n_tasks)
        return Design(features=dom, target=self.target, fit_intercept=False)

    def fit_statistics(
        self,
        exact: Sequence[SufficientStatistics],
        *,
        d: int | None = None,
        rng: np.random.Generator | None = None,
        matrix: bool = False,
    ) -> TraceFit:
        """Fit from exact per-block statistics.

        The same mechanism, and for the same statistics and seeded ``rng`` the same coefficients, as
        the row fit of :mod:`dp.reference.frame_regression`. Privacy rests on every block having
        been summed from rows clipped by :meth:`design` ``(d, matrix=matrix)`` and, for the
        multi-task design, on the tasks being disjoint row partitions (parallel composition): the
        sensitivities assume it.

        Args:
            exact: multi-task: one entry per task ``0 .. n_tasks - 1`` (all of them, empty
                tasks included), e.g. the engine's result with ``by`` the task column;
                ``matrix=True``: a single block over all rows.
            d: number of features (rows of ``B``).
            rng: ``None`` for release-grade noise; a seeded generator for tests only.
            matrix: whether the statistics are of matrix covariates (see :meth:`design`).
        """
        design = self.design(d, matrix=matrix)
        d = design.features.dim // (self.n_tasks if matrix else 1)
        want = 1 if matrix else self.n_tasks
        if isinstance(exact, SufficientStatistics) or len(exact) != want:
            got = (
                "one SufficientStatistics"
                if isinstance(exact, SufficientStatistics)
                else (f"{len(exact)} entries")
            )
            raise InputError(f"exact must be a list of {want} block statistics, got {got}")
        for block in exact:
            check_statistics(block, design)
        multitask = not matrix
        dom = design.features
        releases = [
            functional_release(
                e, design, epsilon=self.epsilon, rng=rng, quadratic_weight=SHRUNK_QUADRATIC_WEIGHT
            )
            for e in exact
        ]
        floor = eigenvalue_floor(releases[0].scales, dom.dim)
        b_q = releases[0].scales["quadratic"]
        spectra = [
            shrink_spectrum(rel.noisy.gram, quadratic_scale=b_q, floor=floor) for rel in releases
        ]
        grams = [sp.matrix() for sp in spectra]
        moments = [rel.noisy.moment for rel in releases]
        independent = [sp.solve(m) for sp, m in zip(spectra, moments, strict=True)]
        rho = max(sp.rho for sp in spectra)
        lam = self._penalty(releases[0], design, d, rho=rho)
        scale = np.asarray(design.feature_scale)
        shape = (d, self.n_tasks)
        B = solve_nuclear(grams, moments, shape=shape, lam=lam, per_column=multitask)
        B, rank = refit_in_subspace(B, grams, moments, per_column=multitask)
        if multitask:  # rows were divided per feature by the public box scale: undo it
            ind = np.column_stack(independent)
            B, ind = B / scale[:, None], ind / scale[:, None]
        else:
            ind = independent[0].reshape(shape, order="F")
        # Rank 0: no shared direction stands above the noise; the per-block shrunk solutions
        # are then a better estimate than 0 (module doc).
        info: dict[str, Any] = {
            "design": "multi-task" if multitask else "matrix covariates",
            "composition": (
                "parallel over disjoint tasks: epsilon per task, epsilon in total"
                if multitask
                else "one release over all rows"
            ),
            "penalty": lam,
            "rank": rank,
            "eigenvalue_floor": floor,
            "spectrum_shrinkage": rho,
            "laplace_scale": releases[0].scales,
            "epsilon_split": releases[0].epsilons,
            "solver": SOLVER,
            "feature_bounds": dom.to_dict(),
            "sampler": "opendp" if rng is None else "seeded-test-only",
        }
        if self.encoding is not None:
            info |= self.encoding.to_dict()
        return TraceFit(
            model=self,
            coef=read_only(ind if rank == 0 else B),
            independent_coef=read_only(ind),
            released=tuple(rel.noisy for rel in releases),
            info=info,
        )

    def _box_or_ball(self, d: int) -> FeatureDomain:
        return feature_domain(self.bounds_X, self.data_norm, d=d)

    def _penalty(self, rel: FunctionalRelease, design: Design, d: int, *, rho: float) -> float:
        t = design.shifted_target
        w = max(abs(t.lower), abs(t.upper)) / design.shifted_features.radius
        noise = math.sqrt(2.0) * (rel.scales["cross"] + rho * rel.scales["quadratic"] * w)
        return self.penalty_scale * 2.0 * (math.sqrt(d) + math.sqrt(self.n_tasks)) * noise


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class TraceFit:
    """One fit of a :class:`TraceRegression`: what it published and how (frozen)."""

    model: TraceRegression
    """The configured estimator that made it."""
    coef: FloatArray
    """The ``d x T`` estimate of ``B`` (read-only)."""
    independent_coef: FloatArray
    """Per-block shrunk solutions of the same noisy statistics without the penalty
    (independent per-task DP regressions, for comparison, and the estimate when the penalty
    selects rank 0; free post-processing)."""
    released: tuple[SufficientStatistics, ...]
    """The noisy statistics of each block the fit released and solved from."""
    info: Mapping[str, Any]
    """How it was made private."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable description of the published coefficient matrix."""
        m = self.model
        return {
            "model": "TraceRegression",
            "method": "functional-mechanism + nuclear norm",
            "coefficients": self.coef.tolist(),
            "n_tasks": m.n_tasks,
            "bounds_y": [m.target.lower, m.target.upper],
            "epsilon": m.epsilon,
            "delta": 0.0,
            "neighbours": NEIGHBOURS,
            "exact_sums": fixed_point_record(),
            **self.info,
        }
