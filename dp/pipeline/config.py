"""The pipeline configuration: YAML validated once (pydantic), before any ledger or data.

The dataset, its columns, hierarchies, budget and schedule are declared here; each release
kind contributes its own section (``workloads:``, ``regressions:``...) and its own model, so
:class:`PipelineConfig` is assembled from the registry (:mod:`dp.pipeline.registry`). Paths
are relative to the config file's folder.
"""

from __future__ import annotations

import hashlib
import json
import zoneinfo
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    field_validator,
    model_validator,
)

from dppub.dp.budget import PrivacyCost
from dppub.dp.errors import ConfigError
from dppub.dp.ledger import PERIOD_FIELD, BudgetPolicy, DataIdentity
from dppub.dp.periods import Period
from dppub.dp.pipeline.limits import (
    MAX_CRON_LENGTH,
    MAX_INTERVAL_SECONDS,
    MAX_NAME_LENGTH,
    check_bound,
    check_config_delta,
    check_config_epsilon,
    check_cron,
    check_rho,
)
from dppub.dp.schema import ColumnSpec, TableSchema

__all__ = [
    "DERIVED",
    "NAME_PATTERN",
    "Bound",
    "BudgetModel",
    "ColumnModel",
    "Cost",
    "DatasetModel",
    "Delta",
    "Epsilon",
    "Flag",
    "HierarchyModel",
    "Integer",
    "Model",
    "Name",
    "Number",
    "PipelineConfig",
    "Rho",
    "ScheduleModel",
]

NAME_PATTERN = r"^[A-Za-z0-9_-]+$"
"""Dataset and release names become folder names."""
DERIVED = ("base_dir", "leaves", "dataset_file", "run_period", "run_ledger", "run_time")
"""Fields of :class:`PipelineConfig` the loader sets, never keys of a file."""


def _what(value: object) -> str:
    kind = {bool: "true/false", str: "text"}.get(type(value), type(value).__name__)
    return f"{kind} {value!r}"


def _number(value: object) -> object:
    """An int or a float as YAML wrote it: never a bool (``true`` is not 1) nor text."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"must be a number, got {_what(value)}")
    try:
        float(value)
    except OverflowError:
        raise ValueError(
            f"must be a number a float can hold, got one of {len(str(abs(value))):,} digits"
        ) from None
    return value


def _integer(value: object) -> object:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"must be a whole number, got {_what(value)}")
    return value


def _name(value: str) -> str:
    if len(value) > MAX_NAME_LENGTH:
        raise ValueError(
            f"a name is at most {MAX_NAME_LENGTH} characters (it names folders and files), "
            f"got {len(value):,}"
        )
    return value


Number = Annotated[float, BeforeValidator(_number)]
"""A number: an int or a float, never a bool or a string (``"0.5"``)."""
Bound = Annotated[float, BeforeValidator(_number), AfterValidator(check_bound)]
"""A column bound (:func:`dp.pipeline.limits.check_bound`)."""
Integer = Annotated[int, BeforeValidator(_integer)]
"""A whole number: never a bool, a float or a string."""
Flag = Annotated[bool, Strict()]
"""``true`` or ``false``, never 1 or ``"yes"``."""
Epsilon = Annotated[float, BeforeValidator(_number), AfterValidator(check_config_epsilon)]
"""An epsilon in the documented range (:func:`dp.pipeline.limits.check_config_epsilon`)."""
Delta = Annotated[float, BeforeValidator(_number), AfterValidator(check_config_delta)]
"""A delta in the documented range (:func:`dp.pipeline.limits.check_config_delta`)."""
Rho = Annotated[float, BeforeValidator(_number), AfterValidator(check_rho)]
"""A zCDP rho in the documented range (:func:`dp.pipeline.limits.check_rho`)."""
Name = Annotated[str, Field(pattern=NAME_PATTERN), AfterValidator(_name)]
"""A dataset or release name: letters, digits, ``-`` and ``_``, at most
:data:`~dp.pipeline.limits.MAX_NAME_LENGTH` characters."""


class Model(BaseModel):
    """Frozen, and unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Cost(Model):
    """An (epsilon, delta) pair within the documented ranges (:mod:`dp.pipeline.limits`)."""

    epsilon: Epsilon
    delta: Delta = 0.0

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
    renew: Flag = False
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
    type: Literal["int", "float", "category", "string", "date"]
    bounds: tuple[Bound, Bound] | None = None
    categories: list[str] | None = None
    missing: str | Number = "drop"
    """A null or NaN: ``drop`` the row (default) or use this value."""
    unknown: str = "drop"
    """A value outside ``categories``: ``drop`` the row (default) or map it to this category."""


