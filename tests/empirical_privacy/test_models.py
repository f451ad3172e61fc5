"""Privacy audits of the model releases added after the first audit suite.

Each audit runs :func:`dp.reference.empirical_privacy.audit` on worst-case add/remove neighbours at
the declared bounds, seeded, with the real release passing and a broken twin (noise scale halved)
rejected.

How each release is sampled. The model fits draw their noise through one module-level call
(``laplace`` in :mod:`dp.regression.functional`, ``gaussian`` in :mod:`dp.regression.adassp`,
``objective_perturbation`` from :mod:`dp.reference.frame_regression`). A *spy* wraps that call
during a real ``fit`` on ``D`` and on ``D'`` and records its exact input and its noise parameters
(the sensitivity and the epsilon/delta share the module derived and actually passed); the audit then
replays the very same call, vectorised, on the recorded inputs. This audits the released noisy
statistic end to end through the model's own preprocessing (clipping, shifting, scaling, budget
split) while drawing 10^5 samples in milliseconds. That the fitted model reads the data *only*
through these calls is checked separately: with every call replaced by a data-blind oracle, the
published model is identical on ``D`` and ``D'``.

1. ``LogisticRegression(method="objective")``: the whole release (the certified solver point
   plus its output perturbation, module doc of :mod:`dp.regression.objective`) is audited
   (``looped``: each sample is a Newton solve, ~0.2 ms; 7,200 samples per audit; the output
   perturbation alone, vectorised, in ``test_exact.py``). One feature, no intercept,
   ``data_norm = 1``: ``D`` is 100 rows ``(x = 1, y = 1)``, ``D'`` adds ``(x = 1, y = 0)``,
   whose gradient change ``sigmoid(w)`` is ~0.94 near the noiseless minimiser ``w_0 ~ 2.7``, so
   ``{w > w_0}`` has probability ~1/2 under ``D`` against ``e^{-0.94 eps_b} / 2`` under
   ``D'``: a loss of ~0.83 epsilon, the most any event carries up to the curvature and output
   shares (``eps_b = 0.88 epsilon``). Twin: ``fit`` called with epsilon doubled (true loss ~1.7
   on that event).
   Only ``p = 1`` is audited end to end: for ``p > 1`` the loss concentrates on the ray of ``b``
   anti-parallel to the gradient change, and threshold events on a projection catch only a
   fraction of it (no power with per-call samples). The ``p``-dimensional noise law is covered
   by ``test_noise_vector_norm_is_gamma`` in ``tests/dp/regression`` and here by the check that
   the rows handed to the solver have norm <= 1 and the epsilon split is the derived one.
2. ``LogisticRegression(method="functional")``: each released part of the Taylor surrogate's
   statistics (target ``y - 1/2``), at its recorded L1 sensitivity, on a worst-case added row.
   As in ``test_regression.py`` each part is audited at a common ``epsilon = 1`` rather than at
   its own share, which isolates the sensitivity (the object of each part's proof; the shares
   are chosen adaptively from earlier noisy parts and are checked to sum to epsilon). Twin: the
   recorded sensitivity halved.
3. ``TraceRegression`` (multi-task): a row added to task ``t`` leaves every other task's recorded
   statistics bit-identical (parallel composition), and task ``t``'s whole release (quadratic
   and cross parts at their recorded shares) is audited at the full epsilon. Twin: epsilon
   doubled in ``fit``.
4. ``LinearRegression(method="adassp")``: the three analytic-Gaussian releases (``lambda_min``,
   gram block, moment block), each audited at its recorded ``(eps/3, delta/3)`` on one pair that
   moves all three by exactly their declared L2 sensitivities. Twins: epsilon doubled in ``fit``
   (all three), and ``l2_sensitivity`` monkeypatched to return halved sensitivities (gram and
   moment blocks; ``lambda_min`` does not read it).
5. ``LinearRegression(method="functional")``: as 2, the five parts of a real fit (intercept,
   unit ball, budget split for the shrunk solve of :mod:`dp.regression.shrinkage`) at their
   recorded sensitivities; and, as for the other models, the fit reads the data only through
   them (the shrunk solve, the floored count and the un-shifting are post-processing).

False-failure rate: every audit of a correct release is rejected with probability <= 2e-6
(``dp.reference.empirical_privacy``, confidence 1 - 1e-6); 15 such audits here -> <= 3e-5 for the
file. Every audit is seeded, hence deterministic; the floors on the real audits' ``eps_lb`` (which
show the neighbours are worst case, not a vacuous pass) and the twins' rejections were checked over
several seeds, with the margins noted at each threshold. The other assertions are exact.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dppub.dp.mechanisms
from dppub.dp.calibration import gaussian_sigma
from dppub.dp.mechanisms import gaussian, laplace
from dppub.dp.reference import frame_regression as reference_module
from dppub.dp.reference.empirical_privacy import audit, looped
from dppub.dp.reference.frame_regression import (
    LinearRegression,
    LogisticRegression,
    TraceRegression,
    objective_perturbation,
)
from dppub.dp.regression import adassp as adassp_module
from dppub.dp.regression import functional as functional_module
from dppub.dp.regression.linear import LinearFit
from dppub.dp.regression.objective import CURVATURE_SHARE, OUTPUT_SHARE
from dppub.dp.regression.sensitivity import BlockSensitivity, l2_sensitivity
from dppub.dp.regression.trace import TraceFit
from tests.empirical_privacy.twins import audit_twins, check_twins

Call = tuple[Any, tuple[Any, ...], dict[str, Any]]


def _spy(
    module: object, name: str, run: Callable[[], object], *, blind: bool = False
) -> list[Call]:
    """Run ``run()`` with ``module.name`` wrapped; return its calls ``(value, args, kwargs)``.

    ``blind``: answer every call with a data-independent constant instead of the real output.
    """
    real = getattr(module, name)
    calls: list[Call] = []

    def spy(value: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append((value, args, kwargs))
        if blind:
            return np.full(np.shape(value), 0.75)
        return real(value, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(module, name, spy)
        run()
    return calls


def _spy_fit(
    module: object, name: str, run: Callable[[], Any], *, blind: bool = False
) -> tuple[list[Call], Any]:
    """:func:`_spy` on a fit: its calls and the frozen result it returned."""
    fits: list[Any] = []
    calls = _spy(module, name, lambda: fits.append(run()), blind=blind)
    return calls, fits[0]


def _attains(moved: float, sensitivity: float) -> None:
    """The neighbours move a release by at most its declared sensitivity, and by all of it up
    to the float64 rounding allowance and the fixed-point quantisation of the row (< 1e-4)."""
    assert moved <= sensitivity
    assert moved == pytest.approx(sensitivity, rel=1e-4)


# --- 1. objective perturbation ---------------------------------------------------------------

OBJ_EPS = 1.0
OBJ_X, OBJ_Y = np.ones((100, 1)), np.ones(100)
OBJ_X_NB, OBJ_Y_NB = np.vstack([OBJ_X, [[1.0]]]), np.append(OBJ_Y, 0.0)


def _objective_call(X: np.ndarray, y: np.ndarray, *, epsilon: float, intercept: bool) -> Call:
    model = LogisticRegression(epsilon, data_norm=1.0, fit_intercept=intercept)
    fit = functools.partial(model.fit, X, y, rng=np.random.default_rng(0))
    (call,) = _spy(reference_module, "objective_perturbation", fit)
    return call


@pytest.mark.parametrize("intercept", [False, True])
def test_objective_solver_gets_unit_rows_and_the_derived_split(intercept: bool) -> None:
    # The proof's premises: every row has ||z|| <= 1 (rows far outside the bounds included),
    # labels in {0, 1}, and epsilon = eps_b + log(1 + 1/(4 lam)) + eps_out with
    # eps_J = eps / 10 and eps_out = eps / 50.
    X = np.array([[5.0], [-30.0], [0.2]])
    y = np.array([1.0, 0.0, 1.0])
    Z, (labels,), kw = _objective_call(X, y, epsilon=0.8, intercept=intercept)
    assert kw["epsilon"] == 0.8 and np.array_equal(labels, y)
    assert np.all(np.linalg.norm(Z, axis=1) <= 1.0 + 1e-12)
    assert np.max(np.linalg.norm(Z, axis=1)) > 0.999  # the hostile rows sit on the bound
    par = objective_perturbation(Z, y, epsilon=0.8, rng=np.random.default_rng(1)).parameters
    assert par.epsilon_curvature == pytest.approx(CURVATURE_SHARE * 0.8, rel=1e-12)
    assert math.log1p(0.25 / par.ridge) == pytest.approx(par.epsilon_curvature, rel=1e-12)
    assert par.output.epsilon == pytest.approx(OUTPUT_SHARE * 0.8, rel=1e-12)
    total = par.epsilon_noise + par.epsilon_curvature + par.output.epsilon
    assert total == pytest.approx(0.8, rel=1e-12)


def test_objective_perturbation_end_to_end(monkeypatch: pytest.MonkeyPatch) -> None:
    # gaussian_sigma is a pure function re-solved (200 bisections) on every noise_vector call;
    # memoising it changes no draw and makes a sample ~4x cheaper.
    monkeypatch.setattr(
        dppub.dp.mechanisms,
        "gaussian_sigma",
        functools.lru_cache(maxsize=None)(gaussian_sigma),  # what mechanisms.py calls
    )
    Z, (y,), kw = _objective_call(OBJ_X, OBJ_Y, epsilon=OBJ_EPS, intercept=False)
    Z_nb, (y_nb,), _ = _objective_call(OBJ_X_NB, OBJ_Y_NB, epsilon=OBJ_EPS, intercept=False)
    assert kw["epsilon"] == OBJ_EPS
    # The published coefficients are theta divided by the public row bound (here 1): auditing
    # theta audits them.

    def mechanism(epsilon: float) -> Callable[[tuple[np.ndarray, np.ndarray], Any], np.ndarray]:
        def run(data: tuple[np.ndarray, np.ndarray], rng: np.random.Generator) -> np.ndarray:
            return objective_perturbation(data[0], data[1], epsilon=epsilon, rng=rng).theta

        return run

    kwargs: dict[str, Any] = {
        "dataset": (Z, y),
        "neighbour": (Z_nb, y_nb),
        "epsilon": OBJ_EPS,
        "samples": 3_000,
        "selection_samples": 600,
    }
    real, twin = audit_twins(
        looped(mechanism(OBJ_EPS)), looped(mechanism(2 * OBJ_EPS)), seed=21, **kwargs
    )
    check_twins(real, twin, tight=0.4)  # seeds 0-3: real eps_lb 0.55-0.64, twin 1.35-1.41


# --- shared: replay a recorded Laplace / Gaussian call, vectorised ---------------------------


def _laplace_replay(
    sensitivity: np.ndarray | float, epsilon: np.ndarray | float
) -> Callable[[np.ndarray, int, np.random.Generator], np.ndarray]:
    """Batch sampler of ``laplace`` with per-coordinate sensitivity and epsilon (parts
    concatenated: each coordinate gets its own part's scale, as in the release)."""
    scale = np.asarray(sensitivity, dtype=np.float64) / np.asarray(epsilon, dtype=np.float64)

    def sampler(exact: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        # laplace(x, sensitivity=s, epsilon=e) has scale s / e; one call per distinct scale.
        out = np.empty((n, exact.size))
        scales = np.broadcast_to(scale, exact.shape)
        for s in np.unique(scales):
            cols = np.flatnonzero(scales == s)
            batch = np.broadcast_to(exact[cols], (n, cols.size))
            out[:, cols] = laplace(batch, sensitivity=float(s), epsilon=1.0, rng=rng)
        return out

    return sampler


# --- 2. logistic regression, functional mechanism ---------------------------------------------

FUN_EPS = 1.0
# Unit ball, d = 2, intercept: the added row x = (1, 1)/sqrt(2) maximises ||x||_1 and
# (||x||_1^2 + ||x||_2^2) / 2, and y = 1 (shifted target y - 1/2 = 1/2) the target magnitude,
# so it attains the add/remove L1 sensitivity of every part.
FUN_X = np.array([[0.3, -0.2], [-0.5, 0.1], [0.0, 0.6]])
FUN_Y = np.array([1.0, 0.0, 0.0])
FUN_ROW = np.array([2**-0.5, 2**-0.5])


def _functional_calls(X: np.ndarray, y: np.ndarray, *, blind: bool = False) -> list[Call]:
    model = LogisticRegression(FUN_EPS, data_norm=1.0, method="functional")
    fit = functools.partial(model.fit, X, y, rng=np.random.default_rng(0))
    return _spy(functional_module, "laplace", fit, blind=blind)


def test_logistic_functional_parts_pass_and_their_twins_are_rejected() -> None:
    calls = _functional_calls(FUN_X, FUN_Y)
    calls_nb = _functional_calls(np.vstack([FUN_X, FUN_ROW]), np.append(FUN_Y, 1.0))
    assert len(calls) == len(calls_nb) == 5  # count, target sum, quadratic, feature sum, cross
    assert sum(kw["epsilon"] for _, _, kw in calls) == pytest.approx(FUN_EPS, rel=1e-12)
    # seeds 0-2: real 0.80-0.93, twin 1.70-1.90
    _audit_laplace_parts(calls, calls_nb, epsilon=FUN_EPS, seed=31)


def _audit_laplace_parts(
    calls: list[Call], calls_nb: list[Call], *, epsilon: float, seed: int
) -> None:
    """Audit each recorded Laplace part on D and D' at its recorded sensitivity (and the twin
    at half of it), after checking that D' moves the part by that sensitivity (up to its
    float64 rounding allowance and the row's fixed-point quantisation, < 1e-4 relative)."""
    for (exact, _, kw), (exact_nb, _, kw_nb) in zip(calls, calls_nb, strict=True):
        sens = kw["sensitivity"]
        assert kw_nb["sensitivity"] == sens  # public: a function of the declared bounds only
        # The added row moves this part by its declared sensitivity (worst case).
        _attains(np.abs(np.asarray(exact_nb) - exact).sum(), sens)
        kwargs: dict[str, Any] = {
            "dataset": np.asarray(exact, dtype=np.float64).ravel(),
            "neighbour": np.asarray(exact_nb, dtype=np.float64).ravel(),
            "epsilon": epsilon,
            "samples": 40_000,
        }
        real, twin = audit_twins(
            _laplace_replay(sens, epsilon), _laplace_replay(sens / 2, epsilon), seed=seed, **kwargs
        )
        check_twins(real, twin, tight=0.7)


# --- 3. trace regression: one task's statistics ------------------------------------------------

TR_EPS = 1.0
TR_TASKS = 3
TR_TASK = 1  # the task that receives the added row
# Box [-1, 1]^2 (scale 1, no shift without an intercept), target [-1, 1]: the corner row
# x = (1, 1), y = 1 attains the quadratic (3) and cross (2) L1 sensitivities.
TR_X = np.array([[0.5, -0.5], [0.2, 0.9], [-0.7, 0.1], [0.4, 0.4], [-0.1, -0.8]])
TR_Y = np.array([0.3, -0.6, 0.9, 0.0, -0.2])
TR_T = np.array([0, 1, 2, 1, 0])


def _trace_calls(
    X: np.ndarray, y: np.ndarray, tasks: np.ndarray, *, epsilon: float = TR_EPS, blind: bool = False
) -> tuple[list[Call], TraceFit]:
    model = TraceRegression(epsilon, n_tasks=TR_TASKS, bounds_X=(-1.0, 1.0), bounds_y=(-1.0, 1.0))
    fit = functools.partial(model.fit, X, y, tasks=tasks, rng=np.random.default_rng(0))
    return _spy_fit(functional_module, "laplace", fit, blind=blind)


def _task_release(calls: list[Call], task: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Task ``task``'s parts concatenated: exact values, per-coordinate sensitivity, epsilon."""
    per_task = len(calls) // TR_TASKS
    own = calls[task * per_task : (task + 1) * per_task]
    exact = np.concatenate([np.ravel(v) for v, _, _ in own])
    sens = np.concatenate([np.full(np.size(v), kw["sensitivity"]) for v, _, kw in own])
    eps = np.concatenate([np.full(np.size(v), kw["epsilon"]) for v, _, kw in own])
    return exact, sens, eps


def test_trace_task_release_passes_and_its_twin_is_rejected() -> None:
    X_nb = np.vstack([TR_X, [1.0, 1.0]])
    y_nb, t_nb = np.append(TR_Y, 1.0), np.append(TR_T, TR_TASK)
    calls, model = _trace_calls(TR_X, TR_Y, TR_T)
    calls_nb, _ = _trace_calls(X_nb, y_nb, t_nb)
    assert len(calls) == len(calls_nb) == 2 * TR_TASKS  # quadratic + cross for every task
    assert model.model.privacy_cost.epsilon == TR_EPS  # parallel composition over the tasks
    for t in range(TR_TASKS):
        exact, sens, eps = _task_release(calls, t)
        exact_nb, sens_nb, eps_nb = _task_release(calls_nb, t)
        assert np.array_equal(sens, sens_nb) and np.array_equal(eps, eps_nb)
        assert sum(kw["epsilon"] for _, _, kw in calls[2 * t : 2 * t + 2]) == pytest.approx(TR_EPS)
        if t != TR_TASK:  # the row touches no other task: parallel composition's premise
            assert np.array_equal(exact, exact_nb)
    exact, sens, eps = _task_release(calls, TR_TASK)
    exact_nb, _, _ = _task_release(calls_nb, TR_TASK)
    # The corner row moves each part by its declared L1 sensitivity.
    for s in np.unique(sens):
        cols = sens == s
        _attains(np.abs(exact_nb[cols] - exact[cols]).sum(), s)
    twin_calls, _ = _trace_calls(TR_X, TR_Y, TR_T, epsilon=2 * TR_EPS)
    _, _, twin_eps = _task_release(twin_calls, TR_TASK)
    kwargs: dict[str, Any] = {
        "dataset": exact,
        "neighbour": exact_nb,
        "epsilon": TR_EPS,
        "samples": 60_000,
    }
    real, twin = audit_twins(
        _laplace_replay(sens, eps), _laplace_replay(sens, twin_eps), seed=41, **kwargs
    )
    check_twins(real, twin, tight=0.6)  # seeds 0-4: real 0.71-0.80, twin 1.59-1.72


# --- 4. AdaSSP: three analytic-Gaussian releases ----------------------------------------------

ADA_EPS, ADA_DELTA = 3.0, 3e-5  # (1, 1e-5) per release, as in the Gaussian primitive's audit
# Unit ball, d = 1, intercept, target [-1, 1]. D: three rows x = -1, so G = 3 (-1, 1)(-1, 1)^T
# and lambda_min(G) = 0 along (1, 1); D' adds z = (1, 1) (x = 1, y = 1): lambda_min becomes 2
# = R^2 + 1, the gram block (x^2, x, n/2) moves by (1, 1, 1/2) of norm 1.5 and the moment block
# (y x, y) by (1, 1) of norm sqrt(2): every release moves by exactly its L2 sensitivity.
ADA_X, ADA_Y = np.full((3, 1), -1.0), np.array([-1.0, 0.5, 0.0])
ADA_X_NB, ADA_Y_NB = np.vstack([ADA_X, [[1.0]]]), np.append(ADA_Y, 1.0)
ADA_RELEASES = ("lambda_min", "gram", "moment")


def _adassp_calls(
    X: np.ndarray, y: np.ndarray, *, epsilon: float = ADA_EPS, blind: bool = False
) -> list[Call]:
    model = LinearRegression(
        epsilon, data_norm=1.0, bounds_y=(-1.0, 1.0), method="adassp", delta=ADA_DELTA
    )
    fit = functools.partial(model.fit, X, y, rng=np.random.default_rng(0))
    return _spy(adassp_module, "gaussian", fit, blind=blind)


def _gaussian_replay(kw: dict[str, Any]) -> Callable[[np.ndarray, int, Any], np.ndarray]:
    params = {k: kw[k] for k in ("l2_sensitivity", "epsilon", "delta")}

    def sampler(exact: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        return gaussian(np.broadcast_to(exact, (n, exact.size)), rng=rng, **params)

    return sampler


def _halved_l2(*args: Any, **kwargs: Any) -> BlockSensitivity:
    s = l2_sensitivity(*args, **kwargs)
    return BlockSensitivity(
        quadratic=s.quadratic / 2,
        feature_sum=s.feature_sum / 2,
        count=s.count / 2,
        cross=s.cross / 2,
        target_sum=s.target_sum / 2,
        norm=s.norm,
    )


@pytest.mark.parametrize("release", range(3), ids=ADA_RELEASES)
def test_adassp_releases_pass_and_their_twins_are_rejected(
    release: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls, calls_nb = _adassp_calls(ADA_X, ADA_Y), _adassp_calls(ADA_X_NB, ADA_Y_NB)
    assert len(calls) == len(calls_nb) == 3
    exact, _, kw = calls[release]
    exact_nb, _, kw_nb = calls_nb[release]
    exact = np.atleast_1d(np.asarray(exact, dtype=np.float64))
    exact_nb = np.atleast_1d(np.asarray(exact_nb, dtype=np.float64))
    assert kw == kw_nb | {"rng": kw["rng"]}  # public parameters: the same on D and D'
    assert (kw["epsilon"], kw["delta"]) == pytest.approx((ADA_EPS / 3, ADA_DELTA / 3), rel=1e-12)
    _attains(float(np.linalg.norm(exact_nb - exact)), kw["l2_sensitivity"])
    kwargs: dict[str, Any] = {
        "dataset": exact,
        "neighbour": exact_nb,
        "epsilon": kw["epsilon"],
        "delta": kw["delta"],
        "samples": 500_000,
    }
    # Twin 1: fit told twice the epsilon (every share doubled, sigma less than halved).
    _, _, kw_twin = _adassp_calls(ADA_X, ADA_Y, epsilon=2 * ADA_EPS)[release]
    real, twin = audit_twins(_gaussian_replay(kw), _gaussian_replay(kw_twin), seed=51, **kwargs)
    check_twins(real, twin, tight=0.4)  # seeds 0-2: real 0.57-0.64 of eps, twin 1.24-1.36
    if ADA_RELEASES[release] == "lambda_min":
        return
    # Twin 2: the block sensitivities understated by 2x inside adassp_fit.
    monkeypatch.setattr(adassp_module, "l2_sensitivity", _halved_l2)
    _, _, kw_half = _adassp_calls(ADA_X, ADA_Y)[release]
    assert kw_half["l2_sensitivity"] == pytest.approx(kw["l2_sensitivity"] / 2, rel=1e-12)
    half = audit(_gaussian_replay(kw_half), rng=np.random.default_rng(51), **kwargs)
    assert not half.passed, half.summary()


# --- 5. linear regression, functional mechanism (the default method) --------------------------

LIN_EPS = 1.0
# Unit ball, d = 2, intercept, target [-1, 1]: the added row x = (1, 1)/sqrt(2), y = 1 attains
# the add/remove L1 sensitivity of all five parts (FUN_ROW of section 2).
LIN_X = np.array([[0.3, -0.2], [-0.5, 0.1], [0.0, 0.6]])
LIN_Y = np.array([0.4, -0.9, 0.1])


def _linear_calls(
    X: np.ndarray, y: np.ndarray, *, epsilon: float = LIN_EPS, blind: bool = False
) -> tuple[list[Call], LinearFit]:
    model = LinearRegression(epsilon, data_norm=1.0, bounds_y=(-1.0, 1.0))
    fit = functools.partial(model.fit, X, y, rng=np.random.default_rng(0))
    return _spy_fit(functional_module, "laplace", fit, blind=blind)


def test_linear_functional_parts_pass_and_their_twins_are_rejected() -> None:
    # Each recorded part of a real fit (count, target sum, then quadratic, feature sum and
    # cross at the shares the fit derived for the shrunk solve), on D and D' = D + the corner
    # row, at its recorded sensitivity and a common epsilon, as in section 2 (an audit of the
    # whole 9-coordinate release has too little power on the corner event: eps_lb 0.33).
    X_nb, y_nb = np.vstack([LIN_X, FUN_ROW]), np.append(LIN_Y, 1.0)
    calls, _ = _linear_calls(LIN_X, LIN_Y)
    calls_nb, _ = _linear_calls(X_nb, y_nb)
    assert len(calls) == len(calls_nb) == 5
    for run in (calls, calls_nb):
        assert sum(kw["epsilon"] for _, _, kw in run) == pytest.approx(LIN_EPS, rel=1e-12)
    # seeds 60-62: real 0.83-0.93, twin 1.75-1.88
    _audit_laplace_parts(calls, calls_nb, epsilon=LIN_EPS, seed=61)


# --- the models read the data only through the audited calls ----------------------------------


def test_trace_fit_reads_data_only_through_the_audited_releases() -> None:
    X_nb = np.vstack([TR_X, [1.0, 1.0]])
    y_nb, t_nb = np.append(TR_Y, 1.0), np.append(TR_T, TR_TASK)
    _, a = _trace_calls(TR_X, TR_Y, TR_T, blind=True)
    _, b = _trace_calls(X_nb, y_nb, t_nb, blind=True)
    assert a.to_dict() == b.to_dict()


def test_linear_functional_fit_reads_data_only_through_the_audited_releases() -> None:
    # The shrunk solve, the noisy count's floor and the un-shifting are post-processing.
    _, a = _linear_calls(LIN_X, LIN_Y, blind=True)
    _, b = _linear_calls(np.vstack([LIN_X, FUN_ROW]), np.append(LIN_Y, 1.0), blind=True)
    assert a.to_dict() == b.to_dict()


def test_logistic_functional_fit_reads_data_only_through_the_audited_releases() -> None:
    models = []
    for X, y in ((FUN_X, FUN_Y), (np.vstack([FUN_X, FUN_ROW, -FUN_ROW]), np.r_[FUN_Y, 1, 0])):
        model = LogisticRegression(FUN_EPS, data_norm=1.0, method="functional")
        fit = functools.partial(model.fit, X, y, rng=np.random.default_rng(0))
        models.append(_spy_fit(functional_module, "laplace", fit, blind=True)[1].to_dict())
    assert models[0] == models[1]
