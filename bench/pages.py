"""Benchmark: what the HTML pages cost -- ``report.html`` of the demo run, the audit page of a
ledger with one run and with a thousand.

Each page is rendered in a fresh interpreter that has imported dppub but not matplotlib, as a
run does (``cold``: matplotlib's import included), then once more in the same process
(``warm``). The demo run is published in-process on ``data/sample/census.parquet`` (``make
run`` generates it); the thousand-run ledger holds the demo's releases, recorded and committed
a thousand times.

    .venv/bin/python bench/pages.py            # ~1 minute

Prints one table; writes ``bench/results/pages.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dppub.dp.budget import PrivacyCost  # noqa: E402
from dppub.dp.ledger import Ledger  # noqa: E402
from dppub.dp.pipeline.plan import load_plan  # noqa: E402
from tests.dp.pipeline.published_run import demo_config, publish_in_process  # noqa: E402

# Runs in a fresh interpreter: import dppub, then time the page twice (cold, warm).
_TIMER = r"""
import json, pickle, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import dp.pipeline.report, dp.ledger, dppub.commands  # what a run has imported already
assert "matplotlib" not in sys.modules
args = pickle.loads(Path(sys.argv[2]).read_bytes())
times = []
for _ in range(2):
    start = time.perf_counter()
    if args["page"] == "report":
        from dppub.dp.pipeline.report_html import render_report_html
        render_report_html(**args["kwargs"])
    else:
        from dppub.commands import audit_payload, write_audit_page
        write_audit_page(args["ledger"], audit_payload(args["ledger"], None), Path(args["out"]))
    times.append(time.perf_counter() - start)
print(json.dumps(times))
"""


def _time(args: dict[str, object], work: Path) -> tuple[float, float]:
    import pickle

    blob = work / "args.pickle"
    blob.write_bytes(pickle.dumps(args))
    done = subprocess.run(
        [sys.executable, "-c", _TIMER, str(ROOT), str(blob)],
        capture_output=True,
        text=True,
        check=True,
    )
    cold, warm = json.loads(done.stdout)
    return cold, warm


def _many_runs(ledger: Path, config: Path, runs: int) -> None:
    """``runs`` committed runs of the demo's releases (a budget large enough for all)."""
    plan = load_plan(config)
    cfg = plan.config
    book = Ledger(str(ledger))
    policy = type(cfg.budget_policy)(total=PrivacyCost(epsilon=10.0 * runs))
    records = [r for s in plan.releases for r in _records(s)]
    for i in range(runs):
        run_id = f"bench{i:05d}"
        book.reserve(
            run_id=run_id,
            data=cfg.data_identity,
            policy=policy,
            cost=plan.total,
            config_hash=cfg.config_hash,
        )
        book.record_releases(run_id=run_id, releases=records)
        book.commit(run_id=run_id, output_hash="0" * 64)


def _records(release):  # type: ignore[no-untyped-def]
    from dppub.dp.ledger import ReleaseRecord

    parts = release.parts or ()
    common = {"kind": release.kind, "mechanism": release.mechanism, "is_dp": release.is_dp}
    if not parts:
        return [ReleaseRecord(name=release.name, cost=release.cost, **common)]
    return [ReleaseRecord(name=p.name, cost=p.cost, partition=p.partition, **common) for p in parts]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "sample" / "census.parquet")
    parser.add_argument("--runs", type=int, default=1000)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        config = demo_config(work, args.data)
        published = publish_in_process(config, work / "one.sqlite", work / "out")
        report = {
            "page": "report",
            "kwargs": {
                "manifest": published.manifest,
                "summaries": published.summaries,
                "folder": published.folder,
            },
        }
        rows.append(("report.html, demo run", *_time(report, work)))
        one = {"page": "audit", "ledger": str(work / "one.sqlite"), "out": str(work / "a.html")}
        rows.append(("audit page, 1 run", *_time(one, work)))
        start = time.perf_counter()
        _many_runs(work / "many.sqlite", config, args.runs)
        print(f"({args.runs} runs recorded in {time.perf_counter() - start:.1f} s)")
        many = {"page": "audit", "ledger": str(work / "many.sqlite"), "out": str(work / "b.html")}
        rows.append((f"audit page, {args.runs} runs", *_time(many, work)))
        size = (work / "b.html").stat().st_size
    print(f"{'page':<28} {'cold s':>8} {'warm s':>8}")
    for name, cold, warm in rows:
        print(f"{name:<28} {cold:>8.2f} {warm:>8.2f}")
    print(f"(the {args.runs}-run audit page is {size / 1e6:.1f} MB)")
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    result = [{"page": n, "cold_s": c, "warm_s": w} for n, c, w in rows]
    (out / "pages.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
