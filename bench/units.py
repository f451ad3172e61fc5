"""Privacy units (issue 18): what row-level DP protects, what a row bound costs, what it takes.

Usage: ``.venv/bin/python bench/units.py [--rows 200000] [--units 60000] [--epsilon 1]
[--scale-rows 10000000] [--scale-units 3000000] [--skip-scale]``

Data: the census generator's rows (``data/generate.py``, seeded) with a ``household`` column
drawn heavy-tailed: row ``i`` belongs to unit ``floor(U * u_i^2)``, ``u_i`` uniform, so unit
``k`` expects rows in proportion to ``1/sqrt(k)`` (the heaviest unit holds about
``rows / sqrt(U)`` rows, the lightest 1-2).

1. **Protection of the heaviest unit** (``R`` rows): a row-level release at ``epsilon`` protects
   it at ``R * epsilon`` (group privacy, the only bound that holds for every mechanism); a
   unit-level release at the declared ``epsilon`` protects it at ``epsilon``.
2. **Accuracy price of the bound** ``m = 1, 2, 5, 10`` (and ``m = R``, nothing dropped): the
   histogram of age (74 cells) released at unit-level ``epsilon`` with Laplace noise of scale
   ``m / epsilon`` on the bounded counts (rows kept by the engine's own rule,
   :class:`dp.engine.unit_bounding.UnitBound`, seeded key), against the *unbounded* true counts:
   per-cell RMSE = ``sqrt(bias^2 + 2 (m / epsilon)^2)``, with ``bias^2`` the mean squared count
   of dropped rows (exact), and the empirical RMSE over 50 seeded Laplace draws. The row-level
   release (noise ``1 / epsilon``, no bias) is the reference that protects the heavy unit only at
   ``R * epsilon``.
3. **Scale**: ``dppub run`` of the demo config on ``--scale-rows`` census rows with
   ``--scale-units`` households, default engine, once unbounded (no unit) and once with
   ``privacy_unit: household, max_rows_per_unit: 5``: wall time (Prefect start-up included)
   and the peak resident memory of the process tree (sampled every 0.1 s). Targets: bounded
   <= 2x unbounded in time, <= 2 GiB.

Prints one table and writes ``bench/results/units.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "configs" / "demo.yaml"
sys.path.insert(0, str(ROOT))

from bench.scale import _dataset, watched_run  # noqa: E402
from dppub.dp.axes import Axis, numeric_axis  # noqa: E402
from dppub.dp.engine import HistogramAggregate, StreamingBackend, TableSource  # noqa: E402
from dppub.dp.engine.unit_bounding import BoundingAggregate, UnitBound  # noqa: E402
from dppub.dp.pipeline.loading import inline_dataset, read_config  # noqa: E402
from dppub.dp.pipeline.units import bounded_source  # noqa: E402
from dppub.dp.schema import ColumnSpec, TableSchema  # noqa: E402

BOUNDS = (1, 2, 5, 10)
SCALE_BOUND = 5
DRAWS = 50
KEY = 20261125  # a fixed bounding key, so the bench is reproducible (runs draw theirs from the OS)
OUT = ROOT / "bench" / "results" / "units.json"


def _counts(source: TableSource, axes: list[Axis]) -> np.ndarray:
    """Exact counts over ``axes`` through the source's engine."""
    counts = source.backend.run(HistogramAggregate(tuple(axes)), source.path, source.schema)
    return np.asarray(counts, dtype=np.float64).ravel()


def households(rows: int, units: int, seed: int) -> np.ndarray:
    """Heavy-tailed unit ids: unit ``k`` expects rows in proportion to ``1 / sqrt(k)``."""
    u = np.random.default_rng(seed).random(rows)
    return np.minimum((units * u * u).astype(np.int64), units - 1)


