"""Benchmark: the synthetic table's workload error as the release states it, against the truth.

Prints one table and writes ``bench/results/synthetic_utility.json``. Not run by the test suite.

AIM (``dp.synthetic.run_aim``, seeded numpy noise) publishes a table; the stated error is what
``utility.csv`` / ``release.json`` state (:func:`dp.synthetic.utility.bootstrap_errors`, from
public values only, the published rows as stand-in): the middle of ``low`` (the refit
warm-started at the model) and ``high`` (the refit from scratch). The true error is the
published rows' mean normalized L1 error over the workload marginals against the data (each
marginal summed to 1, so 0 to 2).
Data sets, at epsilon 1, delta 1e-9:
* demo: ``configs/synthetic.yaml`` on the demo census (``make run`` generates it): all 20 3-way
  marginals of 6 columns, ``max_model_size`` 10;
* fars (held out: neither demo nor Adult): ``fars_int.csv`` (``data/public``), 100,937 rows,
  8 columns (age in 5-year codes), a list of 2-way marginals (``FARS_WORKLOAD``).

    .venv/bin/python bench/synthetic_utility.py --seeds 3
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault(
    "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
)

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dppub.dp.reference.public_data import folder  # noqa: E402
from dppub.dp.synthetic import cdp_rho, marginal_answers, run_aim, workload_cliques  # noqa: E402
from dppub.dp.synthetic.pgm import Clique  # noqa: E402
from dppub.dp.synthetic.utility import bootstrap_errors, table_marginal  # noqa: E402

OUT = ROOT / "bench" / "results" / "synthetic_utility.json"
FARS = folder("fars") / "fars_int.csv"
FARS_WORKLOAD = [
    ["iage", "isex"],
    ["iage", "iinjury"],
    ["irace", "ihispanic"],
    ["istatenum", "irace"],
    ["ideathmon", "ideathday"],
    ["isex", "iinjury"],
    ["istatenum", "ihispanic"],
    ["iage", "irace"],
    ["ideathmon", "iinjury"],
    ["istatenum", "iinjury"],
]


def demo() -> tuple[dict[str, np.ndarray], dict[str, int], tuple[Clique, ...], dict[str, Any]]:
    from dppub.dp.pipeline.plan import load_plan

    plan = next(
        r for r in load_plan(ROOT / "configs" / "synthetic.yaml").releases if r.kind == "synthetic"
    )
    spec = plan.spec
    data = pd.read_parquet(ROOT / "data" / "sample" / "census.parquet")
    codes = {a.column: a.codes(data[a.column]) for a in spec.axes}
    return codes, spec.domain, spec.workload, {"max_model_size": 10.0}


def fars() -> tuple[dict[str, np.ndarray], dict[str, int], tuple[Clique, ...], dict[str, Any]]:
    data = pd.read_csv(FARS, sep=";")
    data["iage"] = data["iage"] // 5
    codes = {c: data[c].to_numpy(np.int64) for c in data.columns}
    codes = {c: np.unique(v, return_inverse=True)[1].astype(np.int64) for c, v in codes.items()}
    domain = {c: int(v.max()) + 1 for c, v in codes.items()}
    return codes, domain, workload_cliques(list(domain), FARS_WORKLOAD), {}


def one(name: str, seed: int, epsilon: float, replicates: int) -> dict[str, Any]:
    codes, domain, workload, extra = {"demo": demo, "fars": fars}[name]()
    answers = marginal_answers(codes, domain, workload)
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    result = run_aim(answers, domain, workload, cdp_rho(epsilon, 1e-9), rng=rng, **extra)
    aim_s = time.perf_counter() - start

    def estimate(**variant: Any) -> np.ndarray:
        return bootstrap_errors(
            result.model,
            result.measurements,
            domain,
            workload,
            result.rows,
            iters=1000,
            replicates=replicates,
            seed=seed,
            **variant,
        )

    start = time.perf_counter()
    low = estimate(surrogate=result.synthetic, warm=True)  # refit warm-started at the model
    high = estimate(surrogate=result.synthetic)  # refit from scratch
    stated = (low + high) / 2.0  # what the release states: the middle
    estimate_s = time.perf_counter() - start
    true, model_err = [], []
    for w in workload:
        x = answers[w] / answers[w].sum()
        s = table_marginal(result.synthetic, domain, w)
        true.append(float(np.abs(s / s.sum() - x).sum()))
        m = result.marginal(w)
        model_err.append(float(np.abs(m / m.sum() - x).sum()))
    return {
        "data": name,
        "seed": seed,
        "epsilon": epsilon,
        "marginals": len(workload),
        "measured": len(result.measurements),
        "rounds": result.rounds,
        "rows": result.rows,
        "true": statistics.fmean(true),
        "model_error": statistics.fmean(model_err),
        "stated": float(stated.mean()),
        "stated_replicates": stated.mean(axis=1).tolist(),
        "ratio": statistics.fmean(true) / float(stated.mean()),
        "low": float(low.mean()),
        "high": float(high.mean()),
        "aim_s": aim_s,
        "estimate_s": estimate_s,
        "per_marginal": {
            " x ".join(w): {
                "true": t,
                "model": me,
                "stated": float(b),
                "covered": any(set(w) <= set(m.clique) for m in result.measurements),
            }
            for w, t, me, b in zip(workload, true, model_err, stated.mean(axis=0), strict=True)
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", nargs="+", default=["demo", "fars"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--replicates", type=int, default=1)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    rows = []
    print(
        f"{'data':5} {'seed':>4} {'meas':>4} {'true':>7} {'model':>7} {'stated':>7} "
        f"{'true/stated':>11} {'low':>7} {'high':>7} {'aim s':>6} {'est s':>6}"
    )
    for name in args.data:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            r = one(name, seed, args.epsilon, args.replicates)
            rows.append(r)
            print(
                f"{r['data']:5} {seed:>4} {r['measured']:>4} {r['true']:7.4f} "
                f"{r['model_error']:7.4f} {r['stated']:7.4f} {r['ratio']:11.3f} "
                f"{r['low']:7.4f} {r['high']:7.4f} "
                f"{r['aim_s']:6.1f} {r['estimate_s']:6.1f}",
                flush=True,
            )
    OUT.parent.mkdir(exist_ok=True)
    out = Path(args.out) if args.out else OUT
    out.write_text(json.dumps({"rows": rows}, indent=2))


if __name__ == "__main__":
    main()
