"""Approximate minima perturbation for L2-regularised logistic regression: objective
perturbation (Chaudhuri, Monteleoni & Sarwate, JMLR 2011, Algorithm 2) solved to a *certified*
gradient norm, then output perturbation (Iyengar, Near, Song, Thakkar, Thakurta & Wang, "Towards
Practical Differentially Private Convex Optimization", IEEE S&P 2019, Algorithm 1), re-derived
for add/remove-one neighbours.

Rows ``z`` (clipped, centred, scaled, with the constant column) are divided by their public
bound ``R_z`` and quantised toward zero so that ``||z|| <= 1`` exactly
(:func:`dp.regression.logistic.normalised_rows`). With labels ``y`` in {0, 1} and
``l(s; y) = log(1 + e^s) - y s``,

    J(w) = sum_i l(z_i^T w; y_i) + (lam / 2) ||w||^2 + b^T w,

where ``b`` has density proportional to ``exp(-eps_b ||b||)``. ``lam`` multiplies the *sum*,
not the mean: it is a public constant and the row count scales nothing.

1. **The exact minimiser** ``theta*`` of ``J`` is ``(eps_b + eps_J)``-DP with
   ``eps_J = log(1 + 1/(4 lam))``. ``w`` determines ``b = -grad(sum l) - lam w`` one-to-one.
   For ``D' = D + {z}``, ``b' = b - l'(z^T w) z`` with ``|l'| <= 1``, so
   ``| ||b|| - ||b'|| | <= 1``; the Jacobians of the maps ``w -> b`` differ by the rank-one term
   ``l''(z^T w) z z^T`` with ``0 <= l'' <= 1/4``, so their determinants differ by a factor in
   ``[1, 1 + 1/(4 lam)]`` (``H >= lam I``): the density ratio of ``theta*`` is at most
   ``exp(eps_b) (1 + 1/(4 lam))``.
2. **What is computed.** Newton's method on ``J`` stops at the first iterate ``theta_hat``
   whose *true* gradient norm is certified to be at most ``gamma``: the gradient comes from
   exact integer sums with a proven float64 error bound (:mod:`dp.regression.losssums`), and
   ``||grad J(theta_hat)|| <= ||computed||(1 + 2^-40) + error <= gamma``. ``J`` is
   ``lam``-strongly convex, so ``||theta_hat - theta*|| <= gamma / lam``. ``theta_hat`` is
   rounded to the grid ``G`` (a power of two, :class:`OutputNoise`): ``theta_s`` is within
   ``gamma / lam + sqrt(p) G / 2`` of ``theta*``.
3. **The release** is ``theta_s + G rint(v / G)``, ``v`` with density proportional to
   ``exp(-eps_out ||v|| / Delta)``, ``Delta = 2 gamma / lam + sqrt(p) G``.

Privacy (Iyengar et al. 2019, Thm 1, with their ``Lambda / n`` on the mean loss replaced by
``lam`` on the sum). Given ``D``, ``theta*`` and ``b`` determine each other, so
``theta_s = h(D, theta*)``: the rounded solver output on ``J`` with the ``b`` that makes
``theta*`` its minimiser. For any fixed ``theta*`` and neighbours ``D, D'``,
``||h(D, theta*) - h(D', theta*)|| <= Delta`` (both lie within ``Delta / 2`` of ``theta*``), so
``D -> h(D, theta*) + v`` is ``eps_out``-DP for every ``theta*`` (the output perturbation of
Chaudhuri et al. 2011, Algorithm 1: the density ratio is at most
``exp(eps_out ||h - h'|| / Delta)``), and rounding it to ``G`` -- on which ``h`` lies, so the
float64 sum is exact and lands on the grid -- is post-processing. Composing it adaptively with
the release of ``theta*`` makes the pair ``(theta*, release)`` epsilon-DP with
``epsilon = eps_b + eps_J + eps_out``; the release alone is its marginal. If Newton's method
cannot certify ``gamma`` (it does not converge in 100 steps, or the float64 error bound, which
grows like ``n u ||w||``, exceeds ``gamma`` -- beyond about 10^9 rows) it raises
:class:`dp.errors.SolverError`: nothing is released (the run is charged for its draw). That
failure is the one data-dependent outcome the guarantee does not cover: it signals a table
beyond the documented size (Newton's method on a strongly convex, smooth ``J`` otherwise
converges in a few steps).

Split and tolerance (public). ``eps_J = epsilon / 10`` (``lam = 1 / (4 (e^{eps_J} - 1))``: 25 at
``epsilon = 0.1``, 2.4 at 1), ``eps_out = epsilon / 50`` (:data:`OUTPUT_SHARE`), and
``eps_b = 0.88 epsilon``, whose noise ``||b|| ~ p / eps_b`` dominates the error (2% more of it
than with ``eps_b = 0.9 epsilon`` and no output noise: ``bench/regression.py``). ``gamma`` makes
the output noise's mean norm ``p Delta / eps_out`` equal to :data:`OUTPUT_NOISE` ``= 2^-8`` in
the normalised frame: a prediction's log-odds ``z^T theta`` moves by at most ``||v||``
(``||z|| <= 1``), 0.004 on average. (``gamma = 2^-8 lam eps_out / (2 p)`` up to the grid term:
8.8e-6 at ``p = 11``, ``epsilon = 0.1``; the certificate's float64 error bound
``n (||w|| / 4 + 10) u`` stays below ``gamma / 2`` up to about 3e9 rows there.)

Sampler. ``b`` and ``v`` are built from the project's vetted samplers (:mod:`dp.mechanisms`,
OpenDP with ``rng=None``): a norm ``Gamma(p, scale)`` as the sum of the absolute values of ``p``
Laplace draws of that scale, and a direction from normalised discrete Gaussian draws
(:func:`noise_vector`), on the samplers' fine grid (``2^-30`` of the scale). ``theta*`` is a
minimiser, not ``value + noise``; the output perturbation is, which is why it is computed
exactly on the grid ``G`` (Mironov 2012).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dppub.dp.errors import InvariantError, SolverError
from dppub.dp.mechanisms import gaussian, laplace
from dppub.dp.regression.losssums import LossSums, gradient_error

__all__ = [
    "CURVATURE_SHARE",
    "OUTPUT_NOISE",
    "OUTPUT_SHARE",
    "LossSumsAt",
    "ObjectiveRelease",
    "OutputNoise",
    "Parameters",
    "minimise_objective",
    "noise_vector",
    "parameters",
    "perturb_output",
]

FloatArray = npt.NDArray[np.float64]
LossSumsAt = Callable[[FloatArray], LossSums]
"""The exact :class:`~dp.regression.losssums.LossSums` of the private rows at an iterate ``w``
(one data pass per call)."""
CURVATURE_SHARE = 0.1
"""Fraction of epsilon spent on the Jacobian term ``log(1 + 1/(4 lam))``."""
OUTPUT_SHARE = 0.02
"""Fraction of epsilon spent on the output perturbation."""
OUTPUT_NOISE = 2.0**-8
"""Mean norm of the output perturbation in the normalised frame (module doc)."""
MAX_STEPS = 100
_U = 2.0**-53
_GRID_BITS = 12  # G is 2^-12 of the output sensitivity, to within a factor 2


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputNoise:
    """Public parameters of the output perturbation (module doc, step 3)."""

    sensitivity: float
    """``Delta = 2 gamma / lam + sqrt(p) G``: L2 distance between neighbours' rounded points."""
    epsilon: float
    """``eps_out``."""
    grid: float
    """``G``: the point and the release are integer multiples of it."""

    @property
    def scale(self) -> float:
        """``Delta / eps_out``: ``||v|| ~ Gamma(p, scale)``."""
        return self.sensitivity / self.epsilon


