"""Scale benchmark: the histogram step over 5 attributes per engine, and whole demo runs.

Usage: ``.venv/bin/python bench/scale.py [--sizes 1000000 10000000] [--stream-only 100000000]
[--dask] [--full-demo [--engines auto stream] [--demo-config configs/demo.yaml]]``

For each row count a seeded partitioned dataset is generated (``data/generate_census.py``, 16
partitions, cached under ``--data-dir``, default a temp folder: 10^8 rows take ~0.7 GB). Every
measurement runs in a fresh subprocess, which reports its wall time for the step (validated read
+ histogram of age x sex x race x education x income/64) and its peak RSS
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``, which includes the interpreter and libraries:
the ``baseline`` row is that floor; for Dask, the largest of the client's and the workers' peaks;
cluster start-up is not timed). ``memory`` loads the columns (``MemoryBackend``), ``stream`` and
``dask`` scan batches; all must return the same counts (checked via a digest). Prints one table
and writes ``bench/results/scale.json``.
Targets (issue 7, 2 cores): 10^7 rows <= 2 s and <= 1 GiB peak.

With ``--full-demo`` the rows are instead whole runs of the demo flow (``dppub run`` on a copy of
``--demo-config`` pointed at the dataset, a fresh ledger and output folder, a budget large
enough), each in a subprocess, once per ``--engines`` entry: ``auto`` passes no ``--engine``
(the default a user gets; the table shows what it resolved to), the others pass ``--engine``.
Wall time of the command (Prefect's temporary server start-up included) and two peaks: the
largest single process (``os.wait4``'s ``ru_maxrss``, as ``/usr/bin/time -v`` reports it) and
the largest *sum* of resident memory over the process and all its descendants (Prefect's server,
Dask workers), sampled every 0.1 s. The digest is that of the k-anonymous release's levels,
suppressed count and input digest: equal on every engine. Writes
``bench/results/scale_<config stem>.json``.
Targets (issue 17): the default engine on 10^7 rows <= 60 s and <= 2 GiB; the full demo on
10^8 rows <= 100 s and <= 2 GiB.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODES = ("baseline", "memory", "stream", "dask")
ENGINES = ("auto", "memory", "stream", "dask")
DEMO_TARGET_S = (60, 100)
"""Issue 17: the full demo on <= 10^7 rows within 60 s, on 10^8 rows within 100 s (<= 2 GiB)."""


def _schema() -> Any:
    from dppub.dp.schema import ColumnSpec, TableSchema

    sys.path.insert(0, str(ROOT / "data"))
    gen = __import__("generate")
    return TableSchema(
        columns=(
            ColumnSpec(name="age", type="int", bounds=(17, 90)),
            ColumnSpec(name="sex", type="category", categories=tuple(gen.SEX)),
            ColumnSpec(name="race", type="category", categories=tuple(gen.RACE)),
            ColumnSpec(name="education", type="category", categories=tuple(gen.EDUCATION)),
            ColumnSpec(name="income", type="float", bounds=(0, 250_000)),
        )
    )


def _child(mode: str, path: str, batch_size: int, workers: int) -> None:
    """Run one measurement in this (fresh) process and print one JSON line."""
    import numpy as np

    from dppub.dp.axes import category_axis, numeric_axis

    # Imports happen before the clock starts: the step is timed, not the interpreter start-up.
    from dppub.dp.engine import histogram_stream

    schema = _schema()
    axes = [
        numeric_axis(schema["age"]),
        category_axis(schema["sex"]),
        category_axis(schema["race"]),
        category_axis(schema["education"]),
        numeric_axis(schema["income"], bins=64),
    ]
    counts: Any = np.zeros(1)
    client = None
    if mode == "dask":
        from distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True)
        client = Client(cluster)
    start = time.perf_counter()
    if mode == "memory":
        from dppub.dp.engine import MemoryBackend

        cols = [a.column for a in axes]
        backend = MemoryBackend.load(path, schema, cols, batch_size=batch_size)
        counts = histogram_stream(path, schema, axes, backend=backend)
    elif mode == "stream":
        counts = histogram_stream(path, schema, axes, batch_size=batch_size)
    elif mode == "dask":
        from dppub.dp.engine.dask import DaskBackend

        counts = histogram_stream(path, schema, axes, backend=DaskBackend(batch_size=batch_size))
    seconds = time.perf_counter() - start
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if client is not None:
        # Dask's work happens in the worker processes: report the largest of their peaks too.
        peaks = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        peak_mib = max(peak_mib, *peaks.values())
        client.close()
    digest = hashlib.sha256(np.ascontiguousarray(counts).tobytes()).hexdigest()[:16]
    print(json.dumps({"seconds": seconds, "peak_mib": peak_mib, "digest": digest}))


def _measure(mode: str, path: Path, batch_size: int, workers: int) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", mode, str(path), "--batch-size", str(batch_size)]
    cmd += ["--workers", str(workers)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["?"]
        raise RuntimeError(f"{mode} on {path.name} failed: {tail[0]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _tree_rss(proc: Any) -> int:
    """Resident bytes of ``proc`` and all its descendants now (0 once it is gone)."""
    import psutil

    total = 0
    with contextlib.suppress(psutil.Error):
        for p in [proc, *proc.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                total += p.memory_info().rss
    return total


@dataclass(frozen=True)
class Watched:
    """A finished child process: wall seconds, exit code, the largest single process's peak
    RSS (KiB, ``ru_maxrss``) and the largest sum of resident bytes over its process tree."""

    seconds: float
    code: int
    peak_kib: int
    tree_peak: int


def watched_run(cmd: list[str], *, stdout: Any, stderr: Any, env: Any = None) -> Watched:
    """Run ``cmd`` from the repository root, sampling its tree's memory every 0.1 s."""
    import psutil

    tree = 0
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=stdout, stderr=stderr)
    watched = psutil.Process(proc.pid)
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        tree = max(tree, _tree_rss(watched))
        time.sleep(0.1)
    seconds = time.perf_counter() - start
    return Watched(seconds, os.waitstatus_to_exitcode(status), usage.ru_maxrss, tree)


