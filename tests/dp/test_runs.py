"""The run protocol: open, settle, recover -- and faults injected where they happen."""

import errno
import json
import time
from pathlib import Path

import pytest

import dppub.dp.publication
import dppub.dp.runs
from dppub.dp.budget import PrivacyCost
from dppub.dp.errors import BudgetExceededError, InvariantError, LedgerError
from dppub.dp.ledger import BudgetPolicy, DataIdentity, Ledger, ReleaseRecord
from dppub.dp.ledger.summary import spending_summary
from dppub.dp.periods import next_period_start
from dppub.dp.runs import Run, RunPlan, recover
from tests.dp.conftest import LedgerFactory
from tests.pg import PostgresServer

BUDGET = PrivacyCost(epsilon=1.0)
COST = PrivacyCost(epsilon=0.6)
DATA = DataIdentity(name="d", source="/data/d.parquet")


def _plan(cost: PrivacyCost = COST, policy: BudgetPolicy | None = None) -> RunPlan:
    return RunPlan(
        data=DATA, policy=policy or BudgetPolicy(total=BUDGET), cost=cost, config_hash="c"
    )


def _record(run: Run, name: str, eps: float) -> ReleaseRecord:
    """What a release task does: record the draw, write, complete."""
    assert run.staging.attempt(name, PrivacyCost(epsilon=eps)) is None
    run.staging.write_json(name, "answer.json", {"x": 1})
    done = run.staging.complete(name, {"name": name})
    return ReleaseRecord(
        name=name,
        kind="workload",
        mechanism="laplace",
        cost=PrivacyCost(epsilon=eps),
        output_hash=done["output_hash"],
    )


def _publish(run: Run, records: list[ReleaseRecord]) -> None:
    head = run.compose(records, COST)
    manifest = {"run_id": run.run_id, "ledger_head": {"seq": head[0], "hash": head[1]}}
    run.publish(manifest=manifest, report="r")
    run.commit()


def _spent(led: Ledger) -> float:
    return float(spending_summary(led)["d"]["lifetime_spent_epsilon"])


def test_a_run_publishes_and_commits(tmp_path: Path, ledger_factory: LedgerFactory) -> None:
    led = ledger_factory()
    with Run.open(led, tmp_path / "out", _plan()) as run:
        _publish(run, [_record(run, "a", 0.4), _record(run, "b", 0.2)])
    assert led.reservation(run.run_id).state == "committed"
    assert _spent(led) == pytest.approx(0.6)
    assert (tmp_path / "out" / "d" / run.run_id / "manifest.json").is_file()


