"""The workload-norm projection: its certified guarantee, the interior-point path, the limits.

The guarantee tests are deterministic (fixed seeds) and must hold for *every* noise draw and
every non-negative truth, so a single counterexample fails them; the only slack is rounding
(relative 1e-9 on the error norm, far above the 1e-12 the certificate allows).
"""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import dppub.dp.matrix as mx
from dppub.dp.errors import ConfigError, SolverError
from dppub.dp.matrix.interior import interior_nnls

proj = importlib.import_module("dppub.dp.matrix.project")
rec = importlib.import_module("dppub.dp.matrix.reconstruct")

# 2-way marginals over 2,880 cells (263 queries): above MAX_DENSE_CELLS, so the interior-point
# method and the certificate do the work, as for the demo's 3,600- and 72,000-cell workloads.
WIDE = mx.marginals((8, 6, 5, 3, 4), 2)
RTOL = 1e-9


def _wnorm(w: mx.Workload, e: np.ndarray) -> float:
    return float(np.sqrt(e @ w.gram_matmul(e)))


def _sparse_truth(rng: np.random.Generator, n: int, density: float, scale: float) -> np.ndarray:
    return np.asarray(rng.poisson(scale, n) * (rng.random(n) < density).astype(float))


def _never_worse(w: mx.Workload, est: np.ndarray, x_ls: np.ndarray, truth: np.ndarray) -> bool:
    return _wnorm(w, est - truth) <= _wnorm(w, x_ls - truth) * (1 + RTOL) + RTOL


def test_wide_workload_takes_the_interior_point_path() -> None:
    assert WIDE.n > proj.MAX_DENSE_CELLS >= WIDE.m
    assert not rec._full_rank(WIDE)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12))
def test_nonneg_l1_never_loses_to_least_squares_at_any_nonnegative_truth(seed: int) -> None:
    # The certificate (h >= 0 and ||W p|| <= ||W x_ls||) is equivalent to the guarantee at every
    # truth x >= 0, not only the one that generated the data: check the data's truth, the empty
    # histogram, a single huge cell and random histograms unrelated to the data.
    rng = np.random.default_rng(seed)
    density, scale, epsilon = [(0.05, 3.0, 0.05), (0.3, 20.0, 0.5), (0.6, 2.0, 0.5)][seed % 3]
    x = _sparse_truth(rng, WIDE.n, density, scale)
    identity = mx.kron_strategy(*(mx.identity_strategy(d) for d in WIDE.domain))
    strategy = mx.workload_strategy(WIDE) if seed % 2 else identity
    meas = mx.measure(strategy, x, epsilon=epsilon, rng=rng)
    x_ls = mx.reconstruct(meas, WIDE, method="least-squares")
    est = mx.reconstruct(meas, WIDE)
    assert est.min() >= 0
    assert x_ls.min() < 0  # the projection had work to do
    spike = np.zeros(WIDE.n)
    spike[rng.integers(WIDE.n)] = 1e9
    truths = [x, np.zeros(WIDE.n), spike] + [
        _sparse_truth(rng, WIDE.n, rng.random(), 10 ** rng.uniform(0, 4)) for _ in range(8)
    ]
    for truth in truths:
        assert _never_worse(WIDE, est, x_ls, truth)


@pytest.mark.slow
@pytest.mark.parametrize(("records", "epsilon"), [(10**7, 0.01), (10**7, 1.0), (10**5, 1.0)])
def test_certificate_holds_when_least_squares_is_nearly_consistent(
    records: int, epsilon: float
) -> None:
    # With many records the least-squares answers are (nearly) those of a non-negative histogram:
    # the projection moves them by ~0 and the certificate's margin ||W (x_ls - p)||^2 is ~0, so
    # it must be met to rounding (the solver's own tolerance would not do).
    rng = np.random.default_rng(5)
    prob = rng.dirichlet(np.full(WIDE.n, 0.3))
    prob[rng.random(WIDE.n) < 0.5] = 0.0
    x = rng.multinomial(records, prob / prob.sum()).astype(float)
    meas = mx.measure(mx.workload_strategy(WIDE), x, epsilon=epsilon, rng=rng)
    x_ls = mx.reconstruct(meas, WIDE, method="least-squares")
    est = mx.reconstruct(meas, WIDE)
    assert est.min() >= 0
    assert _never_worse(WIDE, est, x_ls, x)
    assert _never_worse(WIDE, est, x_ls, np.zeros(WIDE.n))


def test_interior_point_matches_the_exact_active_set_projection() -> None:
    # Below MAX_DENSE_CELLS the exact Lawson-Hanson NNLS runs; the interior-point method must
    # reach the same (unique) answers.
    w = mx.marginals((4, 5, 3, 2), 2)
    rng = np.random.default_rng(3)
    x_ls = rng.normal(size=w.n) * 4 + (rng.random(w.n) < 0.3) * 8
    exact = proj.workload_projection(w, x_ls)
    fast = interior_nnls(proj.sparse_workload(w), x_ls)
    assert fast.min() >= 0
    np.testing.assert_allclose(w @ fast, w @ exact, atol=1e-7 * np.max(np.abs(w @ exact)))


