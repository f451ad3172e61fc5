"""How many digits a published table value carries: no more than its noise supports.

Post-processing of released values only (no privacy cost). The rule (:data:`PRECISION_RULE`):
a row's answer, its ``std_error`` and its interval bounds are rounded (half to even) to one
power of ten, the largest at or below a tenth of its standard error (``10^floor(log10(se /
10))``: 9.18 -> 0.1, 0.0342 -> 0.001), so the standard error keeps two significant digits and
the answer none that the noise makes meaningless. Counts are rounded to integers at least
(9.18 -> 1: ``2086.09 +- 9.18`` is published as ``2086``, ``9``). A value without a standard
error (a quantile drawn by the exponential mechanism) uses its grid's bin width instead: the
value is a grid edge and means nothing finer. A value already rounded under control (``round:``,
:mod:`dp.tables.rounding`) keeps its value, so its margins still add up; its standard error and
interval follow the rule.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dppub.dp.stopping import checked

__all__ = ["PRECISION_RULE", "VALUE_COLUMNS", "as_text", "exponents", "round_at"]

FloatArray = npt.NDArray[np.float64]

VALUE_COLUMNS = ("answer", "std_error", "ci_low", "ci_high")
"""A table row's numbers, rounded to one power of ten together."""

PRECISION_RULE = (
    "post-processing of the released values (no privacy cost): each row's answer, std_error, "
    "ci_low and ci_high are rounded (half to even) to the largest power of ten at or below a "
    "tenth of its standard error (two significant digits of the standard error), counts to "
    "integers at least; a value without a standard error (an exponential-mechanism quantile) "
    "to the power of ten at or below a tenth of its grid's bin width; values rounded under "
    "control (round:) keep their value, so their margins still add up"
)


def exponents(
    std_error: npt.ArrayLike, *, counts: npt.ArrayLike, resolution: npt.ArrayLike = np.nan
) -> FloatArray:
    """Each row's power of ten (module doc): ``floor(log10(s / 10))`` for ``s`` its standard
    error, or ``resolution`` where it has none; at least 0 for a count; NaN where neither
    (the value is left as it is).

    >>> exponents([9.18, 0.0342, 31.6, 1.0], counts=[True, False, False, False])
    array([ 0., -3.,  0., -1.])
    >>> exponents([np.nan, np.nan], counts=[False, False], resolution=[0.5, np.nan])
    array([-2., nan])
    """
    se = np.asarray(std_error, dtype=np.float64)
    scale = np.where(np.isfinite(se) & (se > 0), se, np.asarray(resolution, dtype=np.float64))
    scale = np.where(np.isfinite(scale) & (scale > 0), scale, np.nan)
    with np.errstate(invalid="ignore"):
        e = np.floor(np.log10(scale / 10.0))
    return np.where(np.asarray(counts, dtype=bool) & np.isfinite(e), np.maximum(e, 0.0), e)


def round_at(values: npt.ArrayLike, exponent: npt.ArrayLike) -> FloatArray:
    """``values`` rounded half to even at each row's power of ten (NaN exponent: unchanged).

    Dividing by an exact power of ten gives the float nearest the decimal (``0.034``, not
    ``0.034000000000000002``).

    >>> round_at([2086.0911728424985, 9.1786225266111678, 0.034187, 12345.0], [0, 0, -3, 2])
    array([2.086e+03, 9.000e+00, 3.400e-02, 1.230e+04])
    """
    v = np.asarray(values, dtype=np.float64)
    e = np.asarray(exponent, dtype=np.float64)
    out = v.copy()
    for k in np.unique(e[np.isfinite(e)]):
        at = e == k
        p = 10.0 ** abs(k)
        out[at] = np.rint(v[at] * p) / p if k < 0 else np.rint(v[at] / p) * p
    return out + 0.0  # no -0.0: a rounded-away negative is published as 0


def as_text(values: npt.ArrayLike, exponent: npt.ArrayLike) -> list[str]:
    """Each value with exactly its row's digits (``""`` for a missing value), as a CSV holds it.

    >>> as_text([2086.0, 0.034, 12300.0, np.nan, 0.1 + 0.2], [0, -3, 2, 0, np.nan])
    ['2086', '0.034', '12300', '', '0.30000000000000004']
    """
    out: list[str] = []
    pairs = zip(np.asarray(values, dtype=np.float64), np.asarray(exponent), strict=True)
    for v, e in checked(pairs, "writing a table's numbers"):
        if not np.isfinite(v):
            out.append("")
        elif not np.isfinite(e):
            out.append(repr(float(v)))
        else:
            out.append(f"{v:.{max(0, -int(e))}f}")
    return out
