"""The run's order (dp/pipeline/publish.py), with plain steps: what each step gets, and a run
whose releases fail is settled by whoever opened it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import ParamSpec, TypeVar

import pytest
import yaml

from dppub.dp.ledger import Ledger
from dppub.dp.pipeline.kinds import ReleaseSummary
from dppub.dp.pipeline.plan import load_plan
from dppub.dp.pipeline.publish import Release, Steps, compute, in_order, publish
from tests.dp.pipeline.published_run import demo_config


def _config(tmp_path: Path, data: Path) -> Path:
    """The demo's workloads only (three DP releases, seconds to run)."""
    path = demo_config(tmp_path, data)
    raw = yaml.safe_load(path.read_text())
    for section in ("anonymize", "regressions", "clustering"):
        raw.pop(section)
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


P = ParamSpec("P")
R = TypeVar("R")


def _recording(steps: Steps, calls: list[str]) -> Steps:
    """``steps``, noting each step's name as it is called."""

    def noted(name: str, fn: Callable[P, R]) -> Callable[P, R]:
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            calls.append(name)
            return fn(*args, **kwargs)

        return call

    return replace(
        steps,
        read=noted("read", steps.read),
        bound_units=noted("bound_units", steps.bound_units),
        scan=noted("scan", steps.scan),
        releases=noted("releases", steps.releases),
        compose=noted("compose", steps.compose),
    )


@pytest.mark.slow
def test_the_steps_run_in_order_and_the_run_is_committed(
    tmp_path: Path, census_small: Path
) -> None:
    config, ledger, out = _config(tmp_path, census_small), tmp_path / "l.sqlite", tmp_path / "out"
    plan = load_plan(config)
    calls: list[str] = []
    with plan.open_run(ledger, out) as run:
        done = publish(plan, run, _recording(in_order(), calls))
    assert calls == ["read", "bound_units", "scan", "releases", "compose"]
    assert [s.name for s in done.summaries] == [r.name for r in plan.releases]
    assert done.folder == out / "census_demo" / run.run_id and done.folder.is_dir()
    assert Ledger(ledger).reservation(run.run_id).state == "committed"
    assert done.reports.manifest["run_id"] == run.run_id


def test_a_failed_release_is_settled_by_whoever_opened_the_run(
    tmp_path: Path, census_small: Path
) -> None:
    # The first release draws its noise, the second fails: the run is charged for that draw,
    # nothing is published, and the staging folder is gone.
    config, ledger, out = _config(tmp_path, census_small), tmp_path / "l.sqlite", tmp_path / "out"
    plan = load_plan(config)

    def first_then_fail(jobs: Sequence[Release]) -> list[ReleaseSummary]:
        compute(jobs[0], in_order().log)
        raise OSError(5, "Input/output error", "second release")

    steps = replace(in_order(), releases=first_then_fail)
    with pytest.raises(OSError, match="second release"), plan.open_run(ledger, out) as run:
        publish(plan, run, steps)
    book = Ledger(ledger)
    assert book.reservation(run.run_id).state == "charged"
    drawn = [r for r in book.history() if r["event"] == "draw"]
    assert [r["release"] for r in drawn] == [plan.releases[0].name]
    assert not (out / "census_demo" / run.run_id).exists()
    assert not run.staging.dir.exists()


def test_more_rows_than_the_allowance_covers_are_refused_before_the_reservation(
    tmp_path: Path, census_small: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 34, item 7 (old code: DID NOT RAISE -- the run reserved its budget and the scan
    # refused). The footers' row count is checked with the structure, before the ledger opens.
    import pyarrow.parquet as pq

    from dppub.dp.errors import InputError
    from dppub.dp.numerics import fixedpoint

    rows = pq.ParquetFile(census_small).metadata.num_rows
    plan = load_plan(demo_config(tmp_path, census_small))
    ledger = tmp_path / "ledger.sqlite"
    monkeypatch.setattr(fixedpoint, "MAX_ROWS", rows - 1)
    with pytest.raises(InputError, match="more than 2\\^"):
        plan.open_run(ledger, tmp_path / "out")
    assert not ledger.exists()  # nothing reserved, nothing charged
    monkeypatch.setattr(fixedpoint, "MAX_ROWS", rows)
    with plan.open_run(ledger, tmp_path / "out") as run:
        assert run.run_id
