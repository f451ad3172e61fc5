"""A published run as its files say: what :func:`dppub.publish` and the ``dppub-publish`` flow
return.

Only published values: the run folder's ``manifest.json``, and per release its ``release.json``
(its result, as written) and its tables (``*.parquet``, read when asked for). Prefect keeps no
result of the flow; a caller that holds a :class:`Publication` holds nothing the published
folder does not.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dppub.dp.budget import PrivacyCost
from dppub.dp.pipeline.kinds import JSON, ReleaseSummary
from dppub.dp.pipeline.registry import read_summary
from dppub.dp.publication import RELEASE_MARKER

__all__ = ["Publication", "ReleaseResult", "read_publication"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleaseResult:
    """One published release."""

    name: str
    kind: str
    """Its label in plans, the ledger and the manifest (``workload``, ``k-anonymity``...)."""
    path: Path
    """Its folder in the run folder."""
    result: Mapping[str, JSON]
    """Its ``release.json``: its public account (mechanism, costs, what it states)."""
    summary: ReleaseSummary
    """The same, typed: costs, files and its kind's result (``summary.result``)."""

    @property
    def answers(self) -> dict[str, pd.DataFrame]:
        """Its published tables by file stem (``answers``, ``coefficients``, ``clusters``,
        ``synthetic``...; a joint group's tables: ``<table>/answers``), read from their Parquet
        files now."""
        files = sorted(self.path.rglob("*.parquet"))
        return {
            p.relative_to(self.path).with_suffix("").as_posix(): pd.read_parquet(p) for p in files
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Publication:
    """A published and committed run: public values only (the flow may hand it to Prefect)."""

    run_id: str
    path: Path
    """The published run folder, ``OUT/<dataset>/<run_id>``."""
    manifest: dict[str, JSON]
    """Its ``manifest.json``: releases, costs, guarantee, ledger head."""
    cost: PrivacyCost
    """What the run spent (its planned, reserved and recomputed cost)."""
    releases: dict[str, ReleaseResult]
    """Each release by name, in the manifest's order."""


def read_publication(run_id: str, path: Path, cost: PrivacyCost) -> Publication:
    """The run published at ``path``, from its files."""
    manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    releases = {}
    for entry in manifest["releases"]:
        name, folder = str(entry["name"]), path / str(entry["name"])
        result = json.loads((folder / RELEASE_MARKER).read_text(encoding="utf-8"))
        releases[name] = ReleaseResult(
            name=name,
            kind=str(entry["kind"]),
            path=folder,
            result=result,
            summary=read_summary(result),
        )
    return Publication(run_id=run_id, path=path, manifest=manifest, cost=cost, releases=releases)
