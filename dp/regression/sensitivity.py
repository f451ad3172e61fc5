"""Global sensitivities of the regression sufficient statistics, derived from declared bounds.

Neighbouring datasets differ by **adding or removing one record** (unbounded DP, the dppub-wide
convention): the row count ``n`` is *not* public. A row contributes ``x`` (already
clipped, shifted and scaled into the declared domain) and ``y`` (clipped, shifted). The released
statistics are

* the **gram block**: the upper triangle (diagonal included) of ``Q = sum_i x_i x_i^T``, followed,
  with an intercept, by ``s = sum_i x_i`` and the corner ``n`` (the *count*);
* the **moment block**: ``c = sum_i y_i x_i``, followed, with an intercept, by ``t = sum_i y_i``.

Adding or removing the row ``(x, y)`` changes every statistic by exactly that row's own term,
``+-(x x^T, x, 1, y x, y)``, so each sensitivity is ``max over the domain of ||f(row)||``. (Under
replace-one it was the *range* ``max ||f(row) - f(row')||``, up to twice as large on a centred
domain.) Write ``a_j = max(|lo_j|, |hi_j|)`` for the shifted box (``a_j = R`` for a ball), ``R``
for the radius of the shifted domain and ``B = max |y|`` for the shifted target. Where two valid
bounds exist the smaller is used.

One-hot blocks (the indicators of a category column, :mod:`dp.regression.encoding`): a clipped
block has at most one non-zero entry, in ``[0, 1]``, so its contribution to every
``||x||_p^p`` is at most 1, the bound of one numeric coordinate with ``a_j = 1``. Every formula
below therefore runs over *groups* -- each numeric coordinate, and each block as one group of
magnitude 1 (:meth:`FeatureDomain.group_magnitudes`) -- and ``d`` in the ball bounds is the
number of groups. The bounds stay functions of the declared categories only.

**L1** (Laplace, functional mechanism):

* quadratic: ``sum_{j<=l} |x_j x_l| = (||x||_1^2 + ||x||_2^2) / 2``. On the box this is at most
  ``((sum_j a_j)^2 + sum_j a_j^2) / 2``; on the ball, with ``||x||_1 <= sqrt(d) R``, at most
  ``R^2 (d + 1) / 2`` (attained at ``x = R (1, ..., 1) / sqrt(d)``). Replace-one charged
  ``R^2 sqrt(d (d + 3) / 2)``: 8.06 against 5.5 at ``d = 10``.
* feature sum: ``||x||_1 <= min(sum_j a_j, sqrt(d) R)`` (replace-one: twice that).
* cross: ``||y x||_1 <= B min(sum_j a_j, sqrt(d) R)`` (replace-one: ``2 sqrt(d) B R``).
* target sum: ``|y| <= B`` (replace-one: ``hi - lo = 2 B`` on the centred interval).
* count: ``1`` (replace-one: 0, because ``n`` was public -- the one part that gets dearer).

**L2** (Gaussian mechanism, AdaSSP):

* quadratic: ``sum_{j<=l} x_j^2 x_l^2 = (||x||_2^4 + ||x||_4^4) / 2 <= ||x||_2^4``, so at most
  ``min(sqrt(((sum_j a_j^2)^2 + sum_j a_j^4) / 2), R^2)`` (replace-one: ``sqrt(2) R^2``);
* feature sum ``R``, cross ``B R``, target sum ``B``, count ``1``.

**Float64.** The statistics are exact sums of quantised rows (:mod:`dp.numerics.fixedpoint`),
which lie inside every bound above, rounded once to float64. A coordinate the added or removed
row does not touch (its term is 0) has the same exact sum on both sides, hence the same float;
a touched coordinate's two floats differ by at most their exact difference plus
``CONVERSION_ALLOWANCE * M`` (``2^-16 M``, up to ``MAX_ROWS`` rows), ``M`` its per-row
magnitude bound: ``a_j a_l`` on the quadratic part, ``a_j`` on the feature sum, ``B a_j`` on
the cross part, ``B`` on the target sum. A row touches at most one indicator of a one-hot
block, so over the coordinates a row can touch these bounds are those of the groups above, and
every released part's declared sensitivity is its bound plus ``2^-16`` times the same bound
taken over the box of group magnitudes (the L1 or L2 norm of the per-coordinate allowances):
e.g. ``+1.5e-5`` on a target sum of sensitivity 1, ``+0.007`` on the L1 quadratic part of a
unit ball at ``d = 30`` (15.5). The count is an integer below ``2^53``: exact, no allowance; a
part that is not released keeps sensitivity 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dppub.dp.numerics.domains import FeatureDomain, TargetDomain
from dppub.dp.numerics.fixedpoint import CONVERSION_ALLOWANCE

__all__ = ["NEIGHBOURS", "PARTS", "BlockSensitivity", "l1_sensitivity", "l2_sensitivity"]

NEIGHBOURS = "add/remove one record"
"""The neighbour relation every sensitivity here assumes, as published in ``to_dict()``."""

PARTS = ("quadratic", "feature_sum", "count", "cross", "target_sum")
"""The released parts, in release order of the gram block then the moment block."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockSensitivity:
    """Add/remove-one sensitivities of the released parts (one norm: L1 or L2)."""

    quadratic: float
    """Upper triangle of ``sum x x^T``."""
    feature_sum: float
    """``sum x`` (0 without an intercept: not released)."""
    count: float
    """The row count ``n``, the corner of the gram matrix (0 without an intercept)."""
    cross: float
    """``sum y x``."""
    target_sum: float
    """``sum y`` (0 without an intercept: not released)."""
    norm: str
    """``"l1"`` or ``"l2"``."""

    def part(self, name: str) -> float:
        """Sensitivity of the part called ``name`` (one of :data:`PARTS`)."""
        return float(getattr(self, name))

    @property
    def gram(self) -> float:
        """Sensitivity of the whole gram block (quadratic part, feature sums, count)."""
        return _combine([self.quadratic, self.feature_sum, self.count], self.norm)

    @property
    def moment(self) -> float:
        """Sensitivity of the whole moment block (cross part followed by the target sum)."""
        return _combine([self.cross, self.target_sum], self.norm)


