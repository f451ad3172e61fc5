"""LogisticRegression: configuration, clipping, the certified solver point and its output
perturbation, exact loss sums, publication, accuracy."""

from __future__ import annotations

import json
import math
from decimal import Decimal, getcontext

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import expit

from dppub.dp.budget import PrivacyCost
from dppub.dp.errors import ConfigError, InputError, InvariantError, SolverError
from dppub.dp.numerics.domains import FeatureDomain, TargetDomain
from dppub.dp.reference import frame_regression as reference_regression
from dppub.dp.reference.frame_regression import (
    LogisticRegression,
    objective_perturbation,
    predict,
    predict_proba,
)
from dppub.dp.regression import objective as op
from dppub.dp.regression.logistic import LogisticFit, normalised_rows, row_norm_bound
from dppub.dp.regression.losssums import SIGMA_ERROR, LossSums, gradient_error, logistic_sums
from dppub.dp.regression.statistics import Design

METHODS = ["objective", "functional"]


def _ball(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    z = rng.normal(size=(n, d))
    return np.asarray(
        z / np.linalg.norm(z, axis=1, keepdims=True) * rng.random(n)[:, None] ** (1 / d)
    )


def _logistic_data(
    rng: np.random.Generator, n: int, d: int, scale: float = 5.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def test_labels_must_be_zero_or_one() -> None:
    with pytest.raises(InputError, match=r"y must contain only the labels 0 and 1"):
        LogisticRegression(1.0, data_norm=1.0).fit(np.zeros((3, 2)), np.array([0.0, 1.0, 2.0]))


# --- privacy: clipping, normalisation, certified point, output perturbation ----------------


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("method", METHODS)
def test_rows_are_clipped(method: str, fit_intercept: bool) -> None:
    rng = np.random.default_rng(1)
    X, y, _ = _logistic_data(rng, 500, 3)
    X_out = X.copy()
    X_out[:10] *= 1e6  # far outside the declared box

    def fit(Xf: np.ndarray) -> LogisticFit:
        model = LogisticRegression(
            1.0, bounds_X=(-1.0, 1.0), fit_intercept=fit_intercept, method=method
        )
        return model.fit(Xf, y, rng=np.random.default_rng(7))

    raw, pre = fit(X_out), fit(np.clip(X_out, -1.0, 1.0))
    np.testing.assert_allclose(raw.coef, pre.coef, rtol=1e-9, atol=1e-12)


_coord = st.one_of(st.sampled_from([-9.0, -1.0, 0.0, 1.0, 9.0]), st.floats(-1e6, 1e6))


@pytest.mark.slow
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
    # Exactly: the rows are on the 2^-16 grid and their integer squared norms are <= 2^32.
    V = Z * 2.0**16
    assert np.array_equal(V, np.trunc(V))
    assert np.all(np.einsum("ij,ij->i", V, V) <= 2.0**32)
    assert bound > 0.0 and bound == row_norm_bound(dsg)


def _solver_points(monkeypatch: pytest.MonkeyPatch) -> list[np.ndarray]:
    """Record the point the solver hands to the output perturbation (never published)."""
    points: list[np.ndarray] = []
    real = op.perturb_output

    def spy(
        point: np.ndarray,
        noise: op.OutputNoise,
        *,
        rng: np.random.Generator | None,
        size: int | None = None,
    ) -> np.ndarray:
        points.append(np.array(point))
        return real(point, noise, rng=rng, size=size)

    monkeypatch.setattr(op, "perturb_output", spy)
    return points


def _true_gradient(  # plain float64, independent of the exact sums
    Z: np.ndarray, y: np.ndarray, w: np.ndarray, ridge: float, b: np.ndarray
) -> np.ndarray:
    return np.asarray(Z.T @ (expit(Z @ w) - y) + ridge * w + b)


def _solve(
    monkeypatch: pytest.MonkeyPatch, *, seed: int, n: int, d: int, epsilon: float
) -> tuple[np.ndarray, np.ndarray, op.ObjectiveRelease, np.ndarray, np.ndarray]:
    """A release on synthetic rows, the solver's point and the linear noise ``b`` (re-drawn
    from the same seed: it is the first draw)."""
    points = _solver_points(monkeypatch)
    X, y, _ = _logistic_data(np.random.default_rng(seed), n, d)
    Z, _ = normalised_rows(X, LogisticRegression(epsilon, data_norm=1.0).design(d))
    rel = objective_perturbation(Z, y, epsilon=epsilon, rng=np.random.default_rng(seed + 1))
    b = op.noise_vector(
        d + 1, epsilon=rel.parameters.epsilon_noise, rng=np.random.default_rng(seed + 1)
    )
    (point,) = points
    return Z, y, rel, point, b


def test_released_point_is_certified_then_perturbed(monkeypatch: pytest.MonkeyPatch) -> None:
    # Approximate minima perturbation: the solver's point has true gradient norm <= gamma (so
    # it is within gamma / lam of the exact minimiser), and the release adds output noise of
    # L2 sensitivity 2 gamma / lam + sqrt(p) G on the grid G.
    Z, y, rel, point, b = _solve(monkeypatch, seed=2, n=2_000, d=3, epsilon=0.5)
    par = rel.parameters
    gamma = par.gradient_tolerance
    assert np.linalg.norm(_true_gradient(Z, y, point, par.ridge, b)) <= gamma
    # The release is the point rounded to G plus a non-zero multiple of G.
    G = par.output.grid
    steps = rel.theta / G - np.rint(point / G)
    assert np.array_equal(steps, np.rint(steps)) and np.any(steps != 0.0)
    assert par.output.sensitivity >= 2.0 * gamma / par.ridge + 2.0 * G
    # The three shares make up exactly epsilon: eps_b + log(1 + 1 / (4 lam)) + eps_out.
    assert par.epsilon_curvature == pytest.approx(math.log1p(0.25 / par.ridge), rel=1e-12)
    assert par.epsilon_noise + par.epsilon_curvature + par.output.epsilon == pytest.approx(
        0.5, rel=1e-12
    )
    assert par.output.epsilon == pytest.approx(op.OUTPUT_SHARE * 0.5, rel=1e-12)
    # Mean output-noise norm p Delta / eps_out is the declared OUTPUT_NOISE.
    assert 4 * par.output.scale == pytest.approx(op.OUTPUT_NOISE, rel=1e-9)


def test_an_early_stop_stays_within_the_accounted_distance(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A loose tolerance (OUTPUT_NOISE 1: gamma ~ 0.008) makes Newton stop well before the
    # exact minimiser; the released point is then still within gamma / lam of it, the distance
    # the output noise is calibrated to.
    monkeypatch.setattr(op, "OUTPUT_NOISE", 1.0)
    Z, y, rel, point, b = _solve(monkeypatch, seed=4, n=3_000, d=2, epsilon=1.0)
    par = rel.parameters
    exact = point.copy()
    for _ in range(50):  # plain Newton to the float64 minimiser
        p = expit(Z @ exact)
        hess = (Z * (p * (1 - p))[:, None]).T @ Z + par.ridge * np.eye(3)
        exact -= np.linalg.solve(hess, _true_gradient(Z, y, exact, par.ridge, b))
    gap = np.linalg.norm(point - exact)
    assert 1e-9 < gap <= par.gradient_tolerance / par.ridge  # stopped early, within the bound


def test_certificate_refuses_what_float64_cannot_vouch_for() -> None:
    # The float64 error bound grows with the row count: with 10^13 rows (claimed by the sums)
    # it exceeds gamma, and the solver fails closed instead of releasing an uncertified point.
    def huge(w: np.ndarray) -> LossSums:
        return LossSums(loss=0.0, gradient=-0.5 * w, hessian=np.eye(len(w)), rows=10**13)

    with pytest.raises(SolverError, match=r"error bound of the gradient exceeds"):
        op.minimise_objective(huge, p=2, epsilon=1.0, rng=np.random.default_rng(0))


def test_objective_reports_a_solver_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    # A gradient that never vanishes: Newton must give up with one clear line, not loop.
    # (|b| << 1e3 here: J's gradient 1e3 sign(w) + lam w + b has no zero.)
    def stuck(Z: np.ndarray, y: np.ndarray, w: np.ndarray) -> LossSums:
        return LossSums(
            loss=0.0, gradient=np.where(w >= 0.0, 1e3, -1e3), hessian=np.eye(len(w)), rows=3
        )

    monkeypatch.setattr(reference_regression, "logistic_sums", stuck)
    with pytest.raises(SolverError, match=r"did not reach the certified gradient tolerance"):
        objective_perturbation(np.ones((3, 2)) / 2, np.ones(3), epsilon=1.0)


def test_fit_loss_sums_is_fit_given_the_same_sums() -> None:
    # One Newton loop: fit passes the sums over its rows; any caller passing the same sums (an
    # engine folding batches) gets the same release, bit for bit, one call per evaluated point.
    rng = np.random.default_rng(5)
    X, y, _ = _logistic_data(rng, 1_000, 2)
    want = LogisticRegression(0.8, data_norm=1.0).fit(X, y, rng=np.random.default_rng(6))
    model = LogisticRegression(0.8, data_norm=1.0)
    Z, bound = normalised_rows(X, model.design(2))
    points: list[np.ndarray] = []

    def sums(w: np.ndarray) -> LossSums:
        points.append(w.copy())
        return logistic_sums(Z, y, w)

    got = model.fit_loss_sums(sums, d=2, rng=np.random.default_rng(6))
    assert got.coef.tobytes() == want.coef.tobytes() and got.intercept == want.intercept
    assert got.to_dict() == want.to_dict() and got.to_dict()["row_norm_bound"] == bound
    assert len(points) > 1 and not points[0].any()  # starts at 0
    with pytest.raises(InvariantError, match="the loss sums have the wrong shape"):
        model.fit_loss_sums(
            lambda w: LossSums(loss=0.0, gradient=np.zeros(2), hessian=np.eye(3), rows=0), d=2
        )


# --- the loss sums: exact, order-free, within their error bound -----------------------------


def test_loss_sums_do_not_depend_on_the_row_order() -> None:
    rng = np.random.default_rng(11)
    X, y, _ = _logistic_data(rng, 3_000, 4)
    Z, _ = normalised_rows(X, LogisticRegression(1.0, data_norm=1.0).design(4))
    w = rng.normal(size=5) * 3.0
    want = logistic_sums(Z, y, w)
    for perm in (rng.permutation(len(y)), np.arange(len(y))[::-1]):
        got = logistic_sums(Z[perm], y[perm], w)
        assert got.loss == want.loss
        assert got.gradient.tobytes() == want.gradient.tobytes()
        assert got.hessian.tobytes() == want.hessian.tobytes()


def _exact_gradient(Z: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """sum_i (sigma(z_i w) - y_i) z_i in 50-digit decimal arithmetic."""
    getcontext().prec = 50
    wd = [Decimal(float(v)) for v in w]
    out = [Decimal(0)] * len(w)
    for z, label in zip(Z, y, strict=True):
        zd = [Decimal(float(v)) for v in z]
        s = sum((a * b for a, b in zip(zd, wd, strict=True)), Decimal(0))
        r = 1 / (1 + (-s).exp()) - Decimal(float(label))
        out = [o + r * a for o, a in zip(out, zd, strict=True)]
    return np.array([float(v) for v in out])


def test_gradient_is_within_its_error_bound() -> None:
    # The certificate's premise: the float64 gradient is within gradient_error of the true one.
    rng = np.random.default_rng(12)
    X, y, _ = _logistic_data(rng, 400, 3)
    Z, _ = normalised_rows(X, LogisticRegression(1.0, data_norm=1.0).design(3))
    for scale in (0.1, 3.0, 40.0):
        w = rng.normal(size=4) * scale
        sums = logistic_sums(Z, y, w)
        assert np.linalg.norm(sums.gradient - _exact_gradient(Z, y, w)) <= gradient_error(sums, w)


def test_expit_is_within_the_assumed_error() -> None:
    # gradient_error assumes |expit(s) - sigma(s)| <= SIGMA_ERROR = 8 ulp(1/2); the analysis of
    # 1 / (1 + exp(-s)) with a one-ulp exp gives 4. Checked at half of SIGMA_ERROR on 6,000
    # points, the tails included (deterministic: a fixed grid and a seeded sample).
    getcontext().prec = 40
    rng = np.random.default_rng(13)
    s = np.r_[rng.normal(0.0, 6.0, 4_000), np.linspace(-40.0, 40.0, 1_995), -745.0, 745.0]
    got = expit(s)
    worst = max(
        abs(Decimal(float(g)) - 1 / (1 + (-Decimal(float(v))).exp()))
        for v, g in zip(s, got, strict=True)
    )
    assert float(worst) <= SIGMA_ERROR / 2


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
    assert model.model.privacy_cost == PrivacyCost(epsilon=0.5)
    proba = predict_proba(model, X[:5])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert predict(model, X[:5]).tolist() == (proba[:, 1] > 0.5).astype(int).tolist()


def test_functional_never_explodes_on_degenerate_data() -> None:
    rng = np.random.default_rng(5)
    for n in (1, 10, 100):
        for eps in (0.01, 1.0):
            X = np.zeros((n, 4)) if n == 10 else _ball(rng, n, 4)
            y = (rng.random(n) < 0.5).astype(float)
            for method in METHODS:
                model = LogisticRegression(eps, data_norm=1.0, method=method).fit(X, y, rng=rng)
                assert np.all(np.isfinite(model.coef)) and np.isfinite(model.intercept)


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
    assert np.mean(predict(model, Xte) != yte) - bayes < 0.015


@pytest.mark.slow
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
    assert np.all(np.isfinite(model.coef))
