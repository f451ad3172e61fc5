"""Pipeline configuration: YAML validated once, at the flow boundary, with pydantic.

Every DP stage declares its epsilon (and delta) here, so the plan — and its cost — is known
before any private data is read. Paths are relative to the config file's folder.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dp.budget import PlannedCost, PrivacyCost, compose
from dp.errors import ConfigError
from dp.ledger import PERIOD_FIELD, BudgetPolicy, DataIdentity
from dp.periods import Period
from dp.runs import RunPlan
from dp.schema import ColumnSpec, TableSchema
from dp.validation import check_delta, check_epsilon

__all__ = ["PipelineConfig", "PlannedRelease", "load_config", "plan_releases"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Cost(_Model):
    """An (epsilon, delta) pair, validated with the messages of :mod:`dp.validation`."""

    epsilon: float
    delta: float = 0.0

    @field_validator("epsilon")
    @classmethod
    def _eps(cls, v: float) -> float:
        return check_epsilon(v)

    @field_validator("delta")
    @classmethod
    def _delta(cls, v: float) -> float:
        return check_delta(v)


class BudgetModel(_Cost):
    """The data's lifetime budget; a period may cap spending inside it, or renew it when each
    period reads its own rows (the dataset path names ``{period}``)."""

    per: Period | None = None
    """Calendar period (UTC) for ``cap`` or ``renew``: year, quarter, month, week, day, hour,
    minute."""
    cap: _Cost | None = None
    """At most this much inside one period (the lifetime total still bounds everything)."""
    renew: bool = False
    """Each period reads disjoint rows, so each has its own budget (parallel composition)."""

    @property
    def policy(self) -> BudgetPolicy:
        return BudgetPolicy(
            total=PrivacyCost(epsilon=self.epsilon, delta=self.delta),
            per=self.per,
            cap=None
            if self.cap is None
            else PrivacyCost(epsilon=self.cap.epsilon, delta=self.cap.delta),
            renew=self.renew,
        )


class ColumnModel(_Model):
    type: Literal["int", "float", "category", "string"]
    bounds: tuple[float, float] | None = None
    categories: list[str] | None = None
    missing: str | float = "drop"
    """A null or NaN: ``drop`` the row (default) or use this value."""
    unknown: str = "drop"
    """A value outside ``categories``: ``drop`` the row (default) or map it to this category."""


class DatasetModel(_Model):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]+$")
    path: Path
    budget: BudgetModel
    columns: dict[str, ColumnModel]
    engine: Literal["pandas", "stream", "dask"] = "pandas"
    """How exact aggregates are computed: one in-memory frame (pandas), record batches
    (stream: memory bounded by the domain), or dask over the Parquet files."""
    scheduler: str | None = None
    """dask scheduler address (tcp://host:8786); omitted = a local cluster of ``workers``."""
    workers: int = Field(default=2, ge=1)
    """Worker processes of the local dask cluster started when no ``scheduler`` is given."""
    batch_size: int | None = Field(default=None, ge=1)
    """Rows per record batch for the stream and dask engines (default 2^20)."""


class HierarchyModel(_Model):
    """Exactly one of: ``bands`` (int columns), ``prefix_mask``, ``levels``, ``file``."""

    bands: list[int] | None = None
    prefix_mask: int | None = Field(default=None, ge=1)
    """Fixed-length codes masked one trailing character per level; the value is the length."""
    levels: dict[str, list[str]] | None = None
    file: Path | None = None
    sep: str = ";"

    @field_validator("prefix_mask", mode="before")
    @classmethod
    def _length(cls, v: object) -> object:
        if isinstance(v, bool):
            raise ValueError("prefix_mask is the code length, e.g. prefix_mask: 6")
        return v

    @model_validator(mode="after")
    def _exactly_one(self) -> HierarchyModel:
        given = [k for k in ("bands", "prefix_mask", "levels", "file") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(f"give exactly one of bands, prefix_mask, levels, file; got {given}")
        return self


class DPStage(_Cost):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]+$")


class AnonymizeModel(_Model):
    name: str = Field(default="k_anonymous_table", pattern=r"^[A-Za-z0-9_-]+$")
    quasi_identifiers: list[str] = Field(min_length=1)
    k: int = Field(ge=1)
    max_suppression: float = Field(default=0.0, ge=0.0, le=1.0)
    metric: Literal["loss", "dm", "dm_star", "entropy"] = "loss"
    include: list[str] = []
    """Further columns released unchanged beside the generalized quasi-identifiers."""
    publish: bool = True


class AxisModel(_Model):
    """One histogram axis: bins of a numeric column, categories, or a fixed hierarchy level."""

    column: str
    bins: int | None = Field(default=None, ge=1)
    level: int | None = Field(default=None, ge=0)


class WorkloadModel(DPStage):
    attributes: list[AxisModel] = Field(min_length=1)
    workload: Literal["identity", "total", "prefix", "all_range", "marginals"] = "identity"
    marginal_k: int = Field(default=1, ge=1)
    strategy: Literal["auto", "identity", "hierarchical"] = "auto"
    reconstruction: Literal["nonneg-l1", "least-squares", "l1"] = "nonneg-l1"


class RegressionModel(DPStage):
    """A DP regression. Feature (and numeric target) bounds come from the declared columns."""

    target: str
    features: list[str] = Field(min_length=1)
    model: Literal["linear", "logistic", "trace"] = "linear"
    method: Literal["functional", "adassp", "objective"] | None = None
    """linear: functional (default, pure epsilon) or adassp (Gaussian, needs delta > 0);
    logistic: objective (default) or functional; trace: functional."""
    fit_intercept: bool = True
    positive: str | None = None
    """logistic with a category target: the category that is class 1."""
    threshold: float | None = None
    """logistic with a numeric target: values above it are class 1."""
    tasks: str | None = None
    """trace: the category column naming each row's task (tasks are disjoint partitions)."""

    @model_validator(mode="after")
    def _method_fits_model(self) -> RegressionModel:
        allowed = {
            "linear": ("functional", "adassp"),
            "logistic": ("objective", "functional"),
            "trace": ("functional",),
        }[self.model]
        if self.method is not None and self.method not in allowed:
            raise ValueError(f"a {self.model} regression's method must be one of {list(allowed)}")
        if self.method == "adassp" and self.delta <= 0:
            raise ValueError("method adassp adds Gaussian noise and needs delta > 0")
        if self.resolved_method != "adassp" and self.delta > 0:
            raise ValueError(f"the {self.resolved_method} method is pure epsilon-DP; set delta 0")
        if self.model == "logistic" and (self.positive is None) == (self.threshold is None):
            raise ValueError("a logistic regression needs exactly one of positive, threshold")
        if self.model == "trace" and self.tasks is None:
            raise ValueError("a trace regression needs 'tasks', a category column")
        return self

    @property
    def resolved_method(self) -> str:
        default = {"linear": "functional", "logistic": "objective", "trace": "functional"}
        return self.method or default[self.model]


class ClusteringModel(DPStage):
    """DP k-means (DP Lloyd) over declared numeric features."""

    features: list[str] = Field(min_length=1)
    k: int = Field(ge=1)
    iterations: int = Field(default=5, ge=1)


class ScheduleModel(_Model):
    cron: str | None = None
    interval_seconds: float | None = Field(default=None, gt=0)
    timezone: str = "UTC"

    @model_validator(mode="after")
    def _one(self) -> ScheduleModel:
        if (self.cron is None) == (self.interval_seconds is None):
            raise ValueError("a schedule needs exactly one of cron, interval_seconds")
        return self


class PipelineConfig(_Model):
    dataset: DatasetModel
    hierarchies: dict[str, HierarchyModel] = {}
    anonymize: AnonymizeModel | None = None
    workloads: list[WorkloadModel] = []
    regressions: list[RegressionModel] = []
    clustering: list[ClusteringModel] = []
    schedule: ScheduleModel | None = None
    base_dir: Path = Path(".")
    """Folder of the config file; relative paths resolve against it (set by the loader)."""
    leaves: dict[str, list[str]] = {}
    """Leaves of text columns' declared hierarchies (set by the loader from the hierarchies)."""

    @model_validator(mode="after")
    def _cross_checks(self) -> PipelineConfig:
        cols = self.dataset.columns
        names = [s.name for s in (*self.workloads, *self.regressions, *self.clustering)]
        if self.anonymize is not None and self.anonymize.publish:
            names.append(self.anonymize.name)
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"release names must be unique, got {dupes} more than once")
        if not (self.workloads or self.regressions or self.clustering or self.anonymize):
            raise ValueError("the config declares no release")
        budget = self.dataset.budget
        try:
            budget.policy  # noqa: B018 -- validates per, cap and renew together
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        if budget.renew != (PERIOD_FIELD in str(self.dataset.path)):
            raise ValueError(
                f"dataset.path must name {PERIOD_FIELD} exactly when the budget renews: each "
                "period then reads its own rows"
            )
        if budget.delta == 0.0:
            with_delta = [s.name for s in (*self.workloads, *self.regressions) if s.delta > 0]
            if with_delta:
                raise ValueError(
                    f"release {with_delta[0]!r} declares delta > 0 but the dataset's budget has "
                    "delta 0"
                )
        used = [a.column for w in self.workloads for a in w.attributes]
        used += [c for r in self.regressions for c in (r.target, *r.features)]
        used += [r.tasks for r in self.regressions if r.tasks is not None]
        used += [c for k in self.clustering for c in k.features]
        used += list(self.hierarchies)
        if self.anonymize is not None:
            used += [*self.anonymize.quasi_identifiers, *self.anonymize.include]
            missing_h = [q for q in self.anonymize.quasi_identifiers if q not in self.hierarchies]
            if missing_h:
                raise ValueError(f"quasi-identifiers without a hierarchy: {missing_h}")
        undeclared = sorted({c for c in used if c not in cols})
        if undeclared:
            raise ValueError(f"columns used but not declared in dataset.columns: {undeclared}")
        for r in self.regressions:
            if r.tasks is not None and not cols[r.tasks].categories:
                raise ValueError(
                    f"regression {r.name!r}: tasks column {r.tasks!r} needs categories"
                )
            cats = cols[r.target].categories
            if r.positive is not None and (not cats or r.positive not in cats):
                raise ValueError(
                    f"regression {r.name!r}: positive {r.positive!r} is not a category of "
                    f"{r.target!r}"
                )
        for w in self.workloads:
            for a in w.attributes:
                if a.level is not None and a.column not in self.hierarchies:
                    raise ValueError(
                        f"workload {w.name!r}: {a.column!r} has a level but no hierarchy"
                    )
        return self

    @property
    def schema(self) -> TableSchema:
        """The declared columns; a text column whose hierarchy declares its leaves is read as a
        category column over those leaves (so its undeclared values meet the same policy)."""
        specs = []
        for n, c in self.dataset.columns.items():
            cats = c.categories if c.categories is not None else self.leaves.get(n)
            h = self.hierarchies.get(n)
            length = h.prefix_mask if h is not None and cats is None else None
            specs.append(
                ColumnSpec(
                    name=n,
                    type="category" if cats is not None and c.type == "string" else c.type,
                    bounds=c.bounds,
                    categories=None if cats is None else tuple(cats),
                    missing=c.missing,
                    unknown=c.unknown,
                    length=length,
                )
            )
        return TableSchema(columns=tuple(specs))

    @property
    def budget(self) -> PrivacyCost:
        return PrivacyCost(epsilon=self.dataset.budget.epsilon, delta=self.dataset.budget.delta)

    @property
    def used_columns(self) -> list[str]:
        """The declared columns some stage reads, in first-use order (the only ones read)."""
        used: list[str] = []
        if self.anonymize is not None:
            used += [*self.anonymize.quasi_identifiers, *self.anonymize.include]
        used += [a.column for w in self.workloads for a in w.attributes]
        for r in self.regressions:
            used += [*r.features, r.target, *([r.tasks] if r.tasks else [])]
        used += [c for k in self.clustering for c in k.features]
        return list(dict.fromkeys(used))

    def period(self) -> str:
        """The calendar period a run starting now is charged to (``all`` without ``per``)."""
        return self.budget_policy.period()

    @property
    def budget_policy(self) -> BudgetPolicy:
        return self.dataset.budget.policy

    @property
    def data_identity(self) -> DataIdentity:
        """The data the budget is tied to: its name and resolved source (``{period}`` kept)."""
        return DataIdentity(name=self.dataset.name, source=str(self.resolve(self.dataset.path)))

    def data_path(self, period: str | None = None) -> Path:
        """The file or folder a run in ``period`` (default: the current one) reads."""
        text = str(self.resolve(self.dataset.path))
        return Path(text.replace(PERIOD_FIELD, period or self.period()))

    def run_plan(self, total: PrivacyCost) -> RunPlan:
        """What the ledger checks before the run reads any data."""
        return RunPlan(
            data=self.data_identity,
            policy=self.budget_policy,
            cost=total,
            config_hash=self.config_hash,
        )

    def resolve(self, path: Path) -> Path:
        return path if path.is_absolute() else (self.base_dir / path).resolve()

    @property
    def config_hash(self) -> str:
        """Hash of what the config releases; how aggregates are computed is not part of it."""
        payload = self.model_dump(
            mode="json",
            exclude={
                "base_dir": True,
                "leaves": True,
                "dataset": {"engine", "scheduler", "workers", "batch_size"},
            },
        )
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class PlannedRelease(_Model):
    """A release the run will make, with its declared cost."""

    name: str
    kind: Literal["workload", "regression", "clustering", "k-anonymity"]
    mechanism: str
    epsilon: float
    delta: float
    is_dp: bool

    @property
    def cost(self) -> PrivacyCost:
        return PrivacyCost(epsilon=self.epsilon, delta=self.delta)


