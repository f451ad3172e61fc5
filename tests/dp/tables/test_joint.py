"""Joint tables (:mod:`dp.tables.joint`): never more noise than measured apart (exact
variances), the measurement's sensitivity under row and unit neighbours, members that add up,
and one draw per group in the staging area."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dppub.dp.axes import Axis
from dppub.dp.matrix.exact import certified_sensitivity
from dppub.dp.tables.joint import (
    Joint,
    Member,
    joint_group,
    lift,
    measure_group,
    member_rows,
    row_variances,
)
from dppub.dp.tables.margins import Dimension, published_rows
from dppub.dp.tables.split import Measure, split_epsilon
from dppub.dp.tables.table import TableDesign, table_strategy

REGION = Axis(column="region", labels=("n", "s", "e"))
MONTH = Axis(column="month", labels=("jan", "feb", "mar", "apr"))
SEX = Axis(column="sex", labels=("f", "m"))


def _member(name: str, epsilon: float, axes: tuple[Axis, ...], margins: bool = False) -> Member:
    dims = tuple(Dimension(a.labels) for a in axes)
    design = TableDesign(
        keys=tuple(a.column for a in axes), dims=dims, measures=(), components=(), margins=margins
    )
    return Member(
        name=name,
        epsilon=epsilon,
        axes=axes,
        rows=published_rows(dims, margins).matrix,
        strategy=table_strategy(design),
    )


GROUPS: dict[str, list[Member]] = {
    "cells and a margin": [
        _member("a", 1.0, (REGION, MONTH)),
        _member("b", 1.0, (REGION,)),
    ],
    "uneven epsilons, three tables": [
        _member("a", 0.2, (REGION, MONTH)),
        _member("b", 1.0, (MONTH,)),
        _member("c", 0.5, (REGION,)),
    ],
    "a table with margins and its cells": [
        _member("a", 0.5, (REGION, SEX), margins=True),
        _member("b", 0.5, (REGION, SEX)),
    ],
    "no member holds the finest cells": [
        _member("a", 1.0, (REGION, MONTH)),
        _member("b", 1.0, (REGION, SEX)),
    ],
    "the same keys twice": [
        _member("a", 1.0, (SEX, MONTH)),
        _member("b", 3.0, (SEX, MONTH)),
    ],
}


def _joint(members: list[Member], index: int, measures: list[Measure], rows: int = 1) -> Joint:
    bounds = {"x": (0.0, 10.0)}
    eps = sum(m.epsilon for m in members)
    return joint_group(
        "g",
        members,
        index,
        components=split_epsilon(measures, bounds, eps),
        bounds=bounds,
        group_rows=rows,
    )


@pytest.mark.parametrize("name", list(GROUPS))
def test_every_row_of_every_member_has_at_most_its_separate_noise_variance(name: str) -> None:
    # Exact: the matrix mechanism's least-squares variance w^T (A^T A)^+ w times the squared
    # Laplace scale, jointly (the stack at the group's epsilon) and apart (the member's own
    # strategy at its own epsilon). No sampling: nothing here can fail by chance.
    members = GROUPS[name]
    improved = False
    for k in range(len(members)):
        together, alone = row_variances(_joint(members, k, [Measure("count")]), k)
        assert together.shape == alone.shape == (members[k].rows.shape[0],)
        assert (together <= alone * (1.0 + 1e-9)).all(), (name, k, together / alone)
        improved |= bool((together < alone * 0.99).any())
    assert improved  # the group's other tables always help some table's rows


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(list(GROUPS)),
    rows=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_joint_measurement_moves_within_its_sensitivity_for_a_row_or_a_unit(
    name: str, rows: int, seed: int
) -> None:
    # A row adds one to one of the group's finest cells (a unit: up to m rows, anywhere);
    # the stack's columns have L1 norm at most 1 (sum_k epsilon_k / epsilon), so the count's
    # measurement moves by at most m ||A||_1 <= m, what its noise is calibrated to.
    members = GROUPS[name]
    joint = _joint(members, 0, [Measure("count")], rows=rows)
    strategy = joint.strategy
    assert strategy.sensitivity <= 1.0 + 1e-12
    rng = np.random.default_rng(seed)
    n = strategy.n
    x = rng.integers(0, 50, n).astype(float)
    neighbour = x.copy()
    np.add.at(neighbour, rng.integers(0, n, rows), 1.0)
    moved = np.abs(strategy @ neighbour - strategy @ x).sum()
    assert moved <= rows * strategy.sensitivity * (1 + 1e-12)
    removed = x.copy()
    np.subtract.at(removed, rng.choice(np.flatnonzero(x > 0), 1), 1.0)
    assert np.abs(strategy @ removed - strategy @ x).sum() <= strategy.sensitivity * (1 + 1e-12)


@pytest.mark.parametrize("rows", [1, 3])
def test_the_group_draw_states_the_sensitivity_it_was_calibrated_to(rows: int) -> None:
    # m 2 half ||A||_1 for a mean's pair (v - lo, hi - v: 10 in all per row, plus the
    # fixed-point allowance), m ||A||_1 for a count alone.
    members = GROUPS["uneven epsilons, three tables"]
    joint = _joint(members, 0, [Measure("count")], rows=rows)
    rng = np.random.default_rng(5)
    n = joint.strategy.n
    counts = rng.integers(0, 30, n).astype(float)
    centred = {"x": rng.uniform(-5.0, 5.0, n) * counts}
    mean = measure_group(_joint(members, 0, [Measure("mean", "x")], rows), counts, centred, rng=rng)
    expected = rows * 10.0 * joint.strategy.sensitivity
    assert float(mean["count(x):sensitivity"]) == pytest.approx(expected, rel=1e-4)
    alone = measure_group(joint, counts, {}, rng=rng)
    assert float(alone["count:sensitivity"]) == rows * certified_sensitivity(joint.strategy)


@pytest.mark.parametrize("name", ["cells and a margin", "uneven epsilons, three tables"])
def test_published_members_add_up_to_each_other(name: str) -> None:
    # Every member reads one reconstructed estimate: a coarser table's rows are exactly the
    # sums of the finest table's cells (counts and sums alike), for any noise draw.
    members = GROUPS[name]
    rng = np.random.default_rng(3)
    first = _joint(members, 0, [Measure("count"), Measure("sum", "x")])
    n = first.strategy.n
    counts = rng.integers(0, 30, n).astype(float)
    centred = {"x": rng.uniform(-5.0, 5.0, n) * counts}
    estimates = measure_group(first, counts, centred, rng=rng)
    fine = member_rows(first, estimates)
    for k in range(1, len(members)):
        rows = member_rows(_joint(members, k, [Measure("count"), Measure("sum", "x")]), estimates)
        to_k = lift(members[k].axes, members[0].axes)  # the finest member's cells -> k's
        for vector in ("count", "centred_sum(x)"):
            assert np.allclose(rows[vector].answers, to_k @ fine[vector].answers, atol=1e-9)
        assert (rows["count"].answers >= -1e-9).all()