def _with_units(src: Path, dst: Path, units: int, seed: int) -> Path:
    """Copy a Parquet file or folder adding ``household`` (one row group at a time)."""
    if dst.exists():
        return dst
    tmp = dst.with_name(dst.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    files = sorted(src.glob("*.parquet")) if src.is_dir() else [src]
    rng = np.random.default_rng(seed)
    for f in files:
        reader = pq.ParquetFile(f)
        writer: pq.ParquetWriter | None = None
        for g in range(reader.num_row_groups):
            table = reader.read_row_group(g)
            ids = households(table.num_rows, units, int(rng.integers(2**63)))
            table = table.append_column("household", pa.array(ids))
            if writer is None:
                writer = pq.ParquetWriter(tmp / f.name, table.schema)
            writer.write_table(table)
        if writer is not None:
            writer.close()
    tmp.rename(dst)
    return dst


def accuracy(rows: int, units: int, epsilon: float, scratch: Path) -> dict[str, Any]:
    """Parts 1 and 2 on a single Parquet file of ``rows`` census rows."""
    sys.path.insert(0, str(ROOT / "data"))
    gen = __import__("generate")
    frame = gen.make_census(rows, 20261121)
    frame["household"] = households(rows, units, 7)
    path = scratch / "units.parquet"
    frame.to_parquet(path, index=False)
    sizes = np.bincount(frame["household"].to_numpy())
    sizes = sizes[sizes > 0]
    heaviest = int(sizes.max())
    schema = TableSchema(
        columns=(
            ColumnSpec(name="age", type="int", bounds=(17, 90)),
            ColumnSpec(name="household", type="int", bounds=(0, units), unit=True),
        )
    )
    axes = [numeric_axis(schema["age"])]
    source = TableSource(path=path, schema=schema, backend=StreamingBackend())
    truth = _counts(source, axes)
    rng = np.random.default_rng(0)

    def release(counts: np.ndarray, scale: float) -> dict[str, float]:
        bias2 = float(np.mean((counts - truth) ** 2))
        noisy = counts[None, :] + rng.laplace(0.0, scale, size=(DRAWS, counts.size))
        return {
            "bias_rmse": math.sqrt(bias2),
            "noise_rmse": math.sqrt(2.0) * scale,
            "expected_rmse": math.sqrt(bias2 + 2.0 * scale**2),
            "empirical_rmse": float(np.sqrt(np.mean((noisy - truth) ** 2))),
            "rows_kept": float(counts.sum()),
        }

    table: list[dict[str, Any]] = [
        {
            "release": "row-level DP (no bound)",
            "m": None,
            "noise_scale": 1 / epsilon,
            "heaviest_unit_epsilon": heaviest * epsilon,
            **release(truth, 1 / epsilon),
        }
    ]
    for m in (*BOUNDS, heaviest):
        bound = UnitBound(column="household", max_rows=m, content=("age",), key=KEY)
        keep = source.backend.run(BoundingAggregate(bound), path, schema)
        counts = _counts(bounded_source(source, keep), axes)
        table.append(
            {
                "release": f"unit-level DP, m = {m}"
                + (" (= heaviest unit)" if m == heaviest else ""),
                "m": m,
                "noise_scale": m / epsilon,
                "heaviest_unit_epsilon": epsilon,
                **release(counts, m / epsilon),
            }
        )
    return {
        "rows": rows,
        "units": int(sizes.size),
        "heaviest_unit_rows": heaviest,
        "median_unit_rows": float(np.median(sizes)),
        "units_over_10_rows": int((sizes > 10).sum()),
        "rows_in_units_over_10": int(sizes[sizes > 10].sum()),
        "epsilon": epsilon,
        "cells": int(truth.size),
        "table": table,
    }


def _run(cfg: Path, work: Path) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "dppub.cli", "run", str(cfg)]
    cmd += ["--ledger", str(work / "ledger.sqlite"), "--out", str(work / "out")]
    with (work / "stderr").open("w") as err:
        run = watched_run(cmd, stdout=subprocess.DEVNULL, stderr=err)
    code = run.code
    if code != 0:
        tail = (work / "stderr").read_text().strip().splitlines()[-1:] or ["?"]
        raise RuntimeError(f"dppub run {cfg.name} failed ({code}): {tail[0]}")
    shutil.rmtree(work / "out", ignore_errors=True)
    return {
        "seconds": run.seconds,
        "peak_mib": run.peak_kib / 1024,
        "tree_peak_mib": run.tree_peak / 2**20,
    }


