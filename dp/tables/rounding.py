"""Integer cells, or multiples of a base, whose margins stay closest to the released ones.

Post-processing of released values only. Given the reconstructed non-negative cells ``x`` and
the published rows ``M`` (cells and margins, :func:`dp.tables.margins.margin_matrix`), find
integers ``y``, each cell rounded down or up (controlled rounding, as official statistics
round: never moved by more than one), minimising ``||M y - M x||_1``: an L1 rounding problem
over every published row, solved as a mixed-integer linear program by HiGHS (through
:func:`scipy.optimize.milp`, the solver the matrix mechanism's reconstructions pin, without
cvxpy's start-up banner): variables ``y`` (integer) and ``t >= |M y - M x|`` per row, minimise
``sum t``. The published rows are ``M y``: every cell and every margin an integer, and every
margin exactly the sum of its cells. ``round(x)`` is feasible, so a solution always exists, and
the result is never worse than rounding each cell on its own. The search stops after
:data:`NODE_LIMIT` branch-and-bound nodes (a count, not a clock: the result never depends on the
machine's load) with the best integer solution found, which is then not proven optimal
(or, if none was found, each cell rounded).

``round: {base: b}`` (:func:`round_to_base`) is the same problem in units of ``b``: the cells
``x / b`` rounded as above, times ``b``, so every published row is a multiple of ``b`` and every
margin still the sum of its cells (``round: integer`` is ``b = 1``). Counts are made
non-negative first; a sum only when its column's values are (its lower bound is at least 0).
A sum's base is scaled by powers of ten up to the precision its noise supports
(:func:`sum_base`, :mod:`dp.tables.precision`): rounding it to units would publish digits the
noise makes meaningless.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, milp

from dppub.dp.tables.precision import exponents

__all__ = ["MAX_ROUNDED_CELLS", "round_integer", "round_to_base", "sum_base"]

MAX_ROUNDED_CELLS = 1024
"""Most cells a table rounds (an integer program of one variable per cell and per row): 32 x 32
cells with margins take about 6 s, 10 x 10 x 10 about 25 s, each 20-30% closer to the released
margins in L1 than rounding each cell."""
NODE_LIMIT = 200
GAP = 0.05
"""Stop once the solution is proven within 5% of the smallest L1 distance (HiGHS's bound)."""
"""Branch-and-bound nodes HiGHS may explore (module doc)."""


def round_integer(
    estimate: npt.ArrayLike, rows: sp.csr_matrix, *, nonneg: bool = True
) -> npt.NDArray[np.int64]:
    """The integer cells (module doc), as int64; ``nonneg``: made non-negative first."""
    x = np.asarray(estimate, dtype=np.float64)
    if nonneg:
        x = np.clip(x, 0.0, None)
    target = rows @ x
    start = np.rint(x)
    n, r = len(x), rows.shape[0]
    eye = sp.identity(r, format="csr")
    # M y - t <= a  and  -M y - t <= -a
    a = sp.vstack([sp.hstack([rows, -eye]), sp.hstack([-rows, -eye])], format="csr")
    result = milp(
        c=np.concatenate([np.zeros(n), np.ones(r)]),
        constraints=LinearConstraint(a, -np.inf, np.concatenate([target, -target])),
        integrality=np.concatenate([np.ones(n), np.zeros(r)]),
        bounds=Bounds(
            np.concatenate([np.floor(x), np.zeros(r)]),
            np.concatenate([np.ceil(x), np.full(r, np.inf)]),
        ),
        options={"node_limit": NODE_LIMIT, "mip_rel_gap": GAP},
    )
    # No integer solution within the node limit: rounding each cell is one (and is kept).
    out = start.astype(np.int64) if result.x is None else np.rint(result.x[:n]).astype(np.int64)
    # Never worse than rounding each cell (the solver's tolerance cannot make it so).
    if np.abs(rows @ out - target).sum() > np.abs(rows @ start - target).sum():
        out = start.astype(np.int64)
    return np.asarray(np.clip(out, 0, None) if nonneg else out, dtype=np.int64)


def round_to_base(
    estimate: npt.ArrayLike, rows: sp.csr_matrix, *, base: float, nonneg: bool = True
) -> npt.NDArray[np.float64]:
    """The cells as multiples of ``base`` (module doc): ``rows @`` them are the published rows.

    >>> rows = sp.csr_matrix(np.array([[1, 0], [0, 1], [1, 1]], dtype=float))
    >>> cells = round_to_base([3.4, 1.2], rows, base=5.0)
    >>> cells, rows @ cells
    (array([5., 0.]), array([5., 0., 5.]))
    """
    scaled = np.asarray(estimate, dtype=np.float64) / base
    return round_integer(scaled, rows, nonneg=nonneg).astype(np.float64) * base


def sum_base(base: float, std_error: npt.ArrayLike) -> float:
    """A sum's base: ``base`` times the largest power of ten (at least 1) that keeps it at or
    below the precision step of its smallest standard error (:func:`exponents`).

    >>> sum_base(1.0, [312.0, 840.0]), sum_base(5.0, [312.0]), sum_base(5.0, [3.1])
    (10.0, 5.0, 5.0)
    """
    (e,) = exponents([float(np.min(std_error))], counts=[False])
    if not np.isfinite(e):
        return base
    k = max(0, int(np.floor(np.log10(10.0**e / base) + 1e-9)))
    return float(base * 10**k)
