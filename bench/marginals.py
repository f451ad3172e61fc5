"""Benchmark: strategies for 2- and 3-way marginals, Laplace vs Gaussian noise.

Prints one table and writes ``bench/results/marginals.json``. Not run by the test suite.

Workloads: all 2- and 3-way marginals of
* the demo (``configs/demo.yaml``): age in 5-year bands over [17, 90] x sex x race x education
  x marital status, 15 x 2 x 5 x 6 x 4 = 3,600 cells;
* Adult (``data/public/adult``, the ARX extract): its nine attributes over the domains its
  hierarchy files declare, age in their 5-year bands, 2 x 20 x 5 x 7 x 16 x 41 x 8 x 14 x 2 =
  205,721,600 cells (expected errors only: they need 2^9 numbers, never the histogram).

Rows, per workload (expected per-query RMSE of least-squares answers, data-independent):
* Laplace at epsilon = 1 (every Laplace RMSE scales as 1 / epsilon): the identity, the workload
  as its own strategy, HDMM's marginals template as its reference code runs it (one L-BFGS-B
  from a uniform random start, ftol 1e-4; median and range over 10 seeds), the optimized weights
  ``opt_marginals`` (fixed-seed restarts) and what ``select_strategy`` picks, and the SVD bound.
* Gaussian at equal (epsilon, delta), epsilon in {1, 0.1}, delta in {1e-6, 1e-9}, with the
  residual strategy (ResidualPlanner), calibrated two ways: rho-zCDP converted by the standard
  ``epsilon = rho + 2 sqrt(rho ln(1/delta))`` (``sigma = Delta_2 / sqrt(2 rho)``), and the analytic
  Gaussian at (epsilon, delta) that ``measure_gaussian`` uses. Column ``vs Laplace``: the
  Gaussian RMSE over the best Laplace RMSE at the same epsilon (< 1: Gaussian wins).

Then seeded end-to-end checks on data (numpy noise, 50 draws each): the demo sample's 2-way
marginals and Adult's 2-way marginals over five attributes (age x sex x race x education x
marital, 22,400 cells), empirical RMSE of least squares against the expected figure, and
wall times; and the 72,000-cell case (the demo's attributes x 20 income bins). Least squares
only: the default non-negative reconstruction projects with a generic QP above 2,048 cells
(``dp/matrix/project.py``), which did not finish within 15 minutes on the demo's 3,600 cells.

    .venv/bin/python bench/marginals.py            # ~1-2 min
    .venv/bin/python bench/marginals.py --quick    # 3 HDMM seeds, 10 draws
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import csv
import json
import math
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import dppub.dp.matrix as mx  # noqa: E402
from dppub.dp.matrix.marginal_basis import complement_sizes  # noqa: E402
from dppub.dp.matrix.opt_marginals import descend  # noqa: E402
from dppub.dp.reference.public_data import folder  # noqa: E402

ADULT = folder("adult")
DEMO_DATA = ROOT / "data" / "sample" / "census.parquet"
OUT = ROOT / "bench" / "results" / "marginals.json"

DEMO_COLUMNS = {
    "sex": ["Female", "Male"],
    "race": ["White", "Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other"],
    "education": ["Preschool", "HS-grad", "Some-college", "Bachelors", "Masters", "Doctorate"],
    "marital": ["Never-married", "Married", "Divorced", "Widowed"],
}
DEMO_DIMS = (15, 2, 5, 6, 4)
ADULT_ORDER = [
    "sex",
    "age",
    "race",
    "marital-status",
    "education",
    "native-country",
    "workclass",
    "occupation",
    "salary-class",
]
ADULT_SMALL = ["age", "sex", "race", "education", "marital-status"]
GAUSS = [(1.0, 1e-6), (1.0, 1e-9), (0.1, 1e-6), (0.1, 1e-9)]
HDMM_REFERENCE = {"demo k=2": 10.72}  # the quick reproduction of HDMM


def _leaves(column: str) -> list[str]:
    with open(ADULT / f"adult_hierarchy_{column}.csv") as fh:
        return [row[0] for row in csv.reader(fh, delimiter=";")]


def adult_dims(columns: list[str]) -> tuple[int, ...]:
    return tuple(20 if c == "age" else len(_leaves(c)) for c in columns)


def adult_histogram(columns: list[str]) -> np.ndarray:
    frame = pd.read_csv(ADULT / "adult.csv", sep=";", dtype=str)
    codes = []
    for c in columns:
        if c == "age":
            codes.append(frame[c].astype(int).to_numpy() // 5)  # the hierarchy's 0-4, 5-9, ...
        else:
            leaves = {v: i for i, v in enumerate(_leaves(c))}
            codes.append(frame[c].map(leaves).to_numpy())
    dims = adult_dims(columns)
    flat = np.ravel_multi_index(tuple(np.asarray(k, dtype=np.int64) for k in codes), dims)
    return np.bincount(flat, minlength=math.prod(dims)).astype(float)


def demo_histogram() -> np.ndarray:
    frame = pd.read_parquet(DEMO_DATA)
    codes = [(frame["age"].clip(17, 90).to_numpy() - 17) // 5]
    for column, cats in DEMO_COLUMNS.items():
        codes.append(frame[column].map({v: i for i, v in enumerate(cats)}).to_numpy())
    flat = np.ravel_multi_index(tuple(np.asarray(k, dtype=np.int64) for k in codes), DEMO_DIMS)
    return np.bincount(flat, minlength=math.prod(DEMO_DIMS)).astype(float)


def laplace_rmse(w: mx.Workload, a: mx.Strategy, eps: float = 1.0) -> float:
    return mx.expected_rmse(w, a, eps)


def hdmm_one_start(w: mx.Workload, seed: int) -> float:
    """HDMM's Marginals template as its reference code optimizes it: ``np.random.rand`` start,
    L-BFGS-B with ``ftol = 1e-4``, the loss in its own (unnormalized) units."""
    c = mx.pattern_weights(w)
    assert c is not None
    sizes = complement_sizes(w.domain)
    d = len(w.domain)
    x0 = np.random.default_rng(seed).uniform(0.0, 1.0, 1 << d)
    theta = descend(x0, c, sizes, ftol=1e-4, gtol=1e-5)  # scipy's default gtol
    a = mx.MarginalsStrategy(dims=w.domain, weights=theta)
    return laplace_rmse(w, a)


def zcdp_rmse(w: mx.Workload, a: mx.Strategy, eps: float, delta: float) -> float:
    sigma = a.l2_sensitivity / math.sqrt(2.0 * mx.zcdp_rho(eps, delta))
    return sigma * math.sqrt(a.squared_error_factor(w) / w.m)


def analytic_rmse(w: mx.Workload, a: mx.Strategy, eps: float, delta: float) -> float:
    return mx.expected_rmse_gaussian(w, a, epsilon=eps, delta=delta)


def expected_rows(name: str, w: mx.Workload, seeds: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    bound1 = mx.svd_bound_rmse(w, 1.0)

    def add(eps: float, delta: float, what: str, rmse: float, **extra: Any) -> None:
        rows.append(
            {
                "workload": name,
                "cells": w.n,
                "queries": w.m,
                "epsilon": eps,
                "delta": delta,
                "strategy": what,
                "rmse": rmse,
                "over_bound": rmse / mx.svd_bound_rmse(w, eps),
                **extra,
            }
        )

    ident = mx.kron_strategy(*(mx.identity_strategy(n) for n in w.domain))
    add(1.0, 0.0, "Laplace: identity", laplace_rmse(w, ident))
    add(1.0, 0.0, "Laplace: workload", laplace_rmse(w, mx.workload_strategy(w)))
    hdmm = [hdmm_one_start(w, s) for s in range(seeds)]
    add(
        1.0,
        0.0,
        "Laplace: HDMM one start (median)",
        statistics.median(hdmm),
        low=min(hdmm),
        high=max(hdmm),
    )
    t0, c0 = time.perf_counter(), time.process_time()
    opt = mx.opt_marginals(w)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert opt is not None
    add(1.0, 0.0, f"Laplace: {opt.name}", laplace_rmse(w, opt), wall=wall, cpu=cpu)
    chosen = mx.select_strategy(w)
    best = laplace_rmse(w, chosen)
    add(1.0, 0.0, f"Laplace: selected = {chosen.name}", best)
    add(1.0, 0.0, "SVD bound", bound1)
    res = mx.select_strategy(w, noise="gaussian")
    for eps, delta in GAUSS:
        lap = best / eps  # Laplace RMSE scales as 1 / epsilon
        for label, fn in (("zCDP, standard conversion", zcdp_rmse), ("analytic", analytic_rmse)):
            g = fn(w, res, eps, delta)
            add(eps, delta, f"Gaussian {res.name}: {label}", g, vs_laplace=g / lap)
    return rows


def empirical(
    name: str, w: mx.Workload, x: np.ndarray, draws: int, seed: int
) -> list[dict[str, Any]]:
    """Seeded end-to-end runs on real counts: empirical RMSE vs the expected figure."""
    out = []
    truth = w @ x
    rng = np.random.default_rng(seed)
    lap = mx.select_strategy(w)
    gau = mx.select_strategy(w, noise="gaussian")
    cases = [
        ("Laplace", lap, lambda: mx.measure(lap, x, epsilon=1.0, rng=rng)),
        (
            "Gaussian (1, 1e-6)",
            gau,
            lambda: mx.measure_gaussian(gau, x, epsilon=1.0, delta=1e-6, rng=rng),
        ),
    ]
    for label, a, draw in cases:
        expected = laplace_rmse(w, a) if label == "Laplace" else analytic_rmse(w, a, 1.0, 1e-6)
        sq, t_ls = [], 0.0
        for _ in range(draws):
            t0 = time.perf_counter()
            est = mx.least_squares(draw())
            t_ls += time.perf_counter() - t0
            sq.append(float(np.mean((w @ est - truth) ** 2)))
        out.append(
            {
                "workload": name,
                "noise": label,
                "strategy": a.name,
                "expected_rmse": expected,
                "empirical_rmse": math.sqrt(statistics.mean(sq)),
                "measure_ls_seconds": t_ls / draws,
            }
        )
    return out


def scale_check() -> dict[str, Any]:
    """72,000 cells: selection, then measurement and least squares."""
    w = mx.marginals((*DEMO_DIMS, 20), 2)
    t0 = time.perf_counter()
    a = mx.select_strategy(w)
    select_s = time.perf_counter() - t0
    x = np.random.default_rng(3).poisson(0.7, w.n).astype(float)
    t0 = time.perf_counter()
    est = mx.least_squares(mx.measure(a, x, epsilon=1.0, rng=np.random.default_rng(4)))
    ls_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    mx.least_squares(mx.measure(a, x, epsilon=1.0))  # release-grade OpenDP noise
    release_s = time.perf_counter() - t0
    return {
        "cells": w.n,
        "queries": w.m,
        "strategy": a.name,
        "expected_rmse": laplace_rmse(w, a),
        "ls_rmse_one_draw": float(np.sqrt(np.mean((w @ est - w @ x) ** 2))),
        "select_seconds": select_s,
        "measure_ls_seconds": ls_s,
        "release_measure_ls_seconds": release_s,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 HDMM seeds, 10 draws")
    args = parser.parse_args()
    seeds, draws = (3, 10) if args.quick else (10, 50)
    start = time.perf_counter()
    workloads = {
        f"{tag} k={k}": mx.marginals(dims, k)
        for tag, dims in (("demo", DEMO_DIMS), ("adult", adult_dims(ADULT_ORDER)))
        for k in (2, 3)
    }
    rows = [r for name, w in workloads.items() for r in expected_rows(name, w, seeds)]
    print("| workload | cells | eps | delta | strategy | expected RMSE | / bound | vs Laplace |")
    print("|---|---:|---:|---:|---|---:|---:|---:|")
    for r in rows:
        spread = f" [{r['low']:.2f}-{r['high']:.2f}]" if "low" in r else ""
        timing = f" ({r['wall']:.1f} s)" if "wall" in r else ""
        vs = f"{r['vs_laplace']:.2f}" if "vs_laplace" in r else ""
        print(
            f"| {r['workload']} | {r['cells']:,} | {r['epsilon']:g} | {r['delta']:g} | "
            f"{r['strategy']}{timing} | {r['rmse']:.2f}{spread} | {r['over_bound']:.2f} | {vs} |"
        )
    checks = empirical("demo k=2", mx.marginals(DEMO_DIMS, 2), demo_histogram(), draws, 1)
    small = mx.marginals(adult_dims(ADULT_SMALL), 2)
    checks += empirical("adult-5 k=2", small, adult_histogram(ADULT_SMALL), draws, 2)
    for c in checks:
        print(
            f"# {c['workload']} on data, {c['noise']}, {c['strategy']}: empirical RMSE "
            f"{c['empirical_rmse']:.2f} vs expected {c['expected_rmse']:.2f} (least squares, "
            f"{draws} draws); measure + LS {c['measure_ls_seconds'] * 1e3:.1f} ms"
        )
    big = scale_check()
    print(
        f"# {big['cells']:,} cells ({big['queries']:,} queries), {big['strategy']}: select "
        f"{big['select_seconds']:.1f} s, measure + LS {big['measure_ls_seconds'] * 1e3:.1f} ms "
        f"({big['release_measure_ls_seconds'] * 1e3:.0f} ms with OpenDP noise), peak RSS "
        f"{big['peak_rss_mib']:.0f} MiB; expected RMSE {big['expected_rmse']:.2f}, one draw "
        f"{big['ls_rmse_one_draw']:.2f}"
    )
    total = time.perf_counter() - start
    print(f"# wall {total:.0f} s")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps(
            {
                "expected": rows,
                "hdmm_reference": HDMM_REFERENCE,
                "empirical": checks,
                "scale": big,
                "wall_seconds": total,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
