"""The release kinds, in the order a run computes and reports them.

Adding a kind: write its module (a config model and a :class:`~dp.pipeline.kinds.ReleaseKind`
with ``plan``, ``aggregates``, ``execute`` and ``report``) and add one line to :data:`KINDS`;
its config section, planning, ledger rows, manifest and report follow from here.
"""

from __future__ import annotations

from typing import Any

from pydantic import create_model

from dp.errors import InvariantError
from dp.pipeline.anonymity import AnonymityKind
from dp.pipeline.clustering import ClusteringKind
from dp.pipeline.config import PipelineConfig
from dp.pipeline.kinds import ReleaseKind
from dp.pipeline.regressions import RegressionKind
from dp.pipeline.workloads import WorkloadKind

__all__ = ["KINDS", "Config", "kind_of"]

KINDS: tuple[ReleaseKind, ...] = (
    AnonymityKind(),
    WorkloadKind(),
    RegressionKind(),
    ClusteringKind(),
)


def _sections() -> dict[str, Any]:
    return {
        k.section: (list[k.model], []) if k.many else (k.model | None, None)  # type: ignore[name-defined]
        for k in KINDS
    }


Config: type[PipelineConfig] = create_model("Config", __base__=PipelineConfig, **_sections())
"""The whole pipeline configuration: :class:`PipelineConfig` plus one section per kind."""

_BY_LABEL = {k.label: k for k in KINDS}


def kind_of(label: str) -> ReleaseKind:
    """The kind whose releases carry ``label`` (``workload``, ``regression``...)."""
    try:
        return _BY_LABEL[label]
    except KeyError:
        raise InvariantError(f"no release kind {label!r}") from None
