"""Benchmark: coverage and width of the published 95% intervals (answers and coefficients).

Prints one table and writes ``bench/results/intervals.json``. Not run by the test suite.

For each configuration, ``runs`` seeded releases are simulated and each gets its intervals
exactly as a release would (:func:`dp.matrix.intervals.answer_intervals`,
:func:`dp.regression.uncertainty.coefficient_table`, default replicates unless stated).
Reported per configuration:

* coverage: the share of (run, query) pairs whose interval holds the truth, with its standard
  error over runs (queries of one run share noise, so runs are the independent trials), the
  coverage on queries whose true answer is non-zero, and the worst query's coverage;
* se/RMSE: ``sqrt(mean std_error^2) / sqrt(mean error^2)`` over all (run, query) pairs, i.e.
  whether the published standard errors are as large as the errors really are;
* for bootstrapped workloads, the same two figures for the over-budget fallback (exact
  least-squares widths around the released answers), in the JSON only.

Targets: coverage in [0.93, 0.97] and se/RMSE in [0.8, 1.25].

Truths. Workloads: ``W x`` of the exact histogram. Models: the same fit on the exact
statistics of the same rows (ordinary least squares; the logistic Taylor surrogate's
minimiser; the same penalised low-rank fit for the trace regression), i.e. the intervals cover
the privacy error, not the sampling error of the rows. For every model the table also gives
the coverage of the NON-PRIVATE estimate on the same rows ("cov. of non-private": ordinary
least squares for linear and AdaSSP, the logistic regression MLE, per-task least squares for
the trace regression); for workloads the truth is the non-private answer.

Noise. Workload measurements are simulated with numpy's Laplace sampler (``A x + Lap(b)``,
same distribution as the release, far faster than OpenDP's sampler); models are fitted by
their own ``fit_statistics`` with a seeded generator (dp.mechanisms' reproducible sampler),
and each table is made from the noisy statistics the fitted model kept (``released``), as
the pipeline makes it.

Data. The demo table (``data/generate.py``, 50,000 rows, generated as the Makefile does if
missing) with the demo config's workloads and models, and DPBench 1-D histograms
(``data/public/dpbench1d.npz``: normalized, ``scale`` records drawn, coarsened).

    .venv/bin/python bench/intervals.py            # the table (~10-15 min on 2 cores)
    .venv/bin/python bench/intervals.py --quick    # 30 runs each (~2 min)
    .venv/bin/python bench/intervals.py --only dpbench
    .venv/bin/python bench/intervals.py --lp       # l1, total, 1-way marginals (~10 min)
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import minimize

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import dppub.dp.matrix as mx  # noqa: E402
from dppub.dp.anonymity import Hierarchy  # noqa: E402
from dppub.dp.axes import category_axis, hierarchy_axis, numeric_axis  # noqa: E402
from dppub.dp.matrix.intervals import answer_intervals  # noqa: E402
from dppub.dp.matrix.least_squares_intervals import least_squares_intervals  # noqa: E402
from dppub.dp.matrix.measure import Measurement  # noqa: E402
from dppub.dp.matrix.reconstruct import reconstruct  # noqa: E402
from dppub.dp.reference.frame_regression import (  # noqa: E402
    LinearRegression,
    LogisticRegression,
    TraceRegression,
    sufficient_statistics,
)
from dppub.dp.reference.histogram import histogram  # noqa: E402
from dppub.dp.reference.public_data import folder  # noqa: E402
from dppub.dp.regression.lowrank import refit_in_subspace, solve_nuclear  # noqa: E402
from dppub.dp.regression.statistics import SufficientStatistics  # noqa: E402
from dppub.dp.regression.trace import TraceFit  # noqa: E402
from dppub.dp.regression.uncertainty import coefficient_table  # noqa: E402
from dppub.dp.schema import ColumnSpec  # noqa: E402

SAMPLE = ROOT / "data" / "sample" / "census.parquet"
DPBENCH = folder("dpbench1d")
OUT = ROOT / "bench" / "results" / "intervals.json"
COVERAGE = (0.93, 0.97)
RATIO = (0.8, 1.25)
EDUCATION = ["Preschool", "HS-grad", "Some-college", "Bachelors", "Masters", "Doctorate"]
BOX = ([17.0, 1.0], [90.0, 99.0])  # age, hours: the demo config's declared bounds
INCOME = (0.0, 250_000.0)


def demo_frame() -> pd.DataFrame:
    if not SAMPLE.exists():
        cmd = [sys.executable, "data/generate.py", "--rows", "50000", "--seed", "20261121"]
        subprocess.run([*cmd, "--out", str(SAMPLE)], cwd=ROOT, check=True)
    return pd.read_parquet(SAMPLE)


def demo_histograms(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """The demo config's axes (declared domains), histograms as the pipeline builds them."""
    age = numeric_axis(ColumnSpec(name="age", type="int", bounds=(17, 90)))
    income = numeric_axis(ColumnSpec(name="income", type="float", bounds=INCOME), bins=64)
    bands = Hierarchy.from_bands(17, 90, [5, 10, 20], name="age")
    band = hierarchy_axis("age", bands, level=2)
    sex = category_axis(ColumnSpec(name="sex", type="category", categories=("Female", "Male")))
    return {
        "age": histogram(frame, [age]),
        "income": histogram(frame, [income]),
        "band_sex": histogram(frame, [band, sex]),
    }