@dataclass(frozen=True, slots=True, kw_only=True)
class Parameters:
    """The public parameters of one release (module doc: split and tolerance)."""

    ridge: float
    """``lam``, the L2 penalty on the sum of losses."""
    epsilon_noise: float
    """``eps_b``: the linear noise term."""
    epsilon_curvature: float
    """``eps_J = log(1 + 1 / (4 lam))``."""
    gradient_tolerance: float
    """``gamma``: the certified bound on the true gradient norm at the solver's point."""
    output: OutputNoise
    """The output perturbation (its ``epsilon`` is ``eps_out``)."""


def parameters(*, p: int, epsilon: float) -> Parameters:
    """The split, ridge, tolerance and output noise for ``p`` parameters at ``epsilon``.

    >>> par = parameters(p=3, epsilon=1.0)
    >>> round(par.ridge, 4), round(par.epsilon_noise, 4), round(par.output.epsilon, 4)
    (2.3771, 0.88, 0.02)
    >>> round(3 * par.output.scale, 6) == round(OUTPUT_NOISE, 6)  # mean ||v|| (module doc)
    True
    """
    eps_j = CURVATURE_SHARE * epsilon
    lam = 0.25 / math.expm1(eps_j)
    eps_out = OUTPUT_SHARE * epsilon
    eps_b = epsilon - math.log1p(0.25 / lam) - eps_out
    gamma = OUTPUT_NOISE * lam * eps_out / (2.0 * p)
    base = 2.0 * gamma / lam
    _, exponent = math.frexp(base)  # base = m 2^exponent with m in [1/2, 1)
    grid = 2.0 ** (exponent - 1 - _GRID_BITS)
    # Shrink gamma by the grid term so that the mean ||v|| is OUTPUT_NOISE exactly.
    gamma -= lam * math.sqrt(p) * grid / 2.0
    # (1 + 2^-40) absorbs the rounding of this formula: Delta must not fall below its value.
    delta = (2.0 * gamma / lam + math.sqrt(p) * grid) * (1.0 + 2.0**-40)
    out = OutputNoise(sensitivity=delta, epsilon=eps_out, grid=grid)
    return Parameters(
        ridge=lam,
        epsilon_noise=eps_b,
        epsilon_curvature=epsilon - eps_b - eps_out,
        gradient_tolerance=gamma,
        output=out,
    )


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class ObjectiveRelease:
    """The released coefficients and the public parameters of the release."""

    theta: FloatArray
    """The release, in the normalised frame (``||z|| <= 1``)."""
    parameters: Parameters
    """Split, ridge, tolerance and output noise (public)."""
    newton_steps: int
    """Newton iterations used (data-dependent: never published)."""


