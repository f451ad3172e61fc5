"""LinearRegression: configuration errors, clipping, boundedness, publication, accuracy."""

from __future__ import annotations

import json

import numpy as np
import numpy.typing as npt
import pytest

from dppub.dp.budget import PrivacyCost
from dppub.dp.errors import ConfigError, InputError
from dppub.dp.reference.frame_regression import LinearRegression, predict
from dppub.dp.regression.functional import trimmed_solve
from dppub.dp.regression.linear import LinearFit


def _ball_data(
    rng: np.random.Generator, n: int, d: int, noise: float = 0.1
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    z = rng.normal(size=(n, d))
    X = z / np.linalg.norm(z, axis=1, keepdims=True) * rng.random(n)[:, None] ** (1 / d)
    w = np.linspace(-1.0, 1.0, d) / np.sqrt(d)
    y = np.clip(X @ w + 0.2 + noise * rng.normal(size=n), -1.0, 1.0)
    return X, y, w


# --- configuration -------------------------------------------------------------------------


def test_bounds_y_is_required() -> None:
    with pytest.raises(ConfigError, match=r"bounds_y is required"):
        LinearRegression(1.0, data_norm=1.0)


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"bounds_X": (0.0, 1.0), "data_norm": 1.0}],
)
def test_exactly_one_feature_bound(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match=r"declare exactly one of bounds_X .* or data_norm"):
        LinearRegression(1.0, bounds_y=(-1, 1), **kwargs)  # type: ignore[arg-type]


def test_parameter_messages() -> None:
    with pytest.raises(ConfigError, match=r"epsilon must be finite and > 0, got -1.0"):
        LinearRegression(-1.0, data_norm=1.0, bounds_y=(-1, 1))
    with pytest.raises(
        ConfigError, match=r"method must be one of \['auto', 'functional', 'adassp'\]"
    ):
        LinearRegression(1.0, data_norm=1.0, bounds_y=(-1, 1), method="ols")
    with pytest.raises(ConfigError, match=r"'functional' is pure epsilon-DP: delta must be 0"):
        LinearRegression(1.0, data_norm=1.0, bounds_y=(-1, 1), method="functional", delta=1e-6)
    with pytest.raises(ConfigError, match=r"'adassp' needs delta > 0, got 0.0"):
        LinearRegression(1.0, data_norm=1.0, bounds_y=(-1, 1), method="adassp")
    with pytest.raises(
        ConfigError, match=r"bounds_y must be finite with lo < hi, got \[1.0, 1.0\]"
    ):
        LinearRegression(1.0, data_norm=1.0, bounds_y=(1, 1))
    with pytest.raises(ConfigError, match=r"bounds_X must be a pair \(lo, hi\), got 3 items"):
        LinearRegression(1.0, bounds_X=(0, 1, 2), bounds_y=(0, 1))  # type: ignore[arg-type]


def test_input_messages() -> None:
    model = LinearRegression(1.0, bounds_X=([0, 0], [1, 1]), bounds_y=(0, 1))
    rng = np.random.default_rng(0)
    with pytest.raises(ConfigError, match=r"bounds_X\[0\] must be a scalar or have length 3"):
        model.fit(np.zeros((5, 3)), np.zeros(5), rng=rng)
    with pytest.raises(InputError, match=r"y must be a 1-d array of length 5, got shape \(4,\)"):
        model.fit(np.zeros((5, 2)), np.zeros(4), rng=rng)
    with pytest.raises(InputError, match=r"X and y must be finite"):
        model.fit(np.full((5, 2), np.nan), np.zeros(5), rng=rng)
    fit = model.fit(np.zeros((5, 2)), np.zeros(5), rng=rng)
    with pytest.raises(InputError, match=r"X must have shape \(n, 2\), got \(1, 3\)"):
        predict(fit, np.zeros((1, 3)))