def plan_releases(cfg: PipelineConfig) -> tuple[list[PlannedRelease], PrivacyCost]:
    """The run's releases and their composed DP cost (reads no data)."""
    plan: list[PlannedRelease] = []
    if cfg.anonymize is not None and cfg.anonymize.publish:
        plan.append(
            PlannedRelease(
                name=cfg.anonymize.name,
                kind="k-anonymity",
                mechanism="generalization",
                epsilon=0.0,
                delta=0.0,
                is_dp=False,
            )
        )
    for w in cfg.workloads:
        plan.append(
            PlannedRelease(
                name=w.name,
                kind="workload",
                mechanism="laplace",
                epsilon=w.epsilon,
                delta=w.delta,
                is_dp=True,
            )
        )
    costs = [PlannedCost(name=p.name, cost=p.cost) for p in plan if p.is_dp]
    for r in cfg.regressions:
        release = PlannedRelease(
            name=r.name,
            kind="regression",
            mechanism=regression_mechanism(r),
            epsilon=r.epsilon,
            delta=r.delta,
            is_dp=True,
        )
        plan.append(release)
        costs += (
            task_costs(cfg, r)
            if r.model == "trace"
            else [PlannedCost(name=r.name, cost=release.cost)]
        )
    for k in cfg.clustering:
        plan.append(
            PlannedRelease(
                name=k.name,
                kind="clustering",
                mechanism="dp-lloyd-laplace",
                epsilon=k.epsilon,
                delta=0.0,
                is_dp=True,
            )
        )
        costs.append(PlannedCost(name=k.name, cost=plan[-1].cost))
    return plan, compose(costs)


