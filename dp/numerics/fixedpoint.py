"""Exact sums over private rows: fixed-point rows, integer sums, one rounding at the end.

Why. A sensitivity bounds how far one row moves the *exact* sum. A float64 sum of ``n`` rows
is not that sum: its rounding error grows like ``n u max|x|`` (``u = 2^-53``), depends on the
order of the additions, and an adversary who controls rows can steer it so that neighbouring
datasets' *computed* sums differ by far more than the declared sensitivity (Casacuberta,
Shoemate, Vadhan & Wagaman, "Widespread Underestimation of Sensitivity in Differentially
Private Libraries and How to Fix It", CCS 2022). Every statistic a release here adds noise to
is therefore computed exactly:

1. **Quantise.** A per-row value ``v`` with declared magnitude bound ``|v| <= c`` becomes the
   integer ``V = trunc(v / c * 2^16)``: the row value ``c V 2^-16``, rounded *toward zero* on a
   grid of ``2^-16`` of its bound (:data:`FRACTION_BITS`). No coordinate's magnitude grows, so
   every bound a sensitivity uses -- per-coordinate magnitudes, a row's L1 or L2 norm
   (:func:`check_norms` verifies L2 balls exactly, in integers), one-hot blocks (0 and 1 lie on
   the grid) -- holds for the quantised row exactly as for the real one: the exact sum of
   quantised rows has the declared sensitivity, with no allowance. (The relative change of a
   value is below ``2^-16``, far inside any noise.) Truncation is biased toward the centre,
   though, by half a step per row on average (+0.9 per row on an income sum bounded at
   ``[0, 250000]`` whose rows lie below its midpoint): sums whose sensitivity rests on each
   value's magnitude alone (a table's centred sums) round to the *nearest* grid point instead,
   which keeps ``|V| <= 2^16`` and errs by half a step either way, zero on average.
2. **Sum exactly.** Products of quantised values are integers; a float64 matrix product of
   integer-valued arrays is exact while every partial sum stays below ``2^53``, whatever the
   summation order or FMA use, so :func:`exact_products` multiplies rows in chunks whose
   partial sums provably stay below ``2^53`` (BLAS speed) and adds the chunk results as
   Python integers (no overflow, no row limit). The result is a function of the *multiset* of
   rows: batch boundaries, partitions and merge order cannot change one bit, so the in-memory,
   streaming and Dask paths agree bit for bit and the merge order has no privacy role.
3. **Round once.** An exact sum ``s`` is returned as ``fl(s)``, correctly rounded from the
   exact rational (:func:`to_float`): ``|fl(s) - s| <= 2^-53 |s|``. For a coordinate whose
   per-row value has magnitude ``<= M``, ``|s| <= n M``, so neighbours' *returned* values differ
   by at most their exact difference plus ``2^-52 n M``. Up to :data:`MAX_ROWS` ``= 2^36`` rows
   that is :data:`CONVERSION_ALLOWANCE` ``M = 2^-16 M`` per coordinate, which the declared
   sensitivities include (:mod:`dp.regression.sensitivity`, :mod:`dp.kmeans`). Counts are
   integers below ``2^53``: exact, no allowance. Data of more than ``MAX_ROWS`` rows is
   refused from its footers before a run reserves (:func:`dp.io.check_source`), and a
   statistic of more when it is finished (:func:`check_rows`): the allowance would not cover it.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Literal

import numpy as np
import numpy.typing as npt

from dppub.dp.errors import InputError, InvariantError

__all__ = [
    "CONVERSION_ALLOWANCE",
    "FRACTION_BITS",
    "MAX_ROWS",
    "ONE",
    "IntArray",
    "Rounding",
    "check_norms",
    "check_rows",
    "digits",
    "exact_products",
    "exact_sums",
    "fixed_point_record",
    "float_allowance",
    "int_zeros",
    "quantise",
    "to_float",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.object_]
"""An array of Python integers (exact, unbounded)."""

Rounding = Literal["toward-zero", "nearest"]
"""How :func:`quantise` rounds onto the grid."""
FRACTION_BITS = 16
"""A quantised value is an integer multiple of ``2^-16`` of its declared magnitude bound."""
ONE = float(2**FRACTION_BITS)
"""The integer that stands for a value at its magnitude bound."""
MAX_ROWS = 2**36
"""Most rows a released statistic may sum (6.9e10): what :data:`CONVERSION_ALLOWANCE` covers."""
CONVERSION_ALLOWANCE = MAX_ROWS * 2.0**-52
"""``2^-16``: the extra distance, per coordinate and per unit of its per-row magnitude bound,
between neighbours' float64 statistics beyond their exact difference (module doc, step 3)."""
_EXACT = 53  # float64 holds every integer of magnitude <= 2^53


