"""The ledger's storage format: schema, canonical row encoding and the SHA-256 hash chain.

Each row stores ``hash = sha256(canonical JSON of its fields, including prev_hash)``; verifying
recomputes every hash and checks that each row chains to the one before it and that sequence
numbers have no gap, which detects any edited, inserted or deleted row. Deleting rows at the
*end* is only detectable against a head kept elsewhere (each run's manifest records one).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime

from dppub.dp.ledger.records import ChainReport

__all__ = [
    "EVENTS",
    "FIELDS",
    "FORMAT",
    "GENESIS",
    "MAX_EPSILON",
    "REALS",
    "TERMINAL",
    "now",
    "partition_text",
    "row_hash",
    "schema",
    "verify_rows",
]

GENESIS = "0" * 64
FORMAT = "dppub-ledger/3"
FIELDS = (
    "seq",
    "ts",
    "event",
    "dataset",
    "source",
    "scope",
    "run_id",
    "release",
    "kind",
    "mechanism",
    "epsilon",
    "delta",
    "sensitivity",
    "partition",
    "is_dp",
    "budget_epsilon",
    "budget_delta",
    "period",
    "location",
    "config_hash",
    "output_hash",
    "note",
    "prev_hash",
)
REALS = ("epsilon", "delta", "sensitivity", "budget_epsilon", "budget_delta")
"""The floating-point columns: stored as 64-bit floats, so hashed as floats (``2`` reads back
as ``2.0``, whose canonical JSON differs)."""
MAX_EPSILON = 1e100
"""The largest epsilon a row may hold (a cost, a budget). Far above any meaningful guarantee,
and small enough that every sum the ledger computes stays finite: at most 2^63 rows of 1e100
(and their squares, for zCDP) are far below the largest float."""
EVENTS = ("declare", "amend", "reserve", "draw", "release", "commit", "charge", "abort")
"""``declare``/``amend``: a dataset's identity and budget policy; ``reserve``: a run holds its
planned cost; ``draw``: a release is about to draw noise on private data; ``release``: a computed
release at composition; ``commit``/``charge``/``abort``: how a run ended (published; drew noise
but published nothing; drew nothing). A run's terminal row carries what it finally costs."""
TERMINAL = ("commit", "charge", "abort")
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def _row_encoder() -> Callable[[Sequence[object]], str]:
    """``_ENCODER.encode`` for a flat row, with CPython's C encoder built once instead of once
    per call (a whole-chain audit encodes every row). Falls back to ``_ENCODER.encode`` where
    that encoder is missing or encodes a probe row differently."""
    make = getattr(json.encoder, "c_make_encoder", None)
    probe = [1, 2.5, '\u00e9"x', None, True, -0.0, 10**20]
    try:
        chunks = make(
            None, None, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, False
        )  # type: ignore[misc]
        encode: Callable[[Sequence[object]], str] = lambda row: "".join(chunks(row, 0))  # noqa: E731
        if encode(probe) == _ENCODER.encode(probe):
            return encode
    except TypeError:
        pass
    return _ENCODER.encode


_encode_row = _row_encoder()


def schema(*, key: str, real: str) -> list[str]:
    """The ledger's tables, as SQL statements that create what is missing.

    Args:
        key: the sequence number's type (SQLite: ``INTEGER``, the row id; PostgreSQL:
            ``BIGINT``).
        real: the 64-bit float type (SQLite: ``REAL``; PostgreSQL: ``DOUBLE PRECISION``, as its
            ``REAL`` has 32 bits and would change the values, and so the hashes).
    """
    events = ", ".join(f"'{e}'" for e in EVENTS)
    return [
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        f"""CREATE TABLE IF NOT EXISTS entries (
    seq {key} PRIMARY KEY, ts TEXT NOT NULL, event TEXT NOT NULL CHECK (event IN ({events})),
    dataset TEXT NOT NULL, source TEXT NOT NULL, scope TEXT, run_id TEXT,
    release TEXT, kind TEXT, mechanism TEXT,
    epsilon {real} NOT NULL, delta {real} NOT NULL, sensitivity {real}, partition TEXT,
    is_dp INTEGER NOT NULL, budget_epsilon {real}, budget_delta {real}, period TEXT,
    location TEXT, config_hash TEXT, output_hash TEXT, note TEXT, prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
)""",
        "CREATE INDEX IF NOT EXISTS entries_run ON entries (run_id, event)",
        "CREATE INDEX IF NOT EXISTS entries_source ON entries (source, event)",
        "CREATE INDEX IF NOT EXISTS entries_name ON entries (dataset, event)",
        f"INSERT INTO meta VALUES ('format', '{FORMAT}') ON CONFLICT (key) DO NOTHING",
    ]


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _hash_values(values: Sequence[object]) -> str:
    """SHA-256 of the canonical JSON of a row's fields, in ``FIELDS`` order."""
    return hashlib.sha256(_encode_row(values).encode()).hexdigest()


def row_hash(row: dict[str, object]) -> str:
    return _hash_values([row[f] for f in FIELDS])


def partition_text(partition: tuple[str, str] | None) -> str | None:
    return None if partition is None else json.dumps(list(partition))


def verify_rows(
    rows: Iterable[Sequence[object]],
    *,
    expected_head: tuple[int, str] | None = None,
    after: tuple[int, str] = (0, GENESIS),
) -> ChainReport:
    """Check a chain given as tuples of ``(*FIELDS, hash)`` in sequence order.

    ``after`` is a verified ``(seq, hash)`` the rows continue from (a checkpoint): only the
    rows after it are given and checked, which keeps routine verification cheap.
    """
    problems: list[str] = []
    n, prev = after
    seq_head, digest_head = expected_head or (0, "")
    head_found = seq_head <= 0
    encode, sha256 = _encode_row, hashlib.sha256  # one lookup, not one per row
    for row in rows:
        n += 1
        seq, digest = row[0], row[-1]
        if seq != n:
            problems.append(f"row {n}: sequence gap (found seq {seq})")
        if row[-2] != prev:
            problems.append(f"row {seq}: does not chain to the previous row")
        if sha256(encode(row[:-1]).encode()).hexdigest() != digest:
            problems.append(f"row {seq}: contents do not match its hash")
        prev = str(digest)
        if seq == seq_head:
            head_found = prev == digest_head
    if not head_found:
        problems.append(f"head recorded at seq {seq_head} is missing or altered")
    return ChainReport(ok=not problems, rows=n, head=prev, problems=tuple(problems))
