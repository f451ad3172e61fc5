"""Objective perturbation for L2-regularised logistic regression (Chaudhuri, Monteleoni & Sarwate,
JMLR 2011, Algorithm 2), re-derived for add/remove-one neighbours.

Rows ``z`` (clipped, centred, scaled, with the constant column) are divided by their public
bound ``R_z`` so that ``||z|| <= 1``. We return the *exact* minimiser of

    J(w) = sum_i l(z_i^T w; y_i) + (lam / 2) ||w||^2 + b^T w,   l(s; y) = log(1 + e^s) - y s,

where ``b`` has density proportional to ``exp(-eps_b ||b||)`` (uniform direction, norm
``Gamma(p, 1 / eps_b)``). Note that ``lam`` multiplies the *sum*, not the mean: it is a public
constant and the row count is never used.

Privacy (add/remove one record). ``w`` determines ``b = -grad(sum l) - lam w`` one-to-one.
For ``D' = D + {z}``, ``b' = b - l'(z^T w) z`` with ``|l'| <= 1``, so ``| ||b|| - ||b'|| | <= 1``;
and the Jacobians of the maps ``w -> b`` differ by the rank-one term ``l''(z^T w) z z^T`` with
``0 <= l'' <= 1/4``, so their determinants differ by a factor ``1 + l'' z^T H^-1 z`` in
``[1, 1 + 1/(4 lam)]`` (``H >= lam I``). The density ratio of ``w`` is therefore at most
``exp(eps_b) (1 + 1/(4 lam))``: the release is ``epsilon``-DP with
``epsilon = eps_b + log(1 + 1/(4 lam))``. Under replace-one (Chaudhuri et al.) both terms doubled:
gradient difference 2, and a rank-two Jacobian change ``(1 + c/lam)^2``.

Split. We spend ``eps_J = epsilon / 10`` on the curvature term, i.e. ``lam = 1 / (4 (e^{eps_J}
- 1))`` (25 at ``epsilon = 0.1``, 2.4 at ``epsilon = 1``: small next to ``n`` times the
curvature for ``n`` in the thousands), and ``eps_b = 0.9 epsilon`` on the linear term, whose
noise ``||b|| ~ p / eps_b`` dominates the error.

Exactness. The guarantee is for the exact minimiser; ``J`` is strongly convex and smooth, and we
run Newton's method with backtracking to a gradient norm of ``1e-9`` times the noise norm,
raising :class:`dp.errors.SolverError` otherwise. The data enter only through the loss,
gradient and Hessian *sums* at each iterate (:func:`logistic_sums`), so
:func:`minimise_objective` takes them as a callable: over in-memory rows
(:func:`objective_perturbation`), or folded batch by batch by :mod:`dp.engine.logistic`. The
iterates are functions of the noise and of earlier exact sums, and only the final minimiser is
released.

Sampler. ``b`` is built from the project's vetted samplers (:mod:`dp.mechanisms`, OpenDP with
``rng=None``): its norm ``Gamma(p, 1/eps_b)`` is the sum of ``p`` independent ``Exp(1/eps_b)``,
i.e. of the absolute values of ``p`` Laplace draws of scale ``1/eps_b``, and its direction is a
normalised vector of discrete Gaussian draws. The draws live on the samplers' fine grid
(``2^-30`` of the scale), the same discretisation the Laplace releases use. (The output is a
minimiser, not ``value + noise``; Mironov's 2012 floating-point attack targets the latter.)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.special import expit

from dp.errors import InvariantError, SolverError
from dp.mechanisms import gaussian, laplace

__all__ = [
    "LossSums",
    "LossSumsAt",
    "ObjectiveRelease",
    "logistic_sums",
    "minimise_objective",
    "noise_vector",
    "objective_perturbation",
]

FloatArray = npt.NDArray[np.float64]
LossSums = tuple[float, FloatArray, FloatArray]
"""``(sum_i l, sum_i grad l, sum_i hess l)`` of the logistic loss at one ``w``."""
LossSumsAt = Callable[[FloatArray], LossSums]
"""The exact :data:`LossSums` of the private rows at an iterate ``w`` (one data pass per call)."""
CURVATURE_SHARE = 0.1
"""Fraction of epsilon spent on the Jacobian term ``log(1 + 1/(4 lam))``."""


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class ObjectiveRelease:
    """The perturbed minimiser and the public parameters of the release."""

    theta: FloatArray
    """Minimiser of ``J`` in the normalised frame (``||z|| <= 1``)."""
    ridge: float
    """``lam``, the public L2 penalty on the sum of losses."""
    epsilon_noise: float
    """``eps_b``: the share paying for the linear noise term."""
    epsilon_curvature: float
    """``log(1 + 1 / (4 lam))``."""
    newton_steps: int
    """Newton iterations used."""


def logistic_sums(Z: FloatArray, y: FloatArray, w: FloatArray) -> LossSums:
    """``sum_i l(z_i^T w; y_i)``, its gradient and its Hessian over the rows of ``Z``.

    The data term of ``J`` only; :func:`minimise_objective` adds the penalty and the noise.
    Sums over disjoint row sets add up to the sums over their union (up to float addition
    order), which is how the engine evaluates them batch by batch.

    >>> loss, grad, hess = logistic_sums(np.zeros((2, 1)), np.array([0.0, 1.0]), np.zeros(1))
    >>> round(loss, 6), grad.tolist(), hess.tolist()
    (1.386294, [0.0], [[0.0]])
    """
    s = Z @ w
    loss = float(np.logaddexp(0.0, s).sum() - y @ s)
    p = expit(s)
    grad = Z.T @ (p - y)
    hess = (Z * (p * (1.0 - p))[:, None]).T @ Z
    return loss, np.asarray(grad, dtype=np.float64), np.asarray(hess, dtype=np.float64)


def noise_vector(p: int, *, epsilon: float, rng: np.random.Generator | None) -> FloatArray:
    """A draw from the density proportional to ``exp(-epsilon ||b||)`` on ``R^p`` (module doc)."""
    zeros = np.zeros(p)
    radius = float(np.abs(laplace(zeros, sensitivity=1.0, epsilon=epsilon, rng=rng)).sum())
    # Any scale gives a uniform direction once normalised; (1, 0.5) is just a valid calibration.
    sphere = gaussian(zeros, l2_sensitivity=1.0, epsilon=1.0, delta=0.5, rng=rng)
    norm = float(np.linalg.norm(sphere))
    while norm == 0.0:  # probability ~0 on the 2^-30 grid; redraw rather than divide by zero
        sphere = gaussian(zeros, l2_sensitivity=1.0, epsilon=1.0, delta=0.5, rng=rng)
        norm = float(np.linalg.norm(sphere))
    return np.asarray(sphere / norm * radius, dtype=np.float64)


def objective_perturbation(
    Z: FloatArray, y: FloatArray, *, epsilon: float, rng: np.random.Generator | None = None
) -> ObjectiveRelease:
    """Epsilon-DP logistic regression on rows with ``||z|| <= 1`` and labels in {0, 1}.

    Args:
        Z: normalised design (the caller clips and scales; every row must have norm <= 1).
        y: labels in {0, 1}.
        epsilon: total privacy parameter.
        rng: ``None`` for release-grade (OpenDP) noise; a seeded generator for tests only.
    """
    return minimise_objective(
        lambda w: logistic_sums(Z, y, w), p=Z.shape[1], epsilon=epsilon, rng=rng
    )


def minimise_objective(
    sums: LossSumsAt, *, p: int, epsilon: float, rng: np.random.Generator | None = None
) -> ObjectiveRelease:
    """Objective perturbation given the data term of ``J`` as a callable (module doc).

    The mechanism of :func:`objective_perturbation`, which passes the in-memory rows; a streaming
    engine passes a callable that folds the same sums over batches. Only the iterates ``w`` of
    Newton's method on the perturbed objective are evaluated; they depend on the data and the
    noise and are never released. The release is the exact minimiser either way, so the privacy
    argument is the same.

    Args:
        sums: exact :data:`LossSums` at ``w`` over rows with ``||z|| <= 1``, labels in {0, 1}.
        p: number of parameters (columns of the normalised design).
        epsilon: total privacy parameter.
        rng: ``None`` for release-grade (OpenDP) noise; a seeded generator for tests only.
    """
    eps_j = CURVATURE_SHARE * epsilon
    lam = 0.25 / math.expm1(eps_j)
    eps_b = epsilon - math.log1p(0.25 / lam)
    b = noise_vector(p, epsilon=eps_b, rng=rng)
    eye = np.eye(p)

    def evaluate(w: FloatArray) -> LossSums:
        loss, grad, hess = sums(w)
        if grad.shape != (p,) or hess.shape != (p, p):
            raise InvariantError("the loss sums have the wrong shape")
        return (
            loss + 0.5 * lam * float(w @ w) + float(b @ w),
            np.asarray(grad + lam * w + b, dtype=np.float64),
            np.asarray(hess + lam * eye, dtype=np.float64),
        )

    w = np.zeros(p)
    loss, grad, hess = evaluate(w)
    tol = 1e-9 * max(1.0, float(np.linalg.norm(b)))
    for step in range(1, 101):
        direction = np.linalg.solve(hess, -grad)
        t = 1.0
        gnorm = float(np.linalg.norm(grad))
        while True:
            cand = w + t * direction
            c_loss, c_grad, c_hess = evaluate(cand)
            # Armijo on J; near the optimum J's float resolution (~1e-16 n) hides the decrease,
            # so a step that shrinks the gradient is accepted too. J is strongly convex: a
            # small enough step always satisfies one of them.
            armijo = c_loss <= loss + 1e-4 * t * float(grad @ direction)
            if armijo or float(np.linalg.norm(c_grad)) < gnorm or t < 1e-12:
                break
            t /= 2.0
        w, loss, grad, hess = cand, c_loss, c_grad, c_hess
        if float(np.linalg.norm(grad)) <= tol:
            return ObjectiveRelease(
                theta=w,
                ridge=lam,
                epsilon_noise=eps_b,
                epsilon_curvature=epsilon - eps_b,
                newton_steps=step,
            )
    raise SolverError("objective perturbation: Newton's method did not reach the exact minimiser")
