"""Ledger errors name their real cause (issue 29, item 6).

A full disk and a lock held by another process used to be reported as "X is not a dppub ledger",
which invites deleting a valid ledger. The faults are injected the way they happen: a real full
file system (a small tmpfs, mounted for the test), a lock held by another process for longer
than the ledger's timeout, an immutable file, another user; afterwards the ledger is intact.
"""

import multiprocessing as mp
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from dppub.dp.budget import PrivacyCost
from dppub.dp.errors import LedgerError
from dppub.dp.ledger import BudgetPolicy, DataIdentity, Ledger
from tests.dp.ledger.disk import SmallDisk, mounted_small_disk
from tests.pg import PostgresServer

DATA = DataIdentity(name="d", source="/data/d.parquet")


def _reserve(led: Ledger, run_id: str) -> None:
    led.reserve(
        run_id=run_id,
        data=DATA,
        policy=BudgetPolicy(total=PrivacyCost(epsilon=8.0)),
        cost=PrivacyCost(epsilon=1.0),
        config_hash="c",
    )


def _refused(err: pytest.ExceptionInfo[LedgerError], cause: str) -> None:
    text = str(err.value)
    assert cause in text, text
    assert "not a dppub ledger" not in text and "\n" not in text


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    with mounted_small_disk(tmp_path / "disk") as disk:
        yield disk


@pytest.mark.slow
def test_a_full_disk_at_open_is_named(small_disk: SmallDisk) -> None:
    path = small_disk.path / "l.sqlite"
    _reserve(Ledger(path), "r1")
    before, head = path.read_bytes(), Ledger(path).head()
    small_disk.fill()
    with pytest.raises(LedgerError) as err:
        _reserve(Ledger(path, timeout=0.5), "r2")
    _refused(err, "no space left on the disk (0 bytes free")
    small_disk.free()
    assert path.read_bytes() == before
    led = Ledger(path)
    assert led.verify().ok and led.head() == head
    _reserve(led, "r2")


@pytest.mark.slow
def test_a_full_disk_during_a_write_is_named(small_disk: SmallDisk) -> None:
    path = small_disk.path / "l.sqlite"
    led = Ledger(path)
    _reserve(led, "r1")
    head = led.head()
    reader = sqlite3.connect(path)  # another process reading: the WAL files stay in place
    reader.execute("SELECT COUNT(*) FROM entries").fetchall()
    small_disk.fill()
    with pytest.raises(LedgerError) as err:
        _reserve(led, "r2")
    _refused(err, "no space left on the disk")
    assert "database or disk is full (SQLITE_FULL)" in str(err.value)
    reader.close()
    small_disk.free()
    assert led.verify().ok and led.head() == head
    assert [r["run_id"] for r in led.runs()] == ["r1"]


def _hold(path: str, how: str, ready: "mp.synchronize.Event", done: "mp.synchronize.Event") -> None:
    con = sqlite3.connect(path, isolation_level=None)
    if how == "exclusive":  # e.g. a maintenance tool: no other process may even read
        con.execute("PRAGMA locking_mode=EXCLUSIVE")
        con.execute("BEGIN EXCLUSIVE")
        con.execute("INSERT INTO meta VALUES ('tool', 'x')")
        con.execute("DELETE FROM meta WHERE key = 'tool'")
        con.execute("COMMIT")  # the exclusive lock stays held in this locking mode
    else:  # another dppub mid-write
        con.execute("BEGIN IMMEDIATE")
    ready.set()
    done.wait(60)
    con.close()


@pytest.mark.slow
@pytest.mark.parametrize("how", ["exclusive", "writing"])
def test_a_lock_held_by_another_process_is_named_with_the_wait(tmp_path: Path, how: str) -> None:
    path = tmp_path / "l.sqlite"
    _reserve(Ledger(path), "r1")
    ctx = mp.get_context("fork")
    ready, done = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(str(path), how, ready, done))
    holder.start()
    try:
        assert ready.wait(30)
        start = time.monotonic()
        with pytest.raises(LedgerError) as err:
            _reserve(Ledger(path, timeout=0.5), "r2")
        assert time.monotonic() - start >= 0.5
        _refused(err, "is locked by another process: waited 0.5 s for it")
    finally:
        done.set()
        holder.join(30)
    led = Ledger(path)
    assert led.verify().ok and [r["run_id"] for r in led.runs()] == ["r1"]
    _reserve(led, "r2")


