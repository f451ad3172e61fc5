"""The logistic loss, gradient and Hessian sums of objective perturbation, summed exactly.

Objective perturbation (:mod:`dp.regression.objective`) needs, at each Newton iterate ``w``,

    sum_i l(z_i^T w; y_i),   g(w) = sum_i (sigma(z_i^T w) - y_i) z_i,
    sum_i sigma'(z_i^T w) z_i z_i^T

over the normalised rows ``z_i`` (``||z_i|| <= 1``) and labels ``y_i`` in {0, 1}, with
``l(s; y) = log(1 + e^s) - y s``. The rows are on the fixed-point grid of
:mod:`dp.numerics.fixedpoint` (``z = V 2^-16``, integers ``V`` with ``||V|| <= 2^16``, checked
exactly), and every per-row term is turned into integers before it is summed, so the sums are
functions of the multiset of rows: batches, partitions and merge order change no bit.

Per row (``u = 2^-53``):

* ``s = z^T w`` from two exact integer dot products (``w`` split into a high and a low integer
  part, each product below ``2^53``) and one rounding: ``|s_hat - s| <= 1.01 u ||w|| + sqrt(p)
  2^-(e + b)`` with ``2^-(e + b)`` the split's resolution (:func:`_split`);
* ``sigma(s_hat)`` by ``scipy.special.expit``, ``1 / (1 + exp(-s))``: with ``exp`` within one
  ulp (glibc) its absolute error is at most ``4u``; we allow :data:`SIGMA_ERROR` ``= 8u``.
  ``sigma`` is 1/4-Lipschitz, so ``|r_hat - r| <= |s_hat - s| / 4 + 8u + u`` for
  ``r = sigma(s) - y``;
* ``r_hat`` is written as three base-``2^18`` digits (error ``<= 2^-55``) whose products with
  ``V`` are exact integers.

So the exact integer gradient differs from the true ``g(w)`` by at most ``n e_r`` in L2
(``||z_i|| <= 1``), ``e_r`` the per-row bound above, and its one rounding to float64 by
``u ||g||``: :func:`gradient_error`. Objective perturbation certifies the released point with
this bound. The Hessian only steers Newton's method: it is summed exactly from coarser values
(rows on ``2^-12``, ``sigma'`` on ``2^-12``), which are enough for fast convergence. The loss
only drives the line search: two base-``2^26`` digits of ``l / L`` (``L >= max l``, a power of
two).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.special import expit

from dppub.dp.errors import InvariantError
from dppub.dp.numerics.fixedpoint import (
    FRACTION_BITS,
    ONE,
    IntArray,
    check_norms,
    digits,
    exact_products,
    exact_sums,
    int_zeros,
    to_float,
)

__all__ = [
    "SIGMA_ERROR",
    "LossPartial",
    "LossSums",
    "gradient_error",
    "logistic_sums",
    "loss_partial",
]

FloatArray = npt.NDArray[np.float64]
_U = 2.0**-53
SIGMA_ERROR = 8.0 * _U
"""Allowed absolute error of the computed ``sigma(s)`` (twice the ``4u`` bound of the module
doc; ``tests/dp/regression`` checks expit against high precision)."""
_W_BITS = 36  # ||W_hi||_1 <= 2^36: with |V_j| <= 2^16 each dot product is below 2^53
_R_DIGITS, _R_BITS = 3, 18  # r in [-1, 1] as 3 digits of 18 bits: |D V| <= 2^34
_H_SHIFT, _Q_BITS = 4, 12  # Hessian: rows on 2^-12 (|V_h| <= 2^12), sigma' on 2^-12 (<= 2^10)
_L_DIGITS, _L_BITS = 2, 26  # loss / L in [0, 1] as 2 digits of 26 bits


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class LossSums:
    """``(sum l, g, sum hess l)`` at one ``w``, each rounded once from exact integer sums."""

    loss: float
    """``sum_i l(z_i^T w; y_i)`` (within float64 precision; drives the line search only)."""
    gradient: FloatArray
    """``g(w)``, within :func:`gradient_error` of the true gradient."""
    hessian: FloatArray
    """``sum_i sigma'(z_i^T w) z_i z_i^T`` from coarser values (steering only)."""
    rows: int
    """Number of rows summed (enters :func:`gradient_error` only)."""


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class LossPartial:
    """The exact integer sums of some rows at one ``w``; partials of disjoint rows add (``+``)."""

    loss: IntArray
    """Digit sums of ``l / L``."""
    gradient: IntArray
    """``p x 3``: digit sums of ``r`` times ``V``."""
    hessian: IntArray
    """``p x p``: coarse ``sigma'`` times coarse ``V V^T``."""
    rows: int
    """Number of rows."""
    loss_exponent: int
    """``L = 2^loss_exponent`` (a function of ``w``: equal for partials at one ``w``)."""

    @classmethod
    def zero(cls, p: int, w: FloatArray) -> LossPartial:
        """The sums of no rows at ``w``."""
        return cls(
            loss=int_zeros(_L_DIGITS),
            gradient=int_zeros((p, _R_DIGITS)),
            hessian=int_zeros((p, p)),
            rows=0,
            loss_exponent=_loss_exponent(w),
        )

    def __add__(self, other: LossPartial) -> LossPartial:
        if self.loss_exponent != other.loss_exponent:
            raise InvariantError("loss sums at different iterates cannot be added")
        return LossPartial(
            loss=np.asarray(self.loss + other.loss, dtype=object),
            gradient=np.asarray(self.gradient + other.gradient, dtype=object),
            hessian=np.asarray(self.hessian + other.hessian, dtype=object),
            rows=self.rows + other.rows,
            loss_exponent=self.loss_exponent,
        )

    def finish(self) -> LossSums:
        """Round each exact sum once (module doc)."""
        r = [2 ** (_R_BITS * (_R_DIGITS - 1 - k)) for k in range(_R_DIGITS)]
        grad = self.gradient @ np.asarray(r, dtype=object)
        lo = [2 ** (_L_BITS * (_L_DIGITS - 1 - k)) for k in range(_L_DIGITS)]
        loss = np.asarray([self.loss @ np.asarray(lo, dtype=object)], dtype=object)
        return LossSums(
            loss=float(to_float(loss, 2.0 ** (self.loss_exponent - _L_BITS * _L_DIGITS))[0]),
            gradient=to_float(grad, 2.0 ** -(_R_BITS * _R_DIGITS + FRACTION_BITS)),
            hessian=to_float(self.hessian, 2.0 ** -(2 * (FRACTION_BITS - _H_SHIFT) + _Q_BITS)),
            rows=self.rows,
        )


