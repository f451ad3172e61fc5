from pathlib import Path

import pytest

from dp.budget import PrivacyCost
from dp.errors import BudgetExceededError, LedgerError
from dp.ledger import Ledger
from dp.periods import next_period_start, period_label
from dp.publication import Staging
from dp.runs import confirm_reservation, open_run, recover

BUDGET = PrivacyCost(epsilon=1.0)
COST = PrivacyCost(epsilon=0.6)


def _open(led: Ledger, out: Path, per: str | None = None) -> Staging:
    staging, _ = open_run(
        led,
        out,
        dataset="d",
        cost=COST,
        budget=BUDGET,
        config_hash="c",
        per=per,  # type: ignore[arg-type]
    )
    return staging


def test_refusal_names_the_next_period(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.sqlite")
    first = _open(led, tmp_path / "out", per="year")
    opens = next_period_start("year")
    assert opens is not None
    with pytest.raises(BudgetExceededError, match=f"the next period opens {opens.year}-01-01"):
        _open(led, tmp_path / "out", per="year")
    assert led.reservation(first.run_id).period == period_label("year")
    first.unlock()


def test_recover_commits_published_and_aborts_unpublished_dead_runs(tmp_path: Path) -> None:
    led, out = Ledger(tmp_path / "l.sqlite"), tmp_path / "out"
    big = PrivacyCost(epsilon=10.0)
    runs = []
    for _ in range(3):
        st, _ = open_run(led, out, dataset="d", cost=COST, budget=big, config_hash="c")
        st.create()
        runs.append(st)
    published, unpublished, alive = runs
    published.publish(manifest={"run_id": published.run_id}, report="r")
    published.unlock()  # "dies" after the rename, before the commit
    unpublished.unlock()  # "dies" before publication
    actions = {r.run_id: r.action for r in recover(led)}
    assert actions == {
        published.run_id: "committed",
        unpublished.run_id: "aborted",
        alive.run_id: "running",
    }
    assert led.reservation(published.run_id).state == "committed"
    assert led.reservation(unpublished.run_id).state == "aborted"
    assert not unpublished.dir.exists()
    assert led.reservation(alive.run_id).state == "pending"
    alive.unlock()


def test_confirm_reservation_checks_state_and_plan(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.sqlite")
    st = _open(led, tmp_path / "out")
    kwargs = dict(run_id=st.run_id, dataset="d", config_hash="c", budget=BUDGET)
    left = confirm_reservation(led, cost=COST, **kwargs)  # type: ignore[arg-type]
    assert left.epsilon == pytest.approx(0.4)
    with pytest.raises(LedgerError, match="the plan costs"):
        confirm_reservation(led, cost=PrivacyCost(epsilon=0.5), **kwargs)  # type: ignore[arg-type]
    led.abort(run_id=st.run_id)
    with pytest.raises(LedgerError, match="is aborted and cannot be executed again"):
        confirm_reservation(led, cost=COST, **kwargs)  # type: ignore[arg-type]
    st.unlock()


def test_period_labels() -> None:
    from datetime import UTC, datetime

    t = datetime(2026, 12, 31, 23, 59, tzinfo=UTC)
    assert [period_label(p, t) for p in ("year", "quarter", "month", "week", "day")] == [
        "2026",
        "2026-Q4",
        "2026-12",
        "2026-W53",
        "2026-12-31",
    ]
    assert next_period_start("month", t) == datetime(2027, 1, 1, tzinfo=UTC)
    assert next_period_start("quarter", t) == datetime(2027, 1, 1, tzinfo=UTC)
    assert next_period_start("week", t) == datetime(2027, 1, 4, tzinfo=UTC)
    assert next_period_start(None, t) is None