def _demo(rows: int, engine: str, path: Path, config: Path, scratch: Path) -> dict[str, Any]:
    """One ``dppub run`` of the demo flow on ``path``; wall seconds, peak RSS and a digest."""
    import yaml

    from dppub.dp.pipeline.plan import load_plan

    work = scratch / f"demo_{rows}_{engine}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    raw = yaml.safe_load(config.read_text())
    raw["dataset"]["path"] = str(path.resolve())
    raw["dataset"]["budget"] = {"epsilon": 1000.0, "delta": 0.01}
    raw.pop("schedule", None)
    cfg = work / "config.yaml"
    cfg.write_text(yaml.safe_dump(raw, sort_keys=False))
    resolved = load_plan(cfg, None if engine == "auto" else engine).resolved_engine()
    # The CLI of this checkout (the venv's `dppub` script imports the checkout it was installed
    # from): `python -m dppub.cli` with ROOT as the working directory.
    cmd = [
        sys.executable,
        "-m",
        "dppub.cli",
        "run",
        str(cfg),
        "--ledger",
        str(work / "ledger.sqlite"),
    ]
    cmd += ["--out", str(work / "out")]
    cmd += [] if engine == "auto" else ["--engine", engine]
    with (work / "stdout").open("w") as out, (work / "stderr").open("w") as err:
        run = watched_run(cmd, stdout=out, stderr=err)
    if run.code != 0:
        tail = (work / "stderr").read_text().strip().splitlines()[-1:] or ["?"]
        raise RuntimeError(f"demo flow ({engine}) on {path.name} failed: {tail[0]}")
    name = raw["anonymize"]["name"]
    (metrics,) = (work / "out").glob(f"*/*/{name}/metrics.json")
    m = json.loads(metrics.read_text())
    key = json.dumps([m["levels"], m["suppressed"], m["input_sha256"]]).encode()
    shutil.rmtree(work / "out", ignore_errors=True)  # the released table can be large
    return {
        "engine": resolved,
        "seconds": run.seconds,
        "peak_mib": run.peak_kib / 1024,
        "tree_peak_mib": run.tree_peak / 2**20,
        "digest": hashlib.sha256(key).hexdigest()[:16],
    }


