"""Benchmark: DP linear regression test MSE relative to non-private OLS (issue 5).

Prints one table and writes ``bench/results/regression.json``. Not run by the test suite.

Synthetic data: ``x`` uniform in the unit ball of R^d, ``w`` uniform on the unit sphere (the
largest signal the bounds allow: ``|x^T w| <= 1``),
``y = clip(x^T w + 0.1 + N(0, sigma^2), -1, 1)``, n_train = 80,000, n_test = 20,000.
Declared bounds: ``data_norm = 1``, ``bounds_y = (-1, 1)``
(diffprivlib gets the enclosing box ``[-1, 1]^d``). Real data (if the packages are importable):
scikit-learn's ``diabetes`` and statsmodels' ``randhie``; their bounds are the columns' min/max,
declared as a data owner would from a codebook (bench only -- dppub never derives bounds).

Cells are medians (and 90th percentiles) over seeds of ``MSE / MSE_OLS``; "zero" predicts the
midpoint of ``bounds_y``. A fit "explodes" if a coefficient is non-finite or its test MSE exceeds
100x that of predicting zero.

Usage (diffprivlib/scikit-learn/statsmodels live in a separate environment, see the report)::

    /tmp/benchvenv/bin/python bench/regression.py --seeds 20
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dp.regression import LinearRegression  # noqa: E402

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
        return model.coef_, model.intercept_, model.predict

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
    coef = np.asarray(model.coef_, float)
    return coef, float(model.intercept_), lambda Z: Z @ coef + float(model.intercept_)


def _ols(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    A = np.c_[X, np.ones(len(X))]
    theta = np.linalg.lstsq(A, y, rcond=None)[0]
    return theta[:-1], float(theta[-1])


def run(seeds: int, sigmas: list[float], include_dpl: bool) -> dict[str, Any]:
    methods: dict[str, Fitter] = {
        "functional": _fit_dppub("functional"),
        "adassp(d=1e-6)": _fit_dppub("adassp"),
    }
    if include_dpl:
        methods["diffprivlib"] = _fit_diffprivlib
    epsilons = [0.1, 0.5, 1.0, 10.0]
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
    results: dict[str, Any] = {"cells": [], "fits": {}, "exploding": {}}
    for label, make in settings:
        ratios: dict[tuple[str, float], list[float]] = {}
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
                for eps in epsilons:
                    coef, icpt, predict = fit(data["Xtr"], data["ytr"], eps, data["bounds"], rng)
                    with np.errstate(all="ignore"):
                        mse = float(np.mean((predict(data["Xte"]) - data["yte"]) ** 2))
                    bad = not (np.all(np.isfinite(coef)) and np.isfinite(icpt)) or not (
                        np.isfinite(mse) and mse <= 100 * mse_zero
                    )
                    results["fits"][name] = results["fits"].get(name, 0) + 1
                    results["exploding"][name] = results["exploding"].get(name, 0) + int(bad)
                    ratios.setdefault((name, eps), []).append(mse / mse_ols)
        for (name, eps), r in ratios.items():
            results["cells"].append(
                {
                    "data": label,
                    "method": name,
                    "epsilon": eps,
                    "median_ratio": float(np.median(r)),
                    "p90_ratio": float(np.percentile(r, 90)),
                    "zero_ratio_median": float(np.median(zero_ratio)),
                    "seeds": seeds,
                }
            )
    return results


def print_table(results: dict[str, Any]) -> None:
    cells = results["cells"]
    eps_list = sorted({c["epsilon"] for c in cells})
    head = f"{'data':30s} {'method':16s} " + " ".join(f"eps={e:<13g}" for e in eps_list)
    print(head + "  zero")
    print("-" * len(head) + "------")
    seen: dict[tuple[str, str], dict[float, dict[str, Any]]] = {}
    for c in cells:
        seen.setdefault((c["data"], c["method"]), {})[c["epsilon"]] = c
    for (data, method), row in seen.items():
        vals = " ".join(
            f"{row[e]['median_ratio']:7.4g}/{row[e]['p90_ratio']:<7.4g}" if e in row else " " * 15
            for e in eps_list
        )
        print(
            f"{data:30s} {method:16s} {vals}  {next(iter(row.values()))['zero_ratio_median']:.3g}"
        )
    print("cells: median/p90 of MSE / OLS MSE; zero: predicting the midpoint of bounds_y")
    for name, n in results["fits"].items():
        print(f"{name}: {results['exploding'][name]} exploding fits out of {n}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--sigma", type=float, nargs="+", default=[0.1, 0.2])
    ap.add_argument("--no-diffprivlib", action="store_true")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "regression.json")
    args = ap.parse_args()
    include_dpl = not args.no_diffprivlib
    if include_dpl:
        try:
            import diffprivlib  # noqa: F401
        except ImportError:
            include_dpl = False
            print("diffprivlib not importable: skipping it", file=sys.stderr)
    t0 = time.time()
    results = run(args.seeds, args.sigma, include_dpl)
    results["seconds"] = round(time.time() - t0, 1)
    results["args"] = {"seeds": args.seeds, "sigma": args.sigma}
    print_table(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))
    print(f"wrote {args.out} in {results['seconds']} s")


if __name__ == "__main__":
    main()
