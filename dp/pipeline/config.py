"""The pipeline configuration: YAML validated once (pydantic), before any ledger or data.

The dataset, its columns, hierarchies, budget and schedule are declared here; each release
kind contributes its own section (``workloads:``, ``regressions:``...) and its own model, so
:class:`PipelineConfig` is assembled from the registry (:mod:`dp.pipeline.registry`). Paths
are relative to the config file's folder.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dp.budget import PrivacyCost
from dp.errors import ConfigError
from dp.ledger import PERIOD_FIELD, BudgetPolicy, DataIdentity
from dp.periods import Period
from dp.schema import ColumnSpec, TableSchema
from dp.validation import check_delta, check_epsilon

__all__ = [
    "NAME_PATTERN",
    "BudgetModel",
    "ColumnModel",
    "Cost",
    "DatasetModel",
    "HierarchyModel",
    "Model",
    "PipelineConfig",
    "ScheduleModel",
]

NAME_PATTERN = r"^[A-Za-z0-9_-]+$"
"""Dataset and release names become folder names."""


class Model(BaseModel):
    """Frozen, and unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Cost(Model):
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

    @property
    def cost(self) -> PrivacyCost:
        return PrivacyCost(epsilon=self.epsilon, delta=self.delta)


class BudgetModel(Cost):
    """The data's lifetime budget; a period may cap spending inside it, or renew it when each
    period reads its own rows (the dataset path names ``{period}``)."""

    per: Period | None = None
    """Calendar period (UTC) for ``cap`` or ``renew``: year, quarter, month, week, day, hour,
    minute."""
    cap: Cost | None = None
    """At most this much inside one period (the lifetime total still bounds everything)."""
    renew: bool = False
    """Each period reads disjoint rows, so each has its own budget (parallel composition)."""

    @property
    def policy(self) -> BudgetPolicy:
        return BudgetPolicy(
            total=self.cost,
            per=self.per,
            cap=None if self.cap is None else self.cap.cost,
            renew=self.renew,
        )


class ColumnModel(Model):
    type: Literal["int", "float", "category", "string"]
    bounds: tuple[float, float] | None = None
    categories: list[str] | None = None
    missing: str | float = "drop"
    """A null or NaN: ``drop`` the row (default) or use this value."""
    unknown: str = "drop"
    """A value outside ``categories``: ``drop`` the row (default) or map it to this category."""


class DatasetModel(Model):
    name: str = Field(pattern=NAME_PATTERN)
    path: Path
    budget: BudgetModel
    columns: dict[str, ColumnModel]
    engine: Literal["auto", "memory", "pandas", "stream", "dask"] = "auto"
    """How exact aggregates are computed: ``memory`` (the run's columns held as validated
    batches; ``pandas`` is an alias), ``stream`` (record batches: memory bounded by the
    domain), ``dask`` (one task per Parquet file), or ``auto`` (memory when it fits)."""
    memory_budget_mb: float | None = Field(default=None, gt=0)
    """``auto`` holds the data in memory when it needs at most this (default 1024 MiB, or the
    ``DPPUB_MEMORY_BUDGET_MB`` environment variable)."""
    scheduler: str | None = None
    """dask scheduler address (tcp://host:8786); omitted = a local cluster of ``workers``."""
    workers: int = Field(default=2, ge=1, le=64)
    """Parallelism: the memory and stream engines read and fold this many Parquet files at
    once (one thread each; memory grows with it); the dask engine starts this many worker
    processes when no ``scheduler`` is given. Results never depend on it."""
    batch_size: int | None = Field(default=None, ge=1)
    """Rows per record batch for the stream and dask engines (default 2^20)."""
    privacy_unit: str | None = None
    """The column naming each row's unit (a person, a household): neighbours then differ by
    all rows of one unit. Omitted: by one row."""
    max_rows_per_unit: int | None = Field(default=None, ge=1, le=1_000_000)
    """With a privacy unit: at most this many rows of a unit are read by any release."""
    max_partitions_per_unit: int = Field(default=1, ge=1, le=1_000_000)
    """With a privacy unit: at most this many partitions (a trace regression's tasks) of a
    unit are read by a partitioned release."""

    @model_validator(mode="after")
    def _unit(self) -> DatasetModel:
        if self.privacy_unit is None and self.max_rows_per_unit is not None:
            raise ValueError("max_rows_per_unit needs a privacy_unit")
        if self.privacy_unit is not None:
            if self.privacy_unit not in self.columns:
                raise ValueError(f"privacy_unit {self.privacy_unit!r} is not a declared column")
            if self.max_rows_per_unit is None:
                raise ValueError("a privacy_unit needs max_rows_per_unit (the bound on its rows)")
        return self


