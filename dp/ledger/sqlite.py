"""The ledger's embedded storage: one SQLite file (WAL journal, serialized writers).

Creation is atomic: the schema is written into a temporary file beside the ledger, which is
then hard-linked into place (``link`` never replaces an existing file). Several processes
creating the same ledger at once therefore all end up with the one complete file, and a
half-written ledger (a full disk, a killed process) is never left under the ledger's name.
Every problem is a one-line :class:`LedgerError` that names its cause.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dp.errors import LedgerError
from dp.ledger.chain import schema
from dp.ledger.store import Connection, NoLedgerError, check_format

__all__ = ["SqliteStore"]

SCHEMA = schema(key="INTEGER", real="REAL")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _dict_row(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> dict[str, Any]:
    return {d[0]: v for d, v in zip(cursor.description, row, strict=True)}


class _Connection:
    """A :class:`dp.ledger.store.Connection` over one ``sqlite3`` connection."""

    def __init__(self, con: sqlite3.Connection) -> None:
        self._con = con

    def execute(self, sql: str, params: Sequence[object] = (), /) -> sqlite3.Cursor:
        return self._con.execute(sql, params)

    def tuples(self, sql: str, params: Sequence[object] = (), /) -> sqlite3.Cursor:
        cursor = self._con.cursor()
        cursor.row_factory = None
        return cursor.execute(sql, params)


class SqliteStore:
    """Connections to one SQLite ledger file.

    Args:
        path: the ledger file.
        timeout: seconds to wait for another process holding the write lock.
        create: create a missing ledger (False: a missing file is an error, e.g. for audits).
    """

    def __init__(self, path: str | Path, *, timeout: float = 30.0, create: bool = True) -> None:
        self.path = Path(path)
        self.timeout = timeout
        if not self.path.exists():
            if not create:
                raise NoLedgerError(f"no ledger at {self.path}")
            self._create()
        self._check_format()

    @property
    def name(self) -> str:
        return str(self.path)

    def _create(self) -> None:
        parent = self.path.parent
        if parent.exists() and not parent.is_dir():
            raise LedgerError(f"cannot create ledger {self.path}: {parent} is not a folder")
        tmp = parent / f".{self.path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
        try:
            parent.mkdir(parents=True, exist_ok=True)
            con = sqlite3.connect(tmp, isolation_level=None)
            try:
                con.execute("PRAGMA journal_mode=WAL")  # persistent: stored in the file
                for statement in SCHEMA:
                    con.execute(statement)
            finally:
                con.close()
            with tmp.open("rb") as fh:
                os.fsync(fh.fileno())
            with contextlib.suppress(FileExistsError):  # another process created it first
                os.link(tmp, self.path)
        except (OSError, sqlite3.Error) as exc:
            raise LedgerError(f"cannot create ledger {self.path}: {_reason(exc)}") from None
        finally:
            for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
                leftover.unlink(missing_ok=True)

    def _check_format(self) -> None:
        try:
            size = self.path.stat().st_size
        except OSError as exc:
            raise LedgerError(f"cannot open ledger {self.path}: {_reason(exc)}") from None
        if size == 0:
            raise LedgerError(
                f"{self.path} is an empty file (0 bytes), not a dppub ledger: a copy or a disk "
                "that filled up left it; restore the ledger, or remove the file if no run used it"
            )
        with self.connect() as con:
            try:
                row = con.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
            except sqlite3.DatabaseError as exc:
                raise LedgerError(f"{self.path} is not a dppub ledger ({exc})") from None
        check_format(str(self.path), None if row is None else row["value"])

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        """A connection in autocommit mode with rows as dicts."""
        try:
            con = sqlite3.connect(
                f"file:{self.path}?mode=rw", uri=True, timeout=self.timeout, isolation_level=None
            )
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot open ledger {self.path}: {exc}") from None
        con.row_factory = _dict_row
        try:
            yield _Connection(con)
        except sqlite3.OperationalError as exc:
            raise LedgerError(f"ledger {self.path}: {exc}") from None
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"ledger {self.path} is corrupted: {exc}") from None
        finally:
            con.close()

    def liveness(self, key: str) -> None:
        """None: a run's liveness is a file lock beside its staging folder (one machine)."""
        return None

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """An exclusive write transaction (``BEGIN IMMEDIATE``): other writers wait, readers
        (WAL) see the last committed state."""
        with self.connect() as con:
            con.execute("BEGIN IMMEDIATE")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