def _exponent(x: float) -> int:
    """The smallest ``k`` with ``x <= 2^k`` (``x > 0``), exactly (no log rounding)."""
    mantissa, exp = math.frexp(x)
    return exp - 1 if mantissa == 0.5 else exp


def _loss_exponent(w: FloatArray) -> int:
    # l <= |s| + log 2 <= ||w||_2 + 1 (||z|| <= 1); ||w||_1 + 2 bounds it with room for rounding.
    return _exponent(float(np.abs(w).sum()) + 2.0)


def _split(w: FloatArray) -> tuple[FloatArray, FloatArray, int, int]:
    """``w ~ (W_hi + W_lo 2^-b) 2^-e`` with integer ``W``: ``||W_hi||_1 <= 2^36`` and
    ``||W_lo||_1 <= 2^36`` (so ``|V^T W| < 2^53``); resolution ``2^-(e + b + 1)``."""
    p = len(w)
    e = _W_BITS - max(0, _exponent(float(np.abs(w).sum()) * (1.0 + 2.0**-40) + 2.0**-30))
    b = _W_BITS - _exponent(float(p))
    scaled = w * 2.0**e
    hi = np.trunc(scaled)
    lo = np.rint((scaled - hi) * 2.0**b)
    return hi, lo, e, b


def gradient_error(sums: LossSums, w: FloatArray) -> float:
    """An upper bound on ``||sums.gradient - g(w)||_2`` (module doc)."""
    p = len(w)
    _, _, e, b = _split(w)
    w_norm = float(np.linalg.norm(w)) * 1.01
    resolution = math.sqrt(p) * 2.0 ** -(e + b)
    per_row = (1.01 * _U * w_norm + resolution) / 4.0 + SIGMA_ERROR + 2.0 * _U
    return sums.rows * per_row + 1.01 * _U * float(np.linalg.norm(sums.gradient))


