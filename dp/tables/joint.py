"""Several tables of one run estimated jointly: one matrix-mechanism measurement for a group.

Tables that declare the same ``joint: <group>`` (declared keys, the same measures: counts,
sums, means) are measured once over the group's finest cells -- the product of every key
column at its finest level among the members -- and each member publishes its own rows read
off the one reconstructed estimate (post-processing), so the members are mutually consistent:
a coarser table's rows are exactly the sums of a finer one's cells.

**The strategy.** Member ``k`` alone would measure its strategy ``S_k`` (the identity on its
cells, or its margins' strategy) at ``epsilon_k``. Lifted to the group's cells by the 0/1 map
``P_k`` (each fine cell to the member's cell holding it; ``||S_k P_k||_1 = ||S_k||_1``), the
group measures the stack ``A = [(epsilon_k / (epsilon ||S_k||_1)) S_k P_k]_k`` at the group's
``epsilon = sum_k epsilon_k``, each component (count, centred sums) at its share, split as a
member's (the members' measures are the same, so their splits are proportional). Its column L1
norm is at most ``sum_k epsilon_k / epsilon = 1``: one row of the data moves the measurement by
at most ``m s ||A||_1 <= m s`` (``s``: the row's sensitivity, ``m``: rows per unit), and the
noise is calibrated to that. Block ``k``, rescaled, is ``S_k P_k x`` plus Laplace noise of
scale ``m s ||S_k||_1 ||A||_1 / epsilon_k``: no more than member ``k`` measured alone, and the
blocks are independent. Least squares over the whole stack is the best linear unbiased
estimate from all blocks (equal noise scales: ordinary least squares is the Gauss-Markov
estimate), so every published row's least-squares noise variance (before counts are made
non-negative, as for any table) is at most what the member's own block alone gives -- the
separate release's. :func:`row_variances` computes both exactly (the
matrix mechanism's variance formula), and ``dppub plan`` shows them.

**The guarantee.** The group's measurement is ``epsilon``-DP (the sum of the members'); the
ledger charges each member its own ``epsilon_k``, so the run's total is unchanged. A member's
answers use every block, so a member on its own is *not* an ``epsilon_k``-DP release: on its
own it is ``epsilon``-DP, and the members together are ``epsilon``-DP. ``release.json`` says so.

The group is one release (:mod:`dp.pipeline.kinds.tables.group`): its noisy measurement is
drawn once, in that release's one execution, after the ledger recorded its draw at the group's
epsilon, and every member's rows are read off the same reconstructed estimate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pandas as pd
import scipy.sparse as sp

from dppub.dp.axes import Axis
from dppub.dp.errors import ConfigError
from dppub.dp.matrix.least_squares_intervals import least_squares_intervals
from dppub.dp.matrix.strategy import Strategy
from dppub.dp.matrix.variance import query_variance_factors
from dppub.dp.matrix.workload import FloatArray, Workload
from dppub.dp.tables.cells_and_margins import Linear
from dppub.dp.tables.split import Component
from dppub.dp.tables.table import measure_components, with_count

__all__ = [
    "MAX_JOINT_CELLS",
    "Joint",
    "Member",
    "RowsWorkload",
    "StackedStrategy",
    "finest_axes",
    "joint_group",
    "lift",
    "measure_group",
    "member_rows",
    "row_variances",
]

MAX_JOINT_CELLS = 1024
"""The most cells a joint group's finest table may have (its strategy is held dense)."""


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class RowsWorkload(Workload):
    """A workload given as a sparse 0/1 matrix of rows over the cells."""

    rows: sp.csr_matrix
    label: str

    @property
    def name(self) -> str:
        return self.label

    @property
    def domain(self) -> tuple[int, ...]:
        return (int(self.rows.shape[1]),)

    @property
    def m(self) -> int:
        return int(self.rows.shape[0])

    def _matmat(self, x: FloatArray) -> FloatArray:
        return np.asarray(self.rows @ x, dtype=np.float64)

    def _rmatmat(self, y: FloatArray) -> FloatArray:
        return np.asarray(self.rows.T @ y, dtype=np.float64)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class StackedStrategy(Strategy):
    """A dense strategy (a joint group's stack), least squares by its pseudo-inverse."""

    matrix: FloatArray
    label: str
    _pinv: FloatArray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_pinv", np.linalg.pinv(self.matrix))

    @property
    def name(self) -> str:
        return self.label

    @property
    def domain(self) -> tuple[int, ...]:
        return (int(self.matrix.shape[1]),)

    @property
    def m(self) -> int:
        return int(self.matrix.shape[0])

    @property
    def sensitivity(self) -> float:
        return float(np.max(np.abs(self.matrix).sum(axis=0)))

    def _matmat(self, x: FloatArray) -> FloatArray:
        return np.asarray(self.matrix @ x, dtype=np.float64)

    def _rmatmat(self, y: FloatArray) -> FloatArray:
        return np.asarray(self.matrix.T @ y, dtype=np.float64)

    def _lstsq(self, r: FloatArray) -> FloatArray:
        return np.asarray(self._pinv @ r, dtype=np.float64)

    def squared_error_factor(self, workload: Workload) -> float:
        return float(np.sum((workload.dense() @ self._pinv) ** 2))


