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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dp.errors import LedgerError
from dp.ledger.chain import FORMAT, SCHEMA

__all__ = ["SqliteStore"]


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


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
                raise LedgerError(f"no ledger at {self.path}")
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
                con.executescript(SCHEMA)
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
        found = None if row is None else row[0]
        if found != FORMAT:
            if isinstance(found, str) and found.startswith("dppub-ledger/"):
                raise LedgerError(
                    f"{self.path} is a ledger of another dppub version (format {found}); "
                    f"this version reads {FORMAT}"
                )
            raise LedgerError(f"{self.path} is not a dppub ledger (format {found!r})")

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """A connection in autocommit mode with rows addressable by column name."""
        try:
            con = sqlite3.connect(
                f"file:{self.path}?mode=rw", uri=True, timeout=self.timeout, isolation_level=None
            )
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot open ledger {self.path}: {exc}") from None
        con.row_factory = sqlite3.Row
        try:
            yield con
        except sqlite3.OperationalError as exc:
            raise LedgerError(f"ledger {self.path}: {exc}") from None
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"ledger {self.path} is corrupted: {exc}") from None
        finally:
            con.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """An exclusive write transaction: other writers wait, readers see the old state."""
        with self.connect() as con:
            con.execute("BEGIN IMMEDIATE")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