@pytest.mark.slow
def test_an_immutable_ledger_is_named_read_only(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    _reserve(Ledger(path), "r1")
    subprocess.run(["chattr", "+i", str(path)], check=True)  # chmod does not stop root
    try:
        with pytest.raises(LedgerError) as err:
            _reserve(Ledger(path), "r2")
        _refused(err, "is read-only (attempt to write a readonly database")
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)
    assert Ledger(path).verify().ok


def _open_as_nobody(path: str, out: "mp.Queue[str]") -> None:
    os.setgid(65534)
    os.setuid(65534)
    try:
        Ledger(path)
        out.put("opened")
    except LedgerError as exc:
        out.put(str(exc))


@pytest.mark.slow
def test_another_users_ledger_is_named_permission_denied() -> None:
    folder = Path(tempfile.mkdtemp(prefix="dppub-perm-"))  # 0700 parents would stop `stat`
    try:
        folder.chmod(0o755)
        path = folder / "l.sqlite"
        _reserve(Ledger(path), "r1")
        path.chmod(0o600)
        ctx = mp.get_context("fork")
        out = ctx.Queue()
        child = ctx.Process(target=_open_as_nobody, args=(str(path), out))
        child.start()
        child.join(30)
        message = out.get(timeout=5)
        assert "permission denied (unable to open database file" in message, message
        assert "not a dppub ledger" not in message
        assert Ledger(path).verify().ok
    finally:
        shutil.rmtree(folder)


# -- PostgreSQL ---------------------------------------------------------------------------------


def test_postgres_without_privileges_is_named_permission_denied(postgres: PostgresServer) -> None:
    url = postgres.schema_url()
    _reserve(Ledger(url), "r1")
    schema = url.rsplit("%3D", 1)[1]
    role = f"stranger_{schema}"  # generated: nothing to escape
    with psycopg.connect(postgres.url(), autocommit=True) as con:
        con.execute(f"CREATE ROLE {role} LOGIN")
        con.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
    stranger = url.replace("postgres@", f"{role}@")
    with pytest.raises(LedgerError) as err:
        Ledger(stranger)
    _refused(err, "permission denied (permission denied for table meta)")


def test_postgres_read_only_is_named(postgres: PostgresServer) -> None:
    url = postgres.schema_url()
    _reserve(Ledger(url), "r1")
    read_only = url + "%20-cdefault_transaction_read_only%3Don"
    led = Ledger(read_only)
    with pytest.raises(LedgerError) as err:
        _reserve(led, "r2")
    _refused(err, "is read-only (cannot execute")
    assert [r["run_id"] for r in Ledger(url).runs()] == ["r1"]


@pytest.mark.slow
def test_postgres_on_a_full_disk_is_named(postgres: PostgresServer) -> None:
    base = Path(tempfile.mkdtemp(prefix="dppub-pgdisk-", dir="/tmp"))
    base.chmod(0o755)  # the server's user reaches the tablespace through it
    with mounted_small_disk(base / "disk") as disk:
        os.chown(disk.path, postgres.uid, postgres.gid)  # the server's own user
        space = f"t_{base.name.rsplit('-', 1)[1].lower()}"
        admin = psycopg.connect(postgres.url(), autocommit=True)
        try:
            admin.execute(f"CREATE TABLESPACE {space} LOCATION '{disk.path}'")
            url = postgres.schema_url() + f"%20-cdefault_tablespace%3D{space}"
            led = Ledger(url)  # its tables live on the small disk; entries is still empty
            disk.fill()
            with pytest.raises(LedgerError) as err:
                _reserve(led, "r1")
            _refused(err, "the database server's disk is full (could not extend file")
            disk.free()
            _reserve(led, "r1")
            assert led.verify().ok
            schema = url.split("search_path%3D", 1)[1].split("%20", 1)[0]
            admin.execute(f"DROP SCHEMA {schema} CASCADE")
            admin.execute(f"DROP TABLESPACE {space}")
        finally:
            admin.close()
    shutil.rmtree(base)
