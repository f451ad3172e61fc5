"""Non-negative integer cells whose margins stay as close as possible to the released ones.

Post-processing of released values only. Given the reconstructed non-negative cells ``x`` and
the published rows ``M`` (cells and margins, :func:`dp.tables.margins.margin_matrix`), find
integers ``y >= 0`` minimising ``||M y - M x||_1``: an L1 rounding problem over every published
row, solved exactly as a mixed-integer linear program (cvxpy, the HiGHS solver pinned, as the
matrix mechanism's reconstructions). The published rows are ``M y``: every cell and every margin
an integer, and every margin exactly the sum of its cells. ``round(x)`` is feasible, so a
solution always exists and is never worse than rounding each cell on its own.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from dp.errors import SolverError

__all__ = ["MAX_ROUNDED_CELLS", "round_integer"]

MAX_ROUNDED_CELLS = 4096
"""Most cells a table rounds (an integer program of two variables per cell and row)."""
_SOLVER = "HIGHS"


def round_integer(estimate: npt.ArrayLike, rows: sp.csr_matrix) -> npt.NDArray[np.int64]:
    """The integer cells (module doc), as int64."""
    cp: Any = importlib.import_module("cvxpy")  # untyped (see dp.matrix.reconstruct)
    x = np.clip(np.asarray(estimate, dtype=np.float64), 0.0, None)
    target = rows @ x
    start = np.rint(x)
    y = cp.Variable(len(x), integer=True)
    y.value = start
    problem = cp.Problem(cp.Minimize(cp.norm1(rows @ y - target)), [y >= 0])
    try:
        problem.solve(solver=_SOLVER, verbose=False)
    except cp.error.SolverError as exc:  # pragma: no cover - HiGHS failing on a feasible program
        raise SolverError(f"integer rounding failed: {exc}") from exc
    if y.value is None or problem.status not in ("optimal", "optimal_inaccurate"):
        raise SolverError(f"integer rounding failed: {problem.status}")
    out = np.rint(np.asarray(y.value, dtype=np.float64)).astype(np.int64)
    # Never worse than rounding each cell (the solver's tolerance cannot make it so).
    if np.abs(rows @ out - target).sum() > np.abs(rows @ start - target).sum():
        out = start.astype(np.int64)
    return np.asarray(np.clip(out, 0, None), dtype=np.int64)
