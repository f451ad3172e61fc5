"""The ledger in PostgreSQL: one ledger shared by runs on several hosts (psycopg 3).

The same tables, rows and hash chain as the SQLite ledger: floats are ``DOUBLE PRECISION`` (64
bits, as SQLite's ``REAL``), so the same events hash the same on both back ends. Writers are
serialized by ``LOCK TABLE entries IN EXCLUSIVE MODE`` inside the write transaction: it waits for
any other writer (at most the store's timeout) and lets plain reads through, which keep seeing
the last committed state. A client that dies mid-write loses its connection, and the server
rolls its transaction back and drops the lock.

Creation is atomic: the check "is there a ledger here?" and the ``CREATE TABLE`` statements run
in one transaction under an advisory lock, so concurrent first runs create one ledger. A schema
(``current_schema()``, the URL's database or ``options=-csearch_path=...``) is initialised only
when it holds no table at all; one that holds other tables, or tables named ``entries`` and
``meta`` without the dppub format, is refused and left untouched.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.rows import dict_row, tuple_row

from dppub.dp.errors import LedgerError
from dppub.dp.ledger.chain import schema
from dppub.dp.ledger.store import Connection, NoLedgerError, check_format, display_url

__all__ = ["PostgresStore"]

SCHEMA = schema(key="BIGINT", real="DOUBLE PRECISION")
_CREATION_LOCK = int.from_bytes(b"dppubldg", "big")
"""The advisory lock key that serializes ledger creation within a database."""
_RELATIONS = """SELECT c.relname AS name FROM pg_class c
                JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
                ORDER BY c.relname"""


@functools.lru_cache(maxsize=256)
def _pg(sql: str) -> str:
    """The ledger's SQL with psycopg's placeholders: ``?`` -> ``%s`` (a literal ``%`` doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


def _reason(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


class _Connection:
    """A :class:`dp.ledger.store.Connection` over one psycopg connection."""

    def __init__(self, con: psycopg.Connection[dict[str, Any]]) -> None:
        self.raw = con

    def execute(self, sql: str, params: Sequence[object] = (), /) -> psycopg.Cursor[Any]:
        return self.raw.execute(_pg(sql), params)

    def tuples(self, sql: str, params: Sequence[object] = (), /) -> psycopg.Cursor[Any]:
        return self.raw.cursor(row_factory=tuple_row).execute(_pg(sql), params)


class _AdvisoryLock:
    """A session-level ``pg_try_advisory_lock`` keyed by a run id (see ``liveness``)."""

    def __init__(self, store: PostgresStore, key: str) -> None:
        self._store = store
        self._key = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big", signed=True)
        self._con: psycopg.Connection[Any] | None = None

    def acquire(self) -> bool:
        if self._con is not None:
            return True
        try:
            con = psycopg.connect(
                self._store.url,
                autocommit=True,
                connect_timeout=max(2, math.ceil(self._store.timeout)),
                keepalives=1,
                keepalives_idle=30,
                keepalives_interval=10,
                keepalives_count=3,
            )
            row = con.execute("SELECT pg_try_advisory_lock(%s)", (self._key,)).fetchone()
        except psycopg.Error as exc:
            raise LedgerError(f"ledger {self._store.name}: {_reason(exc)}") from None
        if row is None or not row[0]:
            con.close()
            return False
        self._con = con
        return True

    def release(self) -> None:
        if self._con is not None:
            self._con.close()  # ends the session: the server drops its advisory locks
            self._con = None


class PostgresStore:
    """Connections to one PostgreSQL ledger.

    Args:
        url: a ``postgresql://`` URL (libpq's syntax; see :func:`dp.ledger.store.ledger_location`
            for why a password belongs in ``PGPASSWORD`` or ``~/.pgpass``, not in the URL).
        timeout: seconds to wait for the server, and for another process holding the write lock.
        create: create the ledger in an empty schema (False: a missing ledger is an error).
    """

    def __init__(self, url: str, *, timeout: float = 30.0, create: bool = True) -> None:
        self.url = url
        self.timeout = timeout
        self._name = display_url(url)
        self._open(create)

    @property
    def name(self) -> str:
        return self._name

    def _open(self, create: bool) -> None:
        with self.connect() as con, con.raw.transaction():
            con.execute("SELECT pg_advisory_xact_lock(?)", (_CREATION_LOCK,))
            (row,) = con.execute("SELECT current_schema() AS name").fetchall()
            if row["name"] is None:
                raise LedgerError(
                    f"ledger {self.name}: no schema of the search path exists to hold the ledger"
                )
            relations = [r["name"] for r in con.execute(_RELATIONS)]
            if not relations:
                if not create:
                    raise NoLedgerError(f"no ledger at {self.name} (schema {row['name']} is empty)")
                for statement in SCHEMA:
                    con.execute(statement)
            elif not {"entries", "meta"} <= set(relations):
                shown = ", ".join(relations[:5]) + (", ..." if len(relations) > 5 else "")
                raise LedgerError(
                    f"{self.name} is not a dppub ledger: schema {row['name']} holds other tables "
                    f"({shown}); give the ledger a database or schema of its own"
                )
            try:
                found = con.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
            except (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedColumn) as exc:
                raise LedgerError(f"{self.name} is not a dppub ledger ({_reason(exc)})") from None
        check_format(self.name, None if found is None else found["value"])

    @contextmanager
    def connect(self) -> Iterator[_Connection]:
        """A connection in autocommit mode with rows as dicts."""
        try:
            con = psycopg.connect(
                self.url,
                autocommit=True,
                row_factory=dict_row,
                connect_timeout=max(2, math.ceil(self.timeout)),  # libpq's minimum is 2 s
            )
        except psycopg.Error as exc:
            raise LedgerError(f"cannot open ledger {self.name}: {_reason(exc)}") from None
        try:
            yield _Connection(con)
        except psycopg.errors.LockNotAvailable:
            raise LedgerError(
                f"ledger {self.name}: another process held the write lock for more than "
                f"{self.timeout:g} s; nothing was written"
            ) from None
        except psycopg.Error as exc:
            raise self._error(exc) from None
        finally:
            con.close()

    def _error(self, exc: psycopg.Error) -> LedgerError:
        """``exc`` as one line naming its cause (the server's SQLSTATE class)."""
        reason = _reason(exc)
        if isinstance(exc, psycopg.errors.DiskFull):
            return LedgerError(
                f"ledger {self.name}: the database server's disk is full ({reason}); nothing "
                "was written"
            )
        if isinstance(exc, psycopg.errors.InsufficientPrivilege):
            return LedgerError(f"ledger {self.name}: permission denied ({reason})")
        if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
            return LedgerError(f"ledger {self.name} is read-only ({reason}); nothing was written")
        return LedgerError(f"ledger {self.name}: {reason}")

    def liveness(self, key: str) -> _AdvisoryLock:
        """A session advisory lock on a connection of its own: the server drops it when the
        holder's connection ends -- the process died, or its host (TCP keepalives) -- so runs
        on several hosts see each other's liveness through the ledger."""
        return _AdvisoryLock(self, key)

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """An exclusive write transaction: other writers wait (at most ``timeout``), readers
        see the last committed state."""
        with self.connect() as con, con.raw.transaction():
            con.execute(
                "SELECT set_config('lock_timeout', ?, true)",
                (str(max(1, round(self.timeout * 1000))),),  # in ms; 0 would wait forever
            )
            con.execute("LOCK TABLE entries IN EXCLUSIVE MODE")
            yield con
