"""The contract of a release kind: its plan, its exact aggregates, its execution, its summary.

A kind (:class:`ReleaseKind`, generic over its config item, its plan's spec and its exact
aggregates) owns one config section and turns each item into a typed
:class:`ReleasePlan` (what it costs, which columns it reads, its frozen spec -- no data), names
the exact aggregates it needs from the run's shared scan (:class:`Scan`), and executes: draws
its noise (after the ledger recorded the draw), writes its files, and returns what it computed
(:class:`Executed`: its typed :class:`Result`, a pydantic model per kind). The ledger rows,
the manifest, both reports and the audit read the one :class:`ReleaseSummary` built from it,
which carries its kind and its typed result; the kind words its own part of them (``dppub
plan``'s text, its ``report.md`` lines and results, its plot in ``report.html``, its
guarantee).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Never, Protocol, TypeVar, cast

from dppub.dp.budget import PlannedCost, PrivacyCost, compose
from dppub.dp.engine import TableSource
from dppub.dp.engine.batches import Batch
from dppub.dp.errors import InvariantError
from dppub.dp.ledger import ReleaseRecord
from dppub.dp.pipeline.kinds.json_values import JSON, as_object, as_str, as_strs
from dppub.dp.pipeline.kinds.plan_facts import PlanFacts, facts_as
from dppub.dp.pipeline.kinds.previews import Preview, preview_lines
from dppub.dp.pipeline.kinds.release_file import PartFile, ReleaseFile, Result
from dppub.dp.pipeline.units import Bounding
from dppub.dp.publication import Staging

if TYPE_CHECKING:
    from dppub.dp.pipeline.config import Model, PipelineConfig
    from dppub.dp.pipeline.html.sections import Section

__all__ = [
    "JSON",
    "EstimatorSpec",
    "ExecuteContext",
    "Executed",
    "PlanFacts",
    "ReleaseKind",
    "ReleasePlan",
    "ReleaseSummary",
    "Result",
    "Scan",
    "ScanAggregate",
    "as_object",
    "as_str",
    "as_strs",
    "facts_as",
    "scan_each",
    "scan_one",
]

ItemT = TypeVar("ItemT", bound="Model")
SpecT = TypeVar("SpecT")
ExactT = TypeVar("ExactT")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)
EstimatorT = TypeVar("EstimatorT")
ResultT = TypeVar("ResultT", bound=Result)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleasePlan(Generic[SpecT]):
    """One planned release: what it costs and what it reads. Known before any data is read."""

    name: str
    """Unique within the run; the release's folder name."""
    release_kind: ReleaseKind[Any, SpecT, Any]
    """The kind that planned it, and plans, scans, executes and reports it: carried, never
    looked up by label."""
    mechanism: str
    """What the ledger and manifest record (``laplace``, ``functional-laplace``...)."""
    cost: PrivacyCost
    """The release's own (epsilon, delta); zero for a non-DP release."""
    is_dp: bool
    """False for a syntactic release (a k-anonymous table)."""
    columns: tuple[str, ...]
    """The declared columns it reads (a row missing one of them is not read)."""
    parts: tuple[PlannedCost, ...] = ()
    """Its costs as composition sees them, one ledger row each: one per disjoint partition it
    spans (a trace regression's tasks, named ``release[label]``), or one per table of a group
    measured together (a joint group's, whole-table parts: they add up); empty for one
    whole-table part."""
    bounding: Bounding = field(default_factory=Bounding)
    """Its privacy unit and contribution bound (default: neighbours differ by one row)."""
    spec: SpecT = field(compare=False, repr=False)
    """Kind-specific, frozen: what :meth:`ReleaseKind.execute` needs (axes, estimator...)."""

    @property
    def kind(self) -> str:
        """Its kind's label (``workload``, ``regression``, ``k-anonymity``...), as plans, the
        ledger and manifests name it."""
        return self.release_kind.label

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


