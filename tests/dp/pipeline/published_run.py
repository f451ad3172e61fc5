"""A real run published without Prefect: the flow's steps, called in order, in-process.

The report tests need genuine releases (noisy answers, fitted models, a k-anonymous table) and
the ledger a run leaves behind, in a few seconds; the flow itself is tested in tests/flows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dp.budget import PrivacyCost
from dp.ledger import Ledger
from dp.pipeline.execute import compute_release, shared_scan
from dp.pipeline.kinds import ReleaseSummary
from dp.pipeline.plan import load_plan
from dp.pipeline.report_html import write_reports
from dp.pipeline.units import unit_filters

ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True, slots=True, kw_only=True)
class Published:
    folder: Path
    manifest: dict[str, Any]
    summaries: list[ReleaseSummary]


def publish_in_process(config: Path, ledger: Path, out: Path) -> Published:
    """Plan, open, compute every release, compose, write both reports, publish, commit."""
    plan = load_plan(config)
    book = Ledger(str(ledger))
    run = plan.open_run(book, out)
    with run:
        source = plan.source(run.reservation.period)
        filters = unit_filters([r.bounding for r in plan.releases], source, plan.columns)
        exact = shared_scan(plan.releases, source, filters)
        summaries = [
            compute_release(r, exact[r.name], source, run.staging, filters) for r in plan.releases
        ]
        head = run.compose([rec for s in summaries for rec in s.records()], plan.total)
        reports = write_reports(plan, run, summaries, head)
        folder = run.publish(manifest=reports.manifest, report=reports.report)
        run.commit()
    return Published(folder=folder, manifest=reports.manifest, summaries=summaries)


def demo_config(directory: Path, data: Path) -> Path:
    """``configs/demo.yaml`` on ``data``, with a smaller income domain (16 bins)."""
    raw = yaml.safe_load((ROOT / "configs" / "demo.yaml").read_text())
    raw["dataset"]["path"] = str(data)
    raw["workloads"][1]["attributes"][0]["bins"] = 16
    raw.pop("schedule")
    path = directory / "demo.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def charge_a_run(ledger: Path, config: Path, *, release: str, epsilon: float) -> str:
    """A run that drew noise for ``release`` and died before publishing: it is charged."""
    cfg = load_plan(config).config
    book = Ledger(str(ledger))
    run_id = "20261125T000000Z-charged0"
    book.reserve(
        run_id=run_id,
        data=cfg.data_identity,
        policy=cfg.budget_policy,
        cost=PrivacyCost(epsilon=epsilon),
        config_hash=cfg.config_hash,
    )
    book.draw(run_id=run_id, release=release, cost=PrivacyCost(epsilon=epsilon))
    book.charge(run_id=run_id)
    return run_id


@dataclass(frozen=True, slots=True, kw_only=True)
class Demo:
    """The demo published once, then a second run charged without being published."""

    published: Published
    ledger: Path
    config: Path
    charged_run: str


def publish_demo(directory: Path, data: Path) -> Demo:
    config = demo_config(directory, data)
    ledger = directory / "ledger.sqlite"
    published = publish_in_process(config, ledger, directory / "out")
    charged = charge_a_run(ledger, config, release="age_cdf", epsilon=0.3)
    return Demo(published=published, ledger=ledger, config=config, charged_run=charged)