def noise_vector(
    p: int,
    *,
    epsilon: float,
    sensitivity: float = 1.0,
    rng: np.random.Generator | None,
    size: int | None = None,
) -> FloatArray:
    """A draw from the density proportional to ``exp(-epsilon ||b|| / sensitivity)`` on ``R^p``
    (module doc); ``size`` independent draws, shape ``(size, p)``, if given."""
    zeros = np.zeros((p,) if size is None else (size, p))
    lap = laplace(zeros, sensitivity=sensitivity, epsilon=epsilon, rng=rng)
    radius = np.abs(lap).sum(axis=-1, keepdims=True)
    # Any scale gives a uniform direction once normalised; (1, 0.5) is just a valid calibration.
    sphere = gaussian(zeros, l2_sensitivity=1.0, epsilon=1.0, delta=0.5, rng=rng)
    norm = np.linalg.norm(sphere, axis=-1, keepdims=True)
    while not np.all(norm > 0.0):  # probability ~0 on the 2^-30 grid; redraw, never divide by 0
        sphere = gaussian(zeros, l2_sensitivity=1.0, epsilon=1.0, delta=0.5, rng=rng)
        norm = np.linalg.norm(sphere, axis=-1, keepdims=True)
    return np.asarray(sphere / norm * radius, dtype=np.float64)


