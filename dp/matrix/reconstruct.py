"""Reconstruction: from noisy strategy answers to a histogram estimate (post-processing only).

* ``"least-squares"`` — ``x_hat = A^+ r``: unbiased, structured per strategy (never a dense
  ``A^T A``).
* ``"l1"`` — the plain Laplace maximum-likelihood fit ``argmin_{x >= 0} ||r - A x||_1`` (Li et
  al. 2015; Ektelo, Zhang et al. SIGMOD 2018), a linear program solved by cvxpy with HiGHS pinned,
  made deterministic by a second LP that picks, among the optima, the one closest to ``x_hat``
  in L1 (plus a fixed generic tie-break term, so the optimum is unique).
  Measured on DPBench it zeroes empty cells but biases them upward, and that bias accumulates:
  prefix and range answers come out 1.5-6x worse than least squares (bench/matrix.py).
* ``"nonneg-l1"`` (default) — non-negative and workload-aware, lexicographically:
  1. the workload answers are those of ``x_W = argmin_{x >= 0} ||W (x - x_hat)||_2``
     (:mod:`dp.matrix.project`): since the truth is non-negative, this is *never* worse than
     least squares in the workload's total squared error, for every noise draw, and it zeroes
     empty regions (per-cell RMSE 0.05-0.8x least squares on sparse DPBench sets);
  2. when ``W`` is rank-deficient, several histograms give those answers: among them take the
     Laplace-likelihood (L1) optimum, then the same unique tie-break as ``"l1"``, so the result
     never depends on which optimal LP vertex the solver returns (:mod:`dp.matrix.tiebreak`).
  When ``W^T W`` is non-singular (prefix, ranges, identity and their products) step 2 is a
  single point and no LP is needed; when the programs would exceed
  :data:`MAX_TIE_BREAK_VARIABLES` it is skipped and the histogram is the projection's own (same
  answers). Workloads too large to project are
  refused by :func:`check_reconstruction` before anything is measured.
"""

from __future__ import annotations

import functools
import importlib
import math
from typing import Any

import numpy as np
import scipy.sparse as sp

from dppub.dp.errors import ConfigError, SolverError
from dppub.dp.matrix.measure import Measurement
from dppub.dp.matrix.product import Kron, Union
from dppub.dp.matrix.project import (
    certify,
    check_projection,
    sparse_workload,
    workload_factor,
    workload_projection,
)
from dppub.dp.matrix.strategy import Strategy, Tree
from dppub.dp.matrix.tiebreak import generic_cost, lexicographic_l1
from dppub.dp.matrix.workload import AllRange, FloatArray, Identity, Prefix, Workload
from dppub.dp.stopping import checked


@functools.cache
def _cvxpy() -> Any:
    """cvxpy, imported on first use: only ``"l1"`` needs it, and it takes ~0.5 s to import.
    (It ships incomplete type information, atoms are re-exported dynamically: hence ``Any``.)"""
    return importlib.import_module("cvxpy")


__all__ = [
    "MAX_TIE_BREAK_VARIABLES",
    "RECONSTRUCTIONS",
    "check_reconstruction",
    "l1_fit",
    "least_squares",
    "linear_program_variables",
    "reconstruct",
    "sparse_matrix",
]

RECONSTRUCTIONS = ("least-squares", "nonneg-l1", "l1")
"""Accepted values of ``reconstruction``."""
MAX_TIE_BREAK_VARIABLES = 1 << 17
"""``"nonneg-l1"`` picks the histogram among those with the projected answers by linear
programs of two variables per cell, plus two per strategy row unless the strategy is the
workload, up to this many variables (72,000 cells, 144,000 variables, took 16 s in HiGHS);
beyond, the histogram is the projection itself, whose answers are the same."""
# Strategies without a structured sparse form are probed in blocks of this many entries.
_PROBE_ENTRIES = 1 << 22

