"""Seeded black-box privacy audit of the functional mechanism's release.

Neighbours add or remove one record. For a pair of neighbouring datasets (``D`` and ``D`` plus
one row) that attains a part's sensitivity, and the event
``S = {noisy part >= the larger of its two exact values}``, an epsilon_k-DP Laplace release has
``|log P_D(S) / P_D'(S)| = epsilon_k`` exactly. We estimate the log-ratio from N seeded runs per
dataset and require it to stay below ``epsilon_k + MARGIN``. The same audit must *fail* when the
sensitivity is understated by 2x (the log-ratio becomes ``2 epsilon_k``); a missing clip (an
added out-of-domain row would move the statistic by far more than the bound) is refused before
any noise, by the fixed-point quantiser that checks every value against its declared bound.

False-failure rate: the estimate's standard error is at most about 0.027 at N = 4,000
(``sqrt((1-p)/(N p))`` for ``p = 0.5`` and ``p ~ 0.3``, combined); MARGIN = 0.12 is 4.4 standard
errors, so each one-sided check fails a correct mechanism with probability ~5e-6 (normal
approximation; ~4e-5 for the eight checks of this file). A 2x bug on the audited quadratic
part (``epsilon_k = 0.5``) moves the estimate up by 0.5, i.e. 13 standard errors past the threshold.
The runs are seeded, so the outcome is in any case deterministic.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dppub.dp.errors import InvariantError
from dppub.dp.numerics.domains import FeatureDomain, TargetDomain
from dppub.dp.numerics.domains import FeatureDomain as _Domain
from dppub.dp.reference.frame_regression import sufficient_statistics
from dppub.dp.regression import functional as fm
from dppub.dp.regression.sensitivity import PARTS, BlockSensitivity, l1_sensitivity
from dppub.dp.regression.statistics import Design

pytestmark = pytest.mark.slow  # seeded privacy audits

N = 4_000
MARGIN = 0.12
EPSILON = 1.0
DESIGNS = {
    intercept: Design(
        features=FeatureDomain.ball(1.0, d=1),
        target=TargetDomain(lower=-1.0, upper=1.0),
        fit_intercept=intercept,
    )
    for intercept in (False, True)
}
BASE_X = np.array([[0.3], [-0.7], [0.1]])
BASE_Y = np.array([0.2, -0.4, 0.9])
Row = tuple[float, float] | None  # the added row (x, y), or None for the base dataset D


def _data(row: Row) -> tuple[np.ndarray, np.ndarray]:
    if row is None:
        return BASE_X, BASE_Y
    return np.vstack([BASE_X, [[row[0]]]]), np.append(BASE_Y, row[1])


def _release(row: Row, rng: np.random.Generator, *, intercept: bool) -> fm.FunctionalRelease:
    design = DESIGNS[intercept]
    exact = sufficient_statistics(*_data(row), design)
    return fm.functional_release(exact, design, epsilon=EPSILON, rng=rng)


def _noisy_parts(row: Row, part: str, rng: np.random.Generator, *, intercept: bool) -> np.ndarray:
    """``N`` independent releases of ``part`` on one dataset (statistics computed once)."""
    design = DESIGNS[intercept]
    exact = sufficient_statistics(*_data(row), design)
    return np.array(
        [
            fm.functional_release(exact, design, epsilon=EPSILON, rng=rng).noisy.parts()[part][0]
            for _ in range(N)
        ]
    )


def _audited_epsilon(part: str, row: Row, row2: Row, *, intercept: bool = False) -> float:
    """Empirical ``|log P_D(S) / P_D'(S)|`` for S = {noisy part >= larger exact value}."""
    rng = np.random.default_rng(20261121)
    exact = [
        float(sufficient_statistics(*_data(r), DESIGNS[intercept]).parts()[part][0])
        for r in (row, row2)
    ]
    threshold = max(exact)
    hits = []
    for r in (row, row2):
        outs = _noisy_parts(r, part, rng, intercept=intercept)
        hits.append(max(1, int((outs >= threshold).sum())))
    return abs(math.log(hits[0] / hits[1]))


def _declared_epsilon(part: str, *, intercept: bool = False) -> float:
    return _release(None, np.random.default_rng(0), intercept=intercept).epsilons[part]


# (part, intercept, row added to D'): each addition attains the part's sensitivity after clipping.
CASES = [
    ("quadratic", False, (1.0, 0.0)),  # sum x^2 moves by 1 = bound
    ("cross", False, (1.0, 1.0)),  # sum x y moves by 1 = bound
    ("count", True, (0.0, 0.0)),  # n moves by 1 = bound, whatever the row
]


@pytest.mark.parametrize(("part", "intercept", "row"), CASES)
def test_release_passes_audit(part: str, intercept: bool, row: tuple[float, float]) -> None:
    eps_k = _declared_epsilon(part, intercept=intercept)
    measured = _audited_epsilon(part, None, row, intercept=intercept)
    # Worst-case pair: the ratio should be close to e^eps_k, not far below (a vacuous audit).
    assert eps_k - MARGIN < measured < eps_k + MARGIN


def test_audit_catches_sensitivity_off_by_two(monkeypatch: pytest.MonkeyPatch) -> None:
    real = l1_sensitivity  # the function functional.py calls, patched there below

    def halved(
        dom: FeatureDomain, target: TargetDomain, *, fit_intercept: bool
    ) -> BlockSensitivity:
        s = real(dom, target, fit_intercept=fit_intercept)
        return BlockSensitivity(**{k: s.part(k) / 2 for k in PARTS}, norm=s.norm)

    monkeypatch.setattr(fm, "l1_sensitivity", halved)
    eps_k = _declared_epsilon("quadratic")
    assert _audited_epsilon("quadratic", None, (1.0, 0.0)) > eps_k + MARGIN


def test_missing_clip_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    # D' adds x = 3, outside the declared ball: clipped it is x = 1, unclipped it would move
    # sum x^2 by 9 instead of 1. Without the clip the statistics are never formed.
    eps_k = _declared_epsilon("quadratic")
    assert _audited_epsilon("quadratic", None, (3.0, 0.0)) < eps_k + MARGIN
    monkeypatch.setattr(_Domain, "clip", lambda self, X: X)
    with pytest.raises(InvariantError, match="exceeds its declared magnitude bound"):
        _audited_epsilon("quadratic", None, (3.0, 0.0))