class DatasetModel(Model):
    name: Name
    path: Path
    budget: BudgetModel
    columns: dict[str, ColumnModel]
    engine: Literal["auto", "memory", "stream", "dask"] = "auto"
    """How exact aggregates are computed: ``memory`` (the run's columns held as validated
    batches), ``stream`` (record batches: memory bounded by the
    domain), ``dask`` (one task per Parquet file), or ``auto`` (memory when it fits)."""
    memory_budget_mb: Number | None = Field(default=None, gt=0)
    """``auto`` holds the data in memory when it needs at most this (default 1024 MiB, or the
    ``DPPUB_MEMORY_BUDGET_MB`` environment variable)."""
    scheduler: str | None = None
    """dask scheduler address (tcp://host:8786); omitted = a local cluster of ``workers``."""
    workers: Integer = Field(default=2, ge=1, le=64)
    """Parallelism: the memory and stream engines read and fold this many Parquet files at
    once (one thread each; memory grows with it); the dask engine starts this many worker
    processes when no ``scheduler`` is given. Results never depend on it."""
    batch_size: Integer | None = Field(default=None, ge=1)
    """Rows per record batch for the stream and dask engines (default 2^20)."""
    privacy_unit: str | None = None
    """The column naming each row's unit (a person, a household): neighbours then differ by
    all rows of one unit. Omitted: by one row."""
    max_rows_per_unit: Integer | None = Field(default=None, ge=1, le=1_000_000)
    """With a privacy unit: at most this many rows of a unit are read by any release."""
    max_partitions_per_unit: Integer = Field(default=1, ge=1, le=1_000_000)
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

    bands: list[Integer] | None = None
    prefix_mask: Integer | None = Field(default=None, ge=1)
    """Fixed-length codes masked one trailing character per level; the value is the length."""
    levels: dict[str, list[str]] | None = None
    file: Path | None = None
    sep: str = ";"

    @model_validator(mode="after")
    def _exactly_one(self) -> HierarchyModel:
        given = [k for k in ("bands", "prefix_mask", "levels", "file") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(f"give exactly one of bands, prefix_mask, levels, file; got {given}")
        return self


class ScheduleModel(Model):
    """When ``dppub serve`` runs the config: checked here as Prefect checks it, so ``plan`` and
    ``run`` refuse what ``serve`` would."""

    cron: Annotated[str, Field(max_length=MAX_CRON_LENGTH), AfterValidator(check_cron)] | None = (
        None
    )
    """A cron expression (``minute hour day month weekday``), read as Prefect reads it."""
    interval_seconds: Number | None = Field(default=None, ge=1, le=MAX_INTERVAL_SECONDS)
    timezone: str = "UTC"
    """An IANA time zone name (``Europe/Berlin``)."""

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, v: str) -> str:
        if v not in zoneinfo.available_timezones():
            raise ValueError(f"unknown time zone {v!r} (an IANA name, e.g. Europe/Berlin)")
        return v

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
    """The dataset's budget ledger: a SQLite file (relative to the file declaring the dataset)
    or a ``postgresql://`` URL; by default ``ledger.sqlite`` beside that file, whoever runs it
    (see :attr:`ledger_location`)."""
    base_dir: Path = Path(".")
    """Folder of the config file; relative paths resolve against it (set by the loader)."""
    dataset_file: Path | None = None
    """The dataset file ``dataset:`` names, if it names one: its ``path`` and ``ledger``
    resolve against its folder (set by the loader, :func:`dp.pipeline.loading.inline_dataset`)."""
    leaves: dict[str, list[str]] = {}
    """Leaves of text columns' declared hierarchies (set by the loader from the hierarchies)."""
    run_period: str | None = None
    """The period a series run publishes (``dppub run --period``; None: the one due now). Set
    by the caller, never a key of the file."""
    run_ledger: str | None = None
    """The ledger the run spends in, where a series finds what it published (``--ledger``;
    None: the config's). Set by the caller, never a key of the file."""
    run_time: datetime | None = None
    """The time a run is due at, which decides a series' period due: a scheduled run's
    scheduled time (None: now). Set by the caller, never a key of the file."""

    @model_validator(mode="after")
    def _budget_rules(self) -> PipelineConfig:
        budget = self.dataset.budget
        try:
            budget.policy  # noqa: B018 -- validates per, cap and renew together
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        if budget.renew and self.dataset.privacy_unit is not None:
            raise ValueError(
                f"budget renew: true cannot be used with privacy_unit "
                f"{self.dataset.privacy_unit!r}: a unit may have rows in every period, so a "
                "fresh budget per period does not bound its loss (use per with cap instead)"
            )
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
                    unit=n == self.dataset.privacy_unit,
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
        return DataIdentity(name=self.dataset.name, source=str(self._declared(self.dataset.path)))

    def data_path(self, period: str | None = None) -> Path:
        """The file or folder a run in ``period`` (default: the current one) reads."""
        text = str(self._declared(self.dataset.path))
        return Path(text.replace(PERIOD_FIELD, period or self.period()))

    def resolve(self, path: Path) -> Path:
        return path if path.is_absolute() else (self.base_dir / path).resolve()

    def _declared(self, path: Path) -> Path:
        """A path of the dataset's declaration: relative to the file that declares it."""
        if self.dataset_file is None or path.is_absolute():
            return self.resolve(path)
        return (self.dataset_file.parent / path).resolve()

    @property
    def ledger_location(self) -> str:
        """Where this config's ledger lives: the ``ledger:`` URL as given, or its file (or the
        default ``ledger.sqlite`` beside the file declaring the dataset) as an absolute path."""
        if self.ledger is not None and self.ledger.startswith(("postgresql://", "postgres://")):
            return self.ledger
        return str(self._declared(Path(self.ledger or "ledger.sqlite")))

    @property
    def config_hash(self) -> str:
        """Hash of what the config releases; how aggregates are computed is not part of it."""
        payload = self.model_dump(
            mode="json",
            exclude={
                "base_dir": True,
                "dataset_file": True,
                "ledger": True,  # where the budget is kept, not what is released
                "leaves": True,
                "run_period": True,
                "run_ledger": True,
                "dataset": {"engine", "memory_budget_mb", "scheduler", "workers", "batch_size"},
            },
        )
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
