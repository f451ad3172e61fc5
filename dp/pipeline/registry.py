"""The release kinds, in the order a run computes and reports them.

Adding a kind: write its package in :mod:`dp.pipeline.kinds` (a config model and a
:class:`~dp.pipeline.kinds.base.ReleaseKind` with ``plan``, ``scan``, ``execute`` and
``report``) and add one line to :data:`KINDS`; its config section, planning, ``dppub plan``'s
text, ledger rows, manifest, both reports and the audit follow from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from pydantic import create_model

from dppub.dp.errors import InvariantError
from dppub.dp.pipeline.config import PipelineConfig
from dppub.dp.pipeline.kinds.base import JSON, ReleaseKind, ReleaseSummary
from dppub.dp.pipeline.kinds.clustering import ClusteringKind
from dppub.dp.pipeline.kinds.contributions import ContributionsKind
from dppub.dp.pipeline.kinds.k_anonymity import KAnonymityKind
from dppub.dp.pipeline.kinds.regression import RegressionKind
from dppub.dp.pipeline.kinds.release_file import release_file_schema
from dppub.dp.pipeline.kinds.synthetic import SyntheticKind
from dppub.dp.pipeline.kinds.tables import TableKind
from dppub.dp.pipeline.kinds.workload import WorkloadKind

__all__ = [
    "KINDS",
    "AnyKind",
    "config_model",
    "kind_of",
    "read_summary",
    "registered",
    "release_schema",
]

AnyKind = ReleaseKind[Any, Any, Any]
"""A kind as the run dispatches to it: by a plan's label, its types known only to itself."""

KINDS: tuple[AnyKind, ...] = (
    KAnonymityKind(),
    WorkloadKind(),
    RegressionKind(),
    ClusteringKind(),
    TableKind(),
    SyntheticKind(),
    ContributionsKind(),
)


@cache
def _config_model(kinds: tuple[AnyKind, ...]) -> type[PipelineConfig]:
    sections: dict[str, Any] = {
        k.section: (list[k.model], []) if k.many else (k.model | None, None)  # type: ignore[name-defined]
        for k in kinds
    }
    model: type[PipelineConfig] = create_model("Config", __base__=PipelineConfig, **sections)
    return model


def config_model() -> type[PipelineConfig]:
    """The whole pipeline configuration: :class:`PipelineConfig` plus one section per kind
    of :data:`KINDS` (read when called, so a test may register a kind by replacing it)."""
    return _config_model(KINDS)


def registered() -> tuple[AnyKind, ...]:
    """The registered kinds, :data:`KINDS` as it is when called."""
    return KINDS


def kind_of(label: str) -> AnyKind:
    """The kind whose releases carry ``label`` (``workload``, ``regression``...)."""
    for k in KINDS:
        if k.label == label:
            return k
    raise InvariantError(f"no release kind {label!r}")


def read_summary(data: Mapping[str, JSON]) -> ReleaseSummary:
    """A release's summary from its ``release.json``, its result read by its kind's model."""
    return ReleaseSummary.from_json(data, kind_of(str(data.get("kind"))))


def release_schema() -> dict[str, Any]:
    """The JSON Schema of ``release.json`` for the registered kinds (committed as
    ``docs/release.schema.json``): its ``details`` are one kind's result, told by ``kind``."""
    return release_file_schema({k.label: k.result for k in KINDS})
