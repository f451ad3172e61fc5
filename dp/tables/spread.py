"""A table's ``variance(col)`` and ``std(col)``, and ``count_distinct``'s sensitivity.

**Variance.** Three noisy components per group (:mod:`dp.tables.split`), over the rows where
``col`` is present, each value clamped to the declared ``[lo, hi]``, ``mid = (lo + hi) / 2``,
``half = (hi - lo) / 2``:

* ``N = count(col)`` (a row moves it by at most 1),
* ``S = sum (v - mid)`` (at most ``half``),
* ``Q' = sum ((v - mid)^2 - half^2 / 2)`` (each term in ``[-half^2 / 2, half^2 / 2]``: at most
  ``half^2 / 2``; shifted so that its bound is half the raw square's ``half^2``).

The published population variance is post-processing of the three: ``V = Q' / n + half^2 / 2 -
(S / n)^2`` with ``n = max(N, 1)`` and ``S / n`` clamped to ``[-half, half]``, clamped to
``[0, half^2]`` (no variance of values in ``[lo, hi]`` exceeds ``((hi - lo) / 2)^2``);
``std = sqrt(V)``. This is the count / sum / sum-of-squares estimator Tumult Analytics and
PipelineDP use (the squares centred, as PipelineDP does, so their sensitivity is the smallest
the bounds allow); OpenDP's ``make_variance`` instead needs the dataset size public and noises
the variance itself, which a group-by table with unknown group sizes does not have.

Intervals (noise only, as every interval here): the delta method on the three independent
noises, ``se_V^2 = (se_Q / n)^2 + (2 S se_S / n^2)^2 + ((2 S^2 / n^3 - Q' / n^2) se_N)^2``, and
``V +- k se_V`` (``k`` the Laplace-safe multiplier) clamped to ``[0, half^2]``; ``std``'s
interval is the square root of the variance's (a monotone map keeps its coverage) and its
standard error ``se_V / (2 std)`` (at most ``half``).

**count_distinct.** The number of distinct privacy units with a row in the group, each unit
counted in at most ``p`` groups (``max_partitions_per_unit``; the fold keeps a unit's ``p``
groups of lowest public hash when it has more, :mod:`dp.engine.folds.table_sums`). Sensitivity
(:func:`distinct_bound`): neighbours differ by all rows of one unit ``u``; after contribution
bounding ``u`` has at most ``m`` rows (``max_rows_per_unit``), so it reaches at most ``m``
groups, and it is counted in at most ``p`` of them: at most ``min(p, m)``. Removing ``u``
changes no other unit's kept rows (:mod:`dp.engine.unit_bounding`) nor which groups another
unit is counted in (its choice depends on its own groups alone), so each group's distinct count
drops by 1 if ``u`` was counted there and is unchanged otherwise: the L1 distance is at most
``min(p, m)`` (L2: its square root, were Gaussian noise used). Without a privacy unit there are
no units to count.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from dppub.dp.matrix.least_squares_intervals import laplace_multiplier
from dppub.dp.tables.cells_and_margins import Linear

__all__ = ["distinct_bound", "spread_rows"]

FloatArray = npt.NDArray[np.float64]


def distinct_bound(*, rows_per_unit: int, max_partitions: int) -> int:
    """How many groups one unit is counted in at most: ``count_distinct``'s L1 sensitivity
    (module doc).

    >>> distinct_bound(rows_per_unit=10, max_partitions=3)
    3
    >>> distinct_bound(rows_per_unit=2, max_partitions=3)
    2
    """
    return min(max_partitions, rows_per_unit)


def spread_rows(
    kind: str, column: str, lo: float, hi: float, linear: Mapping[str, Linear], level: float
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """``variance(column)`` or ``std(column)`` over the published rows: answer, std_error,
    ci_low, ci_high (module doc), from the measured ``count(column)``, ``centred_sum(column)``
    and ``centred_square(column)`` (:class:`dp.tables.cells_and_margins.Linear`)."""
    s_lin, q_lin = (linear[f"{name}({column})"] for name in ("centred_sum", "centred_square"))
    n_lin = linear.get(f"count({column})", linear.get("count"))  # never missing: the count
    assert n_lin is not None
    half = (hi - lo) / 2.0
    n = np.maximum(np.asarray(n_lin.answers, dtype=np.float64), 1.0)
    s = np.asarray(s_lin.answers, dtype=np.float64)
    q = np.asarray(q_lin.answers, dtype=np.float64)
    centred_mean = np.clip(s / n, -half, half)
    raw = q / n + half * half / 2.0 - centred_mean**2
    variance = np.clip(raw, 0.0, half * half)
    se = np.sqrt(
        (q_lin.std_error / n) ** 2
        + (2.0 * s * s_lin.std_error / n**2) ** 2
        + ((2.0 * s**2 / n**3 - q / n**2) * n_lin.std_error) ** 2
    )
    k = float(laplace_multiplier(level))
    low = np.clip(raw - k * se, 0.0, half * half)
    high = np.clip(raw + k * se, 0.0, half * half)
    if kind == "variance":
        return variance, se, low, high
    std = np.sqrt(variance)
    with np.errstate(divide="ignore", invalid="ignore"):
        std_se = np.where(std > 0, se / (2.0 * std), half)
    return std, np.minimum(std_se, half), np.sqrt(low), np.sqrt(high)
