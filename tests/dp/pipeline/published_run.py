"""A real run published without Prefect: the run's steps, in order, in-process.

The report tests need genuine releases (noisy answers, fitted models, a k-anonymous table) and
the ledger a run leaves behind, in a few seconds; the flow itself is tested in tests/flows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dppub.dp.budget import PrivacyCost
from dppub.dp.ledger import Ledger
from dppub.dp.pipeline.kinds import ReleaseSummary
from dppub.dp.pipeline.plan import load_plan
from dppub.dp.pipeline.publish import in_order, publish
from tests.examples import example

ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True, slots=True, kw_only=True)
class Published:
    folder: Path
    manifest: dict[str, Any]
    summaries: list[ReleaseSummary]


def publish_in_process(config: Path, ledger: Path, out: Path) -> Published:
    """The run's steps (:func:`dp.pipeline.publish.publish`), called in this thread."""
    plan = load_plan(config)
    with plan.open_run(ledger, out) as run:
        done = publish(plan, run, in_order())
    return Published(folder=done.folder, manifest=done.reports.manifest, summaries=done.summaries)


def demo_config(directory: Path, data: Path) -> Path:
    """``configs/demo.yaml`` on ``data``, with a smaller income domain (16 bins) and a budget
    of its own (epsilon 4: two demo runs fit, the third is refused)."""
    raw = example("demo.yaml")
    raw["dataset"]["path"] = str(data)
    raw["dataset"]["budget"] = {"epsilon": 4.0, "delta": 0.0}
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
