"""Where a ledger is stored: one small interface over SQLite and PostgreSQL.

A store hands out connections that speak one SQL text (``?`` placeholders, rows as dicts keyed
by column name) and an exclusive write transaction that serializes every writer of the ledger
while readers keep seeing the last committed state. The ledger's code above it
(:mod:`dp.ledger.book`, :mod:`dp.ledger.log`, :mod:`dp.ledger.datasets`) is the same on both.

* **SQLite** (a file path, the default): embedded, one host; see :mod:`dp.ledger.sqlite`.
* **PostgreSQL** (a ``postgresql://`` URL): one ledger shared by runs on several hosts; see
  :mod:`dp.ledger.postgres`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit

from dppub.dp.errors import LedgerError
from dppub.dp.ledger.chain import FORMAT

__all__ = [
    "URL_SCHEMES",
    "Connection",
    "Cursor",
    "NoLedgerError",
    "Row",
    "Store",
    "check_file_path",
    "check_format",
    "display_url",
    "ledger_location",
    "open_store",
]

Row = dict[str, Any]
URL_SCHEMES = ("postgresql://", "postgres://")


class NoLedgerError(LedgerError):
    """There is no ledger yet (a missing file, an empty schema) and it was not to be created."""


class Cursor(Protocol):
    """The result of :meth:`Connection.execute`: rows as dicts."""

    def fetchone(self) -> Row | None: ...

    def fetchall(self) -> list[Row]: ...

    def __iter__(self) -> Iterator[Row]: ...


class Connection(Protocol):
    """A connection in autocommit mode (inside :meth:`Store.transaction`: in its transaction)."""

    def execute(self, sql: str, params: Sequence[object] = (), /) -> Cursor:
        """Run one statement with ``?`` placeholders."""
        ...

    def tuples(self, sql: str, params: Sequence[object] = (), /) -> Iterable[tuple[Any, ...]]:
        """Run one query and yield plain tuples (cheaper than dicts for a whole-chain scan)."""
        ...


class Store(Protocol):
    """A ledger's storage."""

    @property
    def name(self) -> str:
        """The ledger's name in messages (a URL never shows its password)."""
        ...

    def connect(self) -> AbstractContextManager[Connection]:
        """A connection in autocommit mode; storage errors become one-line LedgerErrors."""
        ...

    def transaction(self) -> AbstractContextManager[Connection]:
        """An exclusive write transaction: other writers wait, readers see the old state."""
        ...

    def liveness(self, key: str) -> Liveness | None:
        """A lock the store holds for a live run (None: the store has none; runs then use a
        file lock beside their staging folder, which one machine's kernel manages)."""
        ...


class Liveness(Protocol):
    """A run's liveness lock held by the store's server, dropped when its holder dies."""

    def acquire(self) -> bool:
        """Take it without waiting; False if a live process holds it."""
        ...

    def release(self) -> None:
        """Let it go."""
        ...


def check_format(name: str, found: object) -> None:
    """Refuse a ledger whose recorded format (``meta``'s ``format`` row) is not this version's.

    Raises:
        LedgerError: another dppub version's ledger, or not a dppub ledger at all.
    """
    if found == FORMAT:
        return
    if isinstance(found, str) and found.startswith("dppub-ledger/"):
        raise LedgerError(
            f"{name} is a ledger of another dppub version (format {found}); "
            f"this version reads {FORMAT}"
        )
    raise LedgerError(f"{name} is not a dppub ledger (format {found!r})")


def check_file_path(location: str | Path) -> None:
    """Refuse a SQLite ledger location that is not the path of a file.

    SQLite gives some names a meaning of their own (``:memory:``, an empty name, ``file:``
    URIs), and a folder cannot hold a ledger: each would lose or misplace the charges.

    Raises:
        LedgerError: one of those, or a name with a NUL character.
    """
    text = str(location)
    why = None
    if not text.strip():
        why = "it is empty"
    elif "\x00" in text:
        why = "it holds a NUL character"
    elif text.strip().lower() == ":memory:":
        why = "an in-memory database would forget every charge when the process ends"
    elif text.lower().startswith("file:"):
        why = "it is a SQLite URI; give the file's path"
    elif text.endswith(("/", os.sep)) or Path(text).is_dir():
        why = "it is a folder; give a file in it, e.g. ledger.sqlite"
    if why is not None:
        raise LedgerError(f"ledger {text!r} is not a file path: {why}")


def display_url(url: str) -> str:
    """``url`` without its password (in the user part or a ``password=`` parameter)."""
    parts = urlsplit(url)
    netloc, query = parts.netloc, parts.query
    if parts.password is not None:
        netloc = f"{parts.username or ''}@{netloc.rpartition('@')[2]}"
    pairs = parse_qsl(query, keep_blank_values=True)
    if any(k == "password" for k, _ in pairs):
        query = urlencode([(k, v) for k, v in pairs if k != "password"], safe="/")
    return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")


def _is_url(location: str | Path) -> bool:
    text = str(location)
    if isinstance(location, str) and text.startswith(URL_SCHEMES):
        return True
    if text.startswith(("postgresql:", "postgres:")):
        raise LedgerError(
            f"{text} looks like a PostgreSQL URL that lost its '//' (passed as a path?): "
            "give it as text, e.g. postgresql://user@host/db"
        )
    return False


def ledger_location(location: str | Path) -> str:
    """Where any process opens the ledger ``location`` names: a URL as given, a path absolute.

    What ``dppub`` hands to its flows and scheduled runs, which may run in another folder. Those
    are Prefect parameters, stored with every flow run and deployment, so a URL that holds a
    password is refused: libpq reads it from ``PGPASSWORD``, ``~/.pgpass`` or ``PGPASSFILE``.

    >>> ledger_location("postgresql://ana@db/ledger")
    'postgresql://ana@db/ledger'

    Raises:
        LedgerError: a URL with a password, or one that lost its ``//`` (it went through
            ``Path``); a path that does not name a file (:func:`check_file_path`).
    """
    if not _is_url(location):
        check_file_path(location)
        return str(Path(location).resolve())
    url = str(location)
    if display_url(url) != url:
        raise LedgerError(
            f"{display_url(url)}: keep the password out of the ledger URL (runs record it); "
            "give it in PGPASSWORD or ~/.pgpass"
        )
    return url


def open_store(location: str | Path, *, timeout: float = 30.0, create: bool = True) -> Store:
    """The store at ``location``: a ``postgresql://`` URL, else a SQLite file path.

    Args:
        location: a path (SQLite) or a URL such as ``postgresql://user@host/db``.
        timeout: seconds to wait for the server, or for another process holding the write lock.
        create: create a missing ledger (False: a missing one is an error, e.g. for audits).

    Raises:
        NoLedgerError: ``create`` is False and there is no ledger yet.
        LedgerError: the ledger cannot be opened or created, or is not a dppub ledger.
    """
    if _is_url(location):
        from dppub.dp.ledger.postgres import PostgresStore  # psycopg is imported only when used

        return PostgresStore(str(location), timeout=timeout, create=create)
    from dppub.dp.ledger.sqlite import SqliteStore

    return SqliteStore(location, timeout=timeout, create=create)
