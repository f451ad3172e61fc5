"""Staging and atomic publication of a run's released files.

Releases are written into ``OUT/<dataset>/.staging/<run_id>/``; publication is one
``os.rename`` of that folder to ``OUT/<dataset>/<run_id>/`` (atomic on one filesystem), so a
published folder is never seen half-written, and a failed run leaves no published folder.

Each release's folder gets a ``release.json`` written last: it marks the release as complete.
A re-executed task finds it and reuses the stored answer instead of drawing new noise, so a
retry can never publish a second, independently noised answer to the same query.
"""

from __future__ import annotations

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

    def create(self) -> Staging:
        if self.final.exists():
            raise ConfigError(f"run folder {self.final} already exists")
        self.dir.mkdir(parents=True, exist_ok=True)
        return self

    def release_dir(self, name: str) -> Path:
        d = self.dir / name
        d.mkdir(parents=True, exist_ok=True)
        return d

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
        return self.final

    def discard(self) -> None:
        """Remove the staging folder (nothing of it was published)."""
        shutil.rmtree(self.dir, ignore_errors=True)
