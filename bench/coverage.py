"""Benchmark: does every published 95% interval cover what it says it covers?

Prints one table and writes ``bench/results/coverage.json`` (``coverage_<groups>.json`` with
``--only``). Not run by the test suite.

One row per release kind and query type, each simulated ``--runs`` times in this process with
the release's own code (seeded numpy noise where the release draws OpenDP's, the same
distribution): workload answers (``dp.matrix.intervals.answer_intervals`` with the
least-squares estimate, as the workload kind calls it), including the ranges that start at the
last populated cell before an empty tail; a table's count, sum, mean and CDF quantiles
(``dp.tables.table.release_table``); linear-regression coefficients
(``dp.regression.uncertainty.coefficient_table``); k-means sizes
(``dp.regression.uncertainty.cluster_table`` of ``KMeans.fit_steps``); synthetic data's
per-marginal error range (with the ``mbi`` extra; few runs: each is an AIM fit).

Truths come from the same clamped and binned data (the intervals cover the noise, not the
sampling of the rows): ``W x`` of the exact histogram; the exact counts, sums and means of the
clamped values; a quantile's actual value (the smallest value with at least ``p n`` rows at or
below it); ordinary least squares on the exact statistics; a k-means size's own rows (the
previous centres' assignment: what ``release.json``'s ``size_of`` says it counts) and, in a
separate row, the rows nearest the published centres (what the size is not).

Coverage is the share of (run, query) pairs whose interval holds the truth. Queries of one run
share noise, so runs are the clusters: the 95% CI is cluster-robust, ``mean +- 1.96 sd(run
means) / sqrt(runs)`` (equal cluster sizes). ``worst`` is the worst single query's coverage.
A row is ``ok`` inside [0.94, 0.97]; otherwise ``status`` names where the release says so.

    .venv/bin/python bench/coverage.py --runs 400        # about 1 point of CI per row
    .venv/bin/python bench/coverage.py --runs 40 --only workload,tables
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import datetime as dt
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from intervals import BOX, INCOME, demo_frame, demo_histograms, model_setup  # noqa: E402

import dppub.dp.matrix as mx  # noqa: E402
from dppub.dp.kmeans import KMeans, lloyd_step  # noqa: E402
from dppub.dp.matrix.intervals import answer_intervals  # noqa: E402
from dppub.dp.matrix.measure import Measurement  # noqa: E402
from dppub.dp.matrix.reconstruct import least_squares, reconstruct  # noqa: E402
from dppub.dp.regression.uncertainty import cluster_table, coefficient_table  # noqa: E402
from dppub.dp.tables.margins import Dimension  # noqa: E402
from dppub.dp.tables.split import Measure, split_epsilon  # noqa: E402
from dppub.dp.tables.table import TableDesign, release_table  # noqa: E402

OUT = ROOT / "bench" / "results" / "coverage.json"
BAND = (0.94, 0.97)
Hits = np.ndarray  # runs x queries, bool

# Where a release states that a row's interval is not a 95% interval for that target.
STATED = {
    "k-means size vs the published centres' rows": "release.json size_of (the size counts "
    "the previous centres' rows)",
    "tables: quantile (CDF, deciles)": "release.json interval_covers (conservative: "
    "widened to the grid's bin edges)",
    "synthetic: per-marginal error range": "utility.csv error_range (not a calibrated 95% "
    "interval)",
}


def _clustered(hits: Hits) -> dict[str, float]:
    per_run = hits.mean(axis=1)
    runs = len(per_run)
    mean = float(per_run.mean())
    half = 1.96 * float(per_run.std(ddof=1)) / np.sqrt(runs) if runs > 1 else float("nan")
    return {
        "coverage": mean,
        "ci_low": mean - half,
        "ci_high": mean + half,
        "worst": float(hits.mean(axis=0).min()),
        "runs": runs,
        "queries": int(hits.shape[1]),
    }


def _workload_hits(
    x: np.ndarray, w: mx.Workload, eps: float, runs: int, seed: int
) -> tuple[Hits, mx.Workload]:
    a = mx.select_strategy(w)
    b = a.sensitivity / eps
    truth = w @ x
    rng = np.random.default_rng(seed)
    hits = []
    for _ in range(runs):
        meas = Measurement(
            strategy=a, values=a @ x + rng.laplace(0.0, b, a.m), epsilon=eps, noise_scale=b
        )
        est = reconstruct(meas, w, method="nonneg-l1")
        out = answer_intervals(
            w,
            a,
            est,
            noise_scale=b,
            reconstruction="nonneg-l1",
            rng=rng,
            least_squares=least_squares(meas),
        )
        hits.append((out.ci_low <= truth) & (truth <= out.ci_high))
    return np.asarray(hits), w


def _edge_ranges(x: np.ndarray) -> np.ndarray:
    """All-range queries (row order of ``mx.all_range``) starting at the last populated cell."""
    n, last = len(x), int(np.nonzero(x)[0].max())
    starts = np.concatenate([np.full(n - i, i) for i in range(n)])
    return np.asarray(starts == last)


def workload_rows(runs: int) -> dict[str, Hits]:
    hist = demo_histograms(demo_frame())
    income, _ = _workload_hits(hist["income"], mx.all_range(64), 0.3, runs, 1)
    spike = np.r_[np.full(7, 2.0), [20.0], np.zeros(8)]
    edge, _ = _workload_hits(spike, mx.all_range(16), 0.3, runs, 3)
    return {
        "workload: demo income, all ranges": income,
        "workload: demo income, ranges from the edge of the empty tail": income[
            :, _edge_ranges(hist["income"])
        ],
        "workload: 16 cells, ranges from a spike before an empty tail": edge[
            :, _edge_ranges(spike)
        ],
    }


def prefix_rows(runs: int) -> dict[str, Hits]:
    """The demo's age CDF (prefixes share noise: a run-level sd of about 0.1, so it needs
    more runs than the ranges for the same CI; a group of its own)."""
    age, _ = _workload_hits(demo_histograms(demo_frame())["age"], mx.prefix(74), 0.3, runs, 2)
    return {"workload: demo age, prefixes": age}


def tables_rows(runs: int) -> dict[str, Hits]:
    frame = demo_frame()
    lo, hi = INCOME
    sexes = ("Female", "Male")
    hours_bounds = (1.0, 99.0)
    income = frame["income"].clip(lo, hi).to_numpy()
    hours = frame["hours"].clip(*hours_bounds).to_numpy()
    group = np.searchsorted(np.asarray(sexes), frame["sex"].to_numpy(str))
    deciles = tuple(i / 10 for i in range(1, 10))
    measures = [
        Measure("count"),
        Measure("sum", "income"),
        Measure("mean", "income"),
        Measure("quantile", "hours", deciles),
    ]
    bounds = {"income": INCOME, "hours": hours_bounds}
    edges = tuple(float(e) for e in np.linspace(*hours_bounds, 1025))
    design = TableDesign(
        keys=("sex",),
        dims=(Dimension(sexes),),
        measures=tuple(measures),
        components=split_epsilon(measures, bounds, 1.0),
        bounds=bounds,
        edges={"hours": edges},
    )
    counts = np.bincount(group, minlength=2).astype(float)
    sums = np.bincount(group, weights=income, minlength=2)
    centred = sums - (lo + hi) / 2.0 * counts
    hist = np.stack(
        [np.histogram(hours[group == g], bins=np.asarray(edges))[0] for g in range(2)]
    ).astype(float)
    truth = {"count": counts, "sum(income)": sums, "mean(income)": sums / counts}
    for p in deciles:
        truth[f"quantile(hours, {p:g})"] = np.array(
            [np.quantile(hours[group == g], p, method="inverted_cdf") for g in range(2)]
        )
    rng = np.random.default_rng(4)
    kinds = ("count", "sum", "mean", "quantile (CDF, deciles)")
    out: dict[str, list[np.ndarray]] = {k: [] for k in kinds}
    for _ in range(runs):
        answers = release_table(
            design, counts, {"income": centred}, {"hours": hist}, rng=rng
        ).answers
        run: dict[str, list[np.ndarray]] = {k: [] for k in kinds}
        for name, true in truth.items():
            rows = answers[answers["measure"] == name]
            held = (rows["ci_low"].to_numpy() <= true) & (true <= rows["ci_high"].to_numpy())
            run[kinds[3] if name.startswith("quantile") else name.split("(")[0]].append(held)
        for k in kinds:
            out[k].append(np.concatenate(run[k]))
    return {f"tables: {k}": np.asarray(v) for k, v in out.items()}


def regression_rows(runs: int) -> dict[str, Hits]:
    model, exact, truth, _ = model_setup("linear")
    rng = np.random.default_rng(5)
    hits = []
    for _ in range(runs):
        fitted = model.fit_statistics(exact, d=2, rng=rng)
        table = coefficient_table(fitted, features=["age", "hours"], replicates=200, rng=rng)
        hits.append((table.ci_low <= truth) & (truth <= table.ci_high))
    return {"regression: linear coefficients": np.asarray(hits)}


def kmeans_rows(runs: int) -> dict[str, Hits]:
    frame = demo_frame()
    X = frame[["age", "hours"]].to_numpy(np.float64)
    model = KMeans(3, 0.1, bounds_X=BOX, n_iter=5)
    domain = model.domain(2)
    shift = domain.midpoint()
    centred = domain.translated(shift)
    rows = centred.clip(X - shift)
    rng = np.random.default_rng(6)
    own, nearest = [], []
    seen: list[np.ndarray] = []

    def step(centres: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        counts, sums = lloyd_step(rows, centred, centres)
        seen.append(counts)
        return counts, sums

    for _ in range(runs):
        fit = model.fit_steps(step, d=2, rng=rng)
        scale = fit.record["laplace_scale"]["counts"]
        table = cluster_table(fit.centres, fit.sizes, features=["age", "hours"], size_scale=scale)
        low, high = table["size_ci_low"].to_numpy(), table["size_ci_high"].to_numpy()
        after = lloyd_step(rows, centred, fit.centres - shift)[0]
        own.append((low <= seen[-1]) & (seen[-1] <= high))
        nearest.append((low <= after) & (after <= high))
    return {
        "k-means size vs its own rows (previous centres)": np.asarray(own),
        "k-means size vs the published centres' rows": np.asarray(nearest),
    }


def synthetic_rows(runs: int) -> dict[str, Hits]:
    """Per-marginal error ranges of AIM on a small Bayesian network (a -> b -> c, d
    independent; 4,000 rows, 2-way workload, epsilon 1): AIM and the release's bootstrap (two
    warm-started and two from-scratch refits) per run, as ``dp.pipeline.kinds.synthetic.kind`` does.
    Each run takes about a minute, so this group runs ``max(runs // 40, 3)`` times."""
    from dppub.dp.pipeline.kinds.synthetic.error_estimates import REPLICATES, marginal_error_range
    from dppub.dp.synthetic import cdp_rho, marginal_answers, run_aim, workload_cliques
    from dppub.dp.synthetic.utility import bootstrap_errors, table_marginal

    domain = {"a": 4, "b": 3, "c": 5, "d": 6}
    data = np.random.default_rng(11)
    rows = 4000
    a = data.choice(4, rows, p=[0.4, 0.3, 0.2, 0.1])
    b = (a + data.choice(3, rows, p=[0.7, 0.2, 0.1])) % 3
    c = (2 * b + data.choice(5, rows, p=[0.5, 0.2, 0.1, 0.1, 0.1])) % 5
    d = data.choice(6, rows, p=[0.3, 0.25, 0.2, 0.1, 0.1, 0.05])
    codes = {"a": a, "b": b, "c": c, "d": d}
    workload = workload_cliques(list(domain), [["a", "b"], ["b", "c"], ["a", "c"], ["c", "d"]])
    answers = marginal_answers(codes, domain, workload)
    hits = []
    for seed in range(max(runs // 40, 3)):
        rng = np.random.default_rng(100 + seed)
        result = run_aim(answers, domain, workload, cdp_rho(1.0, 1e-9), iters=200, rng=rng)
        low, high = (
            bootstrap_errors(
                result.model,
                result.measurements,
                domain,
                workload,
                result.rows,
                iters=200,
                replicates=REPLICATES,
                seed=seed,
                surrogate=result.synthetic,
                warm=warm,
            )
            for warm in (True, False)
        )
        lo, hi = marginal_error_range(low, high)
        true = np.array(
            [
                np.abs(
                    table_marginal(result.synthetic, domain, w) / result.rows
                    - answers[w] / answers[w].sum()
                ).sum()
                for w in workload
            ]
        )
        hits.append((lo <= true) & (true <= hi))
    return {"synthetic: per-marginal error range": np.asarray(hits)}


GROUPS: dict[str, Callable[[int], dict[str, Hits]]] = {
    "workload": workload_rows,
    "prefixes": prefix_rows,
    "tables": tables_rows,
    "regression": regression_rows,
    "kmeans": kmeans_rows,
    "synthetic": synthetic_rows,
}


def status(name: str, coverage: float) -> str:
    if BAND[0] <= coverage <= BAND[1]:
        return "ok"
    return f"flagged: {STATED[name]}" if name in STATED else "OUTSIDE, not flagged"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--only", default=",".join(GROUPS))
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for group in args.only.split(","):
        start = time.perf_counter()
        found = GROUPS[group](args.runs)
        seconds = time.perf_counter() - start
        for name, hits in found.items():
            figures = _clustered(hits)
            rows.append(
                {
                    "row": name,
                    **figures,
                    "status": status(name, figures["coverage"]),
                    "seconds": seconds,
                }
            )
        print(f"{group}: {seconds:.0f} s", file=sys.stderr, flush=True)
    print(f"{'row':<66} {'coverage':>8} {'95% CI (runs)':>17} {'worst':>6} {'runs':>5}  status")
    for r in rows:
        ci = f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
        print(
            f"{r['row']:<66} {r['coverage']:>8.3f} {ci:>17} {r['worst']:>6.2f} {r['runs']:>5}"
            f"  {r['status']}"
        )
    out = OUT if args.only == ",".join(GROUPS) else OUT.with_stem(f"coverage_{args.only}")
    out.parent.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    out.write_text(json.dumps({"date": stamp, "argv": sys.argv[1:], "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
