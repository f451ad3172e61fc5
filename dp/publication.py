"""Staging and atomic publication of a run's released files.

Releases are written into ``OUT/<dataset>/.staging/<run_id>/``; publication is one
``os.rename`` of that folder to ``OUT/<dataset>/<run_id>/`` (atomic on one filesystem), so a
published folder is never seen half-written, and a failed run leaves no published folder.

A run holds an exclusive ``flock`` on ``OUT/<dataset>/.staging/<run_id>.lock`` from before its
reservation until it ends; the kernel drops the lock when the process dies, so a pending
reservation whose lock is free belongs to a dead run (see :mod:`dp.recovery`).

Each release's folder gets a ``release.json`` written last: it marks the release as complete.
A re-executed task finds it and reuses the stored answer instead of drawing new noise, so a
retry can never publish a second, independently noised answer to the same query. Before drawing
any noise an attempt *claims* its release (an ``O_EXCL`` file beside the staging folder): a
second attempt that finds the release claimed but not complete -- a task dask re-ran after
losing its worker while the first may still be writing -- stops instead of drawing again. A
release folder is never created outside an existing staging folder, so a late writer cannot
resurrect a discarded run.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from dp.errors import ConfigError, InvariantError
from dp.ledger import check_run_id

__all__ = ["Staging", "sha256_files"]

MANIFEST = "manifest.json"
RELEASE_MARKER = "release.json"


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
    """The private staging area of one run, and its publication."""

    def __init__(self, out_dir: str | Path, *, dataset: str, run_id: str) -> None:
        check_run_id(run_id)
        self.run_id = run_id
        self.dataset_dir = Path(out_dir) / dataset
        self.dir = self.dataset_dir / ".staging" / run_id
        self.final = self.dataset_dir / run_id
        self._lock_path = self.dataset_dir / ".staging" / f"{run_id}.lock"
        self._lock_fd: int | None = None

    def try_lock(self) -> bool:
        """Take the run's liveness lock without waiting; False if another process holds it."""
        if self._lock_fd is not None:
            return True
        self._lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._lock_fd = fd
        return True

    def unlock(self) -> None:
        """Release the liveness lock (and remove its file)."""
        if self._lock_fd is not None:
            self._lock_path.unlink(missing_ok=True)
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

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
        d = self.dir / name
        d.mkdir(exist_ok=True)  # not parents: a discarded staging folder stays discarded
        return d

    @property
    def _claims(self) -> Path:
        return self.dir.parent / f"{self.run_id}.claims"

    def attempt(self, name: str) -> dict[str, Any] | None:
        """Start an attempt at release ``name``: the stored summary if an earlier attempt
        completed it (reuse it, draw nothing), else None once this attempt has claimed it.

        Raises:
            InvariantError: as :meth:`claim`.
        """
        done = self.completed(name)
        if done is None:
            self.claim(name)
        return done

    def claim(self, name: str) -> None:
        """Claim release ``name`` for this attempt; call it after :meth:`completed` returned
        None and before any noise is drawn (see the module docstring).

        Raises:
            InvariantError: another attempt claimed the release, or the staging folder is gone.
        """
        if not self.dir.is_dir():
            raise InvariantError(f"the staging folder of run {self.run_id} is gone")
        self._claims.mkdir(exist_ok=True)
        try:
            os.close(os.open(self._claims / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            raise InvariantError(
                f"release {name!r} of run {self.run_id} was already attempted; a second attempt "
                "would draw a second noisy answer, so it stops"
            ) from None

    def completed(self, name: str) -> dict[str, Any] | None:
        """The stored summary of release ``name`` if an earlier attempt completed it."""
        marker = self.dir / name / RELEASE_MARKER
        if not marker.exists():
            return None
        data: dict[str, Any] = json.loads(marker.read_text())
        return data

    def write_frame(self, name: str, filename: str, frame: pd.DataFrame) -> None:
        frame.to_parquet(self.release_dir(name) / filename, index=False)

    def write_json(self, name: str, filename: str, payload: Mapping[str, Any]) -> None:
        text = json.dumps(payload, indent=2, sort_keys=True, allow_nan=False)
        (self.release_dir(name) / filename).write_text(text + "\n")

    def complete(self, name: str, summary: Mapping[str, Any]) -> dict[str, Any]:
        """Mark release ``name`` complete; return the summary with its files and output hash."""
        d = self.release_dir(name)
        files = sorted(p.name for p in d.iterdir() if p.is_file() and p.name != RELEASE_MARKER)
        done = {**summary, "files": [f"{name}/{f}" for f in files], "output_hash": sha256_files(d)}
        tmp = d / (RELEASE_MARKER + ".tmp")
        tmp.write_text(json.dumps(done, indent=2, sort_keys=True, allow_nan=False) + "\n")
        tmp.replace(d / RELEASE_MARKER)
        return done

    def publish(self, *, manifest: Mapping[str, Any], report: str) -> Path:
        """Write the manifest and report, then atomically rename the folder into place."""
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
        _fsync_dir(self.dataset_dir)
        shutil.rmtree(self._claims, ignore_errors=True)
        return self.final

    def discard(self) -> None:
        """Remove the staging folder (nothing of it was published)."""
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self._claims, ignore_errors=True)
