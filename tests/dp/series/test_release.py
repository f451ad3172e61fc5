"""A series released period by period: neighbours never move what a run measures by more than
the noise is sized for, the ledger's running cost is the loss of what was published, values once
published never change, and the intervals cover."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dppub.dp.errors import InputError
from dppub.dp.matrix.exact import exact_rows
from dppub.dp.series import (
    BinaryTree,
    Identity,
    Relation,
    SquareRoot,
    moving_sum,
    optimized,
    per_period,
    running_total,
    stack,
)
from dppub.dp.series.expected_error import Noise
from dppub.dp.series.period_release import Figures, SeriesRelease, certified


def _release(
    kind: str, horizon: int, relation: Relation, noise: Noise, **kw: bool
) -> SeriesRelease:
    workload = stack(per_period(horizon), running_total(horizon))
    strategy = {
        "identity": Identity(horizon=horizon),
        "tree": BinaryTree(horizon=horizon),
        "sqrt": SquareRoot(horizon=horizon),
        "optimized": optimized(workload),
    }[kind]
    return SeriesRelease(
        strategy=strategy, workload=workload, relation=relation, noise=noise, budget=0.5, **kw
    )


@settings(max_examples=120, deadline=None, derandomize=True)
@given(
    kind=st.sampled_from(["identity", "tree", "sqrt", "optimized"]),
    horizon=st.integers(2, 9),
    k=st.integers(1, 4),
    m=st.integers(1, 3),
    noise=st.sampled_from(["gaussian", "laplace"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_neighbour_never_moves_a_runs_measurements_beyond_the_sensitivity(
    kind: str, horizon: int, k: int, m: int, noise: Noise, seed: int
) -> None:
    # One unit added: up to m rows (each of magnitude up to 1e6 here) in up to k periods.
    relation = Relation(max_periods_per_unit=k, max_rows_per_unit=m)
    release = _release(kind, horizon, relation, noise)
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 10**6, (horizon, 1)).astype(np.float64) * rng.random()
    unit = np.zeros((horizon, 1))
    periods = rng.choice(horizon, size=min(k, horizon), replace=False)
    unit[periods, 0] = rng.integers(0, m + 1, periods.size)
    order = 1 if noise == "laplace" else 2
    for t in range(horizon):
        a = release.strategy.matrix[: release.strategy.measured_by(t), : t + 1]
        moved = exact_rows(a, (x + unit)[: t + 1, 0]) - exact_rows(a, x[: t + 1, 0])
        bound = certified(
            release.strategy.matrix[: release.strategy.measured_by(t)], relation, noise
        )
        assert float(np.linalg.norm(moved, ord=order)) <= bound
        assert bound <= release.sensitivity


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
@pytest.mark.parametrize("kind", ["identity", "tree", "sqrt", "optimized"])
def test_the_ledger_holds_the_loss_of_what_was_published(kind: str, noise: Noise) -> None:
    # rho_t = Delta_t^2 / (2 sigma^2) (epsilon_t = Delta_t / b) of the rows measured by t,
    # recomputed here from the noise the release adds; runs that skip periods charge the same
    # total, and the horizon's runs charge the declared budget.
    relation = Relation(max_periods_per_unit=3, max_rows_per_unit=2)
    release = _release(kind, 12, relation, noise)
    scale = release.std if noise == "gaussian" else release.std / math.sqrt(2.0)
    for t in range(12):
        rows = release.strategy.matrix[: release.strategy.measured_by(t)]
        delta = certified(rows, relation, noise)
        proven = delta**2 / (2.0 * scale**2) if noise == "gaussian" else delta / scale
        assert release.loss(t) == pytest.approx(proven, rel=1e-12)
    assert release.loss(11) == pytest.approx(0.5, rel=1e-12)
    for published in ([0, 1, 2, 5, 11], list(range(12)), [3, 11]):
        after: int | None = None
        charged = 0.0
        for t in published:
            charged += release.charge(t, after)
            after = t
        assert charged == pytest.approx(release.loss(11), rel=1e-12)
    with pytest.raises(InputError, match="published once only"):
        release.charge(4, 4)


def _run(
    release: SeriesRelease, truth: np.ndarray, rng: np.random.Generator
) -> list[tuple[Figures, np.ndarray]]:
    """Every period published in turn: (figures, period values) after each run."""
    measured = np.zeros((0, truth.shape[1]))
    published = np.zeros((0, truth.shape[1]))
    runs = []
    after: int | None = None
    for t in range(release.strategy.horizon):
        new = release.measure(t, after, truth[: t + 1], rng=rng)
        measured = np.vstack([measured, new])
        figures, values = release.figures(measured, published)
        published = values
        after = t
        runs.append((figures, values))
    return runs


def test_without_revisions_published_values_never_change_and_totals_add_up() -> None:
    horizon = 24
    workload = stack(per_period(horizon), running_total(horizon), moving_sum(horizon, 12))
    release = SeriesRelease(
        strategy=optimized(workload),
        workload=workload,
        relation=Relation(max_periods_per_unit=12),
        noise="gaussian",
        budget=1.0,
    )
    truth = np.random.default_rng(1).integers(50, 500, (horizon, 3)).astype(np.float64)
    runs = _run(release, truth, np.random.default_rng(2))
    final = runs[-1][1]
    running = 0.0
    for t, (figures, values) in enumerate(runs):
        assert np.array_equal(values, final[: t + 1])  # the past as published, unchanged
        due = workload.periods[figures.figure] == t
        assert due.all() and figures.values.shape == (3, 3)  # period, total, 12-month sum
        running = running + values[t]
        assert np.allclose(figures.values[1], running, rtol=1e-9, atol=1e-6)
        assert np.allclose(figures.values[0], values[t])


@pytest.mark.parametrize("revisions", [False, True])
@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
def test_the_95_percent_intervals_cover(noise: Noise, revisions: bool) -> None:
    # 300 runs of a 12-period series, 2 groups: for each run the figures of its last period
    # (24 with revisions: every period's value and total; 2 without). Coverage 0.95 over at
    # least 600 intervals, correlated within a run: the band [0.92, 0.98] is about 3 standard
    # errors of a 600-interval binomial wide on each side (false-failure rate below 0.3%; the
    # seeds are fixed).
    release = _release(
        "optimized", 12, Relation(max_periods_per_unit=2), noise, revisions=revisions
    )
    truth = np.random.default_rng(3).integers(0, 200, (12, 2)).astype(np.float64)
    rng = np.random.default_rng(4)
    hits, total = 0, 0
    for _ in range(300):
        measured = np.vstack([release.measure(11, None, truth, rng=rng)])
        past = np.zeros((0, 2))
        if not revisions:  # the past as a previous run published it, from the same draws
            for t in range(11):
                rows = release.strategy.measured_by(t)
                _, past = release.figures(measured[:rows], past)
        figures, _ = release.figures(measured, past)
        exact = release.workload.matrix[figures.figure] @ truth
        hits += int(np.sum((figures.ci_low <= exact) & (exact <= figures.ci_high)))
        total += exact.size
    assert total >= 600
    assert 0.92 <= hits / total <= 0.98, hits / total
