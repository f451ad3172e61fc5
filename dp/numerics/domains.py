"""Declared data domains (of a regression, a clustering): a feature box or ball, and a target
interval.

Every sensitivity in :mod:`dp.regression` is a function of these declared bounds, never of the
data (bounds never come from the data). Rows are clipped *into* the domain before any statistic
is computed, so the bounds hold for every row by construction; that clip is what makes the
sensitivity derivations true for arbitrary input (diffprivlib's ``LinearRegression`` skips it
when ``fit_intercept=False``).

A box may hold *one-hot blocks* (the indicators of a category column,
:mod:`dp.regression.encoding`): coordinates in ``[0, 1]`` of which at most one is non-zero. The
clip rounds a block to its nearest vertex (the indicator of its largest entry if that entry
exceeds 1/2, else no indicator), so a clipped block is exactly one-hot or zero, and the whole
block counts as one *group* of magnitude 1 in every norm bound (:meth:`group_magnitudes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from dppub.dp.errors import ConfigError
from dppub.dp.validation import check_bounds, check_positive

__all__ = ["FeatureDomain", "TargetDomain", "check_n_features", "read_only"]


FloatArray = npt.NDArray[np.float64]
BoundLike = float | Sequence[float] | npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureDomain:
    """Where a feature vector may lie: the box ``lower <= x <= upper`` or the ball ``||x||_2 <= R``.

    >>> FeatureDomain.box(0.0, 1.0, d=2).upper
    (1.0, 1.0)
    >>> FeatureDomain.ball(1.0, d=3).radius
    1.0
    """

    kind: Literal["box", "ball"]
    """``"box"`` (per-feature bounds) or ``"ball"`` (an L2 bound on the whole feature vector)."""
    lower: tuple[float, ...]
    """Per-feature lower bounds; for a ball, ``-radius`` (the box that contains the ball)."""
    upper: tuple[float, ...]
    """Per-feature upper bounds; for a ball, ``+radius``."""
    radius: float
    """L2 radius of the ball; for a box, the largest norm of a point of the domain."""
    blocks: tuple[tuple[int, int], ...] = ()
    """``[start, stop)`` of each one-hot block of a box (at most one non-zero entry, in [0, 1])."""

    @property
    def dim(self) -> int:
        """Number of features ``d``."""
        return len(self.lower)

    @classmethod
    def box(
        cls,
        lower: BoundLike,
        upper: BoundLike,
        *,
        d: int,
        blocks: Sequence[tuple[int, int]] = (),
    ) -> FeatureDomain:
        """Per-feature box; scalar bounds are broadcast to all ``d`` features.

        ``blocks``: ``[start, stop)`` ranges of one-hot blocks, disjoint, in order, each
        declared ``[0, 1]`` (module doc).

        >>> FeatureDomain.box([-1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0], d=4,
        ...                   blocks=[(1, 4)]).group_magnitudes().tolist()
        [1.0, 1.0]
        """
        lo = _broadcast(lower, d=d, name="bounds_X[0]")
        hi = _broadcast(upper, d=d, name="bounds_X[1]")
        for j, (a, b) in enumerate(zip(lo, hi, strict=True)):
            check_bounds((a, b), name=f"bounds_X for feature {j}")
        blk = _check_blocks(blocks, lo, hi)
        dom = cls(kind="box", lower=lo, upper=hi, radius=0.0, blocks=blk)
        object.__setattr__(dom, "radius", float(np.linalg.norm(dom.group_magnitudes())))
        return dom

    @classmethod
    def ball(cls, radius: float, *, d: int) -> FeatureDomain:
        """Centred L2 ball of radius ``radius`` in ``d`` dimensions."""
        r = check_positive(radius, name="data_norm")
        return cls(kind="ball", lower=(-r,) * d, upper=(r,) * d, radius=r)

    def midpoint(self) -> FloatArray:
        """Centre of the domain (public): the box midpoint, or the origin for a ball."""
        mid = (np.asarray(self.lower) + np.asarray(self.upper)) / 2.0
        return np.asarray(mid, dtype=np.float64)

    @property
    def numeric(self) -> npt.NDArray[np.bool_]:
        """Per coordinate: True outside the one-hot blocks."""
        mask = np.ones(self.dim, dtype=bool)
        for start, stop in self.blocks:
            mask[start:stop] = False
        return mask

    def group_magnitudes(self) -> FloatArray:
        """The largest ``|x_j|`` of each numeric coordinate, then 1 per one-hot block.

        Every ``||x||_p^p`` over the domain is at most the sum of these to the power ``p``
        (a block's entries are in ``[0, 1]`` with at most one non-zero).
        """
        a = np.maximum(np.abs(np.asarray(self.lower)), np.abs(np.asarray(self.upper)))
        return np.asarray(np.r_[a[self.numeric], np.ones(len(self.blocks))], dtype=np.float64)

    def translated(self, shift: FloatArray, scale: FloatArray | None = None) -> FeatureDomain:
        """The domain of ``(x - shift) / scale`` (a ball is only ever used as declared; one-hot
        blocks are never shifted or scaled)."""
        if self.kind == "ball":
            if np.any(shift != 0.0) or (scale is not None and np.any(scale != 1.0)):
                raise ConfigError("a ball domain can only be used centred and unscaled")
            return self
        div = np.ones(self.dim) if scale is None else scale
        onehot = ~self.numeric
        if np.any(np.asarray(shift)[onehot] != 0.0) or np.any(np.asarray(div)[onehot] != 1.0):
            raise ConfigError("one-hot blocks can only be used unshifted and unscaled")
        lo = (np.asarray(self.lower) - shift) / div
        hi = (np.asarray(self.upper) - shift) / div
        return FeatureDomain.box(lo, hi, d=self.dim, blocks=self.blocks)

    def clip(self, X: FloatArray) -> FloatArray:
        """Project every row into the domain (box: coordinate clamp, one-hot blocks rounded to
        their nearest vertex; ball: radial shrink)."""
        if self.kind == "box":
            out = np.clip(X, np.asarray(self.lower), np.asarray(self.upper))
            rows = np.arange(out.shape[0])
            for start, stop in self.blocks:
                block = out[:, start:stop]
                top = np.argmax(block, axis=1)
                keep = block[rows, top] > 0.5
                block[...] = 0.0
                block[rows[keep], top[keep]] = 1.0
            return out
        norms = np.linalg.norm(X, axis=1)
        # Rows inside the ball are untouched; rows outside are scaled onto its surface.
        scale = np.minimum(1.0, self.radius / np.maximum(norms, np.finfo(np.float64).tiny))
        return np.asarray(X * scale[:, None], dtype=np.float64)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready description of the declared bounds."""
        if self.kind == "ball":
            return {"kind": "ball", "data_norm": self.radius}
        out: dict[str, object] = {
            "kind": "box",
            "lower": list(self.lower),
            "upper": list(self.upper),
        }
        if self.blocks:
            out["one_hot_blocks"] = [list(b) for b in self.blocks]
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetDomain:
    """The declared interval ``[lower, upper]`` of the target ``y``."""

    lower: float
    """Smallest possible target value."""
    upper: float
    """Largest possible target value."""

    @classmethod
    def from_bounds(cls, bounds: Sequence[object] | None) -> TargetDomain:
        """Validate ``bounds_y``; a missing value is a configuration error, never data-derived."""
        if bounds is None:
            raise ConfigError(
                "bounds_y is required (declare [lo, hi]); bounds never come from data"
            )
        lo, hi = check_bounds(bounds, name="bounds_y")
        return cls(lower=lo, upper=hi)

    @property
    def midpoint(self) -> float:
        """Centre of the interval (public)."""
        return (self.lower + self.upper) / 2.0

    def clip(self, y: FloatArray) -> FloatArray:
        """Clamp targets into the declared interval."""
        return np.clip(y, self.lower, self.upper)


def _check_blocks(
    blocks: Sequence[tuple[int, int]], lo: tuple[float, ...], hi: tuple[float, ...]
) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    at = 0
    for block in blocks:
        start, stop = (int(v) for v in block)
        if not at <= start < stop <= len(lo):
            raise ConfigError(
                f"one-hot blocks must be disjoint, ordered ranges, got {list(blocks)}"
            )
        if any(lo[j] != 0.0 or hi[j] != 1.0 for j in range(start, stop)):
            raise ConfigError(f"a one-hot block must be declared [0, 1], got block {[start, stop]}")
        out.append((start, stop))
        at = stop
    return tuple(out)


def _broadcast(value: BoundLike, *, d: int, name: str) -> tuple[float, ...]:
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(d, float(arr))
    if arr.shape != (d,):
        raise ConfigError(f"{name} must be a scalar or have length {d}, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ConfigError(f"{name} must be finite, got {arr.tolist()!r}")
    return tuple(float(v) for v in arr)


def check_n_features(d: object) -> int:
    """Return the declared number of features ``d`` (an integer >= 1), or raise ConfigError."""
    if isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 1:
        raise ConfigError(f"d must be an integer >= 1, got {d!r}")
    return int(d)


def read_only(values: npt.ArrayLike) -> FloatArray:
    """``values`` as a float array nobody can write to (a fit's published numbers)."""
    out = np.array(values, dtype=np.float64)
    out.setflags(write=False)
    return out


def declared_feature_bounds(
    bounds_X: tuple[BoundLike, BoundLike] | None, data_norm: float | None
) -> tuple[tuple[BoundLike, BoundLike] | None, float | None]:
    """Validate declared feature bounds: exactly one of a box ``(lo, hi)`` or an L2 bound."""
    if (bounds_X is None) == (data_norm is None):
        raise ConfigError(
            "declare exactly one of bounds_X (per-feature box) or data_norm (L2 bound); "
            "bounds never come from data"
        )
    if bounds_X is not None and len(bounds_X) != 2:
        raise ConfigError(f"bounds_X must be a pair (lo, hi), got {len(bounds_X)} items")
    return bounds_X, None if data_norm is None else check_positive(data_norm, name="data_norm")


def feature_domain(
    bounds_X: tuple[BoundLike, BoundLike] | None, data_norm: float | None, *, d: int
) -> FeatureDomain:
    """The box or ball of :func:`declared_feature_bounds` over ``d`` features."""
    if bounds_X is not None:
        return FeatureDomain.box(bounds_X[0], bounds_X[1], d=d)
    if data_norm is None:
        raise ConfigError("declare bounds_X or data_norm")
    return FeatureDomain.ball(data_norm, d=d)