# The solver is pinned: LP vertices differ between solvers, and results must be reproducible.
_SOLVER = "HIGHS"


def least_squares(measurement: Measurement) -> FloatArray:
    """Least-squares estimate ``A^+ r`` of the histogram (may be negative)."""
    return measurement.strategy.lstsq(measurement.values)


def sparse_matrix(strategy: Strategy) -> sp.csr_matrix:
    """``A`` as a sparse matrix, for the linear programs (structured where known, else probed
    a block of columns at a time, so a large implicit strategy is never dense as a whole)."""
    mat = getattr(strategy, "matrix", None)
    if isinstance(mat, sp.spmatrix | sp.sparray):
        return sp.csr_matrix(mat)
    factors = getattr(strategy, "factors", None)
    if factors is not None:
        out = sp.csr_matrix(np.ones((1, 1)))
        for f in factors:
            out = sp.csr_matrix(sp.kron(out, sparse_matrix(f)))
        return out
    measured = getattr(strategy, "workload", None)
    if isinstance(measured, Workload):
        as_workload = sparse_workload(measured)
        if as_workload is not None:
            return as_workload
    blocks, width = [], max(1, _PROBE_ENTRIES // strategy.n)
    for start in checked(range(0, strategy.n, width), "probing a strategy", every=1):
        eye = np.zeros((strategy.n, min(width, strategy.n - start)))
        eye[np.arange(start, start + eye.shape[1]), np.arange(eye.shape[1])] = 1.0
        blocks.append(sp.csc_matrix(strategy @ eye))
    return sp.csr_matrix(sp.hstack(blocks))


def _solve(problem: Any, what: str) -> None:
    cp = _cvxpy()
    try:
        # cvxpy's bound propagation multiplies 0 * inf for unbounded variables (harmless NaN).
        with np.errstate(invalid="ignore"):
            problem.solve(solver=_SOLVER)
    except cp.error.SolverError as exc:  # a solver crash is reported as one line, not a trace
        raise SolverError(f"{what}: HiGHS failed ({exc})") from None
    except ValueError as exc:  # cvxpy cannot unpack a solution HiGHS did not finish
        if "invalid solution" not in str(exc):
            raise
        raise SolverError(f"{what}: HiGHS returned no solution (status unknown)") from None
    if problem.status != cp.OPTIMAL:
        raise SolverError(f"{what}: HiGHS returned status {problem.status!r}, expected 'optimal'")


def _centred(measurement: Measurement, centre: FloatArray) -> tuple[FloatArray, float]:
    """``(r - A c) / u`` and ``u``: the linear programs solve for ``(x - c) / u``.

    With ``c`` the least-squares estimate and ``u`` the Laplace scale, residuals and deviations
    are O(1) at any data scale. In raw units (or divided by the largest count) a histogram of
    10^7 records has residuals ~10^-6 of the data, at HiGHS's feasibility tolerance, and the
    solver reported infeasible or unknown status there.
    """
    unit = _unit(measurement)
    return (measurement.values - measurement.strategy @ centre) / unit, unit


def _unit(measurement: Measurement) -> float:
    unit = float(measurement.noise_scale)
    if not math.isfinite(unit) or unit <= 0:
        raise ConfigError(f"noise_scale must be finite and > 0, got {unit!r}")
    return unit


def l1_fit(measurement: Measurement, centre: FloatArray | None = None) -> tuple[FloatArray, float]:
    """``argmin_{x >= 0} ||r - A x||_1`` and its optimal value (one optimal LP vertex).

    Solved for the deviation from ``centre`` (default: the least-squares estimate) in units of
    the noise scale (see :func:`_centred`). The residual is split, ``r - A x = u+ - u-`` with
    ``u+/- >= 0`` and objective ``sum(u+ + u-)``: equality rows instead of the two inequalities
    per row that ``norm1`` generates, which HiGHS's presolve handles about 2x faster. Tree
    strategies use a node formulation: one variable per node, ``y_parent = sum y_children`` and
    ``y_leaf >= 0``, which has ``O(#nodes)`` non-zeros instead of ``O(n depth)``.
    """
    cp = _cvxpy()
    a = measurement.strategy
    c = least_squares(measurement) if centre is None else np.asarray(centre, dtype=np.float64)
    r, unit = _centred(measurement, c)
    if isinstance(a, Tree):
        y = cp.Variable(a.m)
        children = a.parent >= 0
        has_child = np.zeros(a.m, dtype=bool)
        has_child[a.parent[children]] = True
        rows = np.flatnonzero(has_child)
        # (P y)_v = y_v - sum_{c: parent(c) = v} y_c for internal nodes v.
        kids = np.flatnonzero(children)
        incid = sp.csr_matrix((np.ones(kids.size), (a.parent[kids], kids)), shape=(a.m, a.m))
        balance = (sp.identity(a.m, format="csr") - incid)[rows]
        leaves = np.flatnonzero(~has_child)
        up, um = cp.Variable(a.m, nonneg=True), cp.Variable(a.m, nonneg=True)
        cons = [y[leaves] >= -c[a.lo[leaves]] / unit, cp.multiply(a.weight, y) + up - um == r]
        if rows.size:
            cons.append(balance @ y == 0)
        prob = cp.Problem(cp.Minimize(cp.sum(up) + cp.sum(um)), cons)
        _solve(prob, "non-negative L1 reconstruction")
        dev = np.zeros(a.n)
        dev[a.lo[leaves]] = np.asarray(y.value)[leaves]
    else:
        mat = sparse_matrix(a)
        xv = cp.Variable(a.n)
        up, um = cp.Variable(a.m, nonneg=True), cp.Variable(a.m, nonneg=True)
        cons = [xv >= -c / unit, mat @ xv + up - um == r]
        prob = cp.Problem(cp.Minimize(cp.sum(up) + cp.sum(um)), cons)
        _solve(prob, "non-negative L1 reconstruction")
        dev = np.asarray(xv.value)
    # HiGHS meets the bounds up to its feasibility tolerance; clip the tiny negatives.
    return np.maximum(c + unit * dev, 0.0), float(prob.value) * unit


def _closest(mat: sp.csr_matrix, r: FloatArray, low: FloatArray, cap: float) -> FloatArray:
    """Deterministic tie-break among L1-optimal points (``||r - A d||_1 <= cap``, ``d >= low``).

    In the centred units of :func:`_centred` (``d = (x - x_hat) / u``), minimizes ``||d||_1``
    plus a tiny fixed generic linear term: a linear program whose optimum is unique for a
    generic cost vector (a fixed seed keeps it data-independent), so the result does not depend
    on which optimal vertex the first stage returned. (A strictly convex QP would do the same,
    but HiGHS's QP solver reports spurious infeasibility on these.)
    """
    cp = _cvxpy()
    dev = cp.Variable(mat.shape[1])
    generic = generic_cost(mat.shape[1])
    cons = [dev >= low, cp.norm1(r - mat @ dev) <= cap]
    prob = cp.Problem(cp.Minimize(cp.norm1(dev) + generic @ dev), cons)
    _solve(prob, "L1 tie-break")
    return np.asarray(dev.value, dtype=np.float64)


def _slack(value: float, r: FloatArray) -> float:
    # HiGHS's default feasibility tolerance is 1e-7; allow that much relative slack per row.
    return value + 1e-7 * (abs(value) + float(np.sum(np.abs(r)))) + 1e-9


def l1_mle(measurement: Measurement, x_hat: FloatArray) -> FloatArray:
    """Plain non-negative L1 fit with the deterministic tie-break (``reconstruction="l1"``)."""
    _, value = l1_fit(measurement, x_hat)
    r, unit = _centred(measurement, x_hat)
    mat = sparse_matrix(measurement.strategy)
    d = _closest(mat, r, -x_hat / unit, _slack(value / unit, r))
    return np.maximum(x_hat + unit * d, 0.0)


def _full_rank(workload: Workload) -> bool:
    if workload.m < workload.n:
        return False
    if isinstance(workload, Identity | Prefix | AllRange):
        return True
    if isinstance(workload, Kron):
        return all(_full_rank(f) for f in workload.factors)
    if isinstance(workload, Union) and any(_full_rank(p) for p in workload.parts):
        return True
    sv = workload.singular_values()
    return sv.size >= workload.n and float(sv.min()) > 1e-9 * float(sv.max())


def _measures_workload(strategy: Strategy, workload: Workload) -> bool:
    """Whether ``A = W``: the L1 likelihood is then fixed by the answers (stage 1 is moot)."""
    measured = getattr(strategy, "workload", None)
    return isinstance(measured, Workload) and measured.key == workload.key


def workload_l1(measurement: Measurement, workload: Workload, x_hat: FloatArray) -> FloatArray:
    """The default ``"nonneg-l1"`` reconstruction (see the module docstring)."""
    x_w = workload_projection(workload, x_hat)
    a = measurement.strategy
    same = _measures_workload(a, workload)
    size = 2 * workload.n + (0 if same else 2 * a.m)
    if _full_rank(workload) or size > MAX_TIE_BREAK_VARIABLES:
        return x_w
    # Rank-deficient W: keep F x = F x_W (same answers), then L1 likelihood, then nearest x_hat.
    factor = workload_factor(workload)
    if factor is None:
        return x_w
    x_bar = lexicographic_l1(
        fixed=factor,
        target=factor @ x_w,
        strategy=None if same else sparse_matrix(a),
        measured=measurement.values,
        x_hat=x_hat,
        unit=_unit(measurement),
    )
    # The programs keep the answers up to HiGHS's tolerance: certify the result itself.
    return certify(workload, x_hat, x_bar, mat=factor if sp.issparse(factor) else None)


def check_reconstruction(workload: Workload, method: str) -> str:
    """``method`` if :func:`reconstruct` can run it on ``workload``, else a one-line
    :class:`ConfigError` naming the limit; call it when planning, before any budget is spent."""
    if method not in RECONSTRUCTIONS:
        raise ConfigError(f"reconstruction must be one of {list(RECONSTRUCTIONS)}, got {method!r}")
    if method == "nonneg-l1":
        check_projection(workload)
    return method


def reconstruct(
    measurement: Measurement, workload: Workload, *, method: str = "nonneg-l1"
) -> FloatArray:
    """Histogram estimate from a measurement (post-processing: costs no privacy).

    Args:
        measurement: the noisy strategy answers.
        workload: the workload whose answers will be released (used by ``"nonneg-l1"``).
        method: one of :data:`RECONSTRUCTIONS`.

    Returns:
        The estimate, length ``n`` (non-negative unless ``method == "least-squares"``).
    """
    method = check_reconstruction(workload, method)
    x_hat = least_squares(measurement)
    if method == "least-squares":
        return x_hat
    if method == "l1":
        return l1_mle(measurement, x_hat)
    return workload_l1(measurement, workload, x_hat)


def linear_program_variables(workload: Workload, strategy: Strategy, method: str) -> int:
    """Variables of the linear programs one :func:`reconstruct` solves, summed over its (two)
    programs; 0: none. From the sizes alone: what a caller needs to bound the work of
    repeated reconstructions."""
    method = check_reconstruction(workload, method)
    if method == "l1":
        return 2 * (workload.n + 2 * strategy.m)  # the fit, then the tie-break
    if method == "least-squares" or _full_rank(workload):
        return 0
    size = 2 * workload.n + (0 if _measures_workload(strategy, workload) else 2 * strategy.m)
    return 0 if size > MAX_TIE_BREAK_VARIABLES else 2 * size  # likelihood, then tie-break