def _dataset(rows: int, data_dir: Path, partitions: int) -> Path:
    out = data_dir / f"census_{rows}"
    subprocess.run(
        [
            *(sys.executable, str(ROOT / "data" / "generate_census.py")),
            *("--rows", str(rows), "--partitions", str(partitions), "--out", str(out)),
        ],
        check=True,
        capture_output=True,
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1_000_000, 10_000_000])
    parser.add_argument("--stream-only", type=int, nargs="*", default=[])
    parser.add_argument("--dask", action="store_true", help="also measure the Dask backend")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=1 << 20)
    parser.add_argument(
        "--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "dppub-scale"
    )
    parser.add_argument(
        "--full-demo", action="store_true", help="time whole demo-flow runs instead (dppub run)"
    )
    parser.add_argument("--demo-config", type=Path, default=ROOT / "configs" / "demo.yaml")
    parser.add_argument(
        "--engines",
        nargs="*",
        choices=ENGINES,
        default=["auto"],
        help="with --full-demo: engines to run on --sizes (auto: the default, no --engine)",
    )
    parser.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child[0], args.child[1], args.batch_size, args.workers)
        return
    if args.full_demo:
        plan = [(n, e) for n in args.sizes for e in args.engines]
    else:
        plan = [(n, m) for n in args.sizes for m in ("memory", "stream")]
    plan += [(n, "dask") for n in args.sizes if args.dask and "dask" not in args.engines]
    plan += [(n, "stream") for n in args.stream_only]
    rows_out: list[dict[str, Any]] = []
    if not args.full_demo:
        first = min([*args.sizes, *args.stream_only])
        path = _dataset(first, args.data_dir, args.partitions)
        base = _measure("baseline", path, 1, args.workers)
        rows_out.append({"rows": 0, "mode": "baseline", **base, "rows_per_s": None})
    for rows, mode in plan:
        path = _dataset(rows, args.data_dir, args.partitions)
        if args.full_demo:
            r = _demo(rows, mode, path, args.demo_config, args.data_dir / "demo-runs")
        else:
            r = _measure(mode, path, args.batch_size, args.workers)
        rows_out.append({"rows": rows, "mode": mode, **r, "rows_per_s": rows / r["seconds"]})
    digests: dict[int, set[str]] = {}
    for r in rows_out:
        if r["mode"] == "baseline":
            continue
        digests.setdefault(r["rows"], set()).add(r["digest"])
    identical = all(len(d) == 1 for d in digests.values())
    if args.full_demo:
        print(
            f"{'rows':>12} {'engine':>14} {'seconds':>8} {'target':>6} {'rows/s':>10} "
            f"{'peak MiB':>9} {'tree MiB':>9}  digest"
        )
        for r in rows_out:
            target = DEMO_TARGET_S[0] if r["rows"] <= 10**7 else DEMO_TARGET_S[1]
            r["target_seconds"], r["target_mib"] = target, 2048
            r["ok"] = r["seconds"] <= target and r["tree_peak_mib"] <= 2048
            shown = r["mode"] if r["mode"] == r["engine"] else f"{r['mode']}->{r['engine']}"
            print(
                f"{r['rows']:>12,} {shown:>14} {r['seconds']:>8.2f} {target:>6} "
                f"{r['rows_per_s']:>10.3g} {r['peak_mib']:>9.0f} {r['tree_peak_mib']:>9.0f}  "
                f"{r['digest']}{'' if r['ok'] else '  MISSES TARGET'}"
            )
    else:
        print(f"{'rows':>12} {'mode':>8} {'seconds':>8} {'rows/s':>12} {'peak MiB':>9}  digest")
        for r in rows_out:
            rate = f"{r['rows_per_s']:.3g}" if r["rows_per_s"] else "-"
            print(
                f"{r['rows']:>12,} {r['mode']:>8} {r['seconds']:>8.2f} {rate:>12} "
                f"{r['peak_mib']:>9.0f}  {r['digest']}"
            )
    same = "same k-anonymous release" if args.full_demo else "same counts"
    print(f"{same} on every path: {identical}")
    what = "histogram over age x sex x race x education x income(64 bins)"
    if args.full_demo:
        what = f"full demo flow (dppub run {args.demo_config.name})"
    report = {
        "benchmark": what,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "date": datetime.now(UTC).date().isoformat(),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "load_average_at_end": os.getloadavg(),
        "partitions": args.partitions,
        "batch_size": args.batch_size,
        "identical_counts": identical,
        "results": rows_out,
    }
    name = f"scale_{args.demo_config.stem}.json" if args.full_demo else "scale.json"
    out = ROOT / "bench" / "results" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
