"""The ledger's embedded storage: one SQLite file (WAL journal, serialized writers).

Creation is atomic: the schema is written into a temporary file beside the ledger, which is
then hard-linked into place (``link`` never replaces an existing file). Several processes
creating the same ledger at once therefore all end up with the one complete file, and a
half-written ledger (a full disk, a killed process) is never left under the ledger's name.

The file is opened through a URI built from its absolute path, percent-encoded, so no character
of a file name (``%``, ``#``, ``?``) is read as URI syntax: the file opened is exactly the path
given. Every problem is a one-line :class:`LedgerError` that names its real cause (a lock held by
another process, a full disk, a read-only file, a permission, a file that is not a ledger), so a
valid ledger is never reported as something to delete.
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

from dppub.dp.errors import LedgerError
from dppub.dp.ledger.chain import schema
from dppub.dp.ledger.store import Connection, NoLedgerError, check_file_path, check_format

__all__ = ["SqliteStore"]

SCHEMA = schema(key="INTEGER", real="REAL")
_LOW_SPACE = 1 << 20
"""Bytes free below which an I/O error on the ledger is reported as a full disk."""


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _dict_row(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> dict[str, Any]:
    return {d[0]: v for d, v in zip(cursor.description, row, strict=True)}


class _Connection:
    """A :class:`dp.ledger.store.Connection` over one ``sqlite3`` connection."""

    def __init__(self, con: sqlite3.Connection) -> None:
        self.raw = con

    def execute(self, sql: str, params: Sequence[object] = (), /) -> sqlite3.Cursor:
        return self.raw.execute(sql, params)

    def tuples(self, sql: str, params: Sequence[object] = (), /) -> sqlite3.Cursor:
        cursor = self.raw.cursor()
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
        check_file_path(path)
        self.path = Path(path)
        self.timeout = timeout
        # Percent-encoded (as_uri): '%', '#' and '?' in a name stay part of the file's name.
        self._uri = f"{self.path.absolute().as_uri()}?mode=rw"
        if not self.path.exists():
            if not create:
                raise NoLedgerError(f"no ledger at {self.path}")
            self._create()
        if not self._opens(self._uri):
            self._uri = self._read_only_uri()
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

    def _opens(self, uri: str) -> bool:
        """Whether ``uri`` opens and reads; False only where the storage refuses (a read-only
        file or folder, a permission): every other error is left to :meth:`_check_format`."""
        try:
            con = sqlite3.connect(uri, uri=True, timeout=self.timeout, isolation_level=None)
            try:
                con.execute("SELECT count(*) FROM sqlite_master").fetchone()
            finally:
                con.close()
        except sqlite3.Error as exc:
            code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
            refused = (sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM)
            return code not in refused or not os.access(self.path, os.R_OK)
        return True

    def _read_only_uri(self) -> str:
        """Read-only storage (an auditor's copy): ``mode=ro``, else, where SQLite cannot make
        the WAL's shared-memory file beside it (a read-only folder), ``immutable=1`` -- safe
        only without a WAL file holding commits the main file lacks (a copy of a ledger no
        process had open has none), so that case is refused. Writes fail as read-only."""
        base = self.path.absolute().as_uri()
        if self._opens(f"{base}?mode=ro"):
            return f"{base}?mode=ro"
        wal = Path(f"{self.path}-wal")
        if wal.exists() and wal.stat().st_size > 0:
            raise LedgerError(
                f"ledger {self.path} is on read-only storage with a write-ahead log ({wal}) it "
                "cannot replay there: copy the ledger with `sqlite3 LEDGER '.backup COPY'` "
                "and read the copy"
            )
        return f"{base}?mode=ro&immutable=1"

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
            tables = con.execute("SELECT name FROM sqlite_master WHERE name = 'meta'").fetchone()
            if tables is None:
                raise LedgerError(f"{self.path} is not a dppub ledger (it has no meta table)")
            row = con.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        check_format(str(self.path), None if row is None else row["value"])

    def _error(self, exc: sqlite3.Error) -> LedgerError:
        """``exc`` as one line naming its cause, told apart by SQLite's result code."""
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF  # the primary code
        path, detail = self.path, f"{exc} ({getattr(exc, 'sqlite_errorname', '?')})"
        if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            return LedgerError(
                f"ledger {path} is locked by another process: waited {self.timeout:g} s for it "
                f"({detail}); nothing was written: retry when it is done, or wait longer "
                "(DPPUB_LEDGER_TIMEOUT)"
            )
        free = self._free_bytes()
        if code == sqlite3.SQLITE_FULL or (
            code == sqlite3.SQLITE_IOERR and free is not None and free < _LOW_SPACE
        ):
            return LedgerError(
                f"ledger {path}: no space left on the disk ({free} bytes free; {detail}); "
                "nothing was written and the ledger is intact: free some space and retry"
            )
        if code == sqlite3.SQLITE_READONLY:
            return LedgerError(f"ledger {path} is read-only ({detail}); nothing was written")
        if code in (sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH) or (
            code == sqlite3.SQLITE_CANTOPEN
            and path.exists()
            and not os.access(path, os.R_OK | os.W_OK)
        ):
            return LedgerError(f"ledger {path}: permission denied ({detail})")
        if code == sqlite3.SQLITE_NOTADB:
            return LedgerError(f"{path} is not a dppub ledger (not an SQLite database: {detail})")
        if code == sqlite3.SQLITE_CORRUPT:
            return LedgerError(f"ledger {path} is corrupted ({detail}): restore it from a copy")
        return LedgerError(f"ledger {path}: {detail}")

    def _free_bytes(self) -> int | None:
        try:
            st = os.statvfs(self.path.absolute().parent)
        except OSError:
            return None
        return st.f_bavail * st.f_frsize

    @contextmanager
    def connect(self) -> Iterator[_Connection]:
        """A connection in autocommit mode with rows as dicts."""
        try:
            con = sqlite3.connect(self._uri, uri=True, timeout=self.timeout, isolation_level=None)
        except sqlite3.Error as exc:
            raise self._error(exc) from None
        con.row_factory = _dict_row
        try:
            yield _Connection(con)
        except sqlite3.Error as exc:
            raise self._error(exc) from None
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
                if con.raw.in_transaction:  # SQLite may have rolled back itself (a full disk)
                    con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
