"""Privacy audits of the noise primitives in dp.mechanisms, each against a broken twin.

Every audit uses :func:`dp.reference.empirical_privacy.audit` at its default confidence
``1 - 1e-6``: a mechanism that meets its claim is rejected with probability at most ``2e-6`` per
audit (module doc of ``dp.reference.empirical_privacy``), so the false-failure rate of each
``assert res.passed`` below is <= 2e-6, and of this file (18 audits of correct mechanisms)
<= 4e-5. The broken twins (noise scale halved, i.e. sensitivity understated by 2x) have a true
privacy loss of ``2 epsilon`` on the audited event; their measured ``eps_lb`` lands ~0.9 epsilon
above the claim (Laplace, randomized response) and ~0.4 above it (Gaussian), i.e. far outside the
sampling error. Runs are seeded, hence deterministic; several seeds show the verdict does not
hinge on one draw.

Samples are drawn on the reproducible seeded path, which uses the same discrete construction as
the release path (``dp.mechanisms`` module doc), in one vectorised call per batch.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from dppub.dp.mechanisms import gaussian, laplace, randomized_response
from tests.empirical_privacy.twins import audit_twins

SEEDS = (11, 12, 13)
EPS = 1.0
DELTA = 1e-5


def _laplace(
    *, sensitivity: float, epsilon: float, dim: int = 1
) -> Callable[[np.ndarray, int, np.random.Generator], np.ndarray]:
    def sampler(x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        batch = np.broadcast_to(np.asarray(x, dtype=float), (n, dim))
        return laplace(batch, sensitivity=sensitivity, epsilon=epsilon, rng=rng)

    return sampler


@pytest.mark.parametrize("seed", SEEDS)
def test_laplace_scalar_passes_and_its_twin_is_rejected(seed: int) -> None:
    # Neighbours at distance exactly the sensitivity (a counting query, one record added).
    d, d_nb = np.array([3.0]), np.array([4.0])
    # Twin: the same mechanism told half the sensitivity (noise scale halved).
    real, twin = audit_twins(
        _laplace(sensitivity=1.0, epsilon=EPS),
        _laplace(sensitivity=0.5, epsilon=EPS),
        seed=seed,
        dataset=d,
        neighbour=d_nb,
        epsilon=EPS,
    )
    assert real.passed, real.summary()
    assert real.eps_lb > 0.85 * EPS, real.summary()  # the audit is tight, not vacuous
    assert not twin.passed, twin.summary()


@pytest.mark.parametrize("seed", SEEDS)
def test_laplace_vector_l1_sensitivity(seed: int) -> None:
    # A 3-vector whose L1 change is split over coordinates (0.5 + 0.25 + 0.25 = 1): the privacy
    # loss adds up across coordinates, which the corner statistic detects.
    d = np.array([1.0, 2.0, 3.0])
    d_nb = d + np.array([0.5, -0.25, 0.25])
    real, twin = audit_twins(
        _laplace(sensitivity=1.0, epsilon=EPS, dim=3),
        _laplace(sensitivity=1.0, epsilon=2 * EPS, dim=3),
        seed=seed,
        dataset=d,
        neighbour=d_nb,
        epsilon=EPS,
        samples=50_000,
    )
    assert real.passed, real.summary()
    assert not twin.passed, twin.summary()


def _gaussian(*, l2_sensitivity: float) -> Callable[[float, int, np.random.Generator], np.ndarray]:
    def sampler(x: float, n: int, rng: np.random.Generator) -> np.ndarray:
        return gaussian(
            np.full(n, x), l2_sensitivity=l2_sensitivity, epsilon=EPS, delta=DELTA, rng=rng
        )

    return sampler


@pytest.mark.parametrize("seed", SEEDS)
def test_gaussian_passes_and_its_twin_is_rejected(seed: int) -> None:
    # sigma is linear in the sensitivity, so halving the sensitivity halves the noise scale.
    # 500k samples: the twin's tail events near p ~ 3e-3 carry eps_lb ~ 1.4 > 1.
    real, twin = audit_twins(
        _gaussian(l2_sensitivity=1.0),
        _gaussian(l2_sensitivity=0.5),
        seed=seed,
        dataset=0.0,
        neighbour=1.0,
        epsilon=EPS,
        delta=DELTA,
        samples=500_000,
    )
    assert real.passed, real.summary()
    assert not twin.passed, twin.summary()


def _rr(epsilon: float) -> Callable[[bool, int, np.random.Generator], np.ndarray]:
    def sampler(bit: bool, n: int, rng: np.random.Generator) -> np.ndarray:
        return randomized_response(np.full(n, bit), epsilon=epsilon, rng=rng)

    return sampler


@pytest.mark.parametrize("seed", SEEDS)
def test_randomized_response_passes_and_its_twin_is_rejected(seed: int) -> None:
    # Local DP: one respondent's two possible bits are the neighbouring inputs. The event
    # {report = 1} has probability ratio exactly e^eps, so the real audit is tight.
    real, twin = audit_twins(
        _rr(EPS), _rr(2 * EPS), seed=seed, dataset=True, neighbour=False, epsilon=EPS
    )
    assert real.passed and real.eps_lb > 0.9 * EPS, real.summary()
    assert not twin.passed, twin.summary()
