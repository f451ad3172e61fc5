"""Seeded privacy audit: answers on neighbouring histograms are eps-indistinguishable.

For neighbours ``x`` and ``x' = x + e_i`` the strategy answers differ by ``a = A e_i``. Take the
event ``E = {sign(a_j) (r_j - (A x')_j) > 0 for every j with a_j != 0}``. With Laplace noise of
scale ``b`` per row, ``P_x'(E) = 2^-k`` and ``P_x(E) = 2^-k exp(-||a||_1 / b)``, so the log-ratio
is exactly ``||a||_1 / b``: it equals ``epsilon`` for the column of maximal L1 norm when
``b = ||A||_1 / epsilon`` (the mechanism is tight there), and ``2 epsilon`` if the sensitivity
were under-estimated by 2x. The test estimates the log-ratio from seeded samples and requires it
below ``1.5 epsilon``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

import dppub.dp.matrix as mx
from dppub.dp.matrix.exact import certified_sensitivity
from dppub.dp.mechanisms import laplace

pytestmark = pytest.mark.slow  # seeded privacy audits

EPS = 1.0
TRIALS = 8000


def _log_ratio(
    strategy: mx.Strategy,
    release: Callable[[np.ndarray, np.random.Generator], np.ndarray],
    seed: int,
) -> tuple[float, float]:
    """Estimated ``log P_x'(E) - log P_x(E)`` and its standard error (delta method)."""
    dense = strategy.dense()
    cell = int(np.argmax(np.abs(dense).sum(axis=0)))  # the column that attains ||A||_1
    x = np.zeros(strategy.n)
    x[cell] = 3.0
    x_nb = x.copy()
    x_nb[cell] += 1.0
    a = dense[:, cell]
    rows = np.flatnonzero(a)
    centre = (dense @ x_nb)[rows]
    sign = np.sign(a[rows])
    rng = np.random.default_rng(seed)
    hits = []
    for hist in (x_nb, x):
        count = 0
        for _ in range(TRIALS):
            r = release(hist, rng)
            count += bool(np.all(sign * (r[rows] - centre) > 0))
        hits.append(count)
    p_nb, p = hits[0] / TRIALS, hits[1] / TRIALS
    se = math.sqrt((1 - p_nb) / hits[0] + (1 - p) / hits[1])
    return math.log(p_nb / p), se


@pytest.mark.parametrize(
    "strategy",
    [
        mx.hierarchical(8, 2),
        mx.nested_blocks(8, [4, 1], [0.7, 1.0]),
        mx.marginals_strategy((2, 3), {(0,): 0.7, (0, 1): 0.3}),
    ],
)
def test_measurement_is_epsilon_indistinguishable_and_tight(strategy: mx.Strategy) -> None:
    # k = 4 (H2 over 8 cells): P_x'(E) = 1/16 -> ~500 hits, P_x(E) = e^-1/16 -> ~184 hits, so the
    # log-ratio's standard error is ~0.085. Threshold 1.5 eps is 0.5 (~6 standard errors) above
    # the true value eps: false-failure rate ~1e-9 (normal approximation).
    def release(hist: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return mx.measure(strategy, hist, epsilon=EPS, rng=rng).values

    est, se = _log_ratio(strategy, release, seed=2024)
    assert est < 1.5 * EPS
    assert se < 0.12
    # The bound is tight (the audit has power): the estimate is within 6 s.e. of eps.
    assert abs(est - EPS) < 6 * se


def test_audit_catches_a_sensitivity_off_by_two() -> None:
    # The same audit against a deliberately broken release that uses ||A||_1 / 2: the true
    # log-ratio is 2 eps, 0.5 above the threshold (~5 standard errors), so this fails to detect
    # the bug with probability ~1e-7.
    strategy = mx.hierarchical(8, 2)

    def broken(hist: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return laplace(strategy @ hist, sensitivity=strategy.sensitivity / 2, epsilon=EPS, rng=rng)

    est, _ = _log_ratio(strategy, broken, seed=7)
    assert est > 1.5 * EPS


def test_answer_reports_the_calibrated_noise_scale() -> None:
    w = mx.all_range(8)
    res = mx.answer(
        w, np.ones(8), epsilon=EPS, strategy=mx.hierarchical(8, 2), rng=np.random.default_rng(0)
    )
    columns = np.abs(mx.hierarchical(8, 2).dense()).sum(axis=0).max()
    certified = certified_sensitivity(mx.hierarchical(8, 2))  # with the answers' rounding
    assert columns < certified <= columns * (1 + 1e-4)
    assert res.noise_scale == certified / EPS