# --- clipping (diffprivlib skips it when fit_intercept=False) -------------------------------


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("method", ["functional", "adassp"])
def test_rows_are_clipped_with_or_without_intercept(fit_intercept: bool, method: str) -> None:
    rng = np.random.default_rng(1)
    X, y, _ = _ball_data(rng, 500, 3)
    X_out, y_out = X.copy(), y.copy()
    X_out[:10] *= 1e6  # far outside the declared box
    y_out[10:20] = -1e6  # far outside bounds_y
    X_clip = np.clip(X_out, -1.0, 1.0)
    y_clip = np.clip(y_out, -1.0, 1.0)
    delta = 1e-6 if method == "adassp" else 0.0

    def fit(Xf: np.ndarray, yf: np.ndarray) -> LinearFit:
        model = LinearRegression(
            1.0,
            bounds_X=(-1.0, 1.0),
            bounds_y=(-1.0, 1.0),
            fit_intercept=fit_intercept,
            method=method,
            delta=delta,
        )
        return model.fit(Xf, yf, rng=np.random.default_rng(7))

    raw, pre = fit(X_out, y_out), fit(X_clip, y_clip)
    # Same noise, same clipped data: identical models. Without the clip, sum x x^T would be 1e12.
    np.testing.assert_allclose(raw.coef, pre.coef, rtol=1e-9, atol=1e-12)
    assert raw.intercept == pytest.approx(pre.intercept)


def test_ball_clip_shrinks_long_rows() -> None:
    rng = np.random.default_rng(2)
    X, y, _ = _ball_data(rng, 300, 2)
    X_out = X.copy()
    X_out[0] = [30.0, 40.0]  # norm 50, clipped onto the unit sphere at (0.6, 0.8)
    X_pre = X.copy()
    X_pre[0] = [0.6, 0.8]
    a = LinearRegression(1.0, data_norm=1.0, bounds_y=(-1, 1)).fit(
        X_out, y, rng=np.random.default_rng(3)
    )
    b = LinearRegression(1.0, data_norm=1.0, bounds_y=(-1, 1)).fit(
        X_pre, y, rng=np.random.default_rng(3)
    )
    np.testing.assert_allclose(a.coef, b.coef, rtol=1e-9)


# --- boundedness ---------------------------------------------------------------------------


def test_trimmed_solve_bounds_an_indefinite_objective() -> None:
    gram = np.array([[1.0, 3.0], [3.0, 1.0]])  # eigenvalues 4 and -2: unbounded below
    theta, raised = trimmed_solve(gram, np.array([1.0, -1.0]), floor=0.5)
    assert raised == 1
    assert np.linalg.norm(theta) <= np.linalg.norm([1.0, -1.0]) / 0.5


@pytest.mark.slow
def test_never_explodes_on_a_grid_of_hard_cases() -> None:
    # 432 seeded fits where noise swamps the signal (tiny n, tiny epsilon, degenerate X).
    rng = np.random.default_rng(3)
    fits = 0
    for n in (1, 5, 50, 500) * 3:
        for eps in (0.01, 0.1, 1.0):
            for d in (1, 4, 12):
                for method in ("functional", "adassp"):
                    for fit_intercept in (True, False):
                        X, y, _ = _ball_data(rng, n, d)
                        if fits % 3 == 0:
                            X = np.zeros_like(X)  # rank 0: the noisy objective is pure noise
                        model = LinearRegression(
                            eps,
                            data_norm=1.0,
                            bounds_y=(-1.0, 1.0),
                            method=method,
                            delta=1e-6 if method == "adassp" else 0.0,
                            fit_intercept=fit_intercept,
                        ).fit(X, y, rng=rng)
                        pred = predict(model, rng.normal(size=(20, d)) * 100)
                        assert np.all(np.isfinite(model.coef))
                        assert np.isfinite(model.intercept)
                        assert np.all((pred >= -1.0) & (pred <= 1.0))
                        fits += 1
    assert fits == 432


# --- publication ---------------------------------------------------------------------------


def test_to_dict_is_json_and_complete() -> None:
    rng = np.random.default_rng(4)
    X, y, _ = _ball_data(rng, 1000, 3)
    model = LinearRegression(
        0.5, bounds_X=([-1, -1, -1], [1, 1, 1]), bounds_y=(-1, 1), method="functional"
    )
    fit = model.fit(X, y, rng=rng)
    doc = json.loads(json.dumps(fit.to_dict()))
    assert doc["method"] == "functional"
    assert doc["coefficients"] == pytest.approx(fit.coef.tolist())
    assert doc["intercept"] == pytest.approx(fit.intercept)
    assert doc["feature_bounds"] == {"kind": "box", "lower": [-1, -1, -1], "upper": [1, 1, 1]}
    assert doc["bounds_y"] == [-1.0, 1.0]
    assert (doc["epsilon"], doc["delta"]) == (0.5, 0.0)
    assert sum(doc["epsilon_split"].values()) == pytest.approx(0.5, rel=1e-12)
    assert doc["neighbours"] == "add/remove one record"
    assert doc["l1_sensitivity"]["count"] == 1.0  # n is released, not assumed public
    assert 0.0 < doc["epsilon_split"]["count"] < 0.15 * 0.5  # a small share (10.6% at d = 3)
    assert doc["eigenvalue_floor"] > 0.0
    assert 0.0 <= doc["spectrum_shrinkage"] <= 1.0
    assert doc["sampler"] == "seeded-test-only"
    assert model.privacy_cost == PrivacyCost(epsilon=0.5)