@dataclass(frozen=True, kw_only=True, eq=False)  # no slots: built through a generic alias
class EstimatorSpec(Generic[ItemT, EstimatorT]):
    """A model kind's spec: the item and its configured estimator. An estimator is never
    fitted in place (its fit returns a frozen result), so the plan (cached, shared by retries)
    never changes and every execution fits the same estimator."""

    item: ItemT
    estimator: EstimatorT


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleaseSummary:
    """A computed release, as the ledger, the manifest, the report and the audit read it."""

    name: str
    release_kind: ReleaseKind[Any, Any, Any]
    """The kind that computed it, and reports it: carried, never looked up by label."""
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
    result: Result
    """Its kind's typed result: public facts for the report (strategy, expected error...),
    ``release.json``'s ``details``."""
    neighbours: str = "one row"
    """The neighbouring relation its guarantee is stated for."""

    @property
    def kind(self) -> str:
        """Its kind's label, as plans, the ledger and manifests name it."""
        return self.release_kind.label

    def result_as(self, model: type[ResultT]) -> ResultT:
        """Its result as the kind's own model (what the kind reads it as)."""
        if not isinstance(self.result, model):
            raise InvariantError(
                f"release {self.name!r} has a {type(self.result).__name__}, not a {model.__name__}"
            )
        return self.result

    def records(self) -> list[ReleaseRecord]:
        """Its ledger rows: one, or one per part (:attr:`ReleasePlan.parts`)."""
        parts = self.parts or (PlannedCost(name=self.name, cost=self.cost),)
        return [
            ReleaseRecord(
                name=p.name,
                cost=p.cost,
                partition=p.partition,
                kind=self.kind,
                mechanism=self.mechanism,
                sensitivity=self.sensitivity,
                is_dp=self.is_dp,
                output_hash=self.output_hash,
                neighbours=self.neighbours,
            )
            for p in parts
        ]

    def to_json(self) -> dict[str, JSON]:
        """Its ``release.json`` (:class:`~dp.pipeline.kinds.release_file.ReleaseFile`)."""
        file = ReleaseFile[Result](
            name=self.name,
            kind=self.kind,
            mechanism=self.mechanism,
            epsilon=self.cost.epsilon,
            delta=self.cost.delta,
            is_dp=self.is_dp,
            sensitivity=self.sensitivity,
            parts=[
                PartFile(
                    name=p.name, epsilon=p.cost.epsilon, delta=p.cost.delta, partition=p.partition
                )
                for p in self.parts
            ],
            files=list(self.files),
            output_hash=self.output_hash,
            neighbours=self.neighbours,
            details=self.result,
        )
        return cast(dict[str, JSON], file.model_dump(mode="json"))

    @classmethod
    def from_json(
        cls, data: Mapping[str, JSON], release_kind: ReleaseKind[Any, Any, Any]
    ) -> ReleaseSummary:
        """A summary read back from its ``release.json``, checked against its model (its
        ``details`` against ``release_kind``'s result)."""
        file = ReleaseFile[release_kind.result].model_validate(data)  # type: ignore[name-defined]
        if file.kind != release_kind.label:
            raise InvariantError(
                f"release {file.name!r} is a {file.kind}, not a {release_kind.label}"
            )
        return cls(
            name=file.name,
            release_kind=release_kind,
            mechanism=file.mechanism,
            cost=PrivacyCost(epsilon=file.epsilon, delta=file.delta),
            is_dp=file.is_dp,
            sensitivity=file.sensitivity,
            parts=tuple(
                PlannedCost(
                    name=p.name,
                    cost=PrivacyCost(epsilon=p.epsilon, delta=p.delta),
                    partition=p.partition,
                )
                for p in file.parts
            ),
            files=tuple(file.files),
            output_hash=file.output_hash,
            result=file.details,
            neighbours=file.neighbours,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Executed:
    """What :meth:`ReleaseKind.execute` returns besides the files it wrote."""

    result: Result
    """Public facts for the report and manifest: the kind's typed result."""
    sensitivity: float | None = None
    """The L1 sensitivity of the noise, where one number says it."""


def _quiet(_line: str) -> None:
    return None


def _never() -> bool:
    return False


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecuteContext:
    """Everything :meth:`ReleaseKind.execute` works with besides its plan and its exact
    aggregates, given explicitly by the step computing the release."""

    data: TableSource
    """The release's rows (its unit bounding applied), for passes beyond the shared scan."""
    out: Staging
    """The run's staging folder: the release writes its files there."""
    progress: Callable[[str], None] = _quiet
    """Logs one line of progress. Public values only (a round's number, a share of the
    budget): never a count, a value or anything else computed from the data."""
    should_stop: Callable[[], bool] = _never
    """True once the run was interrupted: stop at the next safe point and raise
    :class:`~dp.errors.Stopped` (what was drawn stays charged)."""


class ScanAggregate(Protocol[R_co]):
    """An engine aggregate (:class:`dp.engine.Aggregate`) as a kind hands it to the shared
    scan: it reads some columns and finishes to an ``R_co``. Its accumulator is the engine's
    business: where one goes, this says ``Never`` (nobody outside the engine can make one), so
    every ``Aggregate[P, R]``, whatever its ``P``, is a ``ScanAggregate[R]``."""

    @property
    def columns(self) -> tuple[str, ...]: ...

    def empty(self) -> object: ...

    def update(self, acc: Never, batch: Batch) -> object: ...

    def merge(self, left: Never, right: Never) -> object: ...

    def finish(self, acc: Never) -> R_co: ...


@dataclass(frozen=True, slots=True)
class Scan(Generic[ExactT]):
    """What a release needs from the run's one shared scan: engine aggregates, and how their
    finished results (in the same order) make the kind's typed exact value."""

    aggregates: tuple[ScanAggregate[object], ...]
    """Engine aggregates, whatever their accumulators."""
    assemble: Callable[[Sequence[object]], ExactT]
    """The finished results -> what :meth:`ReleaseKind.execute` receives."""


def scan_one(aggregate: ScanAggregate[R]) -> Scan[R]:
    """One aggregate; the kind receives its finished result."""
    return Scan((aggregate,), lambda results: cast(R, results[0]))


def scan_each(aggregates: Sequence[ScanAggregate[R]]) -> Scan[tuple[R, ...]]:
    """Aggregates of one result type (maybe none); the kind receives their results in order."""
    return Scan(tuple(aggregates), lambda results: tuple(cast(R, r) for r in results))


class ReleaseKind(Generic[ItemT, SpecT, ExactT]):
    """One kind of release (see the module docstring). Stateless; registered once in
    :data:`dp.pipeline.registry.KINDS`. A subclass sets the five attributes and implements
    :meth:`plan`, :meth:`scan`, :meth:`execute` and :meth:`report`; the rest have defaults."""

    section: str
    """Its config section (``workloads``)."""
    label: str
    """What its releases are called in plans, the ledger and manifests (``workload``)."""
    many: bool
    """A list of items (else a single optional object)."""
    model: type[ItemT]
    """The pydantic model of one item."""
    result: type[Result]
    """The pydantic model of its releases' results (``release.json``'s ``details``)."""
    facts: type[PlanFacts] = PlanFacts
    """The pydantic model of what ``dppub plan`` shows of its releases (:meth:`describe`)."""
    previews: tuple[Preview, ...] = ()
    """The published CSV files whose first rows ``report.md`` shows (:meth:`results`)."""
    plots: str | None = None
    """The function of its package's ``plot`` module that draws its section of
    ``report.html`` (:meth:`plot`), or None for none."""

    def __eq__(self, other: object) -> bool:
        # Stateless: every instance of a kind is the same kind (a plan sent to a worker and
        # back carries a copy).
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))

    def plan(self, cfg: PipelineConfig, item: ItemT) -> ReleasePlan[SpecT]:
        """The release an item declares. Raises ConfigError for what the config gets wrong."""
        raise NotImplementedError

    def plan_section(self, cfg: PipelineConfig, items: Sequence[ItemT]) -> list[ReleasePlan[SpecT]]:
        """The releases its section's published ``items`` declare, in order: by default one
        per item (:meth:`plan`); a kind may plan several items as one release (a joint group
        of tables)."""
        return [self.plan(cfg, item) for item in items]

    def scan(self, plan: ReleasePlan[SpecT]) -> Scan[ExactT]:
        """The exact aggregates it needs from the run's one shared scan (may be none)."""
        raise NotImplementedError

    def execute(self, plan: ReleasePlan[SpecT], exact: ExactT, context: ExecuteContext) -> Executed:
        """Compute the release into ``context.out`` (the ledger has recorded its draw);
        ``exact`` is what :meth:`scan` assembled, further passes go through
        ``context.data``'s engine. Called at most once per release (a completed one is reused,
        never recomputed)."""
        raise NotImplementedError

    def report(self, summary: ReleaseSummary) -> list[str]:
        """Markdown lines describing the release in ``report.md``."""
        raise NotImplementedError

    def results(self, summary: ReleaseSummary, folder: Path) -> list[str]:
        """Markdown lines showing its results in ``report.md`` (``report.html`` has its plot's
        tables), from its files published in ``folder`` (the run folder): by default, its
        :attr:`previews`."""
        return preview_lines(summary.name, folder, self.previews)

    def describe(self, plan: ReleasePlan[SpecT]) -> PlanFacts:
        """What ``dppub plan`` shows about it beyond its cost (data-independent): its
        :attr:`facts` model, whose JSON ``dppub plan --json`` writes. By default, nothing."""
        return PlanFacts()

    def plan_text(self, facts: PlanFacts) -> str:
        """What ``dppub plan`` prints after a release's cost, from :meth:`describe`'s facts
        (the kind's :attr:`facts` model: :func:`facts_as` reads them as it)."""
        return ""

    def guarantee(self, summary: ReleaseSummary) -> str:
        """The guarantee column of the budget table."""
        return "differential privacy" if summary.is_dp else "syntactic (not DP)"

    def not_covered(self, summary: ReleaseSummary) -> str:
        """For a release the DP guarantee does not cover: why, in one sentence."""
        return "a syntactic release; it is not protected by the DP guarantee."

    def plot(self, summary: ReleaseSummary, folder: Path) -> Section:
        """Its plots and tables in ``report.html``, from its files published in ``folder``
        (the run folder): by default, :attr:`plots` of its package's ``plot`` module called
        with the summary, its typed result and ``folder``, imported only now (it imports
        matplotlib, which a run that draws no report never loads)."""
        from dppub.dp.pipeline.html.sections import Section

        if self.plots is None:
            return Section()
        package = type(self).__module__.rpartition(".")[0]
        draw = getattr(import_module(f"{package}.plot"), self.plots)
        section: Section = draw(summary, summary.result_as(self.result), folder)
        return section