def lift(member: Sequence[Axis], finest: Sequence[Axis]) -> sp.csr_matrix:
    """``P``: each of the group's finest cells (C order over ``finest``) to the member's cell
    holding it (C order over ``member``; a column the member lacks is summed out, a coarser
    level of a hierarchy maps each fine label to its parent)."""
    by_column = {a.column: a for a in finest}
    shape = tuple(a.size for a in finest)
    index = np.indices(shape).reshape(len(shape), -1)
    position = {a.column: i for i, a in enumerate(finest)}
    codes = []
    for axis in member:
        fine = by_column[axis.column]
        codes.append(_label_map(fine, axis)[index[position[axis.column]]])
    cells = int(np.prod(shape))
    target = (
        np.ravel_multi_index(codes, tuple(a.size for a in member)) if member else np.zeros(cells)
    )
    size = int(np.prod([a.size for a in member]))
    return sp.csr_matrix(
        (np.ones(cells), (np.asarray(target, dtype=np.int64), np.arange(cells))),
        shape=(size, cells),
    )


def _label_map(fine: Axis, coarse: Axis) -> npt.NDArray[np.int64]:
    """Each label of ``fine`` -> the index of the ``coarse`` label holding it."""
    if fine.labels == coarse.labels or (
        fine.edges is None and coarse.edges is None and set(fine.labels) == set(coarse.labels)
    ):
        at = {v: i for i, v in enumerate(coarse.labels)}
        return np.asarray([at[v] for v in fine.labels], dtype=np.int64)
    h = fine.hierarchy
    if h is None or coarse.hierarchy is None or coarse.level <= fine.level:
        raise ConfigError(
            f"joint tables must key {fine.column!r} alike (the same bins, or levels of its "
            "hierarchy)"
        )
    leaves = pd.Series(h.labels(0))
    parent: dict[str, str] = {}
    for f, c in zip(
        h.generalize(leaves, fine.level).astype(str),
        h.generalize(leaves, coarse.level).astype(str),
        strict=True,
    ):
        if parent.setdefault(f, c) != c:
            raise ConfigError(
                f"{fine.column!r}: level {coarse.level} does not nest level {fine.level}"
            )
    at = {v: i for i, v in enumerate(coarse.labels)}
    return np.asarray([at[parent[v]] for v in fine.labels], dtype=np.int64)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Joint:
    """A joint group as one member sees it (module doc); everything is public."""

    group: str
    members: tuple[str, ...]
    epsilons: tuple[float, ...]
    index: int
    """This member's position in :attr:`members`."""
    axes: tuple[Axis, ...]
    """The group's finest cells (what the shared scan folds)."""
    components: tuple[Component, ...]
    """The group's components, at the group's epsilon."""
    bounds: Mapping[str, tuple[float, float]]
    rows: tuple[sp.csr_matrix, ...]
    """Each member's published rows over the group's cells (``W_k P_k``)."""
    separate: tuple[sp.csr_matrix, ...]
    """Each member's own strategy over the group's cells, ``S_k P_k`` (dense as sparse)."""
    separate_sensitivity: tuple[float, ...]
    strategy: StackedStrategy
    """The stack ``A`` (module doc)."""
    group_rows: int = 1
    """Rows a unit may contribute."""

    @property
    def epsilon(self) -> float:
        return float(sum(self.epsilons))

    @property
    def workload(self) -> RowsWorkload:
        """Every member's rows, stacked (what the counts are reconstructed non-negative for)."""
        return RowsWorkload(rows=sp.csr_matrix(sp.vstack(self.rows)), label=f"joint {self.group}")

    def member_workload(self, k: int) -> RowsWorkload:
        return RowsWorkload(rows=self.rows[k], label=f"{self.members[k]} in {self.group}")


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Member:
    """One table of a group as it would be measured alone."""

    name: str
    epsilon: float
    axes: tuple[Axis, ...]
    """Its cells' axes (C order)."""
    rows: sp.csr_matrix
    """Its published rows over its cells."""
    strategy: Strategy
    """What it would measure alone (the identity, or its margins' strategy)."""


def finest_axes(members: Sequence[Member]) -> tuple[Axis, ...]:
    """Every key column of the members at its finest level among them, in first-appearance
    order: the group's cells."""
    finest: dict[str, Axis] = {}
    for m in members:
        for a in m.axes:
            if a.column not in finest or a.level < finest[a.column].level:
                finest[a.column] = a
    return tuple(finest.values())


