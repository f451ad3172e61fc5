"""The exponential mechanism: its selection probabilities and its zCDP calibration."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dp.errors import ConfigError
from dp.mechanisms import exponential

SCORES = [0.0, 1.0, 3.0]
RHO = 0.125  # epsilon = sqrt(8 rho) = 1


def _expected(sensitivity: float) -> np.ndarray:
    eps = math.sqrt(8 * RHO)
    w = np.exp(eps * np.asarray(SCORES) / (2 * sensitivity))
    return w / w.sum()


@pytest.mark.parametrize("sensitivity", [1.0, 3.0])
def test_seeded_selection_follows_the_softmax(sensitivity: float) -> None:
    rng = np.random.default_rng(2026)
    picks = [exponential(SCORES, sensitivity=sensitivity, rho=RHO, rng=rng) for _ in range(6000)]
    counts = np.bincount(picks, minlength=3)
    # chi-square goodness of fit; fixed seed, false-failure rate 1e-6 for a fresh one
    assert stats.chisquare(counts, 6000 * _expected(sensitivity)).pvalue > 1e-6


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
