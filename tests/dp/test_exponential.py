"""The exponential mechanism: its selection probabilities and its zCDP calibration."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dppub.dp.errors import ConfigError
from dppub.dp.mechanisms import exponential, noisy_max

SCORES = [0.0, 1.0, 3.0]
RHO = 0.125  # epsilon = sqrt(8 rho) = 1


def _expected(sensitivity: float) -> np.ndarray:
    eps = math.sqrt(8 * RHO)
    w = np.exp(eps * np.asarray(SCORES) / (2 * sensitivity))
    return np.asarray(w / w.sum())


@pytest.mark.slow
@pytest.mark.parametrize("sensitivity", [1.0, 3.0])
def test_seeded_selection_follows_the_softmax(sensitivity: float) -> None:
    rng = np.random.default_rng(2026)
    picks = [exponential(SCORES, sensitivity=sensitivity, rho=RHO, rng=rng) for _ in range(6000)]
    counts = np.bincount(picks, minlength=3)
    # chi-square goodness of fit; fixed seed, false-failure rate 1e-6 for a fresh one
    assert stats.chisquare(counts, 6000 * _expected(sensitivity)).pvalue > 1e-6


@pytest.mark.slow
def test_release_selection_follows_the_softmax() -> None:
    # OpenDP's sampler (not seedable): false-failure rate 1e-6
    picks = [exponential(SCORES, sensitivity=1.0, rho=RHO) for _ in range(1500)]
    counts = np.bincount(picks, minlength=3)
    assert stats.chisquare(counts, 1500 * _expected(1.0)).pvalue > 1e-6


@pytest.mark.parametrize(
    ("scores", "sensitivity", "rho"),
    [([], 1.0, 0.1), ([1.0], 0.0, 0.1), ([1.0], 1.0, 0.0), ([math.nan], 1.0, 0.1)],
)
def test_bad_inputs_are_refused(scores: list[float], sensitivity: float, rho: float) -> None:
    with pytest.raises(ConfigError):
        exponential(scores, sensitivity=sensitivity, rho=rho)


def test_pure_noisy_max_draws_exponential_noise_at_two_sensitivity_over_epsilon() -> None:
    # Scores 0 and 1, sensitivity 0.5, epsilon 1: scale 1, and with exponential noise the better
    # index wins with probability 1 - e^-1 / 2 = 0.816 (Gumbel noise, the exponential
    # mechanism, gives e / (1 + e) = 0.731). 4,000 seeded draws: sd 0.006, so 0.03 is 5 sd (a
    # false failure below 1e-6).
    rng = np.random.default_rng(7)
    wins = np.mean(
        [noisy_max([0.0, 1.0], sensitivity=0.5, epsilon=1.0, rng=rng) for _ in range(4000)]
    )
    assert abs(wins - (1 - math.exp(-1) / 2)) < 0.03, wins
    with pytest.raises(ConfigError, match="sensitivity > 0"):
        noisy_max([0.0, 1.0], sensitivity=0.0, epsilon=1.0)
    with pytest.raises(ConfigError, match="at least one candidate"):
        noisy_max([], sensitivity=1.0, epsilon=1.0)
