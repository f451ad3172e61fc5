"""Quantiles with margins: every cell and margin gets its own quantiles from one Kronecker
measurement (the counts' strategy times the CDF tree); its sensitivity and accuracy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dppub.dp import matrix
from dppub.dp.tables.margins import STAR, Dimension
from dppub.dp.tables.quantiles import cdf_strategy, joint_rank_errors
from dppub.dp.tables.split import Measure, split_epsilon
from dppub.dp.tables.table import TableDesign, release_table, table_strategy

EDGES = tuple(np.linspace(0.0, 365.0, 1025))


def _design(shape: tuple[int, ...], edges: tuple[float, ...], at: tuple[float, ...]) -> TableDesign:
    measures = [Measure("quantile", "w", at)]
    return TableDesign(
        keys=tuple(f"k{i}" for i in range(len(shape))),
        dims=tuple(Dimension(tuple(f"v{j}" for j in range(n))) for n in shape),
        measures=tuple(measures),
        components=split_epsilon(measures, {"w": (edges[0], edges[-1])}, 1.0),
        bounds={"w": (edges[0], edges[-1])},
        edges={"w": edges},
        margins=True,
    )


def test_every_cell_and_margin_gets_its_own_median_within_two_percentile_points() -> None:
    # 2 x 2 cells of 6,000 lognormal waits each (so margins of 12,000 and a total of 24,000),
    # 1,024 bins, epsilon 1, 5 seeds. A margin's median is its rows' median, not a function of
    # its cells' (the test reads it off the pooled rows). The worst CDF point's rank noise is
    # 15.6 rows for a cell, 22.1 for a margin, 31.2 for the total (joint_rank_errors); 2 points
    # are 120 rows for a cell, 7.6 of its standard deviations (a sum of Laplace terms exceeds
    # that with probability below exp(-7.6 sqrt 2) = 2.2e-5), more for margins: the 45 checks
    # fail with probability below 1e-3 for a random seed, never with these fixed seeds.
    data = np.random.default_rng(0)
    cells = [np.clip(data.lognormal(mu, 0.8, 6000), 0, 365) for mu in (2.0, 2.5, 3.0, 3.5)]
    hist = np.stack([np.histogram(c, bins=EDGES)[0] for c in cells]).ravel().astype(float)
    design = _design((2, 2), EDGES, (0.5,))
    rank = joint_rank_errors(design.rows().workload(), table_strategy(design), 1024, 1.0, 1)[0]
    n = np.array([6000.0] * 4 + [12000.0] * 4 + [24000.0])  # cells, margins, total
    assert (0.02 * n / rank).min() > 7.6
    worst = 0.0
    for seed in range(5):
        release = release_table(design, hist, {}, {"w": hist}, rng=np.random.default_rng(seed))
        answers = release.answers
        assert len(answers) == 9  # 4 cells, 2 + 2 margins, the total
        for _, row in answers.iterrows():
            pooled = np.concatenate(
                [
                    cells[2 * i + j]
                    for i in range(2)
                    for j in range(2)
                    if row["k0"] in (f"v{i}", STAR) and row["k1"] in (f"v{j}", STAR)
                ]
            )
            worst = max(worst, abs(float(np.mean(pooled <= row["answer"])) - 0.5))
            assert row["ci_low"] <= row["answer"] <= row["ci_high"]
    assert worst <= 0.02, worst


@settings(max_examples=20, deadline=None)
@given(
    shape=st.sampled_from([(1,), (3,), (2, 2), (2, 3)]),
    bins=st.sampled_from([4, 16, 64]),
    rows=st.integers(1, 3),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_joint_cdf_moves_within_its_sensitivity_for_a_units_rows(
    shape: tuple[int, ...], bins: int, rows: int, seed: int
) -> None:
    # A row adds one to one (cell, bin) of the cells' histograms: through the Kronecker
    # strategy it moves a cell's CDF and the CDF of every margin holding the cell. A unit's m
    # rows anywhere move the measurement by at most the sensitivity the noise is calibrated to
    # (m ||S||_1 ||T||_1), and a single row's worst cell reaches it exactly (it is tight).
    rng = np.random.default_rng(seed)
    edges = tuple(np.linspace(0.0, 1.0, bins + 1))
    design = _design(shape, edges, (0.5,))
    groups = table_strategy(design)
    strategy = matrix.kron_strategy(groups, cdf_strategy(bins))
    sensitivity = joint_rank_errors(design.rows().workload(), groups, bins, 1.0, rows)[2]
    size = int(np.prod(shape)) * bins
    x = rng.integers(0, 20, size).astype(float)
    neighbour = x.copy()
    np.add.at(neighbour, rng.integers(0, size, rows), 1.0)
    moved = np.abs(strategy @ neighbour - strategy @ x).sum()
    assert moved <= sensitivity * (1 + 1e-9)
    columns = np.abs(strategy @ np.eye(size)).sum(axis=0)
    assert rows * columns.max() == pytest.approx(sensitivity)