def scale(rows: int, units: int, data_dir: Path) -> dict[str, Any]:
    """Part 3: the demo flow on ``rows`` rows, unbounded and bounded per household."""
    import yaml

    from dppub.dp.pipeline.plan import load_plan

    base = _dataset(rows, data_dir, 16)
    data = _with_units(base, data_dir / f"census_{rows}_units_{units}", units, 11)
    distinct = len(
        np.unique(
            np.concatenate(
                [
                    pq.read_table(f, columns=["household"])[0].to_numpy()
                    for f in data.glob("*.parquet")
                ]
            )
        )
    )
    out: dict[str, Any] = {"rows": rows, "units": distinct, "bound": SCALE_BOUND}
    for label, unit in (("unbounded", False), ("bounded", True)):
        work = data_dir / f"units-run-{label}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        raw = inline_dataset(read_config(DEMO), DEMO)[0]  # its path is set below
        raw.pop("schedule", None)
        raw["dataset"]["path"] = str(data)
        raw["dataset"]["budget"] = {"epsilon": 1000.0}
        raw["dataset"]["columns"]["household"] = {"type": "int", "bounds": [0, units]}
        if unit:
            raw["dataset"].update(privacy_unit="household", max_rows_per_unit=SCALE_BOUND)
        cfg = work / "config.yaml"
        cfg.write_text(yaml.safe_dump(raw, sort_keys=False))
        engine = load_plan(cfg).resolved_engine()
        out[label] = {"engine": engine, **_run(cfg, work)}
    out["ratio"] = out["bounded"]["seconds"] / out["unbounded"]["seconds"]
    out["ok"] = out["ratio"] <= 2.0 and out["bounded"]["tree_peak_mib"] <= 2048
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--units", type=int, default=60_000)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--scale-rows", type=int, default=10_000_000)
    parser.add_argument("--scale-units", type=int, default=3_000_000)
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument(
        "--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "dppub-scale"
    )
    args = parser.parse_args()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        acc = accuracy(args.rows, args.units, args.epsilon, Path(tmp))
    big = None if args.skip_scale else scale(args.scale_rows, args.scale_units, args.data_dir)

    print(
        f"{acc['rows']:,} rows, {acc['units']:,} units (median {acc['median_unit_rows']:g} rows, "
        f"heaviest {acc['heaviest_unit_rows']:,}; {acc['units_over_10_rows']:,} units hold "
        f"{acc['rows_in_units_over_10']:,} rows in units of > 10 rows); histogram of age, "
        f"{acc['cells']} cells, epsilon {acc['epsilon']:g}, RMSE per cell vs the unbounded truth"
    )
    head = (
        f"{'release':<40} {'heaviest unit eps':>17} {'noise':>7} {'bias':>8} "
        f"{'expected':>9} {'empirical':>9} {'rows kept':>10}"
    )
    print(head)
    for r in acc["table"]:
        print(
            f"{r['release']:<40} {r['heaviest_unit_epsilon']:>17g} {r['noise_rmse']:>7.2f} "
            f"{r['bias_rmse']:>8.2f} {r['expected_rmse']:>9.2f} {r['empirical_rmse']:>9.2f} "
            f"{r['rows_kept']:>10,.0f}"
        )
    if big is not None:
        print(
            f"\ndppub run demo, {big['rows']:,} rows, {big['units']:,} households "
            f"(max_rows_per_unit {big['bound']}):"
        )
        for label in ("unbounded", "bounded"):
            r = big[label]
            print(
                f"  {label:<10} engine {r['engine']:<7} {r['seconds']:>7.1f} s  peak "
                f"{r['peak_mib']:>6.0f} MiB (process tree {r['tree_peak_mib']:.0f} MiB)"
            )
        print(
            f"  bounded / unbounded {big['ratio']:.2f} (<= 2), "
            f"{'ok' if big['ok'] else 'MISSES TARGET'}"
        )
    report = {
        "benchmark": "privacy units: protection, accuracy price of the bound, scale",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "date": datetime.now(UTC).date().isoformat(),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "load_average_at_end": os.getloadavg(),
        "seconds": time.perf_counter() - t0,
        "accuracy": acc,
        "scale": big,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