def dpbench_histogram(name: str, n: int, scale: float) -> np.ndarray:
    """DPBench protocol: normalize, draw ``scale`` records (seeded), coarsen to ``n`` cells."""
    raw = np.load(DPBENCH / f"{name}.npy").astype(np.float64)
    draw = np.random.default_rng(20160626).multinomial(int(scale), raw / raw.sum())
    return np.asarray(draw.reshape(n, -1).sum(axis=1), dtype=np.float64)


WORKLOADS = {
    "identity": mx.identity,
    "total": mx.total,
    "prefix": mx.prefix,
    "all_range": mx.all_range,
}


def workload_jobs(runs: int, *, lp: bool) -> list[dict[str, Any]]:
    # (data, kind, n or marginal spec, epsilon, reconstruction, replicates). With ``lp``, only
    # the reconstructions whose every replicate solves a linear program (l1, and nonneg-l1 on
    # rank-deficient workloads: total, 1-way marginals), with 40 replicates: 10-20 ms each.
    lp_rows = [
        ("demo:age", "prefix", 74, 0.3, "l1", 40),
        ("demo:band_sex", "marginals1", 16, 0.2, "nonneg-l1", 40),
        ("demo:age", "total", 74, 0.3, "nonneg-l1", 40),
    ]
    demo = [
        ("demo:age", "prefix", 74, 0.3, "nonneg-l1", 200),
        ("demo:age", "prefix", 74, 0.3, "least-squares", 0),
        ("demo:income", "all_range", 64, 0.3, "nonneg-l1", 200),
        ("demo:income", "all_range", 64, 0.3, "least-squares", 0),
        ("demo:band_sex", "marginals2", 16, 0.2, "nonneg-l1", 200),
        ("demo:band_sex", "marginals2", 16, 0.2, "least-squares", 0),
        ("demo:age", "identity", 74, 0.3, "nonneg-l1", 200),
        ("demo:age", "identity", 74, 0.3, "least-squares", 0),
    ]
    bench = []
    for data in ("NETTRACE.n4096", "INCOME.n4096"):
        for scale, eps in ((1e3, 0.1), (1e5, 1.0)):
            tag = f"dpbench:{data.split('.')[0]}@{scale:.0e},eps={eps}"
            bench += [
                (tag, "prefix", 256, eps, "nonneg-l1", 200),
                (tag, "all_range", 64, eps, "nonneg-l1", 200),
                (tag, "identity", 256, eps, "nonneg-l1", 200),
                (tag, "prefix", 256, eps, "least-squares", 0),
            ]
    out = []
    for i, (data, kind, n, eps, method, reps) in enumerate(lp_rows if lp else demo + bench):
        out.append(
            {
                "group": "workload",
                "data": data,
                "kind": kind,
                "n": n,
                "epsilon": eps,
                "method": method,
                "replicates": reps,
                "runs": runs,
                "seed": (3000 if lp else 1000) + i,
            }
        )
    return out


