import multiprocessing as mp
import sqlite3
from pathlib import Path

import pytest

from dp.budget import PrivacyCost
from dp.errors import BudgetExceededError, LedgerError
from dp.ledger import GENESIS, BudgetPolicy, DataIdentity, Ledger, ReleaseRecord
from dp.ledger.summary import spending_summary

BUDGET = PrivacyCost(epsilon=1.0, delta=1e-5)
POLICY = BudgetPolicy(total=BUDGET)
DATA = DataIdentity(name="d", source="/data/d.parquet")


def _reserve(
    led: Ledger, run_id: str, eps: float, *, policy: BudgetPolicy = POLICY, **kwargs: object
) -> PrivacyCost:
    return led.reserve(
        run_id=run_id,
        data=DATA,
        policy=policy,
        cost=PrivacyCost(epsilon=eps),
        config_hash="c",
        **kwargs,  # type: ignore[arg-type]
    )


def _spending(led: Ledger) -> dict[str, object]:
    return spending_summary(led)["d"]


def _rows(path: Path) -> int:
    with sqlite3.connect(path) as con:
        return int(con.execute("SELECT COUNT(*) FROM entries").fetchone()[0])


def test_reserve_commit_and_spending(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.sqlite")
    left = _reserve(led, "r1", 0.4)
    assert left.epsilon == pytest.approx(0.6)
    rel = ReleaseRecord(
        name="q",
        kind="workload",
        mechanism="laplace",
        cost=PrivacyCost(epsilon=0.4),
        sensitivity=1.0,
        output_hash="h",
    )
    led.record_releases(run_id="r1", releases=[rel])
    led.commit(run_id="r1", output_hash="h")
    s = _spending(led)
    assert (s["spent_epsilon"], s["runs"], s["pending_runs"]) == (pytest.approx(0.4), 1, 0)
    assert (s["budget_epsilon"], s["budget_delta"]) == (BUDGET.epsilon, BUDGET.delta)
    assert led.verify().ok


def test_over_budget_is_refused_with_clear_message_and_no_write(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    led = Ledger(path)
    _reserve(led, "r1", 0.7)
    before = _rows(path)
    msg = (
        r"dataset 'd': budget epsilon=1 delta=1e-05, spent epsilon=0.7 delta=0, "
        r"requested epsilon=0.5"
    )
    with pytest.raises(BudgetExceededError, match=msg):
        _reserve(led, "r2", 0.5)
    assert _rows(path) == before
    assert led.remaining(data=DATA, policy=POLICY).epsilon == pytest.approx(0.3)


def test_pending_reservation_counts_until_aborted(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.sqlite")
    _reserve(led, "crashed", 0.8)  # never committed: a crash must not under-count
    assert _spending(led)["pending_runs"] == 1
    with pytest.raises(BudgetExceededError):
        _reserve(led, "next", 0.5)
    led.abort(run_id="crashed")
    assert _reserve(led, "next", 0.5).epsilon == pytest.approx(0.5)


def test_state_transitions_are_enforced(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.sqlite")
    _reserve(led, "r1", 0.1)
    with pytest.raises(LedgerError, match="already in the ledger"):
        _reserve(led, "r1", 0.1)
    led.commit(run_id="r1", output_hash="h")
    with pytest.raises(LedgerError, match="committed and cannot be aborted"):
        led.abort(run_id="r1")
    with pytest.raises(LedgerError, match="committed and cannot be committed"):
        led.commit(run_id="r1", output_hash="h")
    with pytest.raises(LedgerError, match="no reservation"):
        led.commit(run_id="ghost", output_hash="h")


def test_recorded_cost_recomputes_parallel_composition(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.sqlite")
    _reserve(led, "r1", 0.5)
    rels = [
        ReleaseRecord(
            name=f"t{i}",
            kind="regression",
            mechanism="laplace",
            cost=PrivacyCost(epsilon=0.5),
            partition=("task", str(i)),
        )
        for i in range(3)
    ] + [
        ReleaseRecord(
            name="k",
            kind="k-anonymity",
            mechanism="generalization",
            cost=PrivacyCost.zero(),
            is_dp=False,
        )
    ]
    led.record_releases(run_id="r1", releases=rels)
    reserved, recomputed = led.recorded_cost("r1")
    assert reserved.epsilon == pytest.approx(0.5)
    assert recomputed.epsilon == pytest.approx(0.5)  # max over disjoint parts, not 1.5


def test_verify_detects_edit_and_deletion(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    led = Ledger(path)
    for i in range(4):
        _reserve(led, f"r{i}", 0.1)
    head = led.head()
    assert led.verify(expected_head=head).ok
    with sqlite3.connect(path) as con:
        con.execute("UPDATE entries SET epsilon = 0.01 WHERE seq = 2")
    report = led.verify()
    assert not report.ok
    assert any("row 2: contents do not match" in p for p in report.problems)
    with sqlite3.connect(path) as con:
        con.execute("UPDATE entries SET epsilon = 0.1 WHERE seq = 2")
    assert led.verify().ok  # restoring the value restores the hash
    with sqlite3.connect(path) as con:
        con.execute("DELETE FROM entries WHERE seq = 3")
    assert not led.verify().ok


def test_truncation_is_caught_against_a_recorded_head(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    led = Ledger(path)
    _reserve(led, "r0", 0.1)
    _reserve(led, "r1", 0.1)
    head = led.head()
    with sqlite3.connect(path) as con:
        con.execute("DELETE FROM entries WHERE seq = (SELECT MAX(seq) FROM entries)")
    assert led.verify().ok  # a clean prefix of a chain is still a chain...
    assert not led.verify(expected_head=head).ok  # ...but not the one the manifest saw


def test_empty_ledger_head(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.sqlite")
    assert led.head() == (0, GENESIS)
    assert led.verify().ok


def test_corrupted_foreign_and_missing_files_are_never_recreated(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(LedgerError, match="not a dppub ledger"):
        Ledger(junk)
    assert junk.read_bytes().startswith(b"this is not")
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as con:
        con.execute("CREATE TABLE t (x)")
    with pytest.raises(LedgerError, match="not a dppub ledger"):
        Ledger(foreign)
    with pytest.raises(LedgerError, match="no ledger at"):
        Ledger(tmp_path / "missing.sqlite", create=False)


def _contender(
    path: str, run_id: str, barrier: "mp.synchronize.Barrier", out: "mp.Queue[str]"
) -> None:
    led = Ledger(path)
    barrier.wait()
    try:
        _reserve(led, run_id, 0.3)
        out.put("granted")
    except BudgetExceededError:
        out.put("refused")


def test_concurrent_processes_never_overspend(tmp_path: Path) -> None:
    path = str(tmp_path / "l.sqlite")
    Ledger(path)
    ctx = mp.get_context("fork")
    n = 8
    barrier, out = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_contender, args=(path, f"r{i}", barrier, out)) for i in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    results = [out.get(timeout=5) for _ in range(n)]
    assert results.count("granted") == 3  # floor(1.0 / 0.3)
    assert results.count("refused") == n - 3
    spent = _spending(Ledger(path))["spent_epsilon"]
    assert spent <= BUDGET.epsilon + 1e-12
    assert Ledger(path).verify().ok


def test_reservation_and_pending(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.sqlite")
    _reserve(led, "a", 0.1, location="/out/d")
    _reserve(led, "b", 0.1)
    led.abort(run_id="b")
    res = led.reservation("a")
    assert (res.state, res.location, res.recorded, res.period) == (
        "pending",
        "/out/d",
        False,
        "all",
    )
    assert [r.run_id for r in led.pending()] == ["a"]
    assert led.reservation("b").state == "aborted"
