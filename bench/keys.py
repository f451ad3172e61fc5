"""Private keys under a unit in several groups: dppub's rules against PipelineDP (issue 37, 4).

Usage::

    .venv/bin/python bench/keys.py                   # ~5 min on 2 loaded cores (+ venv once)
    .venv/bin/python bench/keys.py --runs 20 --peers-venv /tmp/dppub-bench-tables
    .venv/bin/python bench/keys.py --data visits     # the tuning file (below)

One table, in one run, on the same Parquet file at the same (epsilon, delta): a count table with
private keys, epsilon 1, delta 1e-6, keys and counts from one budget (both sides give epsilon/2
and all of delta to the selection: PipelineDP's NaiveBudgetAccountant splits one COUNT and its
selection so, and so does :func:`dp.tables.keys.selection_budget`), row-level and per patient
(at most 4 clinics and 5 rows per clinic: at most 20 rows a unit; PipelineDP
``max_partitions_contributed=4``, ``max_contributions_per_partition=5``). Per rule: keys
released in each of ``--runs`` release-grade draws (dppub: OpenDP's samplers; PipelineDP: its
own), their mean and standard deviation, and the exact expectation (the sum over keys of each
rule's release probability; PipelineDP's from PyDP's own ``probability_of_keep``), which has no
sampling noise. dppub's rules: ``threshold`` (the optimal rule on unit counts at
``(eps/m, delta/m)`` per key: PipelineDP's), ``gaussian`` (weights ``1/sqrt(k)``) and ``policy``
(adaptive weights, :mod:`dp.tables.policy_keys`), all from the per-key aggregate the engine folds
after unit bounding (:mod:`dp.engine.unit_bounding`, :mod:`dp.engine.key_weights`).

The table is generated here, deterministically (:func:`clinic_visits`; nothing from outside,
so nothing to license): patients each with a home clinic (Zipf-like popularity over 400
clinics) and, for a third of them, 1-3 further clinics from a flatter distribution; 1-5 rows
per (patient, clinic). The policy rule's one constant (its cutoff, ``rho + 3 sigma``) was chosen
on ``bench/tables.py``'s ``visits`` file (persons in 1-4 of 104 Zipf-like postcodes, 1-3 rows
each) before this table was generated; ``--data visits`` runs the same comparison there.

PipelineDP 0.3.1 runs in the benchmark's own virtualenv (``bench/requirements-tables.txt``,
never dppub's dependencies), created on first use, through ``bench/tables_peers.py``.

Prints one table and writes ``bench/results/keys.json`` (``keys_visits.json`` for ``visits``).
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import ndtr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.tables import peers, peers_python, visits  # noqa: E402
from dppub.dp.engine import StreamingBackend  # noqa: E402
from dppub.dp.engine.key_weights import KeyWeightsAggregate  # noqa: E402
from dppub.dp.engine.unit_bounding import BoundedBackend, BoundingAggregate, UnitBound  # noqa: E402
from dppub.dp.schema import ColumnSpec, TableSchema  # noqa: E402
from dppub.dp.tables.keys import (  # noqa: E402
    KeyRule,
    KeyWeights,
    key_rule,
    rule_weights,
    select_keys,
    selection_budget,
)

OUT = ROOT / "bench" / "results"
EPSILON, DELTA = 1.0, 1e-6
M, PER_KEY = 4, 5
RULES = ("threshold", "gaussian", "policy")


def clinic_visits(seed: int = 37, patients: int = 6_000, clinics: int = 400) -> pd.DataFrame:
    """Patients with a home clinic (Zipf-like) and, a third of them, 1-3 more (flatter)."""
    rng = np.random.default_rng(seed)
    home = 1.0 / (np.arange(clinics) + 3.0) ** 1.2
    home /= home.sum()
    other = 1.0 / (np.arange(clinics) + 30.0) ** 0.8
    other = rng.permutation(other / other.sum())
    rows: list[tuple[str, str]] = []
    for p in range(patients):
        mine = {int(rng.choice(clinics, p=home))}
        if rng.random() < 1 / 3:
            mine |= set(rng.choice(clinics, size=int(rng.integers(1, 4)), p=other).tolist())
        for c in sorted(mine):
            rows += [(f"p{p:05d}", f"C{c:03d}")] * int(rng.integers(1, PER_KEY + 1))
    return pd.DataFrame(rows, columns=["unit", "key"])


def tuning_visits() -> pd.DataFrame:
    """``bench/tables.py``'s ``visits`` file (the policy rule's cutoff was chosen on it)."""
    return visits().rename(columns={"person": "unit", "postcode": "key"})


def aggregate(path: Path, unit: str | None) -> KeyWeights:
    """The exact per-key aggregate, after unit bounding (what a table run folds)."""
    columns = [ColumnSpec(name="key", type="string")]
    if unit is not None:
        columns.append(ColumnSpec(name=unit, type="string"))
    schema = TableSchema(columns=tuple(columns))
    backend: Any = StreamingBackend()
    bound = None
    if unit is not None:
        bound = UnitBound(
            column=unit,
            max_rows=M * PER_KEY,
            partition="key",
            max_partitions=M,
            content=(unit, "key"),
        )
        backend = BoundedBackend(backend, backend.run(BoundingAggregate(bound), path, schema))
    weights: KeyWeights = backend.run(KeyWeightsAggregate(("key",), bound), path, schema)
    return weights


def expected(weights: KeyWeights, rule: KeyRule) -> float:
    """The exact expectation of the number of keys released."""
    if rule.kind == "threshold":
        last = len(rule.probabilities) - 1
        return float(sum(rule.probabilities[min(int(n), last)] for n in weights.units))
    z = (rule_weights(weights, rule) - rule.rho) / rule.sigma
    return float(np.sum(ndtr(z)))


def case(python: Path, path: Path, unit: str | None, runs: int) -> list[dict[str, Any]]:
    m = M if unit else 1
    eps, delta, _ = selection_budget(EPSILON, DELTA, 1)
    weights = aggregate(path, unit)
    out = []
    for name in RULES if unit else ("threshold",):
        rule = key_rule(eps, delta, m, name)
        start = time.perf_counter()
        drawn = [int(select_keys(weights, rule).sum()) for _ in range(runs)]
        seconds = (time.perf_counter() - start) / runs
        out.append(
            {
                "tool": f"dppub {name}",
                "released": drawn,
                "expected": expected(weights, rule),
                "seconds_per_draw": seconds,
            }
        )
    job = {
        "kind": "keys",
        "path": str(path),
        "key": "key",
        "unit": unit or "__row__",
        "epsilon": EPSILON,
        "delta": DELTA,
        "max_partitions": m,
        "max_per_partition": PER_KEY if unit else 1,
        "runs": runs,
    }
    answer = peers(python, job)
    out.append(
        {"tool": "PipelineDP", "released": answer["released"], "expected": answer["expected"]}
    )
    for row in out:
        row |= {"unit": unit or "row", "m": m, "real_keys": len(weights.labels)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--data", choices=("clinic", "visits"), default="clinic")
    parser.add_argument("--peers-venv", type=Path, default=Path("/tmp/dppub-bench-tables"))
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/dppub-bench-keys-data"))
    args = parser.parse_args()
    python = peers_python(args.peers_venv)
    args.data_dir.mkdir(parents=True, exist_ok=True)
    path = args.data_dir / f"{args.data}.parquet"
    frame = clinic_visits() if args.data == "clinic" else tuning_visits()
    frame.to_parquet(path, index=False)
    per_unit = frame.drop_duplicates().groupby("unit").size()
    rows = case(python, path, None, args.runs) + case(python, path, "unit", args.runs)
    peer = {r["unit"]: r["expected"] for r in rows if r["tool"] == "PipelineDP"}
    print(
        f"\nPrivate keys, epsilon {EPSILON}, delta {DELTA} (selection epsilon/2), "
        f"{args.data}: {len(frame):,} rows, {frame['unit'].nunique():,} units in 1-"
        f"{per_unit.max()} keys (mean {per_unit.mean():.2f}); {args.runs} draws each"
    )
    print(
        f"{'unit':8} {'m':>2} {'real':>5} {'tool':16} {'mean':>7} {'sd':>6} {'E':>8} {'E/PDP':>6}"
    )
    for r in rows:
        ratio = r["expected"] / peer[r["unit"]]
        r["expected_ratio_to_pipelinedp"] = ratio
        print(
            f"{r['unit']:8} {r['m']:>2} {r['real_keys']:>5} {r['tool']:16} "
            f"{np.mean(r['released']):>7.1f} {np.std(r['released'], ddof=1):>6.1f} "
            f"{r['expected']:>8.2f} {ratio:>6.3f}"
        )
    out = OUT / ("keys.json" if args.data == "clinic" else f"keys_{args.data}.json")
    OUT.mkdir(parents=True, exist_ok=True)
    meta = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
        ).stdout.strip(),
        "python": platform.python_version(),
        "runs": args.runs,
        "epsilon": EPSILON,
        "delta": DELTA,
        "rows": len(frame),
        "data": args.data,
    }
    out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(f"\nwrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
