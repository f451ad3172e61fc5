"""Privacy audits of the matrix mechanism (dp.matrix.measure / dp.matrix.answer).

Neighbouring histograms are ``x`` and ``x + e_i`` (one record added to cell ``i``), with ``i``
the column attaining ``||A||_1`` so that the audited pair is the worst case. The noisy strategy
answers are sampled in one vectorised call per batch; two same-seed identity tests first pin
that this sampler *is* ``measure`` (bit for bit) and that ``answer`` is a post-processing of it,
which cannot increase the privacy loss (Dwork & Roth 2014, Prop. 2.1).

False-failure rate: each audit of a correct strategy is rejected with probability <= 2e-6
(``dp.reference.empirical_privacy`` at confidence 1 - 1e-6); 6 strategies -> <= 1.2e-5 for the
file. The twins (sensitivity halved) have true loss 2 eps on the corner event; measured eps_lb >=
~1.5.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import dppub.dp.matrix as mx
from dppub.dp.matrix.exact import certified_sensitivity, exact_answers
from dppub.dp.mechanisms import laplace
from tests.empirical_privacy.twins import audit_twins

EPS = 1.0
SEED = 2026


def _strategies() -> dict[str, mx.Strategy]:
    w = mx.all_range(16)
    return {
        "identity": mx.identity_strategy(16),
        "haar": mx.wavelet(16),
        "h2": mx.hierarchical(16, 2),
        "h4": mx.hierarchical(16, 4),
        "opt0": mx.opt0(w, init="random"),
        "kron": mx.kron_strategy(mx.identity_strategy(4), mx.hierarchical(4, 2)),
    }


STRATEGIES = _strategies()


def _measurement_sampler(
    strategy: mx.Strategy, *, sensitivity: float
) -> Callable[[np.ndarray, int, np.random.Generator], np.ndarray]:
    """``n`` noisy strategy answers in one call: ``A x + Lap(sensitivity / eps)`` per row."""

    def sampler(x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        exact = np.broadcast_to(exact_answers(strategy, x), (n, strategy.m))
        return laplace(exact, sensitivity=sensitivity, epsilon=EPS, rng=rng)

    return sampler


def _worst_pair(strategy: mx.Strategy) -> tuple[np.ndarray, np.ndarray]:
    cell = int(np.argmax(np.abs(strategy.dense()).sum(axis=0)))
    x = np.arange(strategy.n, dtype=np.float64) % 3.0
    x_nb = x.copy()
    x_nb[cell] += 1.0
    return x, x_nb


def test_the_vectorised_sampler_is_measure_bit_for_bit() -> None:
    # Same seed, same draws: the audited sampler and the released measurement are one function.
    strategy = STRATEGIES["h2"]
    x, _ = _worst_pair(strategy)
    released = mx.measure(strategy, x, epsilon=EPS, rng=np.random.default_rng(5)).values
    # A release is calibrated to the certified column norm (the float matrix's, rounded up).
    sampled = _measurement_sampler(strategy, sensitivity=certified_sensitivity(strategy))(
        x, 1, np.random.default_rng(5)
    )[0]
    assert np.array_equal(released, sampled)


def test_answer_is_post_processing_of_the_measurement() -> None:
    # The released workload answers are a function of the noisy measurement only.
    strategy, workload = STRATEGIES["h2"], mx.all_range(16)
    x, _ = _worst_pair(strategy)
    res = mx.answer(
        workload,
        x,
        epsilon=EPS,
        strategy=strategy,
        reconstruction="least-squares",
        rng=np.random.default_rng(9),
    )
    meas = mx.measure(strategy, x, epsilon=EPS, rng=np.random.default_rng(9))
    np.testing.assert_allclose(res.answers, workload @ strategy.lstsq(meas.values), atol=1e-9)
    assert res.noise_scale == meas.noise_scale == certified_sensitivity(strategy) / EPS


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_measurement_passes_and_its_twin_is_rejected(name: str) -> None:
    strategy = STRATEGIES[name]
    x, x_nb = _worst_pair(strategy)
    real, twin = audit_twins(
        _measurement_sampler(strategy, sensitivity=strategy.sensitivity),
        _measurement_sampler(strategy, sensitivity=strategy.sensitivity / 2.0),
        seed=SEED,
        dataset=x,
        neighbour=x_nb,
        epsilon=EPS,
        samples=40_000,
        selection_samples=20_000,
    )
    assert real.passed, real.summary()
    assert not twin.passed, twin.summary()