@pytest.mark.parametrize("fault", ["eio", "interrupt"])
def test_a_fault_after_the_rename_commits_never_refunds(
    tmp_path: Path, ledger_factory: LedgerFactory, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    # The rename happened: the run is public. An I/O error from the folder's fsync or a
    # Ctrl-C right after it must leave the ledger counting the run.
    def fail_after_rename(step: str) -> None:
        if step == "renamed":
            if fault == "eio":
                raise OSError(errno.EIO, "Input/output error")
            raise KeyboardInterrupt

    monkeypatch.setattr(dppub.dp.publication, "fault_point", fail_after_rename)
    led = ledger_factory()
    with (
        pytest.raises(OSError if fault == "eio" else KeyboardInterrupt),
        Run.open(led, tmp_path / "out", _plan()) as run,
    ):
        _publish(run, [_record(run, "a", 0.6)])
    assert run.staging.published
    assert led.reservation(run.run_id).state == "committed"
    assert _spent(led) == pytest.approx(0.6)


def _flaky(led: Ledger, out: Path, draws: dict[str, float]) -> Run:
    """A run whose releases ``draws`` draw noise, then a later stage fails."""
    run = Run.open(led, out, _plan())

    def execute() -> None:
        with run:
            for name, eps in draws.items():
                _record(run, name, eps)
            raise RuntimeError("a flaky later stage")

    with pytest.raises(RuntimeError, match="flaky"):
        execute()
    return run


def test_a_run_that_drew_noise_and_failed_is_charged_for_its_draws(
    tmp_path: Path, ledger_factory: LedgerFactory
) -> None:
    led = ledger_factory()
    run = _flaky(led, tmp_path / "out", {"a": 0.4})
    assert led.reservation(run.run_id).state == "charged"
    assert _spent(led) == pytest.approx(0.4)  # what it drew, not the 0.6 it planned
    assert not run.staging.dir.exists()
    summary = spending_summary(led)["d"]
    assert summary["charged_runs"] == 1
    assert summary["charged"][0]["run_id"] == run.run_id
    # Retrying until a draw "looks right" costs every attempt: 0.4 + 0.4 spent, 0.6 refused.
    _flaky(led, tmp_path / "out", {"a": 0.4})
    with pytest.raises(BudgetExceededError), Run.open(led, tmp_path / "out", _plan()):
        pass


def test_a_run_that_drew_nothing_is_aborted_at_no_cost(
    tmp_path: Path, ledger_factory: LedgerFactory
) -> None:
    led = ledger_factory()
    run = _flaky(led, tmp_path / "out", {})
    assert led.reservation(run.run_id).state == "aborted"
    assert _spent(led) == 0.0


def test_a_run_whose_staging_folder_cannot_be_made_is_settled(
    tmp_path: Path, ledger_factory: LedgerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `with run:` is entered after the reservation: a full disk there must not leave the run
    # pending (its block never starts, so leaving it cannot settle it).
    led = ledger_factory()
    run = Run.open(led, tmp_path / "out", _plan())

    def full(self: dppub.dp.publication.Staging) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(self.dir))

    monkeypatch.setattr(dppub.dp.publication.Staging, "create", full)
    with pytest.raises(OSError, match="No space left"), run:
        pytest.fail("the block must not start")
    assert led.reservation(run.run_id).state == "aborted"
    assert recover(led) == []  # nothing pending, no lock left behind


def test_a_release_is_drawn_once(tmp_path: Path, ledger_factory: LedgerFactory) -> None:
    led = ledger_factory()
    run = Run.open(led, tmp_path / "out", _plan())
    with run:
        assert run.staging.attempt("a", PrivacyCost(epsilon=0.3)) is None
        with pytest.raises(InvariantError, match="already attempted"):
            run.staging.attempt("a", PrivacyCost(epsilon=0.3))  # a re-run task must not redraw
    assert led.reservation(run.run_id).state == "charged"
    with pytest.raises(InvariantError, match="staging folder .* is gone"):
        run.staging.attempt("b", PrivacyCost(epsilon=0.1))  # a late writer after the end
    with pytest.raises(LedgerError, match="charged and cannot draw noise"):
        led.draw(run_id=run.run_id, release="b", cost=PrivacyCost(epsilon=0.1))


def test_recover_settles_dead_runs_by_what_is_on_disk(
    tmp_path: Path, ledger_factory: LedgerFactory
) -> None:
    led, out = ledger_factory(), tmp_path / "out"
    plan = _plan(policy=BudgetPolicy(total=PrivacyCost(epsilon=10.0)))
    published, drew, idle, alive = runs = [Run.open(led, out, plan) for _ in range(4)]
    for r in runs:
        r.staging.create()
    head = published.compose([_record(published, "a", 0.6)], COST)
    published.publish(manifest={"ledger_head": {"seq": head[0], "hash": head[1]}}, report="r")
    _record(drew, "a", 0.5)
    for r in (published, drew, idle):
        r.close()  # their processes die: the kernel drops their locks
    actions = {r.run_id: r.action for r in recover(led)}
    assert actions == {
        published.run_id: "committed",
        drew.run_id: "charged",
        idle.run_id: "aborted",
        alive.run_id: "running",
    }
    assert not drew.staging.dir.exists() and not idle.staging.dir.exists()
    assert led.reservation(alive.run_id).state == "pending"
    assert _spent(led) == pytest.approx(0.6 + 0.5 + 0.6)  # alive still holds its 0.6
    alive.close()


def test_a_capped_period_names_when_the_next_opens(
    tmp_path: Path, ledger_factory: LedgerFactory
) -> None:
    led = ledger_factory()
    policy = BudgetPolicy(total=PrivacyCost(epsilon=4.0), per="year", cap=PrivacyCost(epsilon=0.7))
    first = Run.open(led, tmp_path / "out", _plan(policy=policy))
    opens = next_period_start("year")
    assert opens is not None
    with pytest.raises(BudgetExceededError, match=f"the next period opens {opens.year}-01-01"):
        Run.open(led, tmp_path / "out", _plan(policy=policy))
    first.close()


def _published_run(led: Ledger, out: Path, plan: RunPlan | None = None) -> Run:
    with Run.open(led, out, plan or _plan(PrivacyCost(epsilon=0.3))) as run:
        head = run.compose([_record(run, "a", 0.3)], PrivacyCost(epsilon=0.3))
        manifest = {"ledger_head": {"seq": head[0], "hash": head[1]}}
        run.publish(manifest=manifest, report="r")
        run.commit()
    return run


def test_a_new_ledger_beside_earlier_runs_names_the_real_cause(
    tmp_path: Path, ledger_factory: LedgerFactory
) -> None:
    # old code: "ledger L lacks entry N that the publication P recorded: the ledger was cut
    # short, replaced or recreated; restore it from a copy" -- for a ledger that never was.
    out = tmp_path / "out"
    plan = _plan(PrivacyCost(epsilon=0.3))
    _published_run(ledger_factory(), out, plan)
    other = Ledger(tmp_path / "new.sqlite")
    with pytest.raises(LedgerError) as refused:
        Run.open(other, out, plan)
    line = str(refused.value)
    assert f"ledger {other.name} has no record of dataset '{plan.data.name}'" in line
    assert "name that ledger (--ledger" in line and "another --out" in line
    assert "cut short" not in line
    assert other.pending() == [] and other.head()[0] == 0  # nothing was reserved or declared


def test_a_truncated_replaced_or_deleted_ledger_refuses_while_publications_reference_it(
    tmp_path: Path, ledger_factory: LedgerFactory
) -> None:
    out = tmp_path / "out"
    plan = _plan(PrivacyCost(epsilon=0.3))
    led = ledger_factory()
    _published_run(led, out, plan)
    _published_run(led, out, plan)
    backup = ledger_factory.snapshot()
    # Cut the last run's rows off and reset the checkpoint too: the chain verifies...
    (first_of_last,) = ledger_factory.sql(
        "SELECT MIN(seq) AS seq FROM entries WHERE run_id = (SELECT run_id FROM entries "
        "ORDER BY seq DESC LIMIT 1)"
    )
    ledger_factory.sql("DELETE FROM entries WHERE seq >= ?", (first_of_last["seq"],))
    ledger_factory.sql("DELETE FROM meta WHERE key = 'checkpoint'")
    assert ledger_factory().verify().ok
    # ...but the last publication's manifest references rows it lacks.
    with pytest.raises(LedgerError, match="lacks entry .* the ledger was cut short"):
        Run.open(ledger_factory(), out, plan)
    # Deleted and recreated: it no longer knows the dataset its publications spent.
    ledger_factory.erase()
    with pytest.raises(LedgerError, match="has no record of dataset .* holds its publication"):
        Run.open(ledger_factory(), out, plan)
    ledger_factory.restore(backup)
    assert Run.open(ledger_factory(), out, plan).reservation.state == "pending"


def test_manifest_heads_point_at_the_composition_rows(
    tmp_path: Path, ledger_factory: LedgerFactory
) -> None:
    led = ledger_factory()
    run = _published_run(led, tmp_path / "out")
    manifest = json.loads((run.staging.final / "manifest.json").read_text())
    head = (manifest["ledger_head"]["seq"], manifest["ledger_head"]["hash"])
    assert led.missing([head]) == []
    assert led.verify(expected_head=head).ok


def test_settle_is_idempotent(tmp_path: Path, ledger_factory: LedgerFactory) -> None:
    led = ledger_factory()
    run = Run.open(led, tmp_path / "out", _plan())
    run.staging.create()
    assert dppub.dp.runs.settle(led, run.staging) == "aborted"
    assert dppub.dp.runs.settle(led, run.staging) == "none"
    run.close()


def test_a_live_run_on_another_host_is_seen_through_the_postgres_ledger(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    # Host A publishes to a folder host B cannot see: only the ledger's server can tell B
    # that A's run is alive (a session advisory lock), so B must not settle it.
    url = postgres.schema_url()
    alive = Run.open(Ledger(url), tmp_path / "host-a", _plan())
    alive.staging.create()
    (tmp_path / "host-a").rename(tmp_path / "elsewhere")  # B does not see A's files
    other = Ledger(url)
    assert [r.action for r in recover(other, key=DATA.source)] == ["running"]
    assert other.reservation(alive.run_id).state == "pending"
    alive.close()  # A's process ends: its session, and the lock, with it
    # The server ends a closed session's backend asynchronously: until it has, the lock is
    # still held and recover rightly leaves the run alone (CI under load saw one "running").
    deadline = time.monotonic() + 30.0
    actions = [r.action for r in recover(other, key=DATA.source)]
    while actions == ["running"] and time.monotonic() < deadline:
        time.sleep(0.2)
        actions = [r.action for r in recover(other, key=DATA.source)]
    assert actions == ["aborted"]


def test_ctrl_c_during_settlement_waits_until_the_run_is_settled(
    tmp_path: Path, ledger_factory: LedgerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A second Ctrl-C arrives as the interrupted run starts to be settled: the settlement
    # completes first (charged for the draw), then the Ctrl-C is delivered.
    import signal

    led = ledger_factory()

    def ctrl_c_at(step: str) -> None:
        if step in ("drawn", "settling"):
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(dppub.dp.runs, "fault_point", ctrl_c_at)
    monkeypatch.setattr(dppub.dp.publication, "fault_point", ctrl_c_at)
    # Python's own Ctrl-C handler, whatever an earlier test in this worker left installed
    # (the test failed in a full run, never alone).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt), Run.open(led, tmp_path / "out", _plan()) as run:
            _record(run, "a", 0.4)  # Ctrl-C right after the draw is recorded
    finally:
        signal.signal(signal.SIGINT, previous)
    assert led.reservation(run.run_id).state == "charged"
    assert _spent(led) == pytest.approx(0.4)
    assert led.pending() == []
