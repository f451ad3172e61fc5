import multiprocessing as mp
import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

import dppub.dp.ledger.log
from dppub.dp.budget import PrivacyCost
from dppub.dp.errors import BudgetExceededError, LedgerError
from dppub.dp.ledger import (
    GENESIS,
    BudgetPolicy,
    DataIdentity,
    Ledger,
    NoLedgerError,
    ReleaseRecord,
    ledger_location,
)
from dppub.dp.ledger.store import display_url
from dppub.dp.ledger.summary import spending_summary
from tests.dp.conftest import LedgerFactory
from tests.pg import PostgresServer

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


def _spending(led: Ledger) -> dict[str, Any]:  # spending_summary's type
    return spending_summary(led)["d"]


def _rows(ledger_factory: LedgerFactory) -> int:
    return int(ledger_factory.sql("SELECT COUNT(*) AS n FROM entries")[0]["n"])


def test_reserve_commit_and_spending(ledger_factory: LedgerFactory) -> None:
    led = ledger_factory()
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


def test_over_budget_is_refused_with_clear_message_and_no_write(
    ledger_factory: LedgerFactory,
) -> None:
    led = ledger_factory()
    _reserve(led, "r1", 0.7)
    before = _rows(ledger_factory)
    msg = (
        r"dataset 'd': budget epsilon=1 delta=1e-05, spent epsilon=0.7 delta=0, "
        r"requested epsilon=0.5"
    )
    with pytest.raises(BudgetExceededError, match=msg):
        _reserve(led, "r2", 0.5)
    assert _rows(ledger_factory) == before
    assert led.remaining(data=DATA, policy=POLICY).epsilon == pytest.approx(0.3)


def test_pending_reservation_counts_until_aborted(ledger_factory: LedgerFactory) -> None:
    led = ledger_factory()
    _reserve(led, "crashed", 0.8)  # never committed: a crash must not under-count
    assert _spending(led)["pending_runs"] == 1
    with pytest.raises(BudgetExceededError):
        _reserve(led, "next", 0.5)
    led.abort(run_id="crashed")
    assert _reserve(led, "next", 0.5).epsilon == pytest.approx(0.5)


def test_state_transitions_are_enforced(ledger_factory: LedgerFactory) -> None:
    led = ledger_factory()
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


def test_recorded_cost_recomputes_parallel_composition(ledger_factory: LedgerFactory) -> None:
    led = ledger_factory()
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


def test_verify_detects_edit_and_deletion(ledger_factory: LedgerFactory) -> None:
    led = ledger_factory()
    for i in range(4):
        _reserve(led, f"r{i}", 0.1)
    head = led.head()
    assert led.verify(expected_head=head).ok
    ledger_factory.sql("UPDATE entries SET epsilon = 0.01 WHERE seq = 2")
    report = led.verify()
    assert not report.ok
    assert any("row 2: contents do not match" in p for p in report.problems)
    ledger_factory.sql("UPDATE entries SET epsilon = 0.1 WHERE seq = 2")
    assert led.verify().ok  # restoring the value restores the hash
    ledger_factory.sql("DELETE FROM entries WHERE seq = 3")
    assert not led.verify().ok


def test_truncation_is_caught_against_a_recorded_head(ledger_factory: LedgerFactory) -> None:
    led = ledger_factory()
    _reserve(led, "r0", 0.1)
    _reserve(led, "r1", 0.1)
    head = led.head()
    ledger_factory.sql("DELETE FROM entries WHERE seq = (SELECT MAX(seq) FROM entries)")
    assert led.verify().ok  # a clean prefix of a chain is still a chain...
    assert not led.verify(expected_head=head).ok  # ...but not the one the manifest saw


def test_empty_ledger_head(ledger_factory: LedgerFactory) -> None:
    led = ledger_factory()
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


@pytest.mark.slow
def test_concurrent_processes_never_overspend(ledger_factory: LedgerFactory) -> None:
    path = ledger_factory.location
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


def test_reservation_and_pending(ledger_factory: LedgerFactory) -> None:
    led = ledger_factory()
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


def test_another_versions_ledger_is_refused(ledger_factory: LedgerFactory) -> None:
    ledger_factory()
    ledger_factory.sql("UPDATE meta SET value = 'dppub-ledger/2' WHERE key = 'format'")
    with pytest.raises(LedgerError, match=r"another dppub version \(format dppub-ledger/2\)"):
        ledger_factory()


def test_a_foreign_schema_is_refused_and_left_untouched(postgres: PostgresServer) -> None:
    url = postgres.schema_url()
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("CREATE TABLE customers (id INT)")
    with pytest.raises(LedgerError, match=r"not a dppub ledger: schema t_\w+ holds other tables"):
        Ledger(url)
    with psycopg.connect(url, autocommit=True) as con:  # tables named like a ledger's, too
        con.execute("CREATE TABLE entries (x INT); CREATE TABLE meta (x INT)")
    with pytest.raises(LedgerError, match=r"is not a dppub ledger \(column \"value\" does not"):
        Ledger(url)
    with psycopg.connect(url, autocommit=True) as con:
        tables = con.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        assert sorted(r[0] for r in tables) == ["customers", "entries", "meta"]
        assert con.execute("SELECT COUNT(*) FROM meta").fetchone() == (0,)
    with pytest.raises(LedgerError, match="no schema of the search path exists"):
        Ledger(postgres.url(options="-csearch_path%3Dnowhere"))


def test_an_empty_database_is_created_only_when_asked(postgres: PostgresServer) -> None:
    url = postgres.database_url()
    with pytest.raises(LedgerError, match=r"no ledger at postgresql://.* \(schema public is empty"):
        Ledger(url, create=False)
    led = Ledger(url)
    _reserve(led, "r1", 0.25)
    assert Ledger(url, create=False).verify().ok
    with psycopg.connect(url, autocommit=True) as con:
        assert con.execute("SELECT COUNT(*) FROM public.entries").fetchone() == (2,)