def _histogram_for(job: dict[str, Any]) -> np.ndarray:
    data = job["data"]
    if data.startswith("demo:"):
        return demo_histograms(demo_frame())[data.split(":")[1]]
    name, rest = data.split(":")[1].split("@")
    scale = float(rest.split(",")[0])
    return dpbench_histogram(f"{name}.n4096", job["n"], scale)


def _workload(job: dict[str, Any]) -> mx.Workload:
    kind = job["kind"]
    if kind.startswith("marginals"):
        return mx.marginals((8, 2), int(kind[-1]))
    return WORKLOADS[kind](job["n"])


def run_workload(job: dict[str, Any]) -> dict[str, Any]:
    x = _histogram_for(job)
    w = _workload(job)
    a = mx.select_strategy(w)
    eps, method = job["epsilon"], job["method"]
    b = a.sensitivity / eps
    truth = w @ x
    rng = np.random.default_rng(job["seed"])
    hits, se2, err2 = [], [], []
    # The over-budget fallback: least-squares widths around the released answers.
    exact = least_squares_intervals(w, a, np.zeros(w.n), noise_scale=b)
    fallback = []
    start = time.perf_counter()
    for _ in range(job["runs"]):
        r = a @ x + rng.laplace(0.0, b, a.m)  # the mechanism, simulated (bench only)
        meas = Measurement(strategy=a, values=r, epsilon=eps, noise_scale=b)
        est = reconstruct(meas, w, method=method)
        out = answer_intervals(
            w,
            a,
            est,
            noise_scale=b,
            reconstruction=method,
            replicates=max(job["replicates"], 2),
            rng=rng,
        )
        y = w @ est
        hits.append((out.ci_low <= truth) & (truth <= out.ci_high))
        se2.append(out.std_error**2)
        err2.append((y - truth) ** 2)
        fallback.append(
            (np.maximum(y - exact.ci_high, 0.0) <= truth) & (truth <= y + exact.ci_high)
        )
    ratio = np.sqrt(np.mean(exact.std_error**2) / np.mean(err2))
    extra = {"fallback_coverage": float(np.mean(fallback)), "fallback_se_over_rmse": float(ratio)}
    return summarize(
        job | {"strategy": a.name, "queries": w.m, "interval": out.method} | extra,
        np.asarray(hits),
        np.asarray(se2),
        np.asarray(err2),
        positive=truth > 0,
        seconds=time.perf_counter() - start,
    )


def _ols(exact: SufficientStatistics, model: Any, factor: float = 1.0) -> np.ndarray:
    coef, intercept = model.design(2).unshift(factor * np.linalg.solve(exact.gram, exact.moment))
    return np.asarray(np.r_[coef, intercept])


