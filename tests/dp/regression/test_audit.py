"""Seeded black-box privacy audit of the functional mechanism's release.

For a pair of neighbouring datasets that attains a part's sensitivity, and the event
``S = {noisy part >= the larger of its two exact values}``, an epsilon_k-DP Laplace release has
``|log P_D(S) / P_D'(S)| = epsilon_k`` exactly. We estimate the log-ratio from N seeded runs per
dataset and require it to stay below ``epsilon_k + MARGIN``. The same audit must *fail* when the
sensitivity is understated by 2x (the log-ratio becomes ``2 epsilon_k``) or when the clip is
removed (an out-of-domain row moves the statistic by far more than the bound).

False-failure rate: the estimate's standard error is about 0.024 at N = 5,000
(``sqrt((1-p)/(N p))`` for ``p = 0.5`` and ``p ~ 0.34``, combined); MARGIN = 0.12 is 4.9 standard
errors, so each one-sided check fails a correct mechanism with probability ~5e-7 (normal
approximation; ~3e-6 for the six checks of this file). A 2x bug moves the estimate up by
``epsilon_k ~ 0.39``, i.e. 11 standard errors past the threshold.
The runs are seeded, so the outcome is in any case deterministic.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dp.regression import FeatureDomain, TargetDomain
from dp.regression import functional as fm
from dp.regression.domain import FeatureDomain as _Domain
from dp.regression.sensitivity import BlockSensitivity
from dp.regression.statistics import Design, sufficient_statistics

N = 5_000
MARGIN = 0.12
EPSILON = 1.0
DESIGN = Design(
    features=FeatureDomain.ball(1.0, d=1),
    target=TargetDomain(lower=-1.0, upper=1.0),
    fit_intercept=False,
)
BASE_X = np.array([[0.3], [-0.7], [0.1]])
BASE_Y = np.array([0.2, -0.4, 0.9])


def _release(x_last: float, y_last: float, rng: np.random.Generator) -> fm.FunctionalRelease:
    X = np.vstack([BASE_X, [[x_last]]])
    y = np.append(BASE_Y, y_last)
    exact = sufficient_statistics(X, y, DESIGN)
    return fm.functional_release(exact, DESIGN, epsilon=EPSILON, n=len(y), rng=rng)


def _audited_epsilon(part: str, d_row: tuple[float, float], d2_row: tuple[float, float]) -> float:
    """Empirical ``|log P_D(S) / P_D'(S)|`` for S = {noisy part >= larger exact value}."""
    rng = np.random.default_rng(20261121)
    exact = []
    for x_last, y_last in (d_row, d2_row):
        X = np.vstack([BASE_X, [[x_last]]])
        stats = sufficient_statistics(X, np.append(BASE_Y, y_last), DESIGN)
        exact.append(float(stats.parts()[part][0]))
    threshold = max(exact)
    hits = []
    for row in (d_row, d2_row):
        outs = np.array([_release(*row, rng).noisy.parts()[part][0] for _ in range(N)])
        hits.append(max(1, int((outs >= threshold).sum())))
    return abs(math.log(hits[0] / hits[1]))


def _declared_epsilon(part: str) -> float:
    return _release(0.0, 0.0, np.random.default_rng(0)).epsilons[part]


# (part, row on D, row on D'): each pair attains the part's sensitivity after clipping.
CASES = [
    ("quadratic", (1.0, 0.0), (0.0, 0.0)),  # sum x^2 moves by 1 = bound
    ("cross", (1.0, 1.0), (1.0, -1.0)),  # sum x y moves by 2 = bound
]


@pytest.mark.parametrize(("part", "row", "row2"), CASES)
def test_release_passes_audit(
    part: str, row: tuple[float, float], row2: tuple[float, float]
) -> None:
    eps_k = _declared_epsilon(part)
    measured = _audited_epsilon(part, row, row2)
    # Worst-case pair: the ratio should be close to e^eps_k, not far below (a vacuous audit).
    assert eps_k - MARGIN < measured < eps_k + MARGIN


def test_audit_catches_sensitivity_off_by_two(monkeypatch: pytest.MonkeyPatch) -> None:
    real = fm.l1_sensitivity

    def halved(*args: object, **kwargs: object) -> BlockSensitivity:
        s = real(*args, **kwargs)  # type: ignore[arg-type]
        return BlockSensitivity(
            quadratic=s.quadratic / 2,
            feature_sum=s.feature_sum / 2,
            cross=s.cross / 2,
            target_sum=s.target_sum / 2,
            norm=s.norm,
        )

    monkeypatch.setattr(fm, "l1_sensitivity", halved)
    eps_k = _declared_epsilon("quadratic")
    assert _audited_epsilon("quadratic", (1.0, 0.0), (0.0, 0.0)) > eps_k + MARGIN


def test_audit_catches_missing_clip(monkeypatch: pytest.MonkeyPatch) -> None:
    # D' holds x = 3, outside the declared ball: clipped it is x = 1, unclipped it moves
    # sum x^2 by 9 instead of 1.
    eps_k = _declared_epsilon("quadratic")
    assert _audited_epsilon("quadratic", (0.0, 0.0), (3.0, 0.0)) < eps_k + MARGIN
    monkeypatch.setattr(_Domain, "clip", lambda self, X: X)
    assert _audited_epsilon("quadratic", (0.0, 0.0), (3.0, 0.0)) > eps_k + MARGIN
