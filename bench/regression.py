"""Benchmark: DP linear, logistic and trace regression against non-private fits (issue 5).

Prints one table and writes ``bench/results/regression.json``. Not run by the test suite.
Neighbours add or remove one record (the dppub convention); dppub never uses the exact row count.

Linear (``MSE / OLS MSE``). Synthetic: ``x`` uniform in the unit ball of R^d, ``w`` uniform on
the unit sphere (the largest signal the bounds allow: ``|x^T w| <= 1``),
``y = clip(x^T w + 0.1 + N(0, sigma^2), -1, 1)``, n_train = 80,000, n_test = 20,000; the issue
does not fix ``sigma``, so both 0.1 and 0.2 are reported. Declared bounds: ``data_norm = 1``,
``bounds_y = (-1, 1)`` (diffprivlib gets the enclosing box ``[-1, 1]^d``). Real data (if the
packages are importable): scikit-learn's ``diabetes`` and statsmodels' ``randhie``; their bounds
are the columns' min/max, declared as a data owner would from a codebook (bench only -- dppub
never derives bounds). "zero" predicts the midpoint of ``bounds_y``.

Logistic (excess misclassification, percentage points over the non-private logistic fit on the
same split). Synthetic: ``x`` uniform in the unit ball, ``w`` of norm 5 in a random direction,
``P(y = 1) = sigmoid(x^T w + 0.5)``, n_train = 20,000, n_test = 5,000, ``data_norm = 1``.

Trace (Frobenius error ratio). Rank-2 ``B`` (d = 10, 20 tasks, unit-norm columns in a shared
2-dimensional subspace), 2,000 rows per task, ``y = clip(x^T b_t + N(0, 0.1^2), -1, 1)``:
``||B_trace - B||_F / ||B_indep - B||_F`` with ``B_indep`` from 20 independent
``LinearRegression(fit_intercept=False)`` fits at the same epsilon (independent noise).

Cells are medians and 90th percentiles over seeds; the linear reference column gives the
midpoint predictor's median and 90th percentile, and the cells whose per-seed ratio to the
midpoint predictor's MSE has a 90th percentile above 1 are listed. A fit "explodes" if a
coefficient is non-finite, or (linear) its test MSE exceeds 100x that of predicting zero, or
(trace) its error exceeds 100x ``||B||_F``.

Usage (diffprivlib/scikit-learn/statsmodels live in a separate environment,
``bench/requirements-compare.txt``; without diffprivlib only its columns are skipped)::

    /tmp/benchvenv/bin/python bench/regression.py --seeds 21

``--table categorical`` and ``--table auto`` print the census tables of
``bench/regression_census.py`` instead (category features; ``method="auto"``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dppub.dp.reference.frame_regression import (  # noqa: E402
    LinearRegression,
    LogisticRegression,
    TraceRegression,
    predict,
)

Fitter = Callable[[np.ndarray, np.ndarray, float, dict[str, Any], np.random.Generator], Any]


def _ball(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    z = rng.normal(size=(n, d))
    z /= np.linalg.norm(z, axis=1, keepdims=True)
    return z * rng.random(n)[:, None] ** (1.0 / d)


def synthetic(rng: np.random.Generator, d: int, sigma: float) -> dict[str, Any]:
    w = rng.normal(size=d)
    w /= np.linalg.norm(w)
    X = _ball(rng, 100_000, d)
    y = np.clip(X @ w + 0.1 + sigma * rng.normal(size=100_000), -1.0, 1.0)
    return {
        "Xtr": X[:80_000],
        "ytr": y[:80_000],
        "Xte": X[80_000:],
        "yte": y[80_000:],
        "bounds": {"data_norm": 1.0, "box": (-np.ones(d), np.ones(d)), "bounds_y": (-1.0, 1.0)},
    }


def _split_real(X: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> dict[str, Any]:
    idx = rng.permutation(len(y))
    cut = int(0.8 * len(y))
    lo, hi = X.min(axis=0), X.max(axis=0)
    return {
        "Xtr": X[idx[:cut]],
        "ytr": y[idx[:cut]],
        "Xte": X[idx[cut:]],
        "yte": y[idx[cut:]],
        "bounds": {
            "data_norm": None,
            "box": (lo, hi),
            "bounds_y": (float(y.min()), float(y.max())),
        },
    }


def real_datasets() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    try:
        from sklearn.datasets import load_diabetes

        Xd, yd = load_diabetes(return_X_y=True)
        out["diabetes"] = (np.asarray(Xd, float), np.asarray(yd, float))
    except ImportError:
        pass
    try:
        import statsmodels.api as sm

        df = sm.datasets.randhie.load_pandas().data
        out["randhie"] = (df.drop(columns="mdvis").to_numpy(float), df["mdvis"].to_numpy(float))
    except ImportError:
        pass
    return out


def _fit_dppub(method: str) -> Fitter:
    def fit(X: np.ndarray, y: np.ndarray, eps: float, b: dict[str, Any], rng: np.random.Generator):
        kw: dict[str, Any] = {"bounds_y": b["bounds_y"], "method": method}
        if b["data_norm"] is not None:
            kw["data_norm"] = b["data_norm"]
        else:
            kw["bounds_X"] = b["box"]
        if method == "adassp":
            kw["delta"] = 1e-6
        model = LinearRegression(eps, **kw).fit(X, y, rng=rng)
        return model.coef, model.intercept, lambda Z: predict(model, Z)

    return fit


def _fit_diffprivlib(X, y, eps, b, rng):  # type: ignore[no-untyped-def]
    from diffprivlib.models import LinearRegression as DPL

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = DPL(
            epsilon=eps,
            bounds_X=b["box"],
            bounds_y=b["bounds_y"],
            random_state=int(rng.integers(2**31)),
        ).fit(X, y)
    coef = np.asarray(model.coef, float)
    return coef, float(model.intercept), lambda Z: Z @ coef + float(model.intercept)


def _ols(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    A = np.c_[X, np.ones(len(X))]
    theta = np.linalg.lstsq(A, y, rcond=None)[0]
    return theta[:-1], float(theta[-1])


EPSILONS = [0.1, 0.5, 1.0, 10.0]


def _cell(task: str, data: str, method: str, eps: float, vals: list[float], **extra: Any) -> dict:
    return {
        "task": task,
        "data": data,
        "method": method,
        "epsilon": eps,
        "median": float(np.median(vals)),
        "p90": float(np.percentile(vals, 90)),
        "seeds": len(vals),
        **extra,
    }


def _count(results: dict[str, Any], name: str, bad: bool) -> None:
    results["fits"][name] = results["fits"].get(name, 0) + 1
    results["exploding"][name] = results["exploding"].get(name, 0) + int(bad)


def run_linear(seeds: int, sigmas: list[float], include_dpl: bool, results: dict) -> None:
    methods: dict[str, Fitter] = {
        "functional": _fit_dppub("functional"),
        "adassp(d=1e-6)": _fit_dppub("adassp"),
    }
    if include_dpl:
        methods["diffprivlib"] = _fit_diffprivlib
    settings: list[tuple[str, Callable[[np.random.Generator], dict[str, Any]]]] = []
    for sigma in sigmas:
        for d in (10, 30):
            settings.append(
                (f"synth d={d} sigma={sigma}", lambda r, d=d, s=sigma: synthetic(r, d, s))
            )
    for name, (X, y) in real_datasets().items():
        settings.append(
            (f"{name} n={len(y)} d={X.shape[1]}", lambda r, X=X, y=y: _split_real(X, y, r))
        )
    for label, make in settings:
        ratios: dict[tuple[str, float], list[float]] = {}
        vs_zero: dict[tuple[str, float], list[float]] = {}
        zero_ratio: list[float] = []
        for seed in range(seeds):
            rng = np.random.default_rng([seed, len(label)])
            data = make(rng)
            w, c = _ols(data["Xtr"], data["ytr"])
            mse_ols = float(np.mean((data["Xte"] @ w + c - data["yte"]) ** 2))
            mid = sum(data["bounds"]["bounds_y"]) / 2
            mse_zero = float(np.mean((mid - data["yte"]) ** 2))
            zero_ratio.append(mse_zero / mse_ols)
            for name, fit in methods.items():
                for eps in EPSILONS:
                    coef, icpt, predict = fit(data["Xtr"], data["ytr"], eps, data["bounds"], rng)
                    with np.errstate(all="ignore"):
                        mse = float(np.mean((predict(data["Xte"]) - data["yte"]) ** 2))
                    bad = not (np.all(np.isfinite(coef)) and np.isfinite(icpt)) or not (
                        np.isfinite(mse) and mse <= 100 * mse_zero
                    )
                    _count(results, f"linear {name}", bad)
                    ratios.setdefault((name, eps), []).append(mse / mse_ols)
                    vs_zero.setdefault((name, eps), []).append(mse / mse_zero)
        for (name, eps), r in ratios.items():
            zero = [float(np.median(zero_ratio)), float(np.percentile(zero_ratio, 90))]
            p90_vs_zero = float(np.percentile(vs_zero[(name, eps)], 90))
            results["cells"].append(
                _cell("linear", label, name, eps, r, zero=zero, p90_vs_zero=p90_vs_zero)
            )


def _logistic_data(rng: np.random.Generator, d: int) -> tuple[np.ndarray, ...]:
    w = rng.normal(size=d)
    w *= 5.0 / np.linalg.norm(w)
    X = _ball(rng, 25_000, d)
    y = (rng.random(25_000) < expit(X @ w + 0.5)).astype(float)
    return X[:20_000], y[:20_000], X[20_000:], y[20_000:]


def _logistic_nonprivate(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    Z = np.c_[X, np.ones(len(X))]

    def f(w: np.ndarray) -> tuple[float, np.ndarray]:
        s = Z @ w
        return float(np.logaddexp(0, s).sum() - y @ s), Z.T @ (expit(s) - y)

    return np.asarray(minimize(f, np.zeros(Z.shape[1]), jac=True, method="L-BFGS-B").x)


def run_logistic(seeds: int, include_dpl: bool, results: dict) -> None:
    names = ["objective", "functional"] + (["diffprivlib"] if include_dpl else [])
    for d in (10, 30):
        label = f"synth n=20000 d={d}"
        excess: dict[tuple[str, float], list[float]] = {}
        base_err: list[float] = []
        for seed in range(seeds):
            rng = np.random.default_rng([seed, d, 7])
            Xtr, ytr, Xte, yte = _logistic_data(rng, d)
            w = _logistic_nonprivate(Xtr, ytr)
            base = float(np.mean(((Xte @ w[:-1] + w[-1]) > 0) != yte))
            base_err.append(100 * base)
            for name in names:
                for eps in EPSILONS:
                    if name == "diffprivlib":
                        from diffprivlib.models import LogisticRegression as DPLogit

                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            m = DPLogit(
                                epsilon=eps, data_norm=1.0, random_state=int(rng.integers(2**31))
                            ).fit(Xtr, ytr)
                        coef = np.r_[np.ravel(m.coef), np.ravel(m.intercept)]
                        pred = m.predict(Xte)
                    else:
                        fit = LogisticRegression(eps, data_norm=1.0, method=name).fit(
                            Xtr, ytr, rng=rng
                        )
                        coef = np.r_[fit.coef, fit.intercept]
                        pred = predict(fit, Xte)
                    _count(results, f"logistic {name}", not np.all(np.isfinite(coef)))
                    err = float(np.mean(pred != yte))
                    excess.setdefault((name, eps), []).append(100 * (err - base))
        for (name, eps), v in excess.items():
            results["cells"].append(
                _cell("logistic", label, name, eps, v, nonprivate_pct=float(np.median(base_err)))
            )


def _multitask(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    d, t, n_per = 10, 20, 2_000
    u = np.linalg.qr(rng.normal(size=(d, 2)))[0]
    B = u @ rng.normal(size=(2, t))
    B /= np.linalg.norm(B, axis=0, keepdims=True)
    tasks = np.repeat(np.arange(t), n_per)
    X = _ball(rng, t * n_per, d)
    y = np.clip(np.einsum("nd,dn->n", X, B[:, tasks]) + 0.1 * rng.normal(size=len(tasks)), -1, 1)
    return X, y, tasks, B


def run_trace(seeds: int, results: dict) -> None:
    ratios: dict[tuple[str, float], list[float]] = {}
    for seed in range(seeds):
        rng = np.random.default_rng([seed, 20, 2])
        X, y, tasks, B = _multitask(rng)
        scale = float(np.linalg.norm(B))
        for eps in EPSILONS:
            model = TraceRegression(eps, n_tasks=20, data_norm=1.0, bounds_y=(-1, 1)).fit(
                X, y, tasks=tasks, rng=rng
            )
            indep = np.column_stack(
                [
                    LinearRegression(eps, data_norm=1.0, bounds_y=(-1, 1), fit_intercept=False)
                    .fit(X[tasks == t], y[tasks == t], rng=rng)
                    .coef
                    for t in range(20)
                ]
            )
            err = float(np.linalg.norm(model.coef - B))
            bad = not np.all(np.isfinite(model.coef)) or err > 100 * scale
            _count(results, "trace", bad)
            ratios.setdefault(("vs independent LinearRegression", eps), []).append(
                err / float(np.linalg.norm(indep - B))
            )
            ratios.setdefault(("vs same-noise independent", eps), []).append(
                err / float(np.linalg.norm(model.independent_coef - B))
            )
            ratios.setdefault(("trace error / ||B||_F", eps), []).append(err / scale)
    for (name, eps), r in ratios.items():
        results["cells"].append(_cell("trace", "rank 2, 20 tasks, d=10", name, eps, r))


METRICS = {
    "linear": "MSE / OLS MSE",
    "logistic": "excess misclassification, points",
    "trace": "Frobenius error ratio",
}


def print_table(results: dict[str, Any]) -> None:
    cells = results["cells"]
    head = (
        f"{'task':8s} {'data':26s} {'method':32s} "
        + " ".join(f"eps={e:<12g}" for e in EPSILONS)
        + " ref"
    )
    print(head)
    print("-" * len(head))
    seen: dict[tuple[str, str, str], dict[float, dict[str, Any]]] = {}
    for c in cells:
        seen.setdefault((c["task"], c["data"], c["method"]), {})[c["epsilon"]] = c
    for (task, data, method), row in seen.items():
        vals = " ".join(
            f"{row[e]['median']:7.4g}/{row[e]['p90']:<8.4g}" if e in row else " " * 16
            for e in EPSILONS
        )
        first = next(iter(row.values()))
        ref = first.get("zero", first.get("nonprivate_pct"))
        if isinstance(ref, list):
            ref_txt = f" {ref[0]:.4g}/{ref[1]:.4g}"
        else:
            ref_txt = "" if ref is None else f" {ref:.3g}"
        print(f"{task:8s} {data:26s} {method:32s} {vals}{ref_txt}")
    print("cells: median/p90 over seeds of " + "; ".join(f"{k}: {v}" for k, v in METRICS.items()))
    print("ref: linear -- predicting the midpoint of bounds_y (MSE / OLS, median/p90); logistic --")
    print("     non-private misclassification, percent")
    worse = [
        f"{c['data']} {c['method']} eps={c['epsilon']:g}: {c['p90_vs_zero']:.3g}"
        for c in cells
        if c.get("p90_vs_zero", 0.0) > 1.0 and c["method"] != "diffprivlib"
    ]
    print("linear cells whose 90th percentile of per-seed MSE / midpoint MSE exceeds 1:")
    print("     " + ("; ".join(worse) if worse else "none"))
    for name, n in results["fits"].items():
        print(f"{name}: {results['exploding'][name]} exploding fits out of {n}")
    dp_fits = sum(n for k, n in results["fits"].items() if "diffprivlib" not in k)
    dp_bad = sum(n for k, n in results["exploding"].items() if "diffprivlib" not in k)
    print(f"dppub total: {dp_bad} exploding fits out of {dp_fits}")


def main() -> None:
    if any(a.startswith("--table") for a in sys.argv[1:]):
        from regression_census import main as census

        census(sys.argv[1:])
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=21)
    ap.add_argument("--sigma", type=float, nargs="+", default=[0.1, 0.2])
    ap.add_argument("--only", choices=["linear", "logistic", "trace"], nargs="+")
    ap.add_argument("--no-diffprivlib", action="store_true")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "regression.json")
    args = ap.parse_args()
    include_dpl = not args.no_diffprivlib
    if include_dpl:
        try:
            import diffprivlib  # noqa: F401
        except ImportError:
            include_dpl = False
            print(
                "diffprivlib is not importable: its comparison columns are skipped "
                "(pip install -r bench/requirements-compare.txt in a separate venv)",
                file=sys.stderr,
            )
    t0 = time.time()
    results: dict[str, Any] = {"cells": [], "fits": {}, "exploding": {}}
    parts = args.only or ["linear", "logistic", "trace"]
    if "linear" in parts:
        run_linear(args.seeds, args.sigma, include_dpl, results)
    if "logistic" in parts:
        run_logistic(args.seeds, include_dpl, results)
    if "trace" in parts:
        run_trace(args.seeds, results)
    results["seconds"] = round(time.time() - t0, 1)
    results["args"] = {"seeds": args.seeds, "sigma": args.sigma, "diffprivlib": include_dpl}
    print_table(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))
    print(f"wrote {args.out} in {results['seconds']} s")


if __name__ == "__main__":
    main()
