"""Benchmark: causal strategies for a series released period by period (issue 38 core).

Prints one table and writes ``bench/results/series.json``. Not run by the test suite.

At horizon ``T = 120``, Gaussian noise, for running totals alone, per-period values with running
totals, and per-period values with 12-month moving sums, under the row-level relation and a unit
in up to 12 periods (one row each): each candidate's exact expected squared error per figure
(units of ``sigma^2``: noise of standard deviation ``sigma`` times the strategy's declared L2
sensitivity), the SVD lower bound (:func:`dp.series.svd_bound`), the chosen strategy
(:func:`dp.series.choose_strategy`, no revisions) and its ratios to identity, to the better of
identity and square root, and to the bound; and the empirical RMSE over 100 simulated series.

Simulation: a series of Poisson(1000) counts per period (the error does not depend on the data:
every estimate is linear and unbiased), measurements ``A x + N(0, (sigma Delta)^2)`` with numpy's
seeded generator (the same distribution as a release; the release uses OpenDP's sampler), the
published figures from :func:`dp.series.causal_estimates` (without revisions), and the RMSE over
all figures and series.

Columns: "SVD bd" the SVD bound (generalised to the unit relation), "fact bd" the dual bound
from contiguous windows (:func:`dp.series.factorization_bound`: no factorization, causal or not,
has less error; attained row-level), "id/ch" identity over the chosen strategy, "best/ch" the
better of identity and square root over the chosen, "ch/bd" chosen over the SVD bound,
"ch/best" chosen over the larger bound, "sens gap" the chosen strategy's certified sensitivity
over the change of a concrete pair of neighbours (1: exact), "RMSE sim" / "RMSE exp" the
chosen strategy's simulated and expected RMSE per figure (sigma units).

    .venv/bin/python bench/series.py            # ~1 min on the shared 2-core machine
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dppub.dp.series import (  # noqa: E402
    Choice,
    Optimized,
    Relation,
    SeriesWorkload,
    causal_estimates,
    choose_strategy,
    moving_sum,
    per_period,
    running_total,
    stack,
)

OUT = ROOT / "bench" / "results" / "series.json"
HORIZON = 120
SEED = 38
NAMES = ("Identity", "BinaryTree", "SquareRoot", "Optimized")


def figure_sets(horizon: int) -> dict[str, SeriesWorkload]:
    return {
        "running totals": running_total(horizon),
        "per period + running totals": stack(per_period(horizon), running_total(horizon)),
        "per period + 12-month sums": stack(per_period(horizon), moving_sum(horizon, 12)),
    }


def simulate(choice: Choice, workload: SeriesWorkload, runs: int) -> dict[str, float]:
    """Empirical RMSE per figure of every candidate over ``runs`` seeded series (no revisions)."""
    rng = np.random.default_rng(SEED)
    x = rng.poisson(1000.0, size=(workload.horizon, runs)).astype(np.float64)
    truth = workload.matrix @ x
    out = {}
    for strategy, row in zip(choice.strategies, choice.table, strict=True):
        noise = rng.normal(0.0, row.sensitivity.declared, size=(strategy.matrix.shape[0], runs))
        values = causal_estimates(strategy, workload, strategy.matrix @ x + noise)
        out[row.strategy] = float(np.sqrt(np.mean((workload.matrix @ values - truth) ** 2)))
    return out


def _row(
    figures: str, relation: str, workload: SeriesWorkload, choice: Choice, seconds: float, runs: int
) -> dict[str, Any]:
    per = {row.strategy: row.mean for row in choice.table}
    blocks = {
        row.strategy: {
            name: float(np.mean(row.per_figure[workload.block(name)]))
            for name, _ in workload.blocks
        }
        for row in choice.table
    }
    sens = choice.profile.sensitivity
    opt = next(s for s in choice.strategies if isinstance(s, Optimized))
    bound = choice.bound / workload.matrix.shape[0]
    chosen = choice.profile.mean
    floor = max(choice.bound, choice.factorization_bound) / workload.matrix.shape[0]
    return {
        "figures": figures,
        "relation": relation,
        "expected_per_figure": per,
        "expected_per_block": blocks,
        "bound_per_figure": bound,
        "chosen": choice.strategy.name,
        "chosen_per_figure": chosen,
        "identity_over_chosen": per["Identity"] / chosen,
        "better_of_identity_sqrt_over_chosen": min(per["Identity"], per["SquareRoot"]) / chosen,
        "chosen_over_bound": chosen / bound,
        "factorization_bound_per_figure": choice.factorization_bound / workload.matrix.shape[0],
        "best_bound_per_figure": floor,
        "chosen_over_best_bound": chosen / floor,
        "optimized_dual_bound_per_figure": opt.dual_bound / workload.matrix.shape[0],
        "declared_over_attained": sens.declared / sens.attained,
        "empirical_rmse": simulate(choice, workload, runs),
        "expected_rmse": {name: math.sqrt(v) for name, v in per.items()},
        "choose_seconds": seconds,
    }


def _print(results: list[dict[str, Any]]) -> None:
    print(f"== series at T = {HORIZON}, Gaussian: expected squared error per figure (sigma^2) ==")
    head = f"{'figures':<28}{'relation':<11}" + "".join(f"{n:>11}" for n in NAMES)
    head += f"{'SVD bd':>9}{'fact bd':>9}{'chosen':>11}{'id/ch':>7}{'best/ch':>8}{'ch/bd':>7}"
    head += f"{'ch/best':>8}{'sens gap':>9}"
    head += f"{'RMSE sim':>9}{'RMSE exp':>9}"
    print(head)
    for r in results:
        per, chosen = r["expected_per_figure"], r["chosen"]
        line = f"{r['figures']:<28}{r['relation']:<11}"
        line += "".join(f"{per[n]:>11.3f}" for n in NAMES)
        line += f"{r['bound_per_figure']:>9.3f}{r['factorization_bound_per_figure']:>9.3f}"
        line += f"{chosen:>11}{r['identity_over_chosen']:>7.2f}"
        line += f"{r['better_of_identity_sqrt_over_chosen']:>8.2f}{r['chosen_over_bound']:>7.2f}"
        line += f"{r['chosen_over_best_bound']:>8.2f}"
        line += f"{r['declared_over_attained']:>9.4f}"
        line += f"{r['empirical_rmse'][chosen]:>9.3f}{r['expected_rmse'][chosen]:>9.3f}"
        print(line)


def main() -> None:
    ap = argparse.ArgumentParser(description="causal strategies for a series (issue 38 core)")
    ap.add_argument("--runs", type=int, default=100, help="simulated series per configuration")
    args = ap.parse_args()
    relations = {"row": Relation(), "unit k=12": Relation(max_periods_per_unit=12)}
    results: list[dict[str, Any]] = []
    started = time.time()
    for figures, workload in figure_sets(HORIZON).items():
        for name, relation in relations.items():
            t0 = time.time()
            choice = choose_strategy(workload, relation)
            seconds = time.time() - t0
            results.append(_row(figures, name, workload, choice, seconds, args.runs))
    _print(results)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    meta = {"horizon": HORIZON, "runs": args.runs, "seed": SEED, "seconds": time.time() - started}
    OUT.write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    print(f"\nwrote {OUT.relative_to(ROOT)} ({meta['seconds']:.0f} s)")


if __name__ == "__main__":
    main()