class HierarchyModel(Model):
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


class ScheduleModel(Model):
    cron: str | None = None
    interval_seconds: float | None = Field(default=None, gt=0)
    timezone: str = "UTC"

    @model_validator(mode="after")
    def _one(self) -> ScheduleModel:
        if (self.cron is None) == (self.interval_seconds is None):
            raise ValueError("a schedule needs exactly one of cron, interval_seconds")
        return self


class PipelineConfig(Model):
    """The dataset, its domains, its budget and schedule; the release sections are added to a
    subclass from the registry (:func:`dp.pipeline.registry.config_model`)."""

    dataset: DatasetModel
    hierarchies: dict[str, HierarchyModel] = {}
    schedule: ScheduleModel | None = None
    ledger: str | None = Field(default=None, min_length=1)
    """The dataset's budget ledger: a SQLite file (relative to the config file) or a
    ``postgresql://`` URL; by default ``ledger.sqlite`` beside the config file, whoever runs it
    (see :attr:`ledger_location`)."""
    base_dir: Path = Path(".")
    """Folder of the config file; relative paths resolve against it (set by the loader)."""
    leaves: dict[str, list[str]] = {}
    """Leaves of text columns' declared hierarchies (set by the loader from the hierarchies)."""

    @model_validator(mode="after")
    def _budget_rules(self) -> PipelineConfig:
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
        undeclared = sorted(c for c in self.hierarchies if c not in self.dataset.columns)
        if undeclared:
            raise ValueError(
                f"hierarchies of columns not declared in dataset.columns: {undeclared}"
            )
        return self

    def section(self, name: str) -> list[Any]:
        """The items of a release section (a single-object section as a list of 0 or 1)."""
        value = getattr(self, name, None)
        if value is None:
            return []
        return list(value) if isinstance(value, list) else [value]

    @property
    def table_schema(self) -> TableSchema:
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
        return self.dataset.budget.cost

    @property
    def budget_policy(self) -> BudgetPolicy:
        return self.dataset.budget.policy

    def period(self) -> str:
        """The calendar period a run starting now is charged to (``all`` without ``per``)."""
        return self.budget_policy.period()

    @property
    def data_identity(self) -> DataIdentity:
        """The data the budget is tied to: its name and resolved source (``{period}`` kept)."""
        return DataIdentity(name=self.dataset.name, source=str(self.resolve(self.dataset.path)))

    def data_path(self, period: str | None = None) -> Path:
        """The file or folder a run in ``period`` (default: the current one) reads."""
        text = str(self.resolve(self.dataset.path))
        return Path(text.replace(PERIOD_FIELD, period or self.period()))

    def resolve(self, path: Path) -> Path:
        return path if path.is_absolute() else (self.base_dir / path).resolve()

    @property
    def ledger_location(self) -> str:
        """Where this config's ledger lives: the ``ledger:`` URL as given, or its file (or the
        default ``ledger.sqlite`` beside the config) as an absolute path."""
        if self.ledger is not None and self.ledger.startswith(("postgresql://", "postgres://")):
            return self.ledger
        return str(self.resolve(Path(self.ledger or "ledger.sqlite")))

    @property
    def config_hash(self) -> str:
        """Hash of what the config releases; how aggregates are computed is not part of it."""
        payload = self.model_dump(
            mode="json",
            exclude={
                "base_dir": True,
                "ledger": True,  # where the budget is kept, not what is released
                "leaves": True,
                "dataset": {"engine", "memory_budget_mb", "scheduler", "workers", "batch_size"},
            },
        )
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
