"""Privacy audits of DP regression (functional mechanism) and DP k-means releases.

Neighbours add or remove one record. For each released part of the functional mechanism (the
perturbed sufficient statistics, :meth:`SufficientStatistics.parts`), a dataset and the same
dataset plus a worst-case row (a corner of the declared domain, which attains every part's
add/remove L1 sensitivity) are audited with the Laplace noise the release actually uses (the
``sensitivity`` and ``epsilons`` reported by :func:`functional_release`), vectorised; the twin
understates that sensitivity by 2x. The whole release (all parts, adaptive split included) is
then audited end to end through the public ``functional_release`` call (per-call, so fewer
samples), against its twin run at twice the epsilon it claims, at both budget splits in use
(``quadratic_weight`` 1 and :data:`~dp.regression.functional.SHRUNK_QUADRATIC_WEIGHT`).

DP k-means (seed 003): the per-iteration releases, noisy per-cluster counts and coordinate sums
at ``epsilon / (2T)`` each with their declared sensitivities, are audited the same way. (An end
to end audit of the published centres has no power: the centre ``noisy sum / noisy count``
hides most of the loss, so a 2x twin is not rejected with ~10^4 per-call samples.)

Category features: each part released on a design with a one-hot block, at the split
``method="auto"`` uses, against the row that attains the one-hot sensitivity bound.

False-failure rate: every audit of a correct release is rejected with probability <= 2e-6
(``dp.reference.empirical_privacy``, confidence 1 - 1e-6); 19 such audits here -> <= 4e-5 for the
file.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from dppub.dp.kmeans import COUNT_SENSITIVITY, sum_sensitivity
from dppub.dp.mechanisms import laplace
from dppub.dp.numerics.domains import FeatureDomain, TargetDomain
from dppub.dp.reference.empirical_privacy import looped
from dppub.dp.reference.frame_regression import sufficient_statistics
from dppub.dp.regression.auto import INTERCEPT_SHARE
from dppub.dp.regression.encoding import FeatureEncoding
from dppub.dp.regression.functional import SHRUNK_QUADRATIC_WEIGHT, functional_release
from dppub.dp.regression.sensitivity import PARTS
from dppub.dp.regression.statistics import Design, SufficientStatistics
from dppub.dp.schema import ColumnSpec
from tests.empirical_privacy.twins import audit_twins

EPS = 1.0
DESIGNS = {
    "ball": Design(
        features=FeatureDomain.ball(1.0, d=2),
        target=TargetDomain(lower=-1.0, upper=1.0),
        fit_intercept=True,
    ),
    "box": Design(
        features=FeatureDomain.box(0.0, 1.0, d=2),
        target=TargetDomain(lower=0.0, upper=4.0),
        fit_intercept=True,
    ),
}
# Worst-case added rows: x at the corner maximising ||x||_1 (ball: R (1, 1) / sqrt(2)), y at
# the end of the target interval farthest from its midpoint.
WORST = {"ball": ([2**-0.5, 2**-0.5], 1.0), "box": ([1.0, 1.0], 4.0)}
BASE_X = {"ball": np.array([[0.3, -0.2], [-0.5, 0.1]]), "box": np.array([[0.2, 0.9], [0.6, 0.4]])}
BASE_Y = {"ball": np.array([0.2, -0.4]), "box": np.array([1.0, 3.0])}


def _stats(domain: str, *, with_row: bool) -> SufficientStatistics:
    X, y = BASE_X[domain], BASE_Y[domain]
    if with_row:
        x_new, y_new = WORST[domain]
        X, y = np.vstack([X, [x_new]]), np.append(y, y_new)
    return sufficient_statistics(X, y, DESIGNS[domain])


def _part_sampler(
    part: str, *, sensitivity: float, epsilon: float
) -> Callable[[SufficientStatistics, int, np.random.Generator], np.ndarray]:
    def sampler(stats: SufficientStatistics, n: int, rng: np.random.Generator) -> np.ndarray:
        exact = stats.parts()[part]
        batch = np.broadcast_to(exact, (n, exact.size))
        return laplace(batch, sensitivity=sensitivity, epsilon=epsilon, rng=rng)

    return sampler


@pytest.mark.parametrize("domain", list(DESIGNS))
@pytest.mark.parametrize("part", PARTS)
def test_each_released_part_passes_and_its_twin_is_rejected(domain: str, part: str) -> None:
    d, d_nb = _stats(domain, with_row=False), _stats(domain, with_row=True)
    # The noise parameters the release really uses for this part (public, data-independent up
    # to the adaptive split, which only moves epsilon_k, not the sensitivity).
    rel = functional_release(d, DESIGNS[domain], epsilon=EPS, rng=np.random.default_rng(0))
    sens = rel.sensitivity.part(part)
    real, twin = audit_twins(
        _part_sampler(part, sensitivity=sens, epsilon=EPS),
        _part_sampler(part, sensitivity=sens / 2.0, epsilon=EPS),
        seed=7,
        dataset=d,
        neighbour=d_nb,
        epsilon=EPS,
        samples=40_000,
    )
    assert real.passed, real.summary()
    assert real.eps_lb > 0.7 * EPS, real.summary()  # the worst row attains the sensitivity
    assert not twin.passed, twin.summary()


@pytest.mark.parametrize("weight", [1.0, SHRUNK_QUADRATIC_WEIGHT])
def test_functional_release_end_to_end_passes_and_its_twin_is_rejected(weight: float) -> None:
    # Without an intercept (two parts, quadratic and cross: half the budget each at weight 1,
    # 28% / 72% at the weight LinearRegression and TraceRegression use), on one feature in the
    # unit ball; the added row (1, 1) attains both sensitivities, so the loss on the corner
    # event is the full epsilon whatever the split. Per-call sampling: 2,000 test samples per
    # input.
    design = Design(
        features=FeatureDomain.ball(1.0, d=1),
        target=TargetDomain(lower=-1.0, upper=1.0),
        fit_intercept=False,
    )
    X, y = np.array([[0.3], [-0.7], [0.1]]), np.array([0.2, -0.4, 0.9])
    d = sufficient_statistics(X, y, design)
    d_nb = sufficient_statistics(np.vstack([X, [[1.0]]]), np.append(y, 1.0), design)

    def release(
        epsilon: float,
    ) -> Callable[[SufficientStatistics, np.random.Generator], np.ndarray]:
        def mech(stats: SufficientStatistics, rng: np.random.Generator) -> np.ndarray:
            rel = functional_release(
                stats, design, epsilon=epsilon, rng=rng, quadratic_weight=weight
            )
            parts = rel.noisy.parts()
            return np.concatenate([parts[k] for k in PARTS])

        return mech

    real, twin = audit_twins(
        looped(release(EPS)),
        looped(release(2 * EPS)),
        seed=1,
        dataset=d,
        neighbour=d_nb,
        epsilon=EPS,
        samples=2_000,
        selection_samples=1_000,
    )
    assert real.passed, real.summary()
    assert not twin.passed, twin.summary()


@pytest.mark.parametrize("release", ["counts", "sums"])
def test_kmeans_releases_pass_and_their_twins_are_rejected(release: str) -> None:
    # One Lloyd iteration, one cluster: its count is n and its sum the sum of the centred rows
    # (module doc of dp.kmeans); each is released at epsilon / (2T) = EPS / 2.
    domain = FeatureDomain.box(-1.0, 1.0, d=3)
    centred = domain.translated(domain.midpoint())
    rows = np.array([[0.5, -0.25, 0.0], [-1.0, 0.75, 0.5]])
    worst = np.vstack([rows, [[1.0, -1.0, 1.0]]])  # a corner: ||x||_1 = sum_j a_j
    stat: Callable[[np.ndarray], np.ndarray] = {
        "counts": lambda r: np.array([float(len(r))]),
        "sums": lambda r: r.sum(axis=0),
    }[release]
    sens = COUNT_SENSITIVITY if release == "counts" else sum_sensitivity(centred)
    eps_half = EPS / 2.0

    def sampler(factor: float) -> Callable[[np.ndarray, int, np.random.Generator], np.ndarray]:
        def draw(r: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
            exact = stat(domain.clip(r) - domain.midpoint())
            batch = np.broadcast_to(exact, (n, exact.size))
            return laplace(batch, sensitivity=sens * factor, epsilon=eps_half, rng=rng)

        return draw

    real, twin = audit_twins(
        sampler(1.0),
        sampler(0.5),
        seed=4,
        dataset=rows,
        neighbour=worst,
        epsilon=eps_half,
        samples=40_000,
    )
    assert real.passed and real.eps_lb > 0.6 * eps_half, real.summary()
    assert not twin.passed, twin.summary()


# --- one-hot blocks at the auto split ---------------------------------------------------------

ONEHOT = FeatureEncoding.from_specs(
    [
        ColumnSpec(name="x", type="float", bounds=(0.0, 1.0)),
        ColumnSpec(name="c", type="category", categories=("a", "b", "c")),
    ],
    fit_intercept=True,
)
ONEHOT_DESIGN = Design(
    features=ONEHOT.domain(),
    target=TargetDomain(lower=0.0, upper=4.0),
    fit_intercept=True,
    encoding=ONEHOT,
)
# Rows x, c=b, c=c. The added row: x at a corner, one indicator, y at the end of its interval:
# it attains every part's add/remove L1 bound (one group per column).
ONEHOT_X = np.array([[0.2, 1.0, 0.0], [0.7, 0.0, 0.0], [0.5, 0.0, 1.0]])
ONEHOT_Y = np.array([1.0, 3.0, 2.0])
ONEHOT_ROW = ([1.0, 0.0, 1.0], 4.0)


@pytest.mark.parametrize("part", PARTS)
def test_one_hot_parts_at_the_auto_split_pass_and_their_twins_are_rejected(part: str) -> None:
    d = sufficient_statistics(ONEHOT_X, ONEHOT_Y, ONEHOT_DESIGN)
    X_nb = np.vstack([ONEHOT_X, [ONEHOT_ROW[0]]])
    d_nb = sufficient_statistics(X_nb, np.append(ONEHOT_Y, ONEHOT_ROW[1]), ONEHOT_DESIGN)
    rel = functional_release(
        d,
        ONEHOT_DESIGN,
        epsilon=EPS,
        rng=np.random.default_rng(0),
        quadratic_weight=SHRUNK_QUADRATIC_WEIGHT,
        intercept_share=INTERCEPT_SHARE,
    )
    sens = rel.sensitivity.part(part)
    moved = np.abs(d_nb.parts()[part] - d.parts()[part]).sum()
    assert moved <= sens and moved == pytest.approx(sens, rel=1e-4)  # up to the allowance
    real, twin = audit_twins(
        _part_sampler(part, sensitivity=sens, epsilon=EPS),
        _part_sampler(part, sensitivity=sens / 2.0, epsilon=EPS),
        seed=9,
        dataset=d,
        neighbour=d_nb,
        epsilon=EPS,
        samples=40_000,
    )
    assert real.passed, real.summary()
    assert real.eps_lb > 0.7 * EPS, real.summary()
    assert not twin.passed, twin.summary()
