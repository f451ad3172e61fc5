"""Scale benchmark: one streamed pass of each model's exact aggregate over a census dataset.

Usage: ``.venv/bin/python bench/regression_scale.py [--rows 10000000] [--data-dir DIR]``

The dataset is ``bench/scale.py``'s (``data/generate_census.py``, 16 partitions, seeded, cached
under ``--data-dir``). Each step runs in a fresh subprocess (imports before the clock starts) on
the streaming engine with the default batch size, as ``dppub run --engine stream`` does:

* ``linear``: :func:`dp.engine.regression_statistics_stream` of ``income ~ age + hours`` with an
  intercept (the demo's ``income_model`` design);
* ``grouped``: the same, one group per declared education level (trace regression's tasks);
* ``logistic``: one pass of :func:`dp.engine.logistic_sums_stream` (``income > 75,000``) at a
  fixed iterate (objective perturbation makes one such pass per evaluated Newton point);
* ``kmeans``: one DP-Lloyd pass of :func:`dp.engine.lloyd_statistics_stream` (k = 3).

Prints one table (seconds -- the fastest of ``--repeat`` runs --, rows/s and a digest of the
aggregate, so two code versions can be compared for equal output) and writes
``bench/results/regression_scale.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

STEPS = ("linear", "grouped", "logistic", "kmeans")


def _child(step: str, path: str) -> None:
    """Run one step in this (fresh) process and print one JSON line."""
    import numpy as np
    from scale import _schema

    from dppub.dp.engine import lloyd_statistics_stream, logistic_sums_stream
    from dppub.dp.engine import regression_statistics_stream as stats_stream
    from dppub.dp.regression import LinearRegression, LogisticRegression
    from dppub.dp.schema import ColumnSpec, TableSchema

    base = _schema()
    schema = TableSchema(
        columns=(*base.columns, ColumnSpec(name="hours", type="float", bounds=(1, 99)))
    )
    features = ["age", "hours"]
    box = ([17.0, 1.0], [90.0, 99.0])
    out: Any
    start = time.perf_counter()
    if step in ("linear", "grouped"):
        design = LinearRegression(1.0, bounds_X=box, bounds_y=(0, 250_000)).design(2)
        by = "education" if step == "grouped" else None
        stats = stats_stream(path, schema, features=features, target="income", design=design, by=by)
        out = np.concatenate([np.r_[s.gram.ravel(), s.moment] for s in stats])
    elif step == "logistic":
        design = LogisticRegression(1.0, bounds_X=box).design(2)
        w = np.array([0.4, 0.3, -1.0])
        sums = logistic_sums_stream(
            path, schema, features=features, target="income", design=design, w=w, threshold=75e3
        )
        # A LossSums; earlier code versions returned the tuple (loss, gradient, hessian).
        parts = (sums.loss, sums.gradient, sums.hessian) if hasattr(sums, "loss") else sums
        out = np.r_[parts[0], parts[1], parts[2].ravel()]
    else:
        from dppub.dp.numerics.domains import FeatureDomain

        domain = FeatureDomain.box([17.0, 1.0], [90.0, 99.0], d=2)
        centres = np.array([[-10.0, -20.0], [0.0, 0.0], [15.0, 20.0]])
        counts, sums = lloyd_statistics_stream(
            path, schema, features=features, domain=domain, centres=centres
        )
        out = np.r_[counts, sums.ravel()]
    seconds = time.perf_counter() - start
    digest = hashlib.sha256(np.ascontiguousarray(out, dtype=np.float64).tobytes()).hexdigest()
    print(json.dumps({"seconds": seconds, "digest": digest[:16]}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument(
        "--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "dppub-scale"
    )
    parser.add_argument("--steps", nargs="*", choices=STEPS, default=list(STEPS))
    parser.add_argument("--repeat", type=int, default=1, help="runs per step; the fastest counts")
    parser.add_argument("--child", nargs=2, metavar=("STEP", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(*args.child)
        return
    from scale import _dataset

    path = _dataset(args.rows, args.data_dir, args.partitions)
    rows_out: list[dict[str, Any]] = []
    for step in args.steps:
        runs = []
        for _ in range(args.repeat):
            cmd = [sys.executable, __file__, "--child", step, str(path)]
            done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"{step} failed: {done.stderr.strip().splitlines()[-1:]}")
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        r = min(runs, key=lambda run: run["seconds"])
        rows_out.append({"step": step, **r, "rows_per_s": args.rows / r["seconds"]})
    print(f"{'step':>9} {'seconds':>8} {'rows/s':>10}  digest   ({args.rows:,} rows, stream)")
    for r in rows_out:
        print(f"{r['step']:>9} {r['seconds']:>8.2f} {r['rows_per_s']:>10.3g}  {r['digest']}")
    report = {
        "benchmark": "one streamed pass of each model's exact aggregate",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "date": datetime.now(UTC).date().isoformat(),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "rows": args.rows,
        "results": rows_out,
    }
    out = ROOT / "bench" / "results" / "regression_scale.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