def test_adassp_cost_and_record() -> None:
    rng = np.random.default_rng(5)
    X, y, _ = _ball_data(rng, 1000, 3)
    model = LinearRegression(0.5, data_norm=1.0, bounds_y=(-1, 1), method="adassp", delta=1e-6).fit(
        X, y, rng=rng
    )
    assert model.model.privacy_cost == PrivacyCost(epsilon=0.5, delta=1e-6)
    doc = model.to_dict()
    assert doc["neighbours"] == "add/remove one record"
    assert doc["ridge"] >= 0.0
    assert doc["feature_bounds"] == {"kind": "ball", "data_norm": 1.0}


def test_release_grade_sampler_is_used_without_rng() -> None:
    rng = np.random.default_rng(6)
    X, y, _ = _ball_data(rng, 200, 2)
    model = LinearRegression(1.0, data_norm=1.0, bounds_y=(-1, 1)).fit(X, y)
    assert model.to_dict()["sampler"] == "opendp"
    assert np.all(np.isfinite(model.coef))


# --- accuracy (seeded statistical tests) ----------------------------------------------------


@pytest.mark.parametrize("method", ["functional", "adassp"])
def test_recovers_coefficients_at_moderate_epsilon(method: str) -> None:
    # n = 50,000, d = 4, epsilon = 2: the noise on w is ~0.01 per coordinate (Laplace scale of the
    # statistics / n Sigma). Tolerance 0.08 is > 6 standard deviations, so with a fresh seed the
    # test would fail with probability < 1e-8; it is seeded and deterministic.
    rng = np.random.default_rng(8)
    X, y, w = _ball_data(rng, 50_000, 4)
    model = LinearRegression(
        2.0, data_norm=1.0, bounds_y=(-1, 1), method=method, delta=1e-6 if method == "adassp" else 0
    ).fit(X, y, rng=rng)
    np.testing.assert_allclose(model.coef, w, atol=0.08)
    assert model.intercept == pytest.approx(0.2, abs=0.02)


def test_box_domain_with_offset_bounds() -> None:
    # Features in [10, 20], target in [0, 100]: the public centring makes this as easy as [-1, 1].
    rng = np.random.default_rng(9)
    X = rng.uniform(10, 20, size=(40_000, 2))
    y = np.clip(3.0 * X[:, 0] - 2.0 * X[:, 1] + 40 + rng.normal(size=40_000), 0, 100)
    model = LinearRegression(2.0, bounds_X=(10, 20), bounds_y=(0, 100)).fit(X, y, rng=rng)
    # Tolerance: > 6 noise standard deviations (seeded).
    np.testing.assert_allclose(model.coef, [3.0, -2.0], atol=0.15)
    mse = np.mean((predict(model, X) - y) ** 2)
    assert mse < 1.3  # OLS: ~1.0 (unit noise)


# --- add/remove neighbours: the exact row count is never used -------------------------------


@pytest.mark.parametrize("method", ["functional", "adassp"])
def test_fit_reads_data_only_through_the_noisy_releases(
    method: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Replace every noise mechanism by a data-blind oracle (it ignores the exact value). If the
    # fit read anything else -- the exact row count above all -- two datasets of different sizes
    # would give different models; through the releases alone they must give the same one.
    from dppub.dp.regression import adassp, functional

    def blind(value: npt.ArrayLike, **_: object) -> np.ndarray:
        return np.full(np.shape(value), 7.0)

    monkeypatch.setattr(functional, "laplace", blind)
    monkeypatch.setattr(adassp, "gaussian", blind)
    rng = np.random.default_rng(10)
    delta = 1e-6 if method == "adassp" else 0.0
    models = []
    for n in (50, 5_000):
        X, y, _ = _ball_data(rng, n, 3)
        models.append(
            LinearRegression(1.0, data_norm=1.0, bounds_y=(-1, 1), method=method, delta=delta).fit(
                X, y, rng=rng
            )
        )
    np.testing.assert_array_equal(models[0].coef, models[1].coef)
    assert models[0].intercept == models[1].intercept
