"""The release kinds, in the order a run computes and reports them.

Adding a kind: write its module in :mod:`dp.pipeline.kinds` (a config model and a
:class:`~dp.pipeline.kinds.base.ReleaseKind` with ``plan``, ``scan``, ``execute`` and
``report``) and add one line to :data:`KINDS`; its config section, planning, ``dppub plan``'s
text, ledger rows, manifest, both reports and the audit follow from here.
"""

from __future__ import annotations

from typing import Any

from pydantic import create_model

from dp.errors import InvariantError
from dp.pipeline.config import PipelineConfig
from dp.pipeline.kinds.base import ReleaseKind
from dp.pipeline.kinds.clustering import ClusteringKind
from dp.pipeline.kinds.k_anonymity import KAnonymityKind
from dp.pipeline.kinds.regression import RegressionKind
from dp.pipeline.kinds.workload import WorkloadKind

__all__ = ["KINDS", "AnyKind", "Config", "kind_of"]

AnyKind = ReleaseKind[Any, Any, Any]
"""A kind as the run dispatches to it: by a plan's label, its types known only to itself."""

KINDS: tuple[AnyKind, ...] = (
    KAnonymityKind(),
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


def kind_of(label: str) -> AnyKind:
    """The kind whose releases carry ``label`` (``workload``, ``regression``...)."""
    try:
        return _BY_LABEL[label]
    except KeyError:
        raise InvariantError(f"no release kind {label!r}") from None