def test_certify_repairs_small_violations_and_refuses_a_bad_candidate() -> None:
    w = mx.marginals((4, 5, 3), 2)
    rng = np.random.default_rng(8)
    x_ls = rng.normal(size=w.n) * 3 + 2
    exact = proj.workload_projection(w, x_ls)
    # Lower the positive cells a little: their gradient h turns negative, then gets repaired.
    nudged = np.where(exact > 0, exact - 1e-4, 0.0)
    h_before = w.gram_matmul(nudged - x_ls)
    assert h_before.min() < -1e-5
    fixed = proj.certify(w, x_ls, nudged)
    assert w.gram_matmul(fixed - x_ls).min() >= -1e-9
    assert np.max(np.abs(fixed - exact)) < 1e-3
    for truth in (np.zeros(w.n), np.abs(x_ls)):
        assert _never_worse(w, fixed, x_ls, truth)
    with pytest.raises(SolverError, match=r"not certified \(\|\|W x\|\| grew\)"):
        proj.certify(w, x_ls, exact + 50.0)


def test_a_nonnegative_estimate_is_returned_unchanged() -> None:
    x_ls = np.arange(WIDE.n, dtype=float) % 7
    np.testing.assert_array_equal(proj.workload_projection(WIDE, x_ls), x_ls)


@pytest.mark.parametrize(
    ("workload", "limit"),
    [
        (mx.kron(mx.all_range(256), mx.all_range(256)), "MAX_PROJECTION_QUERIES"),
        (mx.marginals((64, 64, 8), 2), "MAX_PROJECTION_QUERIES"),
        (mx.marginals((16,) * 6, 1), "MAX_PROJECTION_CELLS"),
    ],
    ids=["2d-ranges", "wide-marginals", "huge-domain"],
)
def test_too_large_workloads_are_refused_before_measuring(
    workload: mx.Workload, limit: str
) -> None:
    with pytest.raises(ConfigError, match=limit) as err:
        rec.check_reconstruction(workload, "nonneg-l1")
    assert "\n" not in str(err.value) and "least-squares" in str(err.value)
    assert rec.check_reconstruction(workload, "least-squares") == "least-squares"
    # answer() checks before the histogram is even validated: no budget can be spent.
    with pytest.raises(ConfigError, match=limit):
        mx.answer(workload, np.zeros(1), epsilon=1.0, rng=np.random.default_rng(0))


def test_supported_shapes_pass_the_check() -> None:
    for w in (mx.prefix(10**6), mx.all_range(10**5), WIDE, mx.marginals((15, 2, 5, 6, 4, 20), 2)):
        assert rec.check_reconstruction(w, "nonneg-l1") == "nonneg-l1"


def test_interior_point_keeps_cells_no_query_reads() -> None:
    # A column of zeros: any value is optimal there; the clipped estimate is kept and the
    # barrier never pushes it to infinity.
    rng = np.random.default_rng(1)
    mat = sp.random(30, 200, density=0.1, random_state=3, format="csc")
    mat.data[:] = 1.0
    mat = sp.csr_matrix(mat @ sp.diags((np.arange(200) != 7).astype(float)))
    x_ls = rng.normal(size=200) * 3
    out = interior_nnls(mat, x_ls)
    assert out[7] == max(x_ls[7], 0.0)
    assert out.min() >= 0 and np.all(np.isfinite(out))
    h = mat.T @ (mat @ (out - x_ls))
    assert h.min() > -1e-6  # near-optimal: the gradient is (almost) non-negative


@pytest.mark.slow
def test_an_uncertified_interior_point_falls_back_to_the_exact_active_set(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The demo's 2-way marginals over age x sex x race x education x marital (3,600 cells) on
    its 50,000-row sample: noise draws 0 and 25 left the interior point short of the
    certificate, so ``dppub run`` failed after its draw (and was charged)."""
    import pandas as pd

    from dppub.dp.pipeline.declared_domains import histogram_axis
    from dppub.dp.pipeline.kinds.workload.item import WorkloadModel
    from dppub.dp.pipeline.kinds.workload.kind import workload_operator
    from dppub.dp.pipeline.plan import load_config
    from dppub.dp.reference.histogram import histogram
    from tests.conftest import generate

    cfg = load_config(Path(__file__).resolve().parents[3] / "configs" / "demo.yaml")
    attrs = [{"column": "age", "level": 1}]
    attrs += [{"column": c} for c in ("sex", "race", "education", "marital")]
    model = WorkloadModel.model_validate(
        {"name": "m", "epsilon": 0.2, "attributes": attrs, "workload": "marginals", "marginal_k": 2}
    )
    axes = [
        histogram_axis(cfg, "m", a.column, bins=a.bins, level=a.level) for a in model.attributes
    ]
    w, _ = workload_operator(model, axes)
    path = tmp_path_factory.mktemp("sample") / "census.parquet"
    generate.write(50_000, 20261121, path)
    x = histogram(pd.read_parquet(path), axes)
    strategy = mx.select_strategy(w)
    for seed in (0, 25):
        meas = mx.measure(strategy, x, epsilon=0.2, rng=np.random.default_rng(seed))
        x_ls = mx.least_squares(meas)
        est = proj.workload_projection(w, x_ls)  # raised SolverError before
        assert est.min() >= 0
        assert _never_worse(w, est, x_ls, x) and _never_worse(w, est, x_ls, np.zeros(w.n))