def float_allowance(roundings: int) -> float:
    """The allowance of a float64 result that is its exact value up to ``roundings`` roundings,
    each at most ``2^-53`` of a magnitude ``n M`` (``n <= MAX_ROWS`` rows of per-row magnitude
    ``M``): two neighbours' results then differ by at most their exact difference plus
    ``roundings * 2^-52 n M <= roundings * CONVERSION_ALLOWANCE * M`` -- the allowance of
    step 3, once per rounding, per unit of ``M``.

    >>> float_allowance(1) == CONVERSION_ALLOWANCE
    True
    """
    return roundings * CONVERSION_ALLOWANCE


_INT64_CHUNKS = 2**9  # chunk results (each <= 2^53) added in int64 before moving to Python ints


def quantise(
    values: npt.ArrayLike, magnitude: npt.ArrayLike, *, rounding: Rounding = "toward-zero"
) -> FloatArray:
    """``values / magnitude * 2^16`` rounded to an integer: integer-valued float64 in
    ``[-2^16, 2^16]``.

    ``rounding``: ``"toward-zero"`` (truncation) never grows a coordinate's magnitude, so a row's
    L1 or L2 norm bound holds for the quantised row too (:func:`check_norms`); it is biased, by
    up to one grid step per row toward the centre. ``"nearest"`` (ties to even) errs by at most
    half a step either way, about zero on average: for sums whose sensitivity rests on each
    value's magnitude bound alone (a table's centred sums), where a value ``|v| <= c`` still
    becomes ``|V| <= 2^16``. ``values`` must already lie within ``+-magnitude`` (clipped into
    the declared domain); float rounding of the clip may leave them a few ulps outside, which
    either rounding absorbs.

    >>> quantise(np.array([0.5, -1.0, 0.99999]), 1.0).tolist()
    [32768.0, -65536.0, 65535.0]
    >>> quantise(np.array([0.99999, -0.99999]), 1.0, rounding="nearest").tolist()
    [65535.0, -65535.0]
    """
    scaled = np.asarray(values, dtype=np.float64) / np.asarray(magnitude) * ONE
    q = np.rint(scaled) if rounding == "nearest" else np.trunc(scaled)
    if q.size and not float(np.max(np.abs(q))) <= ONE:
        raise InvariantError("a value exceeds its declared magnitude bound after clipping")
    return np.asarray(q, dtype=np.float64)


def check_norms(rows: FloatArray) -> None:
    """Raise InvariantError unless every quantised row has ``||V||_2 <= 2^16`` (norm bound 1).

    Exact: the squares are integers below ``2^32`` and their sum stays below ``2^53``.
    """
    if rows.shape[1] >= 2 ** (_EXACT - 2 * FRACTION_BITS):
        raise InvariantError("too many columns to check row norms exactly")
    if rows.size and not float(np.max(np.einsum("ij,ij->i", rows, rows))) <= ONE * ONE:
        raise InvariantError("a quantised row exceeds its declared L2 bound")


def int_zeros(shape: int | tuple[int, ...]) -> IntArray:
    """An array of Python-integer zeros."""
    return np.zeros(shape, dtype=object)


