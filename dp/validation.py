"""Validation helpers: each returns the cleaned value or raises a one-line :class:`ConfigError`.

Messages echo the bad *parameter* (epsilon, bounds...), never a private data value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from dppub.dp.errors import ConfigError

__all__ = [
    "MIN_EPSILON",
    "check_bounds",
    "check_delta",
    "check_epsilon",
    "check_level",
    "check_positive",
    "check_probability",
]

MIN_EPSILON = 1e-6
"""The smallest epsilon accepted: below it the noise scale outgrows what samplers can draw."""


def _as_float(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    return float(value)


def check_epsilon(epsilon: object, *, name: str = "epsilon") -> float:
    """Return ``epsilon`` as a float if it is finite and > 0.

    >>> check_epsilon(0.5)
    0.5
    """
    eps = _as_float(name, epsilon)
    if not math.isfinite(eps) or eps <= 0.0:
        raise ConfigError(f"{name} must be finite and > 0, got {eps!r}")
    if eps < MIN_EPSILON:
        raise ConfigError(
            f"{name} must be at least {MIN_EPSILON:g} (smaller needs noise floating point cannot "
            f"draw), got {eps!r}"
        )
    return eps


def check_delta(delta: object, *, name: str = "delta") -> float:
    """Return ``delta`` as a float if it lies in ``[0, 1)``.

    >>> check_delta(0)
    0.0
    """
    d = _as_float(name, delta)
    if not math.isfinite(d) or not 0.0 <= d < 1.0:
        raise ConfigError(f"{name} must be in [0, 1), got {d!r}")
    return d


def check_positive(value: object, *, name: str) -> float:
    """Return ``value`` as a float if it is finite and > 0."""
    v = _as_float(name, value)
    if not math.isfinite(v) or v <= 0.0:
        raise ConfigError(f"{name} must be finite and > 0, got {v!r}")
    return v


def check_level(level: object) -> float:
    """Return a confidence ``level`` as a float if it lies in ``(0, 1)``."""
    value = check_positive(level, name="level")
    if not value < 1.0:
        raise ConfigError(f"level must be in (0, 1), got {level!r}")
    return value


def check_probability(value: object, *, name: str) -> float:
    """Return ``value`` as a float if it lies in ``[0, 1]``."""
    p = _as_float(name, value)
    if not math.isfinite(p) or not 0.0 <= p <= 1.0:
        raise ConfigError(f"{name} must be in [0, 1], got {p!r}")
    return p


def check_bounds(bounds: Sequence[object], *, name: str = "bounds") -> tuple[float, float]:
    """Return declared ``(lo, hi)`` bounds if both are finite and ``lo < hi``.

    >>> check_bounds([0, 1])
    (0.0, 1.0)
    """
    if len(bounds) != 2:
        raise ConfigError(f"{name} must be a pair [lo, hi], got {list(bounds)!r}")
    lo, hi = _as_float(f"{name}[0]", bounds[0]), _as_float(f"{name}[1]", bounds[1])
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo >= hi:
        raise ConfigError(f"{name} must be finite with lo < hi, got [{lo!r}, {hi!r}]")
    return lo, hi
