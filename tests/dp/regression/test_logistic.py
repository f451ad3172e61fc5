"""LogisticRegression: configuration, clipping, exact minimiser, publication, accuracy."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import expit

from dp.budget import PrivacyCost
from dp.errors import ConfigError, InputError, InvariantError, SolverError
from dp.regression import FeatureDomain, LogisticRegression, TargetDomain
from dp.regression import objective as op
from dp.regression.logistic import normalised_rows, row_norm_bound
from dp.regression.statistics import Design

METHODS = ["objective", "functional"]


def _ball(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    z = rng.normal(size=(n, d))
    return z / np.linalg.norm(z, axis=1, keepdims=True) * rng.random(n)[:, None] ** (1 / d)


def _logistic_data(rng: np.random.Generator, n: int, d: int, scale: float = 5.0):
    w = rng.normal(size=d)
    w *= scale / np.linalg.norm(w)
    X = _ball(rng, n, d)
    y = (rng.random(n) < expit(X @ w + 0.5)).astype(float)
    return X, y, w


# --- configuration -------------------------------------------------------------------------


def test_config_messages() -> None:
    with pytest.raises(ConfigError, match=r"method must be one of \['objective', 'functional'\]"):
        LogisticRegression(1.0, data_norm=1.0, method="newton")
    with pytest.raises(ConfigError, match=r"pure epsilon-DP: delta must be 0, got 1e-06"):
        LogisticRegression(1.0, data_norm=1.0, delta=1e-6)
    with pytest.raises(ConfigError, match=r"declare exactly one of bounds_X .* or data_norm"):
        LogisticRegression(1.0)
    with pytest.raises(ConfigError, match=r"epsilon must be finite and > 0, got 0.0"):
        LogisticRegression(0.0, data_norm=1.0)
    with pytest.raises(ConfigError, match=r"not fitted yet"):
        LogisticRegression(1.0, data_norm=1.0).predict(np.zeros((1, 2)))


def test_labels_must_be_zero_or_one() -> None:
    with pytest.raises(InputError, match=r"y must contain only the labels 0 and 1"):
        LogisticRegression(1.0, data_norm=1.0).fit(np.zeros((3, 2)), np.array([0.0, 1.0, 2.0]))


# --- privacy: clipping, normalisation, exact minimiser -------------------------------------


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("method", METHODS)
def test_rows_are_clipped(method: str, fit_intercept: bool) -> None:
    rng = np.random.default_rng(1)
    X, y, _ = _logistic_data(rng, 500, 3)
    X_out = X.copy()
    X_out[:10] *= 1e6  # far outside the declared box

    def fit(Xf: np.ndarray) -> LogisticRegression:
        model = LogisticRegression(
            1.0, bounds_X=(-1.0, 1.0), fit_intercept=fit_intercept, method=method
        )
        return model.fit(Xf, y, rng=np.random.default_rng(7))

    raw, pre = fit(X_out), fit(np.clip(X_out, -1.0, 1.0))
    np.testing.assert_allclose(raw.coef_, pre.coef_, rtol=1e-9, atol=1e-12)


_coord = st.one_of(st.sampled_from([-9.0, -1.0, 0.0, 1.0, 9.0]), st.floats(-1e6, 1e6))


@settings(max_examples=200, deadline=None)
@given(
    d=st.integers(1, 4),
    ball=st.booleans(),
    intercept=st.booleans(),
    lo=st.floats(-3.0, 2.0),
    width=st.floats(0.1, 3.0),
    data=st.data(),
)
def test_normalised_rows_have_norm_at_most_one(
    d: int, ball: bool, intercept: bool, lo: float, width: float, data: st.DataObject
) -> None:
    # The objective-perturbation proof needs ||z|| <= 1 for *every* row (gradient <= 1,
    # curvature <= 1/4), including rows far outside the declared bounds.
    dom = FeatureDomain.ball(width, d=d) if ball else FeatureDomain.box(lo, lo + width, d=d)
    dsg = Design(features=dom, target=TargetDomain(lower=-0.5, upper=0.5), fit_intercept=intercept)
    rows = data.draw(st.lists(st.lists(_coord, min_size=d, max_size=d), min_size=1, max_size=5))
    Z, bound = normalised_rows(np.array(rows), dsg)
    assert np.all(np.linalg.norm(Z, axis=1) <= 1.0 + 1e-12)
    assert bound > 0.0 and bound == row_norm_bound(dsg)


def test_objective_returns_the_exact_minimiser() -> None:
    # Re-draw the same noise vector b from the same seed and check grad J(theta) = 0.
    rng = np.random.default_rng(2)
    X, y, _ = _logistic_data(rng, 2_000, 3)
    Z = np.c_[X, np.ones(len(X))] / math.sqrt(2.0)
    rel = op.objective_perturbation(Z, y, epsilon=0.5, rng=np.random.default_rng(3))
    b = op.noise_vector(4, epsilon=rel.epsilon_noise, rng=np.random.default_rng(3))
    grad = Z.T @ (expit(Z @ rel.theta) - y) + rel.ridge * rel.theta + b
    assert np.linalg.norm(grad) < 1e-6
    # The two shares make up exactly epsilon: eps_b + log(1 + 1 / (4 lam)).
    assert rel.epsilon_noise + math.log1p(0.25 / rel.ridge) == pytest.approx(0.5, rel=1e-12)
    assert rel.epsilon_noise + rel.epsilon_curvature == pytest.approx(0.5, rel=1e-12)


def test_objective_reports_a_solver_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    # A gradient that never vanishes: Newton must give up with one clear line, not loop.
    # (|b| << 1e3 here: J's gradient 1e3 sign(w) + lam w + b has no zero.)
    def stuck(Z: np.ndarray, y: np.ndarray, w: np.ndarray):
        return 0.0, np.where(w >= 0.0, 1e3, -1e3), np.eye(len(w))

    monkeypatch.setattr(op, "logistic_sums", stuck)
    with pytest.raises(SolverError, match=r"Newton's method did not reach the exact minimiser"):
        op.objective_perturbation(np.ones((3, 2)) / 2, np.ones(3), epsilon=1.0)


def test_fit_loss_sums_is_fit_given_the_same_sums() -> None:
    # One Newton loop: fit passes the sums over its rows; any caller passing the same sums (an
    # engine folding batches) gets the same release, bit for bit, one call per evaluated point.
    rng = np.random.default_rng(5)
    X, y, _ = _logistic_data(rng, 1_000, 2)
    want = LogisticRegression(0.8, data_norm=1.0).fit(X, y, rng=np.random.default_rng(6))
    model = LogisticRegression(0.8, data_norm=1.0)
    Z, bound = normalised_rows(X, model.design(2))
    points: list[np.ndarray] = []

    def sums(w: np.ndarray) -> op.LossSums:
        points.append(w.copy())
        return op.logistic_sums(Z, y, w)

    got = model.fit_loss_sums(sums, d=2, rng=np.random.default_rng(6))
    assert got.coef_.tobytes() == want.coef_.tobytes() and got.intercept_ == want.intercept_
    assert got.to_dict() == want.to_dict() and got.to_dict()["row_norm_bound"] == bound
    assert len(points) > 1 and not points[0].any()  # starts at 0
    with pytest.raises(InvariantError, match="the loss sums have the wrong shape"):
        model.fit_loss_sums(lambda w: (0.0, np.zeros(2), np.eye(3)), d=2)


# --- publication ---------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_to_dict_and_cost(method: str) -> None:
    rng = np.random.default_rng(4)
    X, y, _ = _logistic_data(rng, 1_000, 3)
    model = LogisticRegression(0.5, data_norm=1.0, method=method).fit(X, y, rng=rng)
    doc = json.loads(json.dumps(model.to_dict()))
    assert doc["neighbours"] == "add/remove one record"
    assert doc["method"] == method
    assert sum(doc["epsilon_split"].values()) == pytest.approx(0.5, rel=1e-12)
    assert (doc["epsilon"], doc["delta"]) == (0.5, 0.0)
    assert model.privacy_cost == PrivacyCost(epsilon=0.5)
    proba = model.predict_proba(X[:5])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert model.predict(X[:5]).tolist() == (proba[:, 1] > 0.5).astype(int).tolist()


def test_functional_never_explodes_on_degenerate_data() -> None:
    rng = np.random.default_rng(5)
    for n in (1, 10, 100):
        for eps in (0.01, 1.0):
            X = np.zeros((n, 4)) if n == 10 else _ball(rng, n, 4)
            y = (rng.random(n) < 0.5).astype(float)
            for method in METHODS:
                model = LogisticRegression(eps, data_norm=1.0, method=method).fit(X, y, rng=rng)
                assert np.all(np.isfinite(model.coef_)) and np.isfinite(model.intercept_)


# --- accuracy (seeded statistical test) -----------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_close_to_non_private_at_epsilon_one(method: str) -> None:
    # n = 20,000, d = 5, epsilon = 1: over 20 seeds in development the excess misclassification
    # was below 0.3 points for both methods (median ~0.0); the threshold 1.5 points is the
    # issue's target, > 5x the largest seen, so a fresh seed fails with negligible probability.
    rng = np.random.default_rng(6)
    X, y, w = _logistic_data(rng, 25_000, 5)
    Xtr, ytr, Xte, yte = X[:20_000], y[:20_000], X[20_000:], y[20_000:]
    bayes = np.mean(((Xte @ w + 0.5) > 0) != yte)
    model = LogisticRegression(1.0, data_norm=1.0, method=method).fit(Xtr, ytr, rng=rng)
    assert np.mean(model.predict(Xte) != yte) - bayes < 0.015


def test_noise_vector_norm_is_gamma() -> None:
    # ||b|| ~ Gamma(p, 1/eps): mean p/eps, variance p/eps^2. Over 4,000 seeded draws with p = 3,
    # eps = 2 the sample mean has standard error sqrt(3/4)/sqrt(4000) = 0.0137; tolerance 0.07
    # is 5 standard errors (false failure ~6e-7). Directions: the mean vector is ~0.
    rng = np.random.default_rng(8)
    draws = np.array([op.noise_vector(3, epsilon=2.0, rng=rng) for _ in range(4_000)])
    norms = np.linalg.norm(draws, axis=1)
    assert abs(norms.mean() - 1.5) < 0.07
    assert abs(norms.var() - 0.75) < 0.15  # sd of the variance estimate ~0.025 (Gamma kurtosis)
    assert np.all(np.abs((draws / norms[:, None]).mean(axis=0)) < 0.05)  # 5.5 standard errors


def test_release_grade_sampler_without_rng() -> None:
    rng = np.random.default_rng(9)
    X, y, _ = _logistic_data(rng, 500, 2)
    model = LogisticRegression(1.0, data_norm=1.0).fit(X, y)
    assert model.to_dict()["sampler"] == "opendp"
    assert np.all(np.isfinite(model.coef_))
