"""Benchmark: does every published 95% interval cover what it says it covers?

Prints one table and writes ``bench/results/coverage.json`` (``coverage_<groups>.json`` with
``--only``). Not run by the test suite.

One row per release kind and query type, each simulated in-process with the release's own
code on a small configuration made for this measurement (seeded numpy noise where the release
draws OpenDP's, the same distribution):

* workload answers (``dp.matrix.intervals.answer_intervals`` with the least-squares estimate,
  as the workload kind calls it) on the demo's 64-bin income histogram, all ranges, split by
  what ``answers.csv``'s ``interval`` column says of each answer (``nominal`` or
  ``conservative``: widened to the least-squares end where the projection moved it), and the
  ranges that start at the last populated cell before an empty tail (there and on a 16-cell
  spike); the demo's age prefixes;
* a table's count, sum, mean and CDF quantiles (``dp.tables.table.release_table``);
* regression coefficients (``dp.regression.uncertainty.coefficient_table``, the pipeline's
  replicates: 200, trace 40) of the demo's linear, logistic (functional mechanism) and trace
  regressions (``bench/intervals.py``'s ``model_setup``);
* k-means sizes (``dp.regression.uncertainty.cluster_table`` of ``KMeans.fit_steps``);
* synthetic data's per-marginal error range (AIM and the release's bootstrap, with the ``mbi``
  extra) on a 3-attribute, 27-cell network with its three 2-way marginals and 100 iterations.

Truths come from the same clamped and binned data (the intervals cover the noise, not the
sampling of the rows): ``W x`` of the exact histogram; the exact counts, sums and means of the
clamped values; a quantile's actual value (the smallest value with at least ``p n`` rows at or
below it); the fit on the exact statistics each table's ``interval_covers`` names (ordinary
least squares; the logistic Taylor surrogate's minimiser; the trace regression's same penalty
and low-rank refit); a k-means size's own rows (the previous centres' assignment: what
``release.json``'s ``size_of`` says it counts) and, in a separate row, the rows nearest the
published centres (what the size is not); the synthetic marginal's true normalized L1 error.

Coverage is the share of (run, interval) pairs that hold the truth. Intervals of one run share
noise, so runs are the clusters and the 95% CI is cluster-robust: the ratio estimator's
``1.96 sqrt(sum_r (h_r - p n_r)^2 / (R (R - 1))) / mean(n_r)`` (``h_r`` hits of ``n_r``
intervals in run ``r``; with equal ``n_r`` it is ``1.96 sd(run means) / sqrt(R)``).
``runs for +-0.01`` is how many runs that CI says a half-width of 0.01 needs. A row is in band
inside [0.94, 0.97]; otherwise ``flag`` names where the published files say its interval is
not a 95% interval for that target.

Runs are spread over ``--jobs`` worker processes (at most 2) in chunks with their own seeds.

    nice -n 19 .venv/bin/python bench/coverage.py                   # the table (RESULTS.md)
    nice -n 19 .venv/bin/python bench/coverage.py --runs 40         # a pilot: 40 runs a group
    nice -n 19 .venv/bin/python bench/coverage.py --only tables --runs tables=1300 --jobs 1
    .venv/bin/python bench/coverage.py --merge bench/results/coverage_*.json   # one table
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import datetime as dt
import functools
import json
import math
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from intervals import (  # noqa: E402
    BOX,
    EDUCATION,
    INCOME,
    demo_frame,
    demo_histograms,
    model_setup,
    same_penalty_fit,
)

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
TARGET = 0.01  # the CI half-width the runs are chosen for
Hits = np.ndarray  # runs x intervals: 1.0 held, 0.0 missed, NaN not in this row

# Where the published files say that a row's interval is not a 95% interval for its target.
STATED = {
    "workload: demo income, all ranges, conservative answers": "answers.csv interval = "
    "conservative (covers at least 95%)",
    "workload: demo income, ranges from the edge of the empty tail": "answers.csv interval = "
    "conservative on the answers the projection moved",
    "tables: quantile (CDF, deciles)": "release.json interval_covers (at least 0.95: "
    "widened to the grid's bin edges)",
    "k-means size vs the published centres' rows": "release.json size_of (the size counts "
    "the previous centres' rows)",
    "synthetic: per-marginal error range": "utility.csv error_range (not a calibrated 95% "
    "interval)",
}

# Runs per group: 1.3 times what a 40-run pilot's cluster-robust CI said +-0.01 needs (its
# worst row; RESULTS.md), as CPU time allowed.
RUNS = {
    "workload": 1100,
    "spike": 400,
    "prefixes": 300,
    "tables": 1300,
    "linear": 1100,
    "logistic": 1200,
    "trace": 350,
    "kmeans": 1500,
    "synthetic": 1400,
}
# Runs per worker task: each task sets its data up once and draws its own seed.
CHUNK = {"workload": 10, "trace": 10, "linear": 25, "logistic": 25, "synthetic": 50}


def clustered(hits: Hits) -> dict[str, float]:
    """Coverage and its cluster-robust 95% CI (runs are the clusters; module doc)."""
    counted = ~np.isnan(hits)
    hits = hits[counted.any(axis=1)][:, counted.any(axis=0)]
    held = np.nansum(hits, axis=1)
    n = np.sum(~np.isnan(hits), axis=1).astype(float)
    runs = len(n)
    p = float(held.sum() / n.sum())
    resid = held - p * n
    se = math.sqrt(float(resid @ resid) / (runs * (runs - 1))) / float(n.mean())
    half = 1.96 * se
    per_query = np.nanmean(hits, axis=0)
    return {
        "coverage": p,
        "ci_low": p - half,
        "ci_high": p + half,
        "half_width": half,
        "runs_needed": math.ceil(runs * (half / TARGET) ** 2),
        "worst": float(np.nanmin(per_query)),
        "runs": runs,
        "intervals": int(n.sum()),
    }


def _held(low: np.ndarray, truth: np.ndarray, high: np.ndarray) -> np.ndarray:
    return ((low <= truth) & (truth <= high)).astype(float)


def _workload_hits(
    x: np.ndarray, w: mx.Workload, eps: float, runs: int, rng: np.random.Generator
) -> tuple[Hits, Hits]:
    """Held (runs x queries) and the answers ``answers.csv`` flags ``conservative``."""
    a = mx.select_strategy(w)
    b = a.sensitivity / eps
    truth = w @ x
    hits, widened = [], []
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
        hits.append(_held(out.ci_low, truth, out.ci_high))
        widened.append(np.zeros(w.m, bool) if out.widened is None else out.widened)
    return np.asarray(hits), np.asarray(widened)


def _edge_ranges(x: np.ndarray) -> np.ndarray:
    """All-range queries (row order of ``mx.all_range``) starting at the last populated cell."""
    n, last = len(x), int(np.nonzero(x)[0].max())
    starts = np.concatenate([np.full(n - i, i) for i in range(n)])
    return np.asarray(starts == last)


@functools.cache
def _demo_histograms() -> dict[str, np.ndarray]:
    return demo_histograms(demo_frame())


def workload_rows(runs: int, rng: np.random.Generator) -> dict[str, Hits]:
    x = _demo_histograms()["income"]
    hits, widened = _workload_hits(x, mx.all_range(64), 0.3, runs, rng)
    return {
        "workload: demo income, all ranges, nominal answers": np.where(widened, np.nan, hits),
        "workload: demo income, all ranges, conservative answers": np.where(widened, hits, np.nan),
        "workload: demo income, ranges from the edge of the empty tail": hits[:, _edge_ranges(x)],
    }


def spike_rows(runs: int, rng: np.random.Generator) -> dict[str, Hits]:
    spike = np.r_[np.full(7, 2.0), [20.0], np.zeros(8)]
    hits, _ = _workload_hits(spike, mx.all_range(16), 0.3, runs, rng)
    return {
        "workload: 16 cells, ranges from a spike before an empty tail": hits[:, _edge_ranges(spike)]
    }


def prefix_rows(runs: int, rng: np.random.Generator) -> dict[str, Hits]:
    hits, _ = _workload_hits(_demo_histograms()["age"], mx.prefix(74), 0.3, runs, rng)
    return {"workload: demo age, prefixes": hits}


@functools.cache
def _table_setup() -> tuple[TableDesign, dict[str, np.ndarray], tuple[np.ndarray, ...]]:
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
    return design, truth, (counts, centred, hist)


def tables_rows(runs: int, rng: np.random.Generator) -> dict[str, Hits]:
    design, truth, (counts, centred, hist) = _table_setup()
    kinds = ("count", "sum", "mean", "quantile (CDF, deciles)")
    out: dict[str, list[np.ndarray]] = {k: [] for k in kinds}
    for _ in range(runs):
        answers = release_table(
            design, counts, {"income": centred}, {"hours": hist}, rng=rng
        ).answers
        run: dict[str, list[np.ndarray]] = {k: [] for k in kinds}
        for name, true in truth.items():
            rows = answers[answers["measure"] == name]
            held = _held(rows["ci_low"].to_numpy(), true, rows["ci_high"].to_numpy())
            run[kinds[3] if name.startswith("quantile") else name.split("(")[0]].append(held)
        for k in kinds:
            out[k].append(np.concatenate(run[k]))
    return {f"tables: {k}": np.asarray(v) for k, v in out.items()}


_model_setup = functools.cache(model_setup)


def _model_rows(which: str, replicates: int, runs: int, rng: np.random.Generator) -> Hits:
    model, exact, truth, _ = _model_setup(which)
    trace = which == "trace"
    hits = []
    for _ in range(runs):
        fitted = model.fit_statistics(exact, d=2, rng=rng)
        table = coefficient_table(
            fitted,
            features=["age", "hours"],
            tasks=EDUCATION if trace else None,
            replicates=replicates,
            rng=rng,
        )
        if trace:
            truth = same_penalty_fit(fitted, exact)
        hits.append(_held(table.ci_low, truth, table.ci_high))
    return np.asarray(hits)


def linear_rows(runs: int, rng: np.random.Generator) -> dict[str, Hits]:
    return {"regression: linear coefficients vs OLS": _model_rows("linear", 200, runs, rng)}


def logistic_rows(runs: int, rng: np.random.Generator) -> dict[str, Hits]:
    return {
        "regression: logistic (functional) vs the Taylor surrogate's minimiser": _model_rows(
            "logistic", 200, runs, rng
        )
    }


def trace_rows(runs: int, rng: np.random.Generator) -> dict[str, Hits]:
    return {
        "regression: trace coefficients vs the same-penalty low-rank fit": _model_rows(
            "trace", 40, runs, rng
        )
    }


def kmeans_rows(runs: int, rng: np.random.Generator) -> dict[str, Hits]:
    frame = demo_frame()
    X = frame[["age", "hours"]].to_numpy(np.float64)
    model = KMeans(3, 0.1, bounds_X=BOX, n_iter=5)
    domain = model.domain(2)
    shift = domain.midpoint()
    centred = domain.translated(shift)
    rows = centred.clip(X - shift)
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
        own.append(_held(low, seen[-1], high))
        nearest.append(_held(low, after, high))
    return {
        "k-means size vs its own rows (previous centres)": np.asarray(own),
        "k-means size vs the published centres' rows": np.asarray(nearest),
    }


def synthetic_rows(runs: int, rng: np.random.Generator) -> dict[str, Hits]:
    """Per-marginal error ranges of AIM on a 3-attribute chain (a -> b -> c, 3 values each;
    2,000 rows, all three 2-way marginals, epsilon 1, 100 iterations): AIM and the release's
    bootstrap (warm-started and from-scratch refits), as ``dp.pipeline.kinds.synthetic`` does."""
    from dppub.dp.pipeline.kinds.synthetic.error_estimates import (
        REPLICATES,
        marginal_error_range,
    )
    from dppub.dp.synthetic import cdp_rho, marginal_answers, run_aim, workload_cliques
    from dppub.dp.synthetic.utility import bootstrap_errors, table_marginal

    domain = {"a": 3, "b": 3, "c": 3}
    data = np.random.default_rng(11)
    rows, iters = 2000, 100
    a = data.choice(3, rows, p=[0.5, 0.3, 0.2])
    b = (a + data.choice(3, rows, p=[0.7, 0.2, 0.1])) % 3
    c = (b + data.choice(3, rows, p=[0.6, 0.3, 0.1])) % 3
    codes = {"a": a, "b": b, "c": c}
    workload = workload_cliques(list(domain), [["a", "b"], ["b", "c"], ["a", "c"]])
    answers = marginal_answers(codes, domain, workload)
    hits = []
    for _ in range(runs):
        result = run_aim(answers, domain, workload, cdp_rho(1.0, 1e-9), iters=iters, rng=rng)
        seed = int(rng.integers(2**32))
        low, high = (
            bootstrap_errors(
                result.model,
                result.measurements,
                domain,
                workload,
                result.rows,
                iters=iters,
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
        hits.append(_held(lo, true, hi))
    return {"synthetic: per-marginal error range": np.asarray(hits)}


Group = Callable[[int, np.random.Generator], dict[str, Hits]]
GROUPS: dict[str, Group] = {
    "workload": workload_rows,
    "spike": spike_rows,
    "prefixes": prefix_rows,
    "tables": tables_rows,
    "linear": linear_rows,
    "logistic": logistic_rows,
    "trace": trace_rows,
    "kmeans": kmeans_rows,
    "synthetic": synthetic_rows,
}


def _task(group: str, runs: int, chunk: int) -> tuple[str, dict[str, Hits], float]:
    """``runs`` runs of one group, seeded by the group's name and the chunk's index."""
    rng = np.random.default_rng([chunk, *group.encode()])
    start = time.process_time()
    return group, GROUPS[group](runs, rng), time.process_time() - start


def flag(name: str, coverage: float) -> tuple[bool, str]:
    inside = BAND[0] <= coverage <= BAND[1]
    if inside:
        return True, ""
    return False, STATED.get(name, "NOT FLAGGED")


def _runs(spec: str, groups: list[str]) -> dict[str, int]:
    if spec.isdigit():
        return dict.fromkeys(groups, int(spec))
    given = {k: int(v) for k, v in (item.split("=") for item in spec.split(","))}
    return {g: given.get(g, RUNS[g]) for g in groups}


def measure(
    runs: dict[str, int],
    jobs: int,
    save: Callable[[dict[str, Hits], dict[str, float]], None],
) -> None:
    """Every group's runs in seeded chunks, interleaved so that all groups reach the same
    share of their runs together; ``save`` gets the rows so far (runs stacked in chunk order,
    so a stopped measurement equals a full one with fewer runs) and CPU seconds per group
    after every chunk."""
    tasks = []
    for group, n in runs.items():
        size = CHUNK.get(group, 100)
        chunks = math.ceil(n / size)
        tasks += [((i + 1) / chunks, group, min(size, n - i * size), i) for i in range(chunks)]
    tasks.sort()
    found: dict[str, list[Hits]] = {}
    cpu = dict.fromkeys(runs, 0.0)
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for group, rows, seconds in pool.map(_task, *list(zip(*tasks, strict=True))[1:]):
            cpu[group] += seconds
            for name, hits in rows.items():
                found.setdefault(name, []).append(hits)
            save({name: np.concatenate(h) for name, h in found.items()}, cpu)


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as the Markdown table in RESULTS.md."""
    lines = [
        "| row | runs | intervals | coverage | 95% CI (by run) | runs for ±0.01 | in band | flag |",
        "|---|---:|---:|---:|---:|---:|:-:|---|",
    ]
    for r in rows:
        ci = f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
        lines.append(
            f"| {r['row']} | {r['runs']} | {r['intervals']:,} | {r['coverage']:.3f} | {ci} |"
            f" {r['runs_needed']:,} | {'yes' if r['in_band'] else 'no'} | {r['flag']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default=",".join(f"{g}={n}" for g, n in RUNS.items()))
    parser.add_argument("--only", default=",".join(GROUPS))
    parser.add_argument("--jobs", type=int, choices=(1, 2), default=2)
    parser.add_argument(
        "--merge", nargs="+", type=Path, help="print the table of these JSON files, no runs"
    )
    args = parser.parse_args()
    if args.merge:
        print(table([r for f in args.merge for r in json.loads(f.read_text())["rows"]]))
        return
    groups = args.only.split(",")
    out = OUT if args.only == ",".join(GROUPS) else OUT.with_stem(f"coverage_{args.only}")
    out.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rows: list[dict[str, Any]] = []

    def save(found: dict[str, Hits], cpu: dict[str, float]) -> None:
        rows.clear()
        for name, hits in found.items():
            figures = clustered(hits)
            inside, why = flag(name, figures["coverage"])
            rows.append({"row": name, **figures, "in_band": inside, "flag": why})
        stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        wall = time.perf_counter() - start
        record = {"date": stamp, "argv": sys.argv[1:], "wall": wall, "cpu": cpu, "rows": rows}
        out.with_suffix(".tmp").write_text(json.dumps(record, indent=2))
        out.with_suffix(".tmp").replace(out)

    measure(_runs(args.runs, groups), args.jobs, save)
    print(table(rows))


if __name__ == "__main__":
    main()
