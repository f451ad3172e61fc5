"""End-to-end ``answer``: result object, validation before measuring, determinism."""

from __future__ import annotations

import numpy as np
import pytest

import dppub.dp.matrix as mx
from dppub.dp.budget import PrivacyCost
from dppub.dp.errors import ConfigError
from dppub.dp.matrix.exact import certified_sensitivity


@pytest.mark.slow
def test_answer_returns_a_consistent_frozen_result() -> None:
    w = mx.all_range(32)
    x = np.zeros(32)
    x[[3, 4, 20]] = [10, 5, 7]
    res = mx.answer(w, x, epsilon=0.5, rng=np.random.default_rng(0))
    assert res.answers.shape == (w.m,)
    assert res.estimate.shape == (32,)
    assert res.estimate.min() >= 0
    np.testing.assert_allclose(res.answers, w @ res.estimate)
    a = mx.select_strategy(w)
    assert res.strategy == a.name
    assert res.sensitivity == certified_sensitivity(a)  # of the answers as computed
    assert res.noise_scale == pytest.approx(res.sensitivity / 0.5)
    # the plan's estimate, at the closed-form ||A||_1 (the release's is 2^-16 noisier)
    assert res.expected_rmse == pytest.approx(mx.expected_rmse(w, a, 0.5), rel=1e-4)
    assert res.svd_bound_rmse == pytest.approx(mx.svd_bound_rmse(w, 0.5))
    assert res.svd_bound_rmse < res.expected_rmse
    assert res.cost == PrivacyCost(epsilon=0.5)
    assert res.reconstruction == "nonneg-l1"
    with pytest.raises(AttributeError):
        res.answers = np.zeros(1)  # type: ignore[misc]


@pytest.mark.slow
def test_seeded_answers_are_reproducible_and_depend_on_the_seed() -> None:
    w, x = mx.prefix(16), np.arange(16.0)
    one = mx.answer(w, x, epsilon=1.0, rng=np.random.default_rng(4))
    two = mx.answer(w, x, epsilon=1.0, rng=np.random.default_rng(4))
    other = mx.answer(w, x, epsilon=1.0, rng=np.random.default_rng(5))
    np.testing.assert_array_equal(one.answers, two.answers)
    assert not np.array_equal(one.answers, other.answers)


def test_release_grade_noise_path_runs() -> None:
    w = mx.prefix(8)
    res = mx.answer(w, np.ones(8), epsilon=1.0, strategy=mx.hierarchical(8, 2))
    assert res.answers.shape == (8,)
    assert np.all(np.isfinite(res.answers))


def test_multidimensional_answer_uses_c_order() -> None:
    w = mx.kron(mx.all_range(4), mx.prefix(3))
    x = np.zeros((4, 3))
    x[1, 2] = 1000.0
    res = mx.answer(w, x, epsilon=10.0, rng=np.random.default_rng(1))
    assert res.estimate.shape == (12,)
    assert int(np.argmax(res.estimate)) == 1 * 3 + 2


@pytest.mark.slow
def test_given_strategy_and_reconstructions() -> None:
    w, x = mx.prefix(20), np.arange(20.0)
    for method in mx.RECONSTRUCTIONS:
        res = mx.answer(
            w,
            x,
            epsilon=1.0,
            strategy=mx.wavelet(20),
            reconstruction=method,
            rng=np.random.default_rng(2),
        )
        assert res.strategy == "Haar"
        assert res.reconstruction == method


class _Spy(mx.Strategy):
    """Counts measurements, to check that validation happens before any noise is drawn."""

    calls = 0

    def __init__(self) -> None:
        pass

    @property
    def name(self) -> str:
        return "spy"

    @property
    def domain(self) -> tuple[int, ...]:
        return (4,)

    @property
    def m(self) -> int:
        return 4

    @property
    def sensitivity(self) -> float:
        return 1.0

    def _matmat(self, x: np.ndarray) -> np.ndarray:
        _Spy.calls += 1
        return x

    def squared_error_factor(self, workload: mx.Workload) -> float:
        return 4.0


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"epsilon": 0.0}, ConfigError, r"epsilon must be finite and > 0, got 0.0"),
        ({"epsilon": "1"}, ConfigError, r"epsilon must be a number, got '1'"),
        ({"reconstruction": "median"}, ConfigError, r"reconstruction must be one of"),
        ({"x": np.ones(5)}, ConfigError, r"histogram must have 4 cells"),
        ({"x": -np.ones(4)}, ConfigError, r"histogram counts must be >= 0"),
        ({"strategy": mx.identity_strategy(5)}, ConfigError, r"strategy domain \(5,\) does not"),
        ({"strategy": "H2"}, ConfigError, r"strategy must be a dp.matrix strategy, got str"),
        ({"workload": np.eye(4)}, ConfigError, r"workload must be a dp.matrix workload, got"),
    ],
)
def test_bad_arguments_fail_before_measuring(
    kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    args: dict[str, object] = {
        "workload": mx.prefix(4),
        "x": np.ones(4),
        "epsilon": 1.0,
        "strategy": _Spy(),
    }
    args.update(kwargs)
    before = _Spy.calls
    with pytest.raises(error, match=message):
        # Deliberately ill-typed: the point is the run-time check.
        mx.answer(args.pop("workload"), args.pop("x"), rng=np.random.default_rng(0), **args)  # type: ignore[arg-type]
    assert _Spy.calls == before