def _combine(values: list[float], norm: str) -> float:
    # L1 norms of concatenated vectors add; squared L2 norms add.
    return sum(values) if norm == "l1" else math.sqrt(sum(v * v for v in values))


def _magnitudes(dom: FeatureDomain) -> npt.NDArray[np.float64]:
    """``a_g``: the largest ``|x_j|`` of each numeric coordinate, 1 per one-hot block."""
    return dom.group_magnitudes()


def _target_magnitude(target: TargetDomain) -> float:
    return max(abs(target.lower), abs(target.upper))


def _plus(
    exact: dict[str, float], dom: FeatureDomain, target: TargetDomain, *, norm: str
) -> BlockSensitivity:
    """``exact`` plus each part's float64 rounding allowance (module doc) in ``norm``."""
    c = _magnitudes(dom)
    b = _target_magnitude(target)
    if norm == "l1":
        s1, s2 = float(c.sum()), float((c * c).sum())
        quadratic, x = (s1 * s1 + s2) / 2.0, s1
    else:
        c2 = c * c
        quadratic = math.sqrt((float(c2.sum()) ** 2 + float((c2 * c2).sum())) / 2.0)
        x = math.sqrt(float(c2.sum()))
    rounding = {"quadratic": quadratic, "feature_sum": x, "count": 0.0, "cross": b * x}
    rounding["target_sum"] = b
    return BlockSensitivity(
        **{
            k: v + (CONVERSION_ALLOWANCE * rounding[k] if v > 0.0 else 0.0)
            for k, v in exact.items()
        },
        norm=norm,
    )


def l1_sensitivity(
    dom: FeatureDomain, target: TargetDomain, *, fit_intercept: bool
) -> BlockSensitivity:
    """L1 sensitivities of the released parts under add/remove-one neighbours (module doc),
    float64 rounding allowance included.

    ``dom`` and ``target`` are the domains of the *shifted* rows actually summed.

    >>> s = l1_sensitivity(FeatureDomain.ball(1.0, d=2), TargetDomain(lower=-1.0, upper=1.0),
    ...                    fit_intercept=True)
    >>> round(s.quadratic, 4), round(s.feature_sum, 4), s.count, round(s.cross, 4)
    (1.5, 1.4142, 1.0, 1.4142)
    >>> s.target_sum - 1.0 == 2.0**-16  # the rounding allowance (module doc)
    True
    """
    a = _magnitudes(dom)
    d, r = len(a), dom.radius
    b = _target_magnitude(target)
    box_q = (float(a.sum()) ** 2 + float((a * a).sum())) / 2.0
    l1_x = min(float(a.sum()), math.sqrt(d) * r)
    exact = {
        "quadratic": min(box_q, r * r * (d + 1) / 2.0),
        "feature_sum": l1_x if fit_intercept else 0.0,
        "count": 1.0 if fit_intercept else 0.0,
        "cross": b * l1_x,
        "target_sum": b if fit_intercept else 0.0,
    }
    return _plus(exact, dom, target, norm="l1")


def l2_sensitivity(
    dom: FeatureDomain, target: TargetDomain, *, fit_intercept: bool
) -> BlockSensitivity:
    """L2 sensitivities of the released parts under add/remove-one neighbours (module doc),
    float64 rounding allowance included.

    >>> s = l2_sensitivity(FeatureDomain.ball(1.0, d=3), TargetDomain(lower=-1.0, upper=1.0),
    ...                    fit_intercept=True)
    >>> [round(v, 4) for v in (s.quadratic, s.feature_sum, s.count, s.cross, s.target_sum)]
    [1.0, 1.0, 1.0, 1.0, 1.0]
    """
    r = dom.radius
    a2 = _magnitudes(dom) ** 2
    b = _target_magnitude(target)
    box_q = math.sqrt((float(a2.sum()) ** 2 + float((a2 * a2).sum())) / 2.0)
    l2_x = min(math.sqrt(float(a2.sum())), r)
    exact = {
        "quadratic": min(box_q, r * r),
        "feature_sum": l2_x if fit_intercept else 0.0,
        "count": 1.0 if fit_intercept else 0.0,
        "cross": b * l2_x,
        "target_sum": b if fit_intercept else 0.0,
    }
    return _plus(exact, dom, target, norm="l2")
