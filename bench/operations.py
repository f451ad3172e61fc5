"""Operations benchmark: demo run wall time, and audit time on a ledger of 100,000 releases.

Usage: ``.venv/bin/python bench/operations.py [--releases 100000] [--runs 2]`` (from the
checkout to measure; the venv must be set up, as ``make setup`` does).

Prints one table and writes ``bench/results/operations.json``. Targets: ``make run`` after
set-up under 30 s (issue 2); ``dppub audit`` on 100,000 releases under 1 s (issue 6).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dppub.dp.budget import PrivacyCost  # noqa: E402
from dppub.dp.ledger import BudgetPolicy, DataIdentity, Ledger, ReleaseRecord  # noqa: E402

# The venv's interpreter, started with ``-m dppub.cli`` from ROOT: the CLI of *this* checkout
# (the venv's ``dppub`` script imports whichever checkout it was installed from).
PYTHON = Path(sys.executable)


def _cli(
    *args: str, env: dict[str, str] | None = None
) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(
        [str(PYTHON), "-m", "dppub.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    return time.perf_counter() - start, done


def build_ledger(path: Path, releases: int, per_run: int = 1000) -> None:
    """A ledger of ``releases`` release rows in runs of ``per_run`` over five datasets."""
    led = Ledger(str(path))
    policy = BudgetPolicy(total=PrivacyCost(epsilon=1e9))
    for r in range(releases // per_run):
        run_id = f"bench-{r}"
        led.reserve(
            run_id=run_id,
            data=DataIdentity(name=f"d{r % 5}", source=f"/data/d{r % 5}.parquet"),
            policy=policy,
            cost=PrivacyCost(epsilon=0.01),
            config_hash="c",
        )
        led.record_releases(
            run_id=run_id,
            releases=[
                ReleaseRecord(
                    name=f"q{i}",
                    kind="workload",
                    mechanism="laplace",
                    cost=PrivacyCost(epsilon=1e-5),
                    sensitivity=1.0,
                    output_hash="0" * 64,
                )
                for i in range(per_run)
            ],
        )
        led.commit(run_id=run_id, output_hash="0" * 64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=2, help="demo runs to time")
    args = parser.parse_args()
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        env = {"PREFECT_HOME": os.environ.get("PREFECT_HOME", str(ROOT / ".state" / "prefect"))}
        sample = ROOT / "data" / "sample" / "census.parquet"
        if not sample.exists():  # what `make run` generates first (same rows and seed)
            gen = [str(PYTHON), "data/generate.py", "--rows", "50000", "--seed", "20261121"]
            subprocess.run([*gen, "--out", str(sample)], cwd=ROOT, check=True, capture_output=True)
        for i in range(args.runs):
            secs, done = _cli(
                "run",
                "configs/demo.yaml",
                "--ledger",
                str(t / "demo.sqlite"),
                "--out",
                str(t / "out"),
                env=env,
            )
            rows.append(
                {
                    "measure": f"demo run {i + 1} (make run after set-up)",
                    "seconds": secs,
                    "target": 30.0,
                    "ok": done.returncode == 0 and secs <= 30.0,
                }
            )
        ledger = t / "big.sqlite"
        start = time.perf_counter()
        build_ledger(ledger, args.releases)
        rows.append(
            {
                "measure": f"build ledger of {args.releases} releases",
                "seconds": time.perf_counter() - start,
                "target": None,
                "ok": True,
            }
        )
        for flag in ([], ["--json"]):
            secs, done = _cli("audit", "--ledger", str(ledger), *flag)
            rows.append(
                {
                    "measure": f"dppub audit {' '.join(flag)}".strip()
                    + f" ({args.releases} releases)",
                    "seconds": secs,
                    "target": 1.0,
                    "ok": done.returncode == 0 and secs <= 1.0,
                }
            )
        secs, done = _cli("audit", "--ledger", str(ledger), "--html", str(t / "a.html"))
        rows.append(
            {
                "measure": f"dppub audit --html ({args.releases} releases)",
                "seconds": secs,
                "target": None,
                "ok": done.returncode == 0,
            }
        )
    print(f"{'measure':<52} {'seconds':>8} {'target':>7}  ok")
    for r in rows:
        target = "" if r["target"] is None else f"{r['target']:g}"
        print(f"{r['measure']:<52} {r['seconds']:>8.2f} {target:>7}  {r['ok']}")
    out = ROOT / "bench" / "results" / "operations.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
