"""Executing a plan's releases: one shared scan, then each release once.

:func:`shared_scan` folds every release's exact aggregates in a single pass over the data (each
release sees the complete rows of its own columns). :func:`compute_release` then records the
release's draw in the ledger (before any noise), lets its kind compute it into the staging
folder, and returns its :class:`~dp.pipeline.kinds.ReleaseSummary`; a release that an earlier
attempt completed is returned as it was, never recomputed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dppub.dp.engine import Aggregate, Fused, TableSource
from dppub.dp.engine.unit_bounding import UnitFilter
from dppub.dp.pipeline.hooks import Hooks
from dppub.dp.pipeline.kinds import ReleasePlan, ReleaseSummary
from dppub.dp.pipeline.kinds.base import ExecuteContext
from dppub.dp.pipeline.units import Bounded, bounded_source
from dppub.dp.publication import Staging

__all__ = ["compute_release", "shared_scan"]


Filters = Mapping[tuple[str | None, ...], UnitFilter]


def shared_scan(
    releases: Sequence[ReleasePlan[Any]], source: TableSource, filters: Filters
) -> dict[str, Any]:
    """Every release's exact value (what its kind's ``scan`` assembles), by release name, from
    one pass over ``source`` (each reading only the rows its privacy unit's bound keeps).

    Exact values: they stay in memory, are never logged or persisted, and reach no output
    except through a release's noise.
    """
    wanted: dict[str, list[Aggregate[Any, Any]]] = {}
    scans = {r.name: r.release_kind.scan(r) for r in releases}
    for r in releases:
        unit = filters.get(r.bounding.key)
        wanted[r.name] = [a if unit is None else Bounded(a, unit) for a in scans[r.name].aggregates]
    flat = tuple(a for aggs in wanted.values() for a in aggs)
    results: list[Any] = []
    if flat:
        results = source.backend.run(Fused(flat), source.path, source.schema)
    out: dict[str, Any] = {}
    start = 0
    for name, aggs in wanted.items():
        out[name] = scans[name].assemble(results[start : start + len(aggs)])
        start += len(aggs)
    return out


def compute_release(
    release: ReleasePlan[Any],
    exact: object,
    source: TableSource,
    staging: Staging,
    filters: Filters,
    hooks: Hooks | None = None,
) -> ReleaseSummary:
    """Compute one release into ``staging`` (see the module docstring); its kind's
    ``execute`` receives the step's ``hooks`` (:mod:`dp.pipeline.hooks`) in its
    :class:`~dp.pipeline.kinds.base.ExecuteContext`."""
    done = staging.attempt(release.name, release.composed_cost, is_dp=release.is_dp)
    if done is not None:
        return ReleaseSummary.from_json(done, release.release_kind)
    step = hooks or Hooks()
    context = ExecuteContext(
        data=bounded_source(source, filters.get(release.bounding.key)),
        out=staging,
        progress=step.progress,
        should_stop=step.should_stop,
    )
    executed = release.release_kind.execute(release, exact, context)
    summary = ReleaseSummary(
        name=release.name,
        release_kind=release.release_kind,
        mechanism=release.mechanism,
        cost=release.cost,
        is_dp=release.is_dp,
        sensitivity=executed.sensitivity,
        parts=release.parts,
        files=(),
        output_hash="",
        result=executed.result,
        neighbours=release.bounding.neighbours,
    )
    payload = summary.to_json()
    del payload["files"], payload["output_hash"]  # the staging area fills them in
    return ReleaseSummary.from_json(staging.complete(release.name, payload), release.release_kind)
