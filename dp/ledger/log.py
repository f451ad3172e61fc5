"""The hash-chained log on top of a store: verified writes, appends, heads.

Every write transaction first re-verifies the chain from the last verified checkpoint (kept in
the ledger's metadata, so routine verification costs only the rows written since), refuses to
write to a damaged ledger, appends, and moves the checkpoint to the new head. The cost columns
of *every* row are checked too (a sign-flipped epsilon before the checkpoint is still caught).

A row is appended only if its costs are in the ledger's range (epsilon in [0, ``MAX_EPSILON``],
delta in [0, 1), a finite sensitivity), so no value a caller passes can make a later write find
the ledger damaged. A finite epsilon above the range that an older dppub wrote is not damage
(it can only over-count) and does not stop the ledger.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from dppub.dp.errors import ConfigError, LedgerError
from dppub.dp.ledger.chain import FIELDS, GENESIS, MAX_EPSILON, REALS, now, row_hash, verify_rows
from dppub.dp.ledger.records import ChainReport
from dppub.dp.ledger.store import Connection, Store

__all__ = ["COLUMNS", "ChainedLog"]

COLUMNS = ", ".join((*FIELDS, "hash"))
_LARGEST = repr(sys.float_info.max)  # SQL has no portable isfinite(): <= the largest float


class ChainedLog:
    """Verified, append-only access to the ``entries`` table of a store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A verified, exclusive write transaction that moves the checkpoint on success."""
        with self.store.transaction() as con:
            self._verify_since_checkpoint(con)
            yield con
            row = con.execute("SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
            if row is not None:
                con.execute(
                    """INSERT INTO meta VALUES ('checkpoint', ?)
                       ON CONFLICT (key) DO UPDATE SET value = excluded.value""",
                    (f"{row['seq']}:{row['hash']}",),
                )

    def _damaged(self, problem: str) -> LedgerError:
        return LedgerError(
            f"ledger {self.store.name} is damaged ({problem}); nothing was written: "
            "see `dppub audit`, and restore the ledger from a copy"
        )

    def _verify_since_checkpoint(self, con: Connection) -> None:
        found = con.execute("SELECT value FROM meta WHERE key = 'checkpoint'").fetchone()
        seq, digest = 0, GENESIS
        if found is not None:
            text, _, digest = str(found["value"]).partition(":")
            seq = int(text)
            row = con.execute(f"SELECT {COLUMNS} FROM entries WHERE seq = ?", (seq,)).fetchone()
            if row is None or row["hash"] != digest or row_hash(dict(row)) != digest:
                raise self._damaged(f"verified row {seq} is missing or altered")
        rows = con.tuples(f"SELECT {COLUMNS} FROM entries WHERE seq > ? ORDER BY seq", (seq,))
        report = verify_rows(rows, after=(seq, digest))
        if not report.ok:
            raise self._damaged(report.problems[0])
        bad = con.execute(
            f"""SELECT seq FROM entries WHERE NOT (epsilon >= 0 AND epsilon <= {_LARGEST}
                AND delta >= 0 AND delta < 1) LIMIT 1"""
        ).fetchone()
        if bad is not None:
            raise self._damaged(f"row {bad['seq']} holds a negative or non-finite cost")

    @staticmethod
    def append(con: Connection, **values: object) -> str:
        """Append one row (inside :meth:`write`); returns its hash."""
        last = con.execute("SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
        row: dict[str, object] = dict.fromkeys(FIELDS)
        row.update(values)
        for field in REALS:
            if row[field] is not None:
                row[field] = float(row[field])  # type: ignore[arg-type]
        _check_range(row)
        row["seq"] = 1 if last is None else last["seq"] + 1
        row["ts"] = now()
        row["prev_hash"] = GENESIS if last is None else last["hash"]
        digest = row_hash(row)
        marks = ", ".join("?" * (len(FIELDS) + 1))
        con.execute(f"INSERT INTO entries ({COLUMNS}) VALUES ({marks})", [*row.values(), digest])
        return digest

    def head(self) -> tuple[int, str]:
        """``(seq, hash)`` of the last row (``(0, GENESIS)`` when empty)."""
        with self.store.connect() as con:
            row = con.execute("SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
        return (0, GENESIS) if row is None else (int(row["seq"]), str(row["hash"]))

    def missing(self, entries: Sequence[tuple[int, str]]) -> list[tuple[int, str]]:
        """Those of ``entries`` (``(seq, hash)`` pairs seen elsewhere) the log lacks."""
        out: list[tuple[int, str]] = []
        with self.store.connect() as con:
            for seq, digest in entries:
                row = con.execute("SELECT hash FROM entries WHERE seq = ?", (seq,)).fetchone()
                if row is None or row["hash"] != digest:
                    out.append((seq, digest))
        return out

    def verify(self, *, expected_head: tuple[int, str] | None = None) -> ChainReport:
        """Recompute the whole hash chain; optionally check it still contains a known head."""
        with self.store.connect() as con:
            return verify_rows(
                con.tuples(f"SELECT {COLUMNS} FROM entries ORDER BY seq"),
                expected_head=expected_head,
            )


def _check_range(row: dict[str, object]) -> None:
    """Refuse a row whose costs are outside the ledger's range (before it is written)."""
    ranges = {
        "epsilon": (0.0, MAX_EPSILON, True),
        "budget_epsilon": (0.0, MAX_EPSILON, True),
        "delta": (0.0, 1.0, False),
        "budget_delta": (0.0, 1.0, False),
    }
    for field, (low, high, closed) in ranges.items():
        value = row[field]
        if value is None:
            continue
        assert isinstance(value, float)
        if not (low <= value <= high if closed else low <= value < high):
            raise ConfigError(
                f"the {row['event']} row's {field} must be in [{low:g}, {high:g}"
                f"{']' if closed else ')'}, got {value!r}: the ledger refuses it and wrote nothing"
            )
    sensitivity = row["sensitivity"]
    if isinstance(sensitivity, float) and not math.isfinite(sensitivity):
        raise ConfigError(
            f"the {row['event']} row's sensitivity must be finite, got {sensitivity!r}: "
            "the ledger refuses it and wrote nothing"
        )
