"""Ledger benchmark: SQLite and PostgreSQL back ends, side by side.

Usage: ``.venv/bin/python bench/ledger.py [--runs 100] [--releases 100000] [--workers 8]
[--per-worker 10] [--postgres URL]``

For each back end, on a fresh ledger:

* ``run cycle``: one run's ledger traffic (reserve, 3 draws, 3 release rows, commit), repeated
  ``--runs`` times in one process; milliseconds per run.
* ``verify`` and ``audit summary`` on a ledger of ``--releases`` release rows (runs of 1,000).
* ``contention``: ``--workers`` processes each run ``--per-worker`` cycles at once on one ledger;
  wall time, runs per second, and a check that the chain verifies and no run was lost.

Without ``--postgres`` a throwaway local server is started (``tests/pg.py``, durable settings:
``fsync`` on), reached over a Unix socket; a server over a network adds its round trips. Prints
one table and writes ``bench/results/ledger.json``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dppub.dp.budget import PrivacyCost  # noqa: E402
from dppub.dp.ledger import BudgetPolicy, DataIdentity, Ledger, ReleaseRecord  # noqa: E402
from dppub.dp.ledger.summary import spending_summary  # noqa: E402

POLICY = BudgetPolicy(total=PrivacyCost(epsilon=1e9))
DATA = DataIdentity(name="bench", source="/data/bench.parquet")


def _release(name: str) -> ReleaseRecord:
    return ReleaseRecord(
        name=name,
        kind="workload",
        mechanism="laplace",
        cost=PrivacyCost(epsilon=1e-5),
        sensitivity=1.0,
        output_hash="0" * 64,
    )


def cycle(led: Ledger, run_id: str, releases: int = 3) -> None:
    """One run's ledger traffic, as ``dppub run`` makes it."""
    led.reserve(
        run_id=run_id,
        data=DATA,
        policy=POLICY,
        cost=PrivacyCost(epsilon=0.01),
        config_hash="c",
    )
    names = [f"q{i}" for i in range(releases)]
    for name in names:
        led.draw(run_id=run_id, release=name, cost=PrivacyCost(epsilon=1e-5))
    led.record_releases(run_id=run_id, releases=[_release(n) for n in names])
    led.commit(run_id=run_id, output_hash="0" * 64)


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _worker(location: str, worker: int, runs: int) -> None:
    led = Ledger(location)
    for r in range(runs):
        cycle(led, f"w{worker}-{r}")


def measure(backend: str, location: str, big: str, args: argparse.Namespace) -> list[dict]:
    rows: list[dict] = []
    led = Ledger(location)
    secs = _timed(lambda: [cycle(led, f"seq-{r}") for r in range(args.runs)])
    rows.append({"measure": "run cycle (ms per run)", "value": 1000 * secs / args.runs})

    large = Ledger(big)
    for r in range(args.releases // 1000):
        large.reserve(
            run_id=f"big-{r}",
            data=DATA,
            policy=POLICY,
            cost=PrivacyCost(epsilon=0.01),
            config_hash="c",
        )
        large.record_releases(run_id=f"big-{r}", releases=[_release(f"q{i}") for i in range(1000)])
        large.commit(run_id=f"big-{r}", output_hash="0" * 64)
    report = large.verify()
    rows.append({"measure": f"verify, {args.releases} releases (s)", "value": _timed(large.verify)})
    rows.append({"measure": "audit summary (s)", "value": _timed(lambda: spending_summary(large))})

    contended = Ledger(location)
    before = len(contended.runs())
    ctx = mp.get_context("fork")
    procs = [
        ctx.Process(target=_worker, args=(location, w, args.per_worker))
        for w in range(args.workers)
    ]
    start = time.perf_counter()
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    secs = time.perf_counter() - start
    done = len(contended.runs()) - before
    ok = report.ok and contended.verify().ok and done == args.workers * args.per_worker
    rows.append({"measure": f"contention, {args.workers} processes (s)", "value": secs})
    rows.append({"measure": "contention (runs per s)", "value": done / secs})
    for r in rows:
        r.update(backend=backend, ok=ok)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--releases", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--per-worker", type=int, default=10)
    parser.add_argument("--postgres", help="a server URL (default: start a local one)")
    args = parser.parse_args()
    server = None
    if args.postgres is None:
        from tests.pg import PostgresServer

        server = PostgresServer(durable=True)
    rows: list[dict] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            rows += measure("sqlite", f"{tmp}/l.sqlite", f"{tmp}/big.sqlite", args)
            if server is not None:
                location, big = server.schema_url(), server.schema_url()
            else:
                location = big = args.postgres  # one ledger: the figures then include both
            rows += measure("postgresql", location, big, args)
    finally:
        if server is not None:
            server.stop()
    measures = list(dict.fromkeys(r["measure"] for r in rows))
    value = {(r["backend"], r["measure"]): r["value"] for r in rows}
    print(f"{'measure':<40} {'sqlite':>10} {'postgresql':>11}")
    for m in measures:
        print(f"{m:<40} {value['sqlite', m]:>10.3f} {value['postgresql', m]:>11.3f}")
    print("all checks ok:", all(r["ok"] for r in rows))
    out = ROOT / "bench" / "results" / "ledger.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
