"""The peers' side of ``bench/tables.py``: PipelineDP on the same Parquet file.

Runs in the benchmark's own environment (``bench/requirements-tables.txt``; never dppub's), is
started by ``bench/tables.py`` with a JSON job on stdin and prints a JSON answer on stdout. It
does not import dppub.

Jobs (``kind``):

* ``keys``: PipelineDP's table of a COUNT per key with private partitions (its default
  TRUNCATED_GEOMETRIC selection, Laplace count, NaiveBudgetAccountant at (epsilon, delta)),
  ``runs`` times; the number of keys in each output.
* ``measures``: PipelineDP's COUNT / SUM / MEAN by a public key set, ``runs`` times (a unit's
  rows bounded by ``max_contributions`` when given); each run's answers per key.
* ``time``: wall time of one PipelineDP local-backend run of a three-measure table
  (count, sum, mean) with private keys; with ``out``, the table is also written there as CSV
  (one row per released key), so the whole process -- Python's start, ``import pipeline_dp``,
  reading the Parquet file, the run, writing the result -- is what ``bench/tables.py`` times
  from outside.
"""

from __future__ import annotations

import csv
import json
import sys
import time
from typing import Any

import pipeline_dp
import pyarrow.parquet as pq


def _rows(path: str, columns: list[str]) -> list[tuple[Any, ...]]:
    table = pq.read_table(path, columns=columns)
    cols = [table.column(c).to_pylist() for c in columns]
    return list(zip(*cols, strict=True))


def _params(job: dict[str, Any], metrics: list[Any]) -> pipeline_dp.AggregateParams:
    bounds = job.get("bounds") or [None, None]
    total = job.get("max_contributions")  # a bound on a unit's rows in all, as dppub's
    return pipeline_dp.AggregateParams(
        noise_kind=pipeline_dp.NoiseKind.LAPLACE,
        metrics=metrics,
        max_partitions_contributed=None if total else job["max_partitions"],
        max_contributions_per_partition=None if total else job["max_per_partition"],
        max_contributions=total,
        min_value=bounds[0],
        max_value=bounds[1],
    )


def _run(job: dict[str, Any], metrics: list[Any], public: list[Any] | None) -> list[Any]:
    cols = [job["unit"], job["key"]] + ([job["value"]] if job.get("value") else [])
    rows = _rows(job["path"], cols) if job["unit"] != "__row__" else None
    if rows is None:  # row-level: each row its own unit
        base = _rows(job["path"], cols[1:])
        rows = [(i, *r) for i, r in enumerate(base)]
    accountant = pipeline_dp.NaiveBudgetAccountant(
        total_epsilon=job["epsilon"], total_delta=job["delta"]
    )
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
    extractors = pipeline_dp.DataExtractors(
        privacy_id_extractor=lambda r: r[0],
        partition_extractor=lambda r: r[1],
        value_extractor=(lambda r: r[2]) if job.get("value") else (lambda r: 0),
    )
    result = engine.aggregate(rows, _params(job, metrics), extractors, public_partitions=public)
    accountant.compute_budgets()
    return list(result)


def keys(job: dict[str, Any]) -> dict[str, Any]:
    counts = []
    for _ in range(job["runs"]):
        out = _run(job, [pipeline_dp.Metrics.COUNT], None)
        counts.append(len(out))
    # The expectation, without sampling noise: sum over keys of PyDP's own keep probability
    # at the selection's share (epsilon/2 here: one COUNT and the selection, weight 1 each) of
    # each key's distinct units (no unit of these files is in more than m keys).
    from pydp.algorithms.partition_selection import create_partition_strategy

    strategy = create_partition_strategy(
        "truncated_geometric", job["epsilon"] / 2, job["delta"], job["max_partitions"]
    )
    table = pq.read_table(job["path"]).to_pandas()
    if job["unit"] == "__row__":
        units = table.groupby(job["key"]).size()
    else:
        units = table.drop_duplicates([job["unit"], job["key"]]).groupby(job["key"]).size()
    expected = float(sum(strategy.probability_of_keep(int(n)) for n in units))
    return {"released": counts, "expected": expected}


def measures(job: dict[str, Any]) -> dict[str, Any]:
    names = job["metrics"]
    metrics = [getattr(pipeline_dp.Metrics, n.upper()) for n in names]
    runs = []
    for _ in range(job["runs"]):
        out = _run(job, metrics, job["public"])
        runs.append({str(k): {n: float(getattr(v, n)) for n in names} for k, v in out})
    return {"runs": runs}


def quantiles(job: dict[str, Any]) -> dict[str, Any]:
    """OpenDP's exponential-mechanism quantiles per group (``make_private_quantile``) on the
    same grid as dppub's (1,024 bins over the declared bounds), each of the ``alphas`` at
    ``epsilon / len(alphas)`` (scale solved for it): per run and group, one value per alpha."""
    import numpy as np
    import opendp.prelude as odp

    odp.enable_features("contrib")
    lo, hi = job["bounds"]
    candidates = [float(c) for c in np.linspace(lo, hi, job["bins"] + 1)]

    alphas = job.get("alphas", [0.5])
    eps = job["epsilon"] / len(alphas)

    def measurement(alpha: float) -> Any:
        def make(scale: float) -> Any:
            return odp.m.make_private_quantile(
                odp.vector_domain(odp.atom_domain(T=float, nan=False)),
                odp.symmetric_distance(),
                odp.max_divergence(),
                candidates=candidates,
                alpha=alpha,
                scale=scale,
            )

        return make(odp.binary_search_param(make, d_in=1, d_out=eps, T=float))

    measurements = [measurement(a) for a in alphas]
    table = pq.read_table(job["path"], columns=[job["key"], job["value"]]).to_pandas()
    groups = {str(k): [float(v) for v in g[job["value"]]] for k, g in table.groupby(job["key"])}
    return {
        "runs": [
            {k: [m(v) for m in measurements] for k, v in groups.items()} for _ in range(job["runs"])
        ]
    }


def timed(job: dict[str, Any]) -> dict[str, Any]:
    metrics = [pipeline_dp.Metrics.COUNT, pipeline_dp.Metrics.SUM, pipeline_dp.Metrics.MEAN]
    start, cpu = time.perf_counter(), time.process_time()
    out = _run(job, metrics, None)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    if job.get("out"):
        with open(job["out"], "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow([job["key"], "count", "sum", "mean"])
            writer.writerows([k, v.count, v.sum, v.mean] for k, v in out)
    return {"seconds": seconds, "cpu_seconds": cpu_seconds, "keys": len(out)}


def main() -> None:
    job = json.load(sys.stdin)
    handler = {"keys": keys, "measures": measures, "quantiles": quantiles, "time": timed}
    handler = handler[job["kind"]]
    json.dump(handler(job), sys.stdout)


if __name__ == "__main__":
    main()
