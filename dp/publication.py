"""Staging and atomic publication of a run's released files.

Releases are written into ``OUT/<dataset>/.staging/<run_id>/``; publication is one
``os.rename`` of that folder to ``OUT/<dataset>/<run_id>/`` (atomic on one filesystem), so a
published folder is never seen half-written, and a failed run leaves no published folder. Once
the rename has happened the run *is* published, whatever fails afterwards (see
:mod:`dp.runs`: it is then committed, never refunded).

Each release's folder gets a ``release.json`` written last: it marks the release as complete.
A re-executed task finds it and reuses the stored answer instead of drawing new noise. Before
drawing any noise an attempt records a ``draw`` in the ledger (:meth:`Staging.attempt`): the run
is charged from then on even if it never publishes, and a second attempt at the same release --
a task the cluster re-ran after losing a worker while the first may still be writing -- is
refused instead of drawing again. A release folder is never created outside an existing staging
folder, so a late writer cannot resurrect a discarded run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dppub.dp.budget import PrivacyCost
from dppub.dp.errors import ConfigError, InvariantError
from dppub.dp.faults import fault_point
from dppub.dp.ledger import Ledger, check_run_id
from dppub.dp.stopping import check_stop

__all__ = ["Staging", "sha256_files"]

MANIFEST = "manifest.json"
RELEASE_MARKER = "release.json"
CSV_ROWS = 4096
"""Rows of a CSV file written between two looks at the run's stop request (well under a second
on a loaded machine)."""
PARQUET_ROWS = 2**16
"""Rows of a Parquet file written between two looks at the stop request (one row group)."""


def sha256_files(root: Path) -> str:
    """SHA-256 over the relative paths and bytes of every file below ``root`` (sorted)."""
    h = hashlib.sha256()
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(f.relative_to(root).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Staging:
    """The private staging area of one run, and its publication.

    Picklable (it holds paths and the ledger's location only), so release tasks can run on
    other processes of the same machine or on workers that share its filesystem.
    """

    def __init__(
        self, out_dir: str | Path, *, dataset: str, run_id: str, ledger: Ledger | None = None
    ) -> None:
        check_run_id(run_id)
        self.run_id = run_id
        self.dataset_dir = Path(out_dir) / dataset
        self.dir = self.dataset_dir / ".staging" / run_id
        self.final = self.dataset_dir / run_id
        self.ledger = ledger

    @property
    def published(self) -> bool:
        """True once the run folder is in place (publication is one rename)."""
        return (self.final / MANIFEST).is_file()

    def create(self) -> Staging:
        if self.final.exists():
            raise ConfigError(f"run folder {self.final} already exists")
        self.dir.mkdir(parents=True, exist_ok=True)
        return self

    def release_dir(self, name: str) -> Path:
        """The folder of release ``name`` (``group/table``: a folder within a release's),
        created inside the staging folder, which must exist: a discarded staging folder stays
        discarded."""
        d = self.dir
        for part in PurePosixPath(name).parts:
            d = d / part
            d.mkdir(exist_ok=True)  # never parents
        return d

    def attempt(self, name: str, cost: PrivacyCost, *, is_dp: bool = True) -> dict[str, Any] | None:
        """Start an attempt at release ``name``: the stored summary if an earlier attempt
        completed it (reuse it, draw nothing), else None once the ledger has recorded that this
        attempt is about to draw noise (at ``cost``) -- call it before any noise is drawn.

        Raises:
            InvariantError: another attempt drew this release, or the staging folder is gone.
            LedgerError: the run is no longer pending (it was settled).
        """
        done = self.completed(name)
        if done is not None:
            return done
        if not self.dir.is_dir():
            raise InvariantError(f"the staging folder of run {self.run_id} is gone")
        if self.ledger is None:
            raise InvariantError(f"run {self.run_id} has no ledger to record its draws in")
        self.ledger.draw(run_id=self.run_id, release=name, cost=cost, is_dp=is_dp)
        if is_dp:
            fault_point("drawn")
        return None

    def completed(self, name: str) -> dict[str, Any] | None:
        """The stored summary of release ``name`` if an earlier attempt completed it."""
        marker = self.dir / name / RELEASE_MARKER
        if not marker.exists():
            return None
        data: dict[str, Any] = json.loads(marker.read_text())
        return data

    def write_frame(self, name: str, filename: str, frame: pd.DataFrame) -> None:
        """``frame`` as Parquet ``filename`` of release ``name`` (what ``to_parquet`` writes),
        :data:`PARQUET_ROWS` rows (one row group) at a time, the run's stop request checked
        between them (:mod:`dp.stopping`)."""
        fault_point("writing")
        table = pa.Table.from_pandas(frame, preserve_index=False)
        if frame.attrs:  # as to_parquet keeps them (a release's statement on its table)
            attrs = {b"PANDAS_ATTRS": json.dumps(frame.attrs).encode("utf-8")}
            table = table.replace_schema_metadata({**attrs, **(table.schema.metadata or {})})
        with pq.ParquetWriter(self.release_dir(name) / filename, table.schema) as writer:
            for batch in table.to_batches(max_chunksize=PARQUET_ROWS):
                check_stop(f"writing {filename}")
                writer.write_batch(batch)

    def write_csv(self, name: str, filename: str, frame: pd.DataFrame, **options: Any) -> None:
        """``frame`` as CSV ``filename`` of release ``name``: the bytes of one ``to_csv(path,
        index=False, **options)``, written :data:`CSV_ROWS` rows at a time, the run's stop
        request checked between them (a million rows take a minute on a loaded machine)."""
        fault_point("writing")
        with (self.release_dir(name) / filename).open("w", newline="") as fh:
            for start in range(0, max(1, len(frame)), CSV_ROWS):  # no rows: the header
                check_stop(f"writing {filename}")
                part = frame.iloc[start : start + CSV_ROWS]
                part.to_csv(fh, index=False, header=start == 0, **options)

    def write_table(self, name: str, stem: str, frame: pd.DataFrame) -> None:
        """A released table as ``stem.parquet`` and the same rows as ``stem.csv`` (for readers
        without Parquet; floats written exactly: ``repr`` precision). RFC 4180 line ends: the
        csv module quotes a field holding a character of the line terminator, so a label with
        a carriage return (as well as a line feed) is quoted, never split."""
        self.write_frame(name, f"{stem}.parquet", frame)
        self.write_csv(name, f"{stem}.csv", frame, float_format="%.17g", lineterminator="\r\n")

    def copy_as_csv(self, name: str, stem: str) -> None:
        """The rows of release ``name``'s ``stem.parquet`` also as ``stem.csv``, batch by batch
        (a table written by a streaming release may not fit in memory); as :meth:`write_table`."""
        fault_point("writing")
        target = self.release_dir(name) / f"{stem}.csv"
        source = pq.ParquetFile(self.release_dir(name) / f"{stem}.parquet")
        with target.open("w", newline="") as fh:
            header = True
            for batch in source.iter_batches(batch_size=CSV_ROWS):
                check_stop(f"writing {stem}.csv")
                batch.to_pandas().to_csv(
                    fh, index=False, header=header, float_format="%.17g", lineterminator="\r\n"
                )
                header = False
            if header:  # no rows: the header alone
                empty = source.schema_arrow.empty_table().to_pandas()
                empty.to_csv(fh, index=False, lineterminator="\r\n")

    def write_json(self, name: str, filename: str, payload: Mapping[str, Any]) -> None:
        fault_point("writing")
        text = json.dumps(payload, indent=2, sort_keys=True, allow_nan=False)
        (self.release_dir(name) / filename).write_text(text + "\n")

    def complete(self, name: str, summary: Mapping[str, Any]) -> dict[str, Any]:
        """Mark release ``name`` complete; return the summary with its files and output hash."""
        d = self.release_dir(name)
        files = sorted(
            p.relative_to(d).as_posix()
            for p in d.rglob("*")
            if p.is_file() and p != d / RELEASE_MARKER
        )
        done = {**summary, "files": [f"{name}/{f}" for f in files], "output_hash": sha256_files(d)}
        tmp = d / (RELEASE_MARKER + ".tmp")
        tmp.write_text(json.dumps(done, indent=2, sort_keys=True, allow_nan=False) + "\n")
        tmp.replace(d / RELEASE_MARKER)
        return done

    def publish(self, *, manifest: Mapping[str, Any], report: str) -> Path:
        """Write the manifest and report, flush every file, then rename the folder into place.

        After the rename the run is published even if a later step (the folder's fsync) fails.
        """
        (self.dir / "report.md").write_text(report)
        text = json.dumps(manifest, indent=2, sort_keys=True, allow_nan=False) + "\n"
        (self.dir / MANIFEST).write_text(text)
        for f in self.dir.rglob("*"):
            if f.is_file():
                with f.open("rb") as fh:
                    os.fsync(fh.fileno())
        if self.final.exists():
            raise InvariantError(f"run folder {self.final} appeared during the run")
        os.rename(self.dir, self.final)
        fault_point("renamed")
        _fsync_dir(self.dataset_dir)
        return self.final

    def discard(self) -> None:
        """Remove the staging folder (nothing of it was published)."""
        shutil.rmtree(self.dir, ignore_errors=True)