def perturb_output(
    point: FloatArray,
    noise: OutputNoise,
    *,
    rng: np.random.Generator | None,
    size: int | None = None,
) -> FloatArray:
    """``point`` rounded to the grid plus the rounded output noise, computed exactly
    (module doc, step 3); ``size`` independent releases if given (audits)."""
    steps = np.rint(np.asarray(point, dtype=np.float64) / noise.grid)
    v = noise_vector(
        len(steps), epsilon=noise.epsilon, sensitivity=noise.sensitivity, rng=rng, size=size
    )
    total = steps + np.rint(v / noise.grid)
    if not float(np.max(np.abs(total))) < 2.0**53:
        raise InvariantError("the released coefficients are beyond the exact grid")
    return np.asarray(total * noise.grid, dtype=np.float64)


def minimise_objective(
    sums: LossSumsAt, *, p: int, epsilon: float, rng: np.random.Generator | None = None
) -> ObjectiveRelease:
    """Approximate minima perturbation given the data term of ``J`` as a callable (module doc).

    The reference fit on rows in memory (:mod:`dp.reference.frame_regression`) passes the sums of
    its rows; a streaming engine passes a callable that folds the same exact sums over batches. Only
    the iterates of Newton's method on the perturbed objective are evaluated; they depend on the
    data and the noise and are never released.

    Args:
        sums: the :func:`~dp.regression.losssums.logistic_sums` at ``w`` of rows with
            ``||z|| <= 1`` on the fixed-point grid and labels in {0, 1} (the certificate's error
            bound assumes exactly that computation).
        p: number of parameters (columns of the normalised design).
        epsilon: total privacy parameter.
        rng: ``None`` for release-grade (OpenDP) noise; a seeded generator for tests only.

    Raises:
        SolverError: the gradient tolerance cannot be certified (module doc).
    """
    par = parameters(p=p, epsilon=epsilon)
    lam, gamma = par.ridge, par.gradient_tolerance
    b = noise_vector(p, epsilon=par.epsilon_noise, rng=rng)
    eye = np.eye(p)

    def evaluate(w: FloatArray) -> tuple[float, FloatArray, FloatArray, float]:
        data = sums(w)
        if data.gradient.shape != (p,) or data.hessian.shape != (p, p):
            raise InvariantError("the loss sums have the wrong shape")
        grad = np.asarray(data.gradient + lam * w + b, dtype=np.float64)
        # Rounding of the two additions and the product, on top of the data term's own bound.
        error = gradient_error(data, w) + 4.0 * _U * 1.01 * (
            float(np.linalg.norm(data.gradient))
            + lam * float(np.linalg.norm(w))
            + float(np.linalg.norm(b))
        )
        certified = float(np.linalg.norm(grad)) * (1.0 + 2.0**-40) + error
        loss = data.loss + 0.5 * lam * float(w @ w) + float(b @ w)
        if certified > gamma and float(np.linalg.norm(grad)) <= gamma / 8.0:
            raise SolverError(
                "objective perturbation: the float64 error bound of the gradient exceeds the "
                "certified tolerance (too many rows for it)"
            )
        return loss, grad, np.asarray(data.hessian + lam * eye, dtype=np.float64), certified

    w = np.zeros(p)
    loss, grad, hess, certified = evaluate(w)
    for step in range(MAX_STEPS + 1):
        if certified <= gamma:
            theta = perturb_output(w, par.output, rng=rng)
            return ObjectiveRelease(theta=theta, parameters=par, newton_steps=step)
        if step == MAX_STEPS:
            break
        direction = np.linalg.solve(hess, -grad)
        t = 1.0
        gnorm = float(np.linalg.norm(grad))
        while True:
            cand = w + t * direction
            c_loss, c_grad, c_hess, c_cert = evaluate(cand)
            # Armijo on J; near the optimum J's float resolution (~1e-16 n) hides the decrease,
            # so a step that shrinks the gradient is accepted too. J is strongly convex: a
            # small enough step always satisfies one of them.
            armijo = c_loss <= loss + 1e-4 * t * float(grad @ direction)
            if armijo or float(np.linalg.norm(c_grad)) < gnorm or t < 1e-12:
                break
            t /= 2.0
        w, loss, grad, hess, certified = cand, c_loss, c_grad, c_hess, c_cert
    raise SolverError(
        "objective perturbation: Newton's method did not reach the certified gradient tolerance"
    )
