"""What one neighbour can move: every candidate marginal AIM measures (by at most m in L1 and
L2 when a unit has at most m rows), and every score its exponential mechanism ranks (by at most
m w_r), for neighbours one row or one unit apart."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dppub.dp.synthetic import (
    candidates,
    marginal_answers,
    project_answer,
    quality,
    workload_cliques,
)
from dppub.dp.synthetic.pgm import Clique

DOMAIN = {"a": 3, "b": 2, "c": 4, "d": 2}


@st.composite
def neighbours(draw: st.DrawFn) -> tuple[dict[str, np.ndarray], np.ndarray, int]:
    """A table (codes per column), the rows of one unit removed from it, and m."""
    n = draw(st.integers(min_value=1, max_value=40))
    m = draw(st.integers(min_value=1, max_value=5))
    codes = {
        c: np.array(draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n)))
        for c, k in DOMAIN.items()
    }
    unit = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=m, unique=True))
    keep = np.setdiff1d(np.arange(n), unit)
    return codes, keep, m


def _answers(codes: dict[str, np.ndarray], rows: np.ndarray, k: int) -> dict[Clique, np.ndarray]:
    workload = workload_cliques(list(DOMAIN), k)
    scanned = marginal_answers({c: v[rows] for c, v in codes.items()}, DOMAIN, workload)
    return {cl: project_answer(scanned, DOMAIN, cl) for cl in candidates(workload)}


@settings(max_examples=30, deadline=None)
@given(data=neighbours(), k=st.integers(1, 3))
def test_a_unit_moves_each_candidate_marginal_by_at_most_m(
    data: tuple[dict[str, np.ndarray], np.ndarray, int], k: int
) -> None:
    codes, keep, m = data
    everyone = np.arange(len(codes["a"]))
    with_unit, without = _answers(codes, everyone, k), _answers(codes, keep, k)
    removed = len(everyone) - len(keep)
    for cl, x in with_unit.items():
        diff = x - without[cl]
        assert np.abs(diff).sum() == removed <= m  # L1: one count per removed row
        assert np.sqrt((diff**2).sum()) <= m  # L2: at most m, all rows in one cell


@settings(max_examples=30, deadline=None)
@given(data=neighbours(), sigma=st.floats(0.1, 50.0), seed=st.integers(0, 2**31))
def test_a_unit_moves_each_score_by_at_most_m_w(
    data: tuple[dict[str, np.ndarray], np.ndarray, int], sigma: float, seed: int
) -> None:
    codes, keep, m = data
    everyone = np.arange(len(codes["a"]))
    weights = candidates(workload_cliques(list(DOMAIN), 2))
    with_unit, without = _answers(codes, everyone, 2), _answers(codes, keep, 2)
    rng = np.random.default_rng(seed)
    for cl, w in weights.items():
        model = rng.uniform(0, 5, size=with_unit[cl].size)  # public: the same on both sides
        moved = quality(w, with_unit[cl], model, sigma) - quality(w, without[cl], model, sigma)
        assert abs(moved) <= m * w + 1e-9