def regression_mechanism(r: RegressionModel) -> str:
    """The mechanism label recorded in the ledger and manifest."""
    return {
        "functional": "functional-laplace",
        "adassp": "adassp-gaussian",
        "objective": "objective-perturbation",
    }[r.resolved_method]


def task_costs(cfg: PipelineConfig, r: RegressionModel) -> list[PlannedCost]:
    """A trace regression's cost per task: disjoint row partitions by the task column."""
    column = r.tasks or ""
    labels = cfg.dataset.columns[column].categories or []
    cost = PrivacyCost(epsilon=r.epsilon, delta=r.delta)
    return [PlannedCost(name=f"{r.name}[{t}]", cost=cost, partition=(column, t)) for t in labels]


def _format_validation(path: Path, exc: ValidationError) -> str:
    first = exc.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
    msg = str(first["msg"]).removeprefix("Value error, ")
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{path}: {loc}: {msg}{more}"


def load_config(path: str | Path) -> PipelineConfig:
    """Read and validate a pipeline config; raise :class:`ConfigError` with one clear line."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config {p}: {exc.strerror or exc}") from None
    try:
        raw: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"{p}:{where}: YAML error: {problem}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{p}: the config must be a YAML mapping")
    raw.pop("leaves", None)
    try:
        cfg = PipelineConfig.model_validate({**raw, "base_dir": p.resolve().parent})
    except ValidationError as exc:
        raise ConfigError(_format_validation(p, exc)) from None
    from flows.stages import checked_leaves  # builds the hierarchies: after validation

    leaves = checked_leaves(cfg)
    try:
        cfg.schema  # noqa: B018 -- the value policies are checked against the domains
    except ConfigError as exc:
        raise ConfigError(f"{p}: {exc}") from None
    return cfg.model_copy(update={"leaves": leaves}) if leaves else cfg
