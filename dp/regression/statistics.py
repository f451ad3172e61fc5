"""Sufficient statistics of least squares, computed from clipped rows in a public frame.

The loss ``sum_i (y_i - x_i^T w - w_0)^2`` is a quadratic in ``(w, w_0)`` whose coefficients are
``G = sum_i z_i z_i^T`` and ``m = sum_i y_i z_i`` with ``z_i = (x_i, 1)`` (Zhang et al., VLDB 2012,
§4: the functional mechanism perturbs exactly these). The constant ``sum y_i^2`` does not move
the minimizer and is never released.

Before summing, rows are clipped into the declared domain and shifted by *public* constants: the
box midpoint for features and the interval midpoint for the target, when there is an intercept
(shifting without an intercept would change the model). Centring shrinks every sensitivity of
:mod:`dp.regression.sensitivity` (``[0, 1]`` becomes ``[-1/2, 1/2]``). Box features are also
divided by their public half-widths (or largest magnitudes, without an intercept), so that every
feature lies in ``[-1, 1]``: noise of one scale on all entries then costs every feature the same
relative accuracy, instead of drowning a feature declared in ``[0, 1]`` next to one declared in
``[0, 10^5]``. Both maps are undone exactly on the coefficients afterwards. One-hot blocks of
category columns (:mod:`dp.regression.encoding`) are neither shifted nor scaled: any shift would
make a block dense and its norm larger.

The sums are exact (:mod:`dp.numerics.fixedpoint`): each shifted coordinate and target is
quantised toward zero on a grid of ``2^-16`` of its declared magnitude
(:attr:`Design.coordinate_magnitudes`, :attr:`Design.target_magnitude`), the products are summed
as integers (:class:`ExactMoments`, which the streaming engine adds batch by batch) and each
statistic is rounded to float64 once. Quantised rows stay inside every bound the sensitivities
use, and the one rounding is covered by the allowance :mod:`dp.regression.sensitivity` adds, so
the declared sensitivities bound the float64 statistics themselves, for any summation order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dppub.dp.errors import InputError
from dppub.dp.numerics.domains import FeatureDomain, TargetDomain
from dppub.dp.numerics.fixedpoint import (
    FRACTION_BITS,
    ONE,
    IntArray,
    check_norms,
    check_rows,
    exact_products,
    int_zeros,
    quantise,
    to_float,
)
from dppub.dp.regression.encoding import FeatureEncoding

__all__ = [
    "Design",
    "ExactMoments",
    "SufficientStatistics",
    "check_statistics",
    "exact_moments",
]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True)
class Design:
    """The public preprocessing of one fit: declared domains, intercept, centring shifts."""

    features: FeatureDomain
    """Declared feature domain (rows are clipped into it)."""
    target: TargetDomain
    """Declared target interval (targets are clipped into it)."""
    fit_intercept: bool
    """Whether a constant column is appended."""
    encoding: FeatureEncoding | None = None
    """How declared columns become the features (None: the features are the numeric columns
    themselves); its :meth:`~FeatureEncoding.domain` must be ``features``."""

    def __post_init__(self) -> None:
        if self.encoding is not None and self.encoding.domain() != self.features:
            raise InputError("the design's feature domain is not its encoding's domain")

    @property
    def feature_shift(self) -> FloatArray:
        """Public shift subtracted from features: the domain midpoint with an intercept, else 0
        (always 0 on one-hot blocks)."""
        if self.fit_intercept:
            return np.asarray(np.where(self.features.numeric, self.features.midpoint(), 0.0))
        return np.zeros(self.features.dim)

    @property
    def target_shift(self) -> float:
        """Public shift subtracted from targets: the interval midpoint with an intercept, else 0."""
        return self.target.midpoint if self.fit_intercept else 0.0

    @property
    def feature_scale(self) -> FloatArray:
        """Public per-feature divisor: box half-widths (or magnitudes), 1 for a ball and on
        one-hot blocks."""
        if self.features.kind == "ball":
            return np.ones(self.features.dim)
        lo = np.asarray(self.features.lower) - self.feature_shift
        hi = np.asarray(self.features.upper) - self.feature_shift
        scale = np.where(self.features.numeric, np.maximum(np.abs(lo), np.abs(hi)), 1.0)
        return np.asarray(scale, dtype=np.float64)

    @property
    def shifted_features(self) -> FeatureDomain:
        """Domain of the shifted, scaled features that are actually summed."""
        return self.features.translated(self.feature_shift, self.feature_scale)

    @property
    def shifted_target(self) -> TargetDomain:
        """Domain of the shifted targets that are actually summed."""
        m = self.target_shift
        return TargetDomain(lower=self.target.lower - m, upper=self.target.upper - m)

    @property
    def coordinate_magnitudes(self) -> FloatArray:
        """Declared bound on ``|z_j|`` for each summed coordinate (shifted features, then the
        constant column): the unit of its fixed-point grid. 1 on scaled box features and
        one-hot indicators, the radius on a ball."""
        dom = self.shifted_features
        a = np.maximum(np.abs(np.asarray(dom.lower)), np.abs(np.asarray(dom.upper)))
        return np.asarray(np.r_[a, 1.0] if self.fit_intercept else a, dtype=np.float64)

    @property
    def target_magnitude(self) -> float:
        """Declared bound on ``|y|`` of the shifted target: the unit of its fixed-point grid."""
        t = self.shifted_target
        return max(abs(t.lower), abs(t.upper))

    @property
    def n_params(self) -> int:
        """Number of fitted parameters ``p`` (``d``, plus one with an intercept)."""
        return self.features.dim + int(self.fit_intercept)

    def unshift(self, theta: FloatArray) -> tuple[FloatArray, float]:
        """Coefficients and intercept in the original frame from a solution in the shifted one.

        ``y - m = ((x - c) / a)^T v + w_0`` gives ``y = x^T w + (w_0 + m - c^T w)``, ``w = v / a``.
        """
        d = self.features.dim
        w = np.asarray(theta[:d] / self.feature_scale, dtype=np.float64)
        if not self.fit_intercept:
            return w, 0.0
        return w, float(theta[d] + self.target_shift - self.feature_shift @ w)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class SufficientStatistics:
    """``G = sum z z^T`` and ``m = sum y z`` in the shifted frame (exact or noisy)."""

    gram: FloatArray
    """Symmetric ``p x p`` matrix; with an intercept its last row is ``(sum x, n)``."""
    moment: FloatArray
    """Length-``p`` vector; with an intercept its last entry is ``sum y``."""
    fit_intercept: bool
    """Whether the last coordinate is the constant column."""

    @property
    def dim(self) -> int:
        """Number of features ``d``."""
        return int(self.gram.shape[0]) - int(self.fit_intercept)

    def parts(self) -> dict[str, FloatArray]:
        """The five released parts (see :mod:`dp.regression.sensitivity`).

        ``quadratic`` is the upper triangle of ``sum x x^T`` (each unordered pair once),
        ``feature_sum`` is ``sum x``, ``count`` is ``[n]`` (the gram corner), ``cross`` is
        ``sum y x`` and ``target_sum`` is ``[sum y]``; ``feature_sum``, ``count`` and
        ``target_sum`` are empty without an intercept. Under add/remove neighbours ``n`` is
        private, so the corner is released like any other coefficient of the quadratic form.
        """
        d = self.dim
        empty = np.zeros(0)
        return {
            "quadratic": self.gram[:d, :d][np.triu_indices(d)],
            "feature_sum": self.gram[:d, d] if self.fit_intercept else empty,
            "count": self.gram[d:, d] if self.fit_intercept else empty,
            "cross": self.moment[:d],
            "target_sum": self.moment[d:] if self.fit_intercept else empty,
        }

    def with_parts(self, parts: dict[str, FloatArray]) -> SufficientStatistics:
        """Same layout with every part replaced (e.g. by its noisy release).

        Every entry of the result comes from ``parts``: nothing exact survives the replacement.
        """
        d = self.dim
        iu = np.triu_indices(d)
        want = {k: v.shape for k, v in self.parts().items()}
        got = {k: np.shape(parts[k]) if k in parts else None for k in want}
        if got != want:
            raise InputError(f"parts must have shapes {want}, got {got}")
        p = self.gram.shape[0]
        gram = np.zeros((p, p))
        upper = np.zeros((d, d))
        upper[iu] = parts["quadratic"]
        # Noise is drawn once per unordered pair and mirrored, so the matrix stays symmetric.
        gram[:d, :d] = upper + np.triu(upper, 1).T
        moment = np.zeros(p)
        moment[:d] = parts["cross"]
        if self.fit_intercept:
            gram[:d, d] = gram[d, :d] = parts["feature_sum"]
            gram[d, d] = parts["count"][0]
            moment[d:] = parts["target_sum"]
        return SufficientStatistics(gram=gram, moment=moment, fit_intercept=self.fit_intercept)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class ExactMoments:
    """The exact integer sums behind :class:`SufficientStatistics` (module doc).

    With ``V`` a row's quantised coordinates (the constant column is ``2^16``) and ``Y`` its
    quantised target, ``gram = sum V V^T`` and ``moment = sum Y V``; ``G_jl`` is
    ``c_j c_l 2^-32 gram_jl`` and ``m_j`` is ``c_j B 2^-32 moment_j``
    (:attr:`Design.coordinate_magnitudes` ``c``, :attr:`Design.target_magnitude` ``B``).
    Sums over disjoint row sets add up exactly (``+``), in any order.
    """

    gram: IntArray
    """``p x p`` Python integers."""
    moment: IntArray
    """``p`` Python integers."""
    rows: int
    """Number of rows summed."""

    @classmethod
    def zero(cls, p: int) -> ExactMoments:
        """The sums of no rows."""
        return cls(gram=int_zeros((p, p)), moment=int_zeros(p), rows=0)

    def __add__(self, other: ExactMoments) -> ExactMoments:
        return ExactMoments(
            gram=np.asarray(self.gram + other.gram, dtype=object),
            moment=np.asarray(self.moment + other.moment, dtype=object),
            rows=self.rows + other.rows,
        )

    def statistics(self, design: Design) -> SufficientStatistics:
        """The float64 statistics: each exact sum rounded once.

        Raises:
            InputError: more rows than :data:`dp.numerics.fixedpoint.MAX_ROWS`.
        """
        check_rows(self.rows)
        c = design.coordinate_magnitudes
        unit = 2.0 ** (-2 * FRACTION_BITS)
        return SufficientStatistics(
            gram=to_float(self.gram, np.outer(c, c) * unit),
            moment=to_float(self.moment, c * (design.target_magnitude * unit)),
            fit_intercept=design.fit_intercept,
        )


def exact_moments(X: FloatArray, y: FloatArray, design: Design) -> ExactMoments:
    """Clip rows into the declared domains, shift by the public midpoints, quantise, and sum
    exactly.

    Every row enters only after :meth:`FeatureDomain.clip` and :meth:`TargetDomain.clip`,
    with or without an intercept: the sensitivities assume it.
    """
    if X.shape[1] != design.features.dim:
        raise InputError(f"X has {X.shape[1]} columns, the domain declares {design.features.dim}")
    d = design.features.dim
    Xc = (design.features.clip(X) - design.feature_shift) / design.feature_scale
    yc = design.target.clip(y) - design.target_shift
    V = quantise(Xc, design.coordinate_magnitudes[:d])
    if design.features.kind == "ball":
        check_norms(V)
    columns = [V, np.full((len(V), 1), ONE)] if design.fit_intercept else [V]
    W = np.hstack([*columns, quantise(yc, design.target_magnitude)[:, None]])
    # One exact product gives gram and moment (and sum Y^2, never used): |V_j V_l| <= 2^32.
    P = exact_products(W, W, bits=2 * FRACTION_BITS)
    p = design.n_params
    return ExactMoments(
        gram=np.asarray(P[:p, :p], dtype=object),
        moment=np.asarray(P[:p, p], dtype=object),
        rows=len(y),
    )


def check_statistics(stats: object, design: Design) -> SufficientStatistics:
    """Return ``stats`` if its layout is the one ``design`` produces, else raise InputError.

    Only shapes and the intercept flag are checked (messages name shapes, never a value): that
    the sums come from rows clipped into ``design`` cannot be read off them, and is the caller's
    contract (:func:`exact_moments` or the streaming engine given the same design).
    """
    if not isinstance(stats, SufficientStatistics):
        raise InputError(f"exact must be a SufficientStatistics, got {type(stats).__name__}")
    if stats.fit_intercept != design.fit_intercept:
        raise InputError(
            f"exact has fit_intercept={stats.fit_intercept}, "
            f"the design has fit_intercept={design.fit_intercept}"
        )
    p = design.n_params
    shapes = (np.shape(stats.gram), np.shape(stats.moment))
    if shapes != ((p, p), (p,)):
        raise InputError(
            f"exact must have gram ({p}, {p}) and moment ({p},) for d={design.features.dim}, "
            f"got gram {shapes[0]} and moment {shapes[1]}"
        )
    if not (np.all(np.isfinite(stats.gram)) and np.all(np.isfinite(stats.moment))):
        raise InputError("exact statistics must be finite (no NaN or inf)")
    return stats