def _fixed_rows(Z: FloatArray) -> FloatArray:
    """``V = Z 2^16`` after checking that the rows are on the grid with ``||V|| <= 2^16``."""
    V = np.asarray(Z, dtype=np.float64) * ONE
    if V.size and not (np.array_equal(np.trunc(V), V) and float(np.max(np.abs(V))) <= ONE):
        raise InvariantError("the rows are not on the fixed-point grid of norm-1 rows")
    check_norms(V)
    return V


def loss_partial(Z: FloatArray, y: FloatArray, w: FloatArray) -> LossPartial:
    """The exact integer sums of the rows ``Z`` (normalised, on the fixed-point grid) with
    labels ``y`` in {0, 1}, at ``w``."""
    p = len(w)
    if Z.ndim != 2 or Z.shape[1] != p or len(y) != len(Z):
        raise InvariantError("the rows, labels and iterate have inconsistent shapes")
    zero = LossPartial.zero(p, w)
    if len(Z) == 0:
        return zero
    V = _fixed_rows(Z)
    hi, lo, e, b = _split(w)
    # Two exact integer dot products, then one rounding (module doc).
    s = (V @ hi) * 2.0 ** -(FRACTION_BITS + e) + (V @ lo) * 2.0 ** -(FRACTION_BITS + e + b)
    sigma = expit(s)
    r_digits = digits(sigma - y, count=_R_DIGITS, bits=_R_BITS)
    gradient = exact_products(V, r_digits, bits=FRACTION_BITS + _R_BITS)
    Vh = np.trunc(V * 2.0**-_H_SHIFT)
    q = np.trunc(sigma * (1.0 - sigma) * 2.0**_Q_BITS)
    bits_h = 2 * (FRACTION_BITS - _H_SHIFT) + _Q_BITS - 2  # sigma' <= 1/4
    hessian = exact_products(Vh * q[:, None], Vh, bits=bits_h)
    # l(s; y) = softplus((1 - 2y) s), in [0, L) with L = 2^loss_exponent.
    loss = np.logaddexp(0.0, (1.0 - 2.0 * y) * s) * 2.0**-zero.loss_exponent
    loss_sums = exact_sums(digits(loss, count=_L_DIGITS, bits=_L_BITS), bits=_L_BITS)
    return LossPartial(
        loss=loss_sums,
        gradient=gradient,
        hessian=hessian,
        rows=len(y),
        loss_exponent=zero.loss_exponent,
    )


def logistic_sums(Z: FloatArray, y: FloatArray, w: FloatArray) -> LossSums:
    """``sum_i l``, its gradient and its Hessian over the rows of ``Z`` at ``w`` (module doc).

    The data term of objective perturbation only; :func:`dp.regression.objective.minimise_objective`
    adds the penalty and the noise. Sums over disjoint row sets are exactly additive
    (:class:`LossPartial`), which is how the engine evaluates them batch by batch.

    >>> sums = logistic_sums(np.zeros((2, 1)), np.array([0.0, 1.0]), np.zeros(1))
    >>> round(sums.loss, 6), sums.gradient.tolist(), sums.hessian.tolist(), sums.rows
    (1.386294, [0.0], [[0.0]], 2)
    """
    return loss_partial(Z, y, w).finish()
