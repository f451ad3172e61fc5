"""Executing a plan's releases: one shared scan, then each release once.

:func:`shared_scan` folds every release's exact aggregates in a single pass over the data (each
release sees the complete rows of its own columns). :func:`compute_release` then records the
release's draw in the ledger (before any noise), lets its kind compute it into the staging
folder, and returns its :class:`~dp.pipeline.kinds.ReleaseSummary`; a release that an earlier
attempt completed is returned as it was, never recomputed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dp.engine import Fused, TableSource
from dp.pipeline.kinds import ReleasePlan, ReleaseSummary
from dp.pipeline.registry import kind_of
from dp.publication import Staging

__all__ = ["compute_release", "shared_scan"]


def shared_scan(releases: Sequence[ReleasePlan], source: TableSource) -> dict[str, list[Any]]:
    """Every release's exact aggregates, by release name, from one pass over ``source``.

    Exact values: they stay in memory, are never logged or persisted, and reach no output
    except through a release's noise.
    """
    wanted = {r.name: list(kind_of(r.kind).aggregates(r)) for r in releases}
    flat = tuple(a for aggs in wanted.values() for a in aggs)
    results: list[Any] = []
    if flat:
        results = source.backend.run(Fused(flat), source.path, source.schema)
    out: dict[str, list[Any]] = {}
    start = 0
    for name, aggs in wanted.items():
        out[name] = results[start : start + len(aggs)]
        start += len(aggs)
    return out


def compute_release(
    release: ReleasePlan, exact: Sequence[Any], source: TableSource, staging: Staging
) -> ReleaseSummary:
    """Compute one release into ``staging`` (see the module docstring)."""
    done = staging.attempt(release.name, release.composed_cost, is_dp=release.is_dp)
    if done is not None:
        return ReleaseSummary.from_json(done)
    executed = kind_of(release.kind).execute(release, exact, source, staging)
    summary = ReleaseSummary(
        name=release.name,
        kind=release.kind,
        mechanism=release.mechanism,
        cost=release.cost,
        is_dp=release.is_dp,
        sensitivity=executed.sensitivity,
        parts=release.parts,
        files=(),
        output_hash="",
        details=executed.details,
    )
    payload = summary.to_json()
    del payload["files"], payload["output_hash"]  # the staging area fills them in
    return ReleaseSummary.from_json(staging.complete(release.name, payload))
