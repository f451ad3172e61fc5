"""The ledger's back ends for the ledger and run tests: every test of ``ledger_factory`` runs on
a SQLite file and on a PostgreSQL database (see :mod:`tests.pg`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dppub.dp.budget import PrivacyCost
from dppub.dp.ledger import BudgetPolicy, DataIdentity, Ledger
from dppub.dp.publication import Staging
from tests.pg import PostgresServer


class LedgerFactory:
    """A fresh ledger location on one back end, and raw access to it (to play the attacker).

    Calling it opens a :class:`Ledger` there (created on first use, like a first run).
    """

    def __init__(self, backend: str, location: str) -> None:
        self.backend = backend
        self.location = location

    def __call__(self, **kwargs: Any) -> Ledger:
        return Ledger(self.location, **kwargs)

    def sql(self, statement: str, params: tuple[object, ...] = ()) -> list[dict[str, Any]]:
        """Run one statement (``?`` placeholders) on the ledger's storage, bypassing the ledger."""
        with Ledger(self.location).store.connect() as con:
            cursor = con.execute(statement, params)
            return cursor.fetchall() if statement.lstrip().upper().startswith("SELECT") else []

    def snapshot(self) -> object:
        """A copy of the whole ledger (the file's bytes, or every row of both tables)."""
        if self.backend == "sqlite":
            return Path(self.location).read_bytes()
        return {t: self.sql(f"SELECT * FROM {t}") for t in ("meta", "entries")}

    def erase(self) -> None:
        """Delete the ledger (the file, or its tables): the next :meth:`__call__` starts anew."""
        if self.backend == "sqlite":
            Path(self.location).unlink()
        else:
            self.sql("DROP TABLE entries, meta")

    def restore(self, snapshot: object) -> None:
        """Put a :meth:`snapshot` back in place of whatever the ledger holds now."""
        if isinstance(snapshot, bytes):
            Path(self.location).write_bytes(snapshot)
            return
        assert isinstance(snapshot, dict)
        self.erase()
        with self().store.connect() as con:  # a new, empty ledger, then the old rows
            con.execute("DELETE FROM meta")
            for table, rows in snapshot.items():
                for row in rows:
                    columns, marks = ", ".join(row), ", ".join("?" * len(row))
                    con.execute(
                        f"INSERT INTO {table} ({columns}) VALUES ({marks})", [*row.values()]
                    )


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_factory(request: pytest.FixtureRequest, tmp_path: Path) -> LedgerFactory:
    """A fresh ledger location: a file in a folder that does not exist yet, or an empty
    PostgreSQL schema."""
    if request.param == "sqlite":
        return LedgerFactory("sqlite", str(tmp_path / "ledger" / "l.sqlite"))
    server: PostgresServer = request.getfixturevalue("postgres")
    return LedgerFactory("postgresql", server.schema_url())


def reserved_staging(directory: Path, *, budget: float = 2.0, cost: float = 1.0) -> Staging:
    """The staging folder of run ``r1`` of dataset ``d``, reserved at ``cost`` in a fresh
    SQLite ledger in ``directory`` whose budget is ``budget``."""
    led = Ledger(directory / "l.sqlite")
    led.reserve(
        run_id="r1",
        data=DataIdentity(name="d", source="/d"),
        policy=BudgetPolicy(total=PrivacyCost(epsilon=budget)),
        cost=PrivacyCost(epsilon=cost),
        config_hash="c",
    )
    return Staging(directory, dataset="d", run_id="r1", ledger=led).create()
