"""configs/monthly.yaml: its schedule fits its budget every month of a year, through the
ledger's own reservation; the demo's weekly schedule does not (its budget is a lifetime's)."""

from datetime import UTC, datetime
from pathlib import Path

import pytest

from dppub.dp.errors import BudgetExceededError
from dppub.dp.ledger import Ledger
from dppub.dp.pipeline.limits import _prefect_croniter
from dppub.dp.pipeline.plan import load_plan

CONFIGS = Path(__file__).resolve().parents[3] / "configs"


def _reserve_on_schedule(config: Path, ledger: Path, until: datetime) -> int:
    """Reserve the plan's cost at every time the config's schedule fires, from 2027 on, until
    the ledger refuses; returns how many runs it accepted."""
    plan = load_plan(config)
    cfg = plan.config
    assert cfg.schedule is not None and cfg.schedule.cron is not None
    book = Ledger(str(ledger))
    fires = _prefect_croniter()(cfg.schedule.cron, datetime(2027, 1, 1, tzinfo=UTC))
    accepted = 0
    while (when := fires.get_next(datetime)) < until:
        book.reserve(
            run_id=f"r{accepted}",
            data=cfg.data_identity,
            policy=cfg.budget_policy,
            cost=plan.total,
            config_hash=cfg.config_hash,
            when=when,
        )
        accepted += 1
    return accepted


def test_the_monthly_schedule_fits_its_budget_for_a_year(tmp_path: Path) -> None:
    assert (
        _reserve_on_schedule(
            CONFIGS / "monthly.yaml", tmp_path / "m.sqlite", datetime(2028, 1, 1, tzinfo=UTC)
        )
        == 12
    )


def test_the_demos_weekly_schedule_is_refused_on_its_sixth_run(tmp_path: Path) -> None:
    with pytest.raises(BudgetExceededError, match="requested epsilon=1.5"):
        _reserve_on_schedule(
            CONFIGS / "demo.yaml", tmp_path / "d.sqlite", datetime(2028, 1, 1, tzinfo=UTC)
        )
    book = Ledger(str(tmp_path / "d.sqlite"))  # five runs of 1.5 fit the census budget of 8
    assert [r.run_id for r in book.pending()] == [f"r{i}" for i in range(5)]
