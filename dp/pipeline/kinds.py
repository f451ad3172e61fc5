"""What a release kind is: its plan entry, its exact aggregates, its execution, its summary.

A kind (:class:`ReleaseKind`) owns one config section and turns each item into a typed
:class:`ReleasePlan` (what it costs, which columns it reads -- no data), names the exact
aggregates it needs from the run's shared scan, and executes: draws its noise (after the
ledger recorded the draw), writes its files, and returns its :class:`ReleaseSummary`. The
ledger rows, the manifest, the report and the audit all read that one summary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from dp.budget import PlannedCost, PrivacyCost, compose
from dp.engine import Aggregate, TableSource
from dp.ledger import ReleaseRecord
from dp.pipeline.units import Bounding
from dp.publication import Staging

if TYPE_CHECKING:
    from dp.pipeline.config import PipelineConfig

__all__ = ["JSON", "Executed", "ReleaseKind", "ReleasePlan", "ReleaseSummary"]

JSON = Any
"""A JSON-ready value (str, number, bool, None, list, dict)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleasePlan:
    """One planned release: what it costs and what it reads. Known before any data is read."""

    name: str
    """Unique within the run; the release's folder name."""
    kind: str
    """The kind's label (``workload``, ``regression``, ``clustering``, ``k-anonymity``)."""
    mechanism: str
    """What the ledger and manifest record (``laplace``, ``functional-laplace``...)."""
    cost: PrivacyCost
    """The release's own (epsilon, delta); zero for a non-DP release."""
    is_dp: bool
    """False for a syntactic release (a k-anonymous table)."""
    columns: tuple[str, ...]
    """The declared columns it reads (a row missing one of them is not read)."""
    parts: tuple[PlannedCost, ...] = ()
    """Its costs as composition sees them: one per disjoint partition it spans (a trace
    regression's tasks, named ``release[label]``), or empty for one whole-table part."""
    bounding: Bounding = field(default_factory=Bounding)
    """Its privacy unit and contribution bound (default: neighbours differ by one row)."""
    spec: Any = field(default=None, compare=False, repr=False)
    """Kind-specific, immutable: what :meth:`ReleaseKind.execute` needs (axes, estimator...)."""
    facts: Mapping[str, JSON] = field(default_factory=dict)
    """Plan-time facts shown by ``dppub plan`` (e.g. the chosen method)."""

    @property
    def planned_costs(self) -> tuple[PlannedCost, ...]:
        """What composition adds up for this release (nothing for a non-DP one)."""
        if not self.is_dp:
            return ()
        return self.parts or (PlannedCost(name=self.name, cost=self.cost),)

    @property
    def composed_cost(self) -> PrivacyCost:
        """This release's own composed cost (its parts in parallel)."""
        return compose(self.planned_costs) if self.is_dp else PrivacyCost.zero()


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleaseSummary:
    """A computed release, as the ledger, the manifest, the report and the audit read it."""

    name: str
    kind: str
    mechanism: str
    cost: PrivacyCost
    is_dp: bool
    sensitivity: float | None
    """The L1 sensitivity the noise was calibrated to, where one number says it."""
    parts: tuple[PlannedCost, ...]
    files: tuple[str, ...]
    """Released files, relative to the run folder."""
    output_hash: str
    """SHA-256 of the release's files."""
    details: Mapping[str, JSON]
    """Kind-specific public facts for the report (strategy, expected error, levels...)."""
    neighbours: str = "one row"
    """The neighbouring relation its guarantee is stated for."""

    def records(self) -> list[ReleaseRecord]:
        """Its ledger rows: one, or one per disjoint partition."""
        common: dict[str, Any] = {
            "kind": self.kind,
            "mechanism": self.mechanism,
            "sensitivity": self.sensitivity,
            "is_dp": self.is_dp,
            "output_hash": self.output_hash,
            "neighbours": self.neighbours,
        }
        if not self.parts:
            return [ReleaseRecord(name=self.name, cost=self.cost, **common)]
        return [
            ReleaseRecord(name=p.name, cost=p.cost, partition=p.partition, **common)
            for p in self.parts
        ]

    def to_json(self) -> dict[str, JSON]:
        return {
            "name": self.name,
            "kind": self.kind,
            "mechanism": self.mechanism,
            "epsilon": self.cost.epsilon,
            "delta": self.cost.delta,
            "is_dp": self.is_dp,
            "sensitivity": self.sensitivity,
            "parts": [
                {
                    "name": p.name,
                    "epsilon": p.cost.epsilon,
                    "delta": p.cost.delta,
                    "partition": None if p.partition is None else list(p.partition),
                }
                for p in self.parts
            ],
            "files": list(self.files),
            "output_hash": self.output_hash,
            "neighbours": self.neighbours,
            "details": dict(self.details),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, JSON]) -> ReleaseSummary:
        return cls(
            name=data["name"],
            kind=data["kind"],
            mechanism=data["mechanism"],
            cost=PrivacyCost(epsilon=data["epsilon"], delta=data["delta"]),
            is_dp=bool(data["is_dp"]),
            sensitivity=data["sensitivity"],
            parts=tuple(
                PlannedCost(
                    name=p["name"],
                    cost=PrivacyCost(epsilon=p["epsilon"], delta=p["delta"]),
                    partition=None if p["partition"] is None else tuple(p["partition"]),
                )
                for p in data["parts"]
            ),
            files=tuple(data["files"]),
            output_hash=data["output_hash"],
            details=data["details"],
            neighbours=data.get("neighbours", "one row"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Executed:
    """What :meth:`ReleaseKind.execute` returns besides the files it wrote."""

    details: Mapping[str, JSON]
    """Public facts for the report and manifest."""
    sensitivity: float | None = None
    """The L1 sensitivity of the noise, where one number says it."""


class ReleaseKind(Protocol):
    """One kind of release (see the module docstring). Stateless; registered once."""

    section: str
    """Its config section (``workloads``)."""
    label: str
    """What its releases are called in plans, the ledger and manifests (``workload``)."""
    many: bool
    """A list of items (else a single optional object)."""
    model: type[Any]
    """The pydantic model of one item."""

    def plan(self, cfg: PipelineConfig, item: Any) -> ReleasePlan:
        """The release an item declares. Raises ConfigError for what the config gets wrong."""
        ...

    def describe(self, plan: ReleasePlan) -> Mapping[str, JSON]:
        """What ``dppub plan`` shows about it beyond its cost (data-independent)."""
        ...

    def aggregates(self, plan: ReleasePlan) -> Sequence[Aggregate[Any, Any]]:
        """The exact aggregates it needs from the run's one shared scan (may be none)."""
        ...

    def execute(
        self,
        plan: ReleasePlan,
        exact: Sequence[Any],
        data: TableSource,
        out: Staging,
    ) -> Executed:
        """Compute the release into ``out`` (the ledger has recorded its draw); ``exact`` are
        the finished :meth:`aggregates`, further passes go through ``data``'s engine. Called
        at most once per release (a completed one is reused, never recomputed)."""
        ...

    def report(self, summary: ReleaseSummary) -> list[str]:
        """Markdown lines describing the release in ``report.md``."""
        ...