def exact_products(a: FloatArray, b: FloatArray, *, bits: int) -> IntArray:
    """``a^T b`` exactly, for integer-valued float64 ``a`` (n, p) and ``b`` (n, q).

    ``bits``: every per-row product satisfies ``|a_ij b_ik| <= 2^bits``. Rows go through BLAS in
    chunks of ``2^(53 - bits)``, so every partial sum of a chunk is an integer of magnitude
    ``<= 2^53`` and each float operation is exact, in any order.
    """
    if not 0 <= bits <= _EXACT:
        raise InvariantError(f"per-row products of 2^{bits} cannot be summed exactly")
    chunk = 2 ** (_EXACT - bits)
    total = int_zeros((a.shape[1], b.shape[1]))
    part = np.zeros((a.shape[1], b.shape[1]), dtype=np.int64)
    for k, start in enumerate(range(0, a.shape[0], chunk), start=1):
        part += (a[start : start + chunk].T @ b[start : start + chunk]).astype(np.int64)
        if k % _INT64_CHUNKS == 0:  # int64 holds 2^9 chunk results of <= 2^53 each
            total += part.astype(object)
            part[...] = 0
    return np.asarray(total + part.astype(object), dtype=object)


def exact_sums(a: FloatArray, *, bits: int) -> IntArray:
    """Column sums of integer-valued float64 ``a`` (n, p) with ``|a_ij| <= 2^bits``, exactly."""
    if not 0 <= bits <= _EXACT:
        raise InvariantError(f"values of 2^{bits} are not integers in float64")
    chunk = 2 ** (62 - bits)  # an int64 sum of a chunk stays below 2^62
    total = int_zeros(a.shape[1])
    for start in range(0, a.shape[0], chunk):
        total += a[start : start + chunk].astype(np.int64).sum(axis=0).astype(object)
    return total


def digits(values: FloatArray, *, count: int, bits: int) -> FloatArray:
    """Base-``2^bits`` digits of values in ``[-1, 1]``: ``v ~ sum_k D[:, k] 2^(-bits (k + 1))``.

    Each digit is integer-valued with ``|D| <= 2^bits``; all but the last are truncated
    (exactly: a float minus its integer part is exact), the last is rounded, so the error is
    at most ``2^-(bits count + 1)``. Shape ``(n, count)``.

    >>> digits(np.array([0.75, -0.3]), count=2, bits=4).tolist()
    [[12.0, 0.0], [-4.0, -13.0]]
    """
    rest = np.asarray(values, dtype=np.float64)
    out = np.empty((len(rest), count))
    for k in range(count):
        rest = rest * float(2**bits)
        digit = np.trunc(rest) if k < count - 1 else np.rint(rest)
        rest = rest - digit
        out[:, k] = digit
    return out


def to_float(total: IntArray, scale: npt.ArrayLike) -> FloatArray:
    """``fl(total * scale)`` per entry, correctly rounded from the exact rational (one rounding).

    >>> to_float(np.array([3, 2**60 + 1], dtype=object), 2.0**-2).tolist()
    [0.75, 2.8823037615171174e+17]
    """
    t = np.asarray(total, dtype=object)
    s = np.broadcast_to(np.asarray(scale, dtype=np.float64), t.shape)
    flat = [
        float(Fraction(int(v)) * Fraction(float(c))) for v, c in zip(t.flat, s.flat, strict=True)
    ]
    return np.asarray(flat, dtype=np.float64).reshape(t.shape)


def check_rows(rows: int) -> int:
    """``rows`` if a statistic of that many rows is covered by :data:`CONVERSION_ALLOWANCE`.

    Raises:
        InputError: more than :data:`MAX_ROWS` rows.
    """
    if rows > MAX_ROWS:
        raise InputError(
            f"more than 2^{int(math.log2(MAX_ROWS))} rows in one statistic: the declared "
            "sensitivities cover float64 rounding of the exact sums up to that many rows only"
        )
    return rows


def fixed_point_record() -> dict[str, object]:
    """How the released statistics were summed, for a model's ``to_dict()``."""
    return {
        "rows": "quantised toward zero on a grid of 2^-16 of each value's declared bound",
        "sums": "exact integers, each rounded once to float64",
        "max_rows": MAX_ROWS,
        "rounding_allowance": CONVERSION_ALLOWANCE,
    }
