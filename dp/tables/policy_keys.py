"""Adaptive key weights: the policy Gaussian's L2-descent (Gopi et al., ICML 2020).

Weighted Gaussian selection (:mod:`dp.tables.keys`) gives each of a unit's ``k`` keys the same
weight ``1/sqrt(k)``: a unit in a huge key and three rare ones spends three quarters of its
weight where it is not needed. The policy Gaussian of Gopi, Gulhane, Kulkarni, Shen, Shokouhi &
Yekhanin ("Differentially private set union", ICML 2020, Algorithm "Policy Gaussian" with the
L2-descent update) visits the units one after another and lets each one *fill up* its keys
towards a cutoff ``Gamma`` above the release threshold ``rho``: with ``y`` the weights so far and
``g_j = max(Gamma - y_j, 0)`` the gaps of the unit's keys,

    ``y_j <- y_j + g_j``                 if ``||g||_2 <= 1``,
    ``y_j <- y_j + g_j / ||g||_2``       otherwise,

so weight goes to the keys far below the cutoff and none to keys already above it (MAD, Chen et
al. ICML 2025, moves weight the same way -- from keys far above the threshold to keys near it --
in parallel rounds; this is its sequential ancestor, with the simpler proof).

Privacy (why a neighbour moves the final weight vector by at most 1 in L2):

1. *Each unit adds at most 1.* The step is ``g`` or ``g / ||g||``: its L2 norm is
   ``min(||g||, 1) <= 1``, on the unit's own (at most ``max_partitions``) keys.
2. *Every unit's update is non-expansive.* With ``z = y - Gamma`` on the unit's keys the update
   is ``F(z) = z+ - S((-z)+)`` (``S``: the L2 soft-threshold ``g max(0, 1 - 1/||g||)``), the
   gradient of ``Phi(z) = |z+|^2/2 + psi((-z)+)`` with ``psi(g) = |g|^2/2 - e(g)``, ``e`` the
   Moreau envelope of ``||.||_2``. ``psi`` and ``e`` are convex and non-decreasing on the
   non-negative orthant (their gradients ``S(g)`` and ``g - S(g)`` are ``>= 0`` there), and
   ``(-z)+`` is convex coordinate-wise, so both ``Phi`` and ``|z|^2/2 - Phi = e((-z)+)`` are
   convex: ``0 <= Hess Phi <= I``, i.e. ``F`` is (firmly) non-expansive in L2 (Baillon-Haddad).
   Keys outside the unit are unchanged, so the whole update is non-expansive.
3. *Neighbours.* The units are visited in an order where any two units' relative order depends
   on those two units alone (:attr:`dp.tables.keys.KeyWeights.spread_offsets`: units in one key
   first, then by number of keys and id). Adding a unit ``u`` leaves the weights before ``u``'s
   turn unchanged, moves them by at most 1 at its turn (1.), and every later update shrinks
   that distance or keeps it (2.): the final vectors (zero on keys absent from a table) are at
   most 1 apart.
4. *Release.* A key is released when its weight plus ``N(0, sigma^2)`` exceeds ``rho``: keys in
   both neighbours see a Gaussian mechanism of L2 sensitivity 1 (``(eps, delta_1)``, the
   analytic sigma); a key only ``u`` holds is untouched by every other unit, so at ``u``'s turn
   all of ``u``'s ``t`` such keys have the same gap ``Gamma`` and get the same weight, at most
   ``1/sqrt(t)`` by 1. -- the bound of the weighted rule, so the same ``rho`` makes their chance
   of showing at most ``delta_2``; ``delta = delta_1 + delta_2``.

Floating point: the weights are doubles. A unit's computed update differs from the exact update
of the computed state by at most ``e = sqrt(m) 2^-53 (2 Gamma + m + 5)`` in L2 (a few roundings
of values at most ``Gamma + 1``; the division happens only when ``||g|| > 1``), and by 2. an
error is never amplified later, so each neighbour's computed vector is within ``N e`` of its
exact one for ``N`` units in more than one key. The noise is calibrated for the sensitivity
:func:`policy_sensitivity` ``= 1 + 2^-20 sqrt(m) (2 Gamma + m + 5)``, which covers ``2 N e``
for ``N <=`` :data:`MAX_SPREAD_UNITS` ``= 2^32`` (checked: more raise), and the new-key bound
uses ``(1 + that slack) / sqrt(t)``.
"""

from __future__ import annotations

import math
from itertools import pairwise

import numpy as np
import numpy.typing as npt

from dppub.dp.errors import InvariantError

__all__ = ["MAX_SPREAD_UNITS", "policy_sensitivity", "policy_weights"]

MAX_SPREAD_UNITS = 1 << 32
"""The most units in more than one key the floating-point slack of :func:`policy_sensitivity`
covers."""

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def policy_sensitivity(*, cutoff: float, max_partitions: int) -> float:
    """The declared L2 sensitivity: 1 plus the floating-point slack (module docstring).

    >>> 1.0 < policy_sensitivity(cutoff=20.0, max_partitions=4) < 1.0001
    True
    """
    m = max_partitions
    return 1.0 + math.sqrt(m) * (2.0 * cutoff + m + 5.0) / (1 << 20)


def policy_weights(
    single: IntArray, spread_keys: IntArray, spread_offsets: IntArray, *, cutoff: float
) -> FloatArray:
    """Each key's weight after every unit's L2-descent step towards ``cutoff``.

    Args:
        single: per key, the units with rows in that key alone. They go first: each adds
            ``min(1, gap)``, so together they give ``min(n, cutoff)`` (no loop needed).
        spread_keys: the key indices of the units in more than one key, unit after unit.
        spread_offsets: where each of those units starts in ``spread_keys`` (and the end), in
            the order they are visited.
        cutoff: ``Gamma``; a key at or above it takes no more weight.

    >>> w = policy_weights(np.array([5, 0, 0]), np.array([0, 1, 2]), np.array([0, 3]), cutoff=3.0)
    >>> w.round(4).tolist()  # the unit gives its whole weight to the two keys below the cutoff
    [3.0, 0.7071, 0.7071]
    """
    if len(spread_offsets) - 1 > MAX_SPREAD_UNITS:
        raise InvariantError(f"more than {MAX_SPREAD_UNITS} units in more than one key")
    y: list[float] = np.minimum(single.astype(np.float64), cutoff).tolist()
    keys: list[int] = spread_keys.tolist()
    ends: list[int] = spread_offsets.tolist()
    for start, end in pairwise(ends):
        mine = keys[start:end]
        gaps = [max(cutoff - y[j], 0.0) for j in mine]
        norm = math.sqrt(math.fsum(g * g for g in gaps))
        scale = 1.0 / norm if norm > 1.0 else 1.0
        for j, g in zip(mine, gaps, strict=True):
            y[j] += g * scale
    return np.asarray(y, dtype=np.float64)