def logistic_mle(X: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """The non-private logistic regression MLE on the same rows: ``[age, hours, intercept]``."""
    mean, scale = X.mean(axis=0), X.std(axis=0)
    Z = np.column_stack([(X - mean) / scale, np.ones(len(X))])

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        t = Z @ w
        p = 1.0 / (1.0 + np.exp(-t))
        return float(np.sum(np.logaddexp(0.0, t) - labels * t)), Z.T @ (p - labels)

    w = minimize(loss, np.zeros(Z.shape[1]), jac=True, method="BFGS", tol=1e-10).x
    coef = w[:-1] / scale
    return np.asarray(np.r_[coef, w[-1] - float(coef @ mean)])


def model_setup(which: str) -> tuple[Any, Any, np.ndarray, np.ndarray]:
    """The demo config's model, the exact statistics of the demo rows, the truth the intervals
    are for (module doc), and the non-private estimate on the same rows (OLS, the logistic
    MLE, per-task OLS)."""
    frame = demo_frame()
    X = frame[["age", "hours"]].to_numpy(np.float64)
    y = frame["income"].to_numpy(np.float64)
    if which == "linear":
        model: Any = LinearRegression(0.3, bounds_X=BOX, bounds_y=INCOME)
    elif which == "adassp":
        model = LinearRegression(0.3, bounds_X=BOX, bounds_y=INCOME, method="adassp", delta=1e-6)
    elif which == "logistic":
        model = LogisticRegression(0.15, bounds_X=BOX, method="functional")
        labels = (y > 75_000).astype(np.float64)
        exact = sufficient_statistics(X, model.response(labels), model.design(2))
        return model, exact, _ols(exact, model, 4.0), logistic_mle(X, labels)
    else:
        model = TraceRegression(0.15, n_tasks=len(EDUCATION), bounds_X=BOX, bounds_y=INCOME)
        tasks = pd.Index(EDUCATION).get_indexer(frame["education"])
        design = model.design(2)
        blocks = [
            sufficient_statistics(X[tasks == t], y[tasks == t], design)
            for t in range(len(EDUCATION))
        ]
        truth = np.concatenate(
            [np.linalg.solve(e.gram, e.moment) / design.feature_scale for e in blocks]
        )
        return model, blocks, truth, truth
    exact = sufficient_statistics(X, y, model.design(2))
    ols = _ols(exact, model)
    return model, exact, ols, ols


def model_jobs(runs: int) -> list[dict[str, Any]]:
    # Fewer replicates where a replicate is slow: AdaSSP's three Gaussian calibrations (~7 ms),
    # the trace regression's cvxpy compile and solve (~50 ms).
    spec = [("linear", 0.3, 200), ("adassp", 0.3, 100), ("logistic", 0.15, 200)]
    spec.append(("trace", 0.15, 40))
    return [
        {
            "group": "model",
            "data": "demo:census",
            "kind": which,
            "epsilon": eps,
            "method": "bootstrap",
            "replicates": reps,
            "runs": runs,
            "seed": 2000 + i,
        }
        for i, (which, eps, reps) in enumerate(spec)
    ]


def same_penalty_fit(fitted: TraceFit, exact: list[SufficientStatistics]) -> np.ndarray:
    """The trace estimator without noise: the released fit's penalty on the exact statistics,
    then the same refit in the selected subspace (its rank selection is part of the target)."""
    grams, moments = [e.gram for e in exact], [e.moment for e in exact]
    lam = float(fitted.to_dict()["penalty"])
    shape = (exact[0].dim, len(exact))
    b = solve_nuclear(grams, moments, shape=shape, lam=lam, per_column=True)
    b, _ = refit_in_subspace(b, grams, moments, per_column=True)
    return np.asarray((b / fitted.model.design(shape[0]).feature_scale[:, None]).T.ravel())


def run_model(job: dict[str, Any]) -> dict[str, Any]:
    model, exact, truth, nonprivate = model_setup(job["kind"])
    blocks = len(exact) if isinstance(exact, list) else 1
    rng = np.random.default_rng(job["seed"])
    hits, se2, err2, hits_np = [], [], [], []
    start = time.perf_counter()
    for _ in range(job["runs"]):
        fitted = model.fit_statistics(exact, d=2, rng=rng)
        table = coefficient_table(
            fitted,
            features=["age", "hours"],
            tasks=EDUCATION if blocks > 1 else None,
            replicates=job["replicates"],
            rng=rng,
        )
        if blocks > 1:
            truth = same_penalty_fit(fitted, exact)
        hits.append((table.ci_low <= truth) & (truth <= table.ci_high))
        hits_np.append((table.ci_low <= nonprivate) & (nonprivate <= table.ci_high))
        se2.append(table.std_error**2)
        err2.append((table.coefficient - truth) ** 2)
    extra = {
        "coverage_nonprivate": float(np.mean(hits_np)),
        "nonprivate_worst": float(np.asarray(hits_np).mean(axis=0).min()),
        "covers": table.covers,
    }
    return summarize(
        job | {"strategy": "-", "queries": truth.size, "interval": table.method} | extra,
        np.asarray(hits),
        np.asarray(se2),
        np.asarray(err2),
        positive=truth != 0,
        seconds=time.perf_counter() - start,
    )


def summarize(
    job: dict[str, Any],
    hits: np.ndarray,
    se2: np.ndarray,
    err2: np.ndarray,
    *,
    positive: np.ndarray,
    seconds: float,
) -> dict[str, Any]:
    per_run = hits.mean(axis=1)
    coverage = float(hits.mean())
    ratio = float(np.sqrt(se2.mean() / err2.mean())) if err2.mean() > 0 else float("nan")
    return job | {
        "coverage": coverage,
        "coverage_se": float(per_run.std(ddof=1) / np.sqrt(len(per_run))),
        "coverage_nonzero": float(hits[:, positive].mean()) if positive.any() else float("nan"),
        "worst_query": float(hits.mean(axis=0).min()),
        "se_over_rmse": ratio,
        "in_range": COVERAGE[0] <= coverage <= COVERAGE[1] and RATIO[0] <= ratio <= RATIO[1],
        "seconds": seconds,
    }


def run(job: dict[str, Any]) -> dict[str, Any]:
    return run_workload(job) if job["group"] == "workload" else run_model(job)


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| release | kind | method | queries | ε | runs | B | coverage ± se | cov. (truth ≠ 0) "
        "| worst query | se/RMSE | in range | cov. of non-private | s |\n"
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|:-:|---:|---:|"
    )
    lines = [head]
    for r in rows:
        reps = r["replicates"] if r["method"] != "least-squares" else "exact"
        lines.append(
            f"| {r['data']} | {r['kind']} | {r['method']} | {r['queries']} | {r['epsilon']} "
            f"| {r['runs']} | {reps} | {r['coverage']:.3f} ± {r['coverage_se']:.3f} "
            f"| {r['coverage_nonzero']:.3f} | {r['worst_query']:.2f} | {r['se_over_rmse']:.3f} "
            f"| {'yes' if r['in_range'] else 'NO'} "
            f"| {r.get('coverage_nonprivate', r['coverage']):.3f} | {r['seconds']:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="seeded releases per row")
    parser.add_argument("--quick", action="store_true", help="30 runs per row")
    parser.add_argument("--only", default="", help="keep rows whose data or kind contains this")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--lp", action="store_true", help="only l1, total, 1-way marginals")
    args = parser.parse_args()
    runs = 30 if args.quick else args.runs
    jobs = workload_jobs(runs, lp=args.lp) + ([] if args.lp else model_jobs(runs))
    jobs = [j for j in jobs if args.only in j["data"] or args.only in j["kind"]]
    demo_frame()  # generate the sample once, before the workers start
    start = time.perf_counter()
    # Longest jobs first, so the two workers finish together.
    order = sorted(range(len(jobs)), key=lambda i: -_cost(jobs[i]))
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        done = dict(zip(order, pool.map(run, [jobs[i] for i in order]), strict=True))
    rows = [done[i] for i in range(len(jobs))]
    wall = time.perf_counter() - start
    print(table(rows))
    print(
        f"\nwall {wall:.0f} s, {args.workers} workers; in range: "
        f"{sum(r['in_range'] for r in rows)}/{len(rows)}"
    )
    out = OUT.with_name("intervals_lp.json") if args.lp else OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rows": rows, "wall_seconds": wall}, indent=2, default=str))


def _cost(job: dict[str, Any]) -> float:
    # Rough seconds per run x replicate, for scheduling only.
    per = {"all_range": 3e-3, "trace": 5e-2, "marginals1": 2e-2, "total": 2e-2}
    unit = per.get(job["kind"], 1e-3) * (15.0 if job["method"] == "l1" else 1.0)
    return unit * job["runs"] * max(job["replicates"], 1)


if __name__ == "__main__":
    main()