def test_a_select_only_role_audits_and_cannot_write(postgres: PostgresServer) -> None:
    url = postgres.schema_url()
    _reserve(Ledger(url), "r1", 0.5)
    role = f"auditor_{os.getpid()}"
    with psycopg.connect(url, autocommit=True) as con:
        con.execute(
            f"CREATE ROLE {role} LOGIN; GRANT USAGE ON SCHEMA {url.rpartition('%3D')[2]} TO "
            f"{role}; GRANT SELECT ON ALL TABLES IN SCHEMA {url.rpartition('%3D')[2]} TO {role}"
        )
    auditor = Ledger(url.replace("postgres@", f"{role}@"), create=False)
    assert auditor.verify().ok
    assert _spending(auditor)["spent_epsilon"] == pytest.approx(0.5)
    with pytest.raises(LedgerError, match="permission denied for table entries"):
        _reserve(auditor, "r2", 0.1)


def test_a_missing_ledger_is_not_created_when_not_asked(ledger_factory: LedgerFactory) -> None:
    with pytest.raises(NoLedgerError, match="no ledger at"):
        ledger_factory(create=False)
    with pytest.raises(NoLedgerError):  # still nothing there
        ledger_factory(create=False)
    assert ledger_factory().head() == (0, GENESIS)
    assert ledger_factory(create=False).verify().ok


def test_a_location_is_what_another_process_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert ledger_location("state/l.sqlite") == str(tmp_path / "state" / "l.sqlite")
    url = "postgres://ana@db:5432/ledger?sslmode=require"
    assert ledger_location(url) == url
    with pytest.raises(LedgerError, match="lost its '//'"):
        ledger_location(Path("postgresql://ana@db/ledger"))
    with pytest.raises(LedgerError, match=r"^postgres://ana@db/l: keep the password out") as err:
        ledger_location("postgres://ana:pw@db/l")
    assert "pw" not in str(err.value)


def test_an_unreachable_server_is_a_one_line_error_without_the_password(tmp_path: Path) -> None:
    with pytest.raises(LedgerError, match=r"cannot open ledger postgresql://u@/db\?host=") as err:
        Ledger(f"postgresql://u:secret@/db?host={tmp_path}", timeout=2)
    assert "secret" not in str(err.value) and "\n" not in str(err.value)


def test_messages_never_show_a_password() -> None:
    assert (
        display_url("postgresql://ana:pw@db.example:5432/l") == "postgresql://ana@db.example:5432/l"
    )
    assert display_url("postgresql:///l?host=/s&password=pw") == "postgresql:///l?host=/s"
    assert (
        display_url("postgresql://ana@h/l?sslmode=require")
        == "postgresql://ana@h/l?sslmode=require"
    )


def _events(led: Ledger) -> None:
    """A run with every kind of value a row holds: NULLs, floats, an int, a partition."""
    led.reserve(
        run_id="r1",
        data=DATA,
        policy=POLICY,
        cost=PrivacyCost(epsilon=0.1 + 0.2, delta=1e-7),
        config_hash="c",
        location="/out/d",
    )
    led.draw(run_id="r1", release="q", cost=PrivacyCost(epsilon=1 / 3))
    rel = ReleaseRecord(
        name="q",
        kind="regression",
        mechanism="laplace",
        cost=PrivacyCost(epsilon=1 / 3),
        sensitivity=2,
        partition=("task", "é"),
        output_hash="h",
    )
    led.record_releases(run_id="r1", releases=[rel])
    led.charge(run_id="r1")


def test_the_same_events_hash_the_same_on_both_back_ends(
    tmp_path: Path, postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dppub.dp.ledger.log, "now", lambda: "2026-11-25T00:00:00.000000+00:00")
    lite, pg = Ledger(tmp_path / "l.sqlite"), Ledger(postgres.schema_url())
    for led in (lite, pg):
        _events(led)
    assert lite.head() == pg.head() and lite.head()[0] == 5
    assert lite.history() == pg.history()
    assert lite.verify() == pg.verify()
    assert lite.verify().ok


def _die_mid_write(location: str, ready: "mp.synchronize.Event") -> None:
    led = Ledger(location)
    with led.log.write() as con:
        led.log.append(
            con,
            event="declare",
            dataset="x",
            source="/x",
            epsilon=0.0,
            delta=0.0,
            is_dp=0,
            note="{}",
        )
        ready.set()
        time.sleep(120)  # killed here, holding the write lock with a row not committed


@pytest.mark.slow
def test_a_writer_killed_mid_transaction_leaves_no_lock_and_no_row(
    ledger_factory: LedgerFactory,
) -> None:
    led = ledger_factory()
    _reserve(led, "r0", 0.25)
    ctx = mp.get_context("fork")
    ready = ctx.Event()
    writer = ctx.Process(target=_die_mid_write, args=(ledger_factory.location, ready))
    writer.start()
    try:
        assert ready.wait(30)
        assert led.head()[0] == 2  # readers see the committed state meanwhile
        with pytest.raises(LedgerError, match="database is locked|held the write lock for more"):
            _reserve(ledger_factory(timeout=0.5), "r1", 0.25)
    finally:
        assert writer.pid is not None  # started above
        os.kill(writer.pid, signal.SIGKILL)
        writer.join(30)
    _reserve(ledger_factory(timeout=10), "r1", 0.25)
    assert led.verify().ok and led.head()[0] == 3
    assert [d.key for d in led.declarations()] == [DATA.source]