def joint_group(
    group: str,
    members: Sequence[Member],
    index: int,
    *,
    components: tuple[Component, ...],
    bounds: Mapping[str, tuple[float, float]],
    group_rows: int,
) -> Joint:
    """The group as member ``index`` sees it: the finest cells (every key column at its finest
    level among the members, in first-appearance order), each member's rows and strategy lifted
    to them, and the stack ``A = [(epsilon_k / (epsilon ||S_k||_1)) S_k P_k]_k`` (module doc).
    ``components``: the members' components at the group's epsilon."""
    axes = finest_axes(members)
    lifts = [lift(m.axes, axes) for m in members]
    separate = tuple(
        sp.csr_matrix(m.strategy.dense() @ p.toarray()) for m, p in zip(members, lifts, strict=True)
    )
    epsilons = tuple(m.epsilon for m in members)
    sensitivities = tuple(m.strategy.sensitivity for m in members)
    total = float(sum(epsilons))
    blocks = [
        (e / (total * s)) * p.toarray()
        for e, s, p in zip(epsilons, sensitivities, separate, strict=True)
    ]
    return Joint(
        group=group,
        members=tuple(m.name for m in members),
        epsilons=epsilons,
        index=index,
        axes=axes,
        components=components,
        bounds=bounds,
        rows=tuple(sp.csr_matrix(m.rows @ p) for m, p in zip(members, lifts, strict=True)),
        separate=separate,
        separate_sensitivity=sensitivities,
        strategy=StackedStrategy(
            matrix=np.vstack(blocks), label=f"stack of {len(blocks)} tables' strategies"
        ),
        group_rows=group_rows,
    )


def measure_group(
    joint: Joint,
    counts: npt.ArrayLike,
    centred: Mapping[str, npt.ArrayLike],
    *,
    rng: np.random.Generator | None = None,
    extra: Mapping[str, npt.ArrayLike] | None = None,
) -> dict[str, FloatArray]:
    """Draw the group's one measurement and reconstruct it: the estimate over the group's
    cells of each vector (``count``, ``centred_sum(col)``), what every member reads, and its
    public ``name:epsilon``, ``name:noise_scale`` (of each strategy answer, as read) and
    ``name:sensitivity`` (of the measurement)."""
    linear = measure_components(
        joint.components,
        joint.bounds,
        joint.workload,
        joint.strategy,
        counts,
        centred,
        group=joint.group_rows,
        rng=rng,
        extra=extra,
    )
    out: dict[str, FloatArray] = {}
    for name, lin in linear.items():
        out[name] = lin.estimate
        for fact in ("epsilon", "noise_scale", "sensitivity"):
            out[f"{name}:{fact}"] = np.asarray(float(getattr(lin, fact)))
    return out


def member_rows(joint: Joint, estimates: Mapping[str, FloatArray]) -> dict[str, Linear]:
    """This member's rows of every vector, read off the group's estimates (what
    :func:`measure_group` returned), with their exact least-squares noise standard deviations
    and intervals."""
    strategy = joint.strategy
    workload = joint.member_workload(joint.index)
    out: dict[str, Linear] = {}
    for name in (k for k in estimates if ":" not in k):
        estimate = np.asarray(estimates[name], dtype=np.float64)
        scale = float(estimates[f"{name}:noise_scale"])
        intervals = least_squares_intervals(workload, strategy, estimate, noise_scale=scale)
        out[name] = Linear(
            estimate=estimate,
            answers=np.asarray(workload @ estimate, dtype=np.float64),
            std_error=intervals.std_error,
            half_width=(intervals.ci_high - intervals.ci_low) / 2.0,
            epsilon=float(estimates[f"{name}:epsilon"]),
            noise_scale=scale,
            sensitivity=float(estimates[f"{name}:sensitivity"]),
            strategy=strategy.name,
        )
    return with_count(out)


def row_variances(joint: Joint, k: int) -> tuple[FloatArray, FloatArray]:
    """Member ``k``'s rows' noise variance factors ``w^T (A^T A)^+ w`` per unit of
    ``(m s / epsilon_component)^2`` (Laplace: times 2): jointly (the stack at the group's
    epsilon) and separately (its own strategy at its own epsilon). Exact: the matrix
    mechanism's variance formula; the ratio is the same for every component."""
    workload = joint.member_workload(k)
    stack = joint.strategy
    joint_var = query_variance_factors(workload, stack) * (stack.sensitivity / joint.epsilon) ** 2
    own = StackedStrategy(matrix=joint.separate[k].toarray(), label=joint.members[k])
    alone = (
        query_variance_factors(workload, own)
        * (joint.separate_sensitivity[k] / joint.epsilons[k]) ** 2
    )
    return np.asarray(joint_var), np.asarray(alone)
