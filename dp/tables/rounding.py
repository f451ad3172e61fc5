"""Non-negative integer cells whose margins stay as close as possible to the released ones.

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
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, milp

__all__ = ["MAX_ROUNDED_CELLS", "round_integer"]

MAX_ROUNDED_CELLS = 1024
"""Most cells a table rounds (an integer program of one variable per cell and per row): 32 x 32
cells with margins take about 6 s, 10 x 10 x 10 about 25 s, each 20-30% closer to the released
margins in L1 than rounding each cell."""
NODE_LIMIT = 200
GAP = 0.05
"""Stop once the solution is proven within 5% of the smallest L1 distance (HiGHS's bound)."""
"""Branch-and-bound nodes HiGHS may explore (module doc)."""


def round_integer(estimate: npt.ArrayLike, rows: sp.csr_matrix) -> npt.NDArray[np.int64]:
    """The integer cells (module doc), as int64."""
    x = np.clip(np.asarray(estimate, dtype=np.float64), 0.0, None)
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
    return np.asarray(np.clip(out, 0, None), dtype=np.int64)
