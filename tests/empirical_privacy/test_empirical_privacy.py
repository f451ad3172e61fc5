"""Unit tests of the privacy auditor itself (dp.reference.empirical_privacy): intervals, bounds,
event selection, validation."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from dppub.dp.errors import ConfigError, InputError
from dppub.dp.reference.empirical_privacy import audit, clopper_pearson, looped, loss_lower_bound


def test_clopper_pearson_matches_closed_forms() -> None:
    # k = 0 and k = n have closed forms: upper = 1 - (a/2)^(1/n), lower = (a/2)^(1/n).
    n, conf = 50, 0.99
    lo, hi = clopper_pearson([0, n], n, confidence=conf)
    assert lo[0] == 0.0 and hi[1] == 1.0
    assert hi[0] == pytest.approx(1.0 - 0.005 ** (1 / n), rel=1e-9)
    assert lo[1] == pytest.approx(0.005 ** (1 / n), rel=1e-9)


def test_clopper_pearson_covers_at_least_its_confidence() -> None:
    # Exact coverage of the two-sided 90% interval for p = 0.3, n = 40, summed over all k:
    # Clopper-Pearson is conservative, so it is >= 0.9 (a deterministic computation).
    from scipy.stats import binom

    n, p = 40, 0.3
    k = np.arange(n + 1)
    lo, hi = clopper_pearson(k, n, confidence=0.9)
    covered = (lo <= p) & (p <= hi)
    assert float(binom.pmf(k, n, p)[covered].sum()) >= 0.9


def test_loss_lower_bound_subtracts_delta_and_handles_empty_numerator() -> None:
    assert float(loss_lower_bound(0.5, 0.25, delta=0.0)) == pytest.approx(math.log(2.0))
    assert float(loss_lower_bound(0.3, 0.1, delta=0.1)) == pytest.approx(math.log(2.0))
    assert float(loss_lower_bound(0.1, 0.1, delta=0.1)) == -math.inf


def _constant(value: float) -> Callable[[float, int, np.random.Generator], np.ndarray]:
    def sampler(x: float, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.full(n, value)

    return sampler


def test_identical_output_distributions_pass_with_no_loss() -> None:
    res = audit(
        _constant(7.0), dataset=0.0, neighbour=1.0, epsilon=0.1, rng=np.random.default_rng(0)
    )
    assert res.passed and res.eps_lb <= 0.0


def test_a_deterministic_release_is_rejected_at_any_epsilon() -> None:
    # Releasing the exact value: the event {y >= 1} has probability 1 vs 0.
    def exact(x: float, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.full(n, x)

    res = audit(exact, dataset=0.0, neighbour=1.0, epsilon=5.0, rng=np.random.default_rng(0))
    assert not res.passed and res.eps_lb > 8.5  # ln(1 / CP upper bound at 0 of 1e5 hits)
    assert res.total_samples == 4 * 100_000


def test_selection_and_test_batches_are_separate_draws() -> None:
    calls: list[int] = []

    def sampler(x: float, n: int, rng: np.random.Generator) -> np.ndarray:
        calls.append(n)
        return x + rng.standard_normal(n)

    res = audit(
        sampler,
        dataset=0.0,
        neighbour=1.0,
        epsilon=5.0,
        delta=0.0,
        samples=1000,
        selection_samples=300,
        rng=np.random.default_rng(1),
    )
    assert calls == [300, 300, 1000, 1000]
    assert res.samples == 1000 and res.selection_samples == 300
    assert "eps_lb=" in res.summary()


def test_looped_adapts_a_per_call_mechanism() -> None:
    def mech(x: float, rng: np.random.Generator) -> np.ndarray:
        return np.array([x, x + rng.random()])

    out = np.asarray(looped(mech)(2.0, 5, np.random.default_rng(0)))
    assert out.shape == (5, 2) and np.all(out[:, 0] == 2.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon": -1.0}, "epsilon"),
        ({"epsilon": 1.0, "confidence": 1.0}, "confidence must be in"),
        ({"epsilon": 1.0, "samples": 10}, "samples must be an integer >= 40"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        audit(_constant(0.0), dataset=0.0, neighbour=1.0, rng=np.random.default_rng(0), **kwargs)


def test_bad_sampler_output_is_refused() -> None:
    def wrong(x: float, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.zeros(n + 1)

    with pytest.raises(InputError, match="sampler must return shape"):
        audit(wrong, dataset=0.0, neighbour=1.0, epsilon=1.0, rng=np.random.default_rng(0))
