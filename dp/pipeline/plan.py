"""Config -> plan, resolved once: the immutable run configuration every step reads.

:func:`load_plan` reads and validates the YAML, builds every declared hierarchy and axis,
plans each release (its cost, its columns), composes the total and resolves the engine -- all
before the ledger is opened or any value is read, so every config error surfaces here as one
line.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from dppub.dp.budget import PlannedCost, PrivacyCost, compose
from dppub.dp.engine import (
    DEFAULT_BATCH_SIZE,
    DaskBackend,
    MemoryBackend,
    StreamingBackend,
    TableSource,
    estimate_bytes,
)
from dppub.dp.errors import ConfigError
from dppub.dp.io import check_source
from dppub.dp.ledger import Ledger, ledger_location
from dppub.dp.pipeline.config import DERIVED, PipelineConfig
from dppub.dp.pipeline.config_messages import validation_message
from dppub.dp.pipeline.declared_domains import checked_leaves
from dppub.dp.pipeline.environment import environment
from dppub.dp.pipeline.kinds import ReleasePlan
from dppub.dp.pipeline.limits import check_planned_total
from dppub.dp.pipeline.loading import inline_dataset, read_config
from dppub.dp.pipeline.registry import AnyKind, config_model, registered
from dppub.dp.runs import Run, RunPlan

__all__ = [
    "DEFAULT_MEMORY_BUDGET_MB",
    "Engine",
    "Plan",
    "build_plan",
    "check_output",
    "completed",
    "for_run",
    "ledger_for",
    "load_config",
    "load_plan",
]

Engine = Literal["auto", "memory", "stream", "dask"]
DEFAULT_MEMORY_BUDGET_MB = 1024.0
"""What ``engine: auto`` may hold in memory unless the config or DPPUB_MEMORY_BUDGET_MB says."""


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Plan:
    """A validated config, its planned releases and composed cost, and the engine to use."""

    config: PipelineConfig
    releases: tuple[ReleasePlan[Any], ...]
    total: PrivacyCost
    """The composed cost of every DP release (what the ledger reserves)."""
    engine: Engine
    """As requested (``auto`` is resolved against the data's size by :meth:`source`)."""
    memory_budget_mb: float = DEFAULT_MEMORY_BUDGET_MB
    """What ``engine: auto`` may hold: the config's, else DPPUB_MEMORY_BUDGET_MB's, else 1024."""

    @property
    def columns(self) -> list[str]:
        """Every declared column some release reads, in first-use order (the only ones read),
        and the privacy unit's."""
        used = [c for r in self.releases for c in r.columns]
        unit = self.config.dataset.privacy_unit
        return list(dict.fromkeys([*used, *([unit] if unit else [])]))

    @property
    def run_plan(self) -> RunPlan:
        """What the ledger checks before the run reads any data."""
        cfg = self.config
        return RunPlan(
            data=cfg.data_identity,
            policy=cfg.budget_policy,
            cost=self.total,
            config_hash=cfg.config_hash,
        )

    def kind(self, release: ReleasePlan[Any]) -> AnyKind:
        return release.release_kind

    def check_structure(self, out_dir: str | Path, period: str | None = None) -> None:
        """The input's structure (files, columns, types in every file) from footers only, and
        a publication folder that can be written and does not overlap the input."""
        check_output(Path(out_dir), self.config.data_path(period))
        self.check_input(period)

    def check_input(self, period: str | None = None) -> None:
        """The input's structure (files, columns, types in every file) from footers only."""
        check_source(self.config.data_path(period), self.config.table_schema, columns=self.columns)

    def open_run(
        self,
        ledger: str | Path,
        out_dir: str | Path,
        *,
        timeout: float = 30.0,
        reserving: Callable[[], None] | None = None,
    ) -> Run:
        """Check the structure (no value is read), then open the run in the ledger at
        ``ledger``: lock, settle dead runs of the same data, check the publications, reserve
        :attr:`total`. The one way a run starts (``dppub run``, served runs, tests); the caller
        holds the run (``with run:`` settles it).

        ``reserving`` is called just before the reservation (``dppub run`` holds its signals
        from there on, so an interrupted run is always settled).
        """
        self.check_structure(out_dir)
        book = Ledger(ledger, timeout=timeout)
        if reserving is not None:
            reserving()
        return Run.open(book, out_dir, self.run_plan)

    def resolved_engine(self, period: str | None = None) -> Literal["memory", "stream", "dask"]:
        """``auto``: in memory when the run's columns fit the memory budget, else streamed."""
        if self.engine != "auto":
            return self.engine
        needed = estimate_bytes(self.config.data_path(period), self.columns)
        return "memory" if needed <= self.memory_budget_mb * 2**20 else "stream"

    def source(self, period: str | None = None) -> TableSource:
        """The data of ``period`` as the engine reads it (the in-memory engine reads it here)."""
        cfg = self.config
        path = cfg.data_path(period)
        size = cfg.dataset.batch_size or DEFAULT_BATCH_SIZE
        workers = cfg.dataset.workers
        engine = self.resolved_engine(period)
        backend: Any
        if engine == "memory":
            backend = MemoryBackend.load(
                path, cfg.table_schema, self.columns, batch_size=size, workers=workers
            )
        elif engine == "dask":
            backend = DaskBackend(batch_size=size, address=cfg.dataset.scheduler)
        else:
            backend = StreamingBackend(batch_size=size, workers=workers)
        return TableSource(path=path, schema=cfg.table_schema, backend=backend)


def build_plan(cfg: PipelineConfig, engine: str | None = None) -> Plan:
    """Plan every release of ``cfg`` (reads no data). ``engine`` overrides the config's.

    Raises:
        ConfigError: one line for the first problem (unknown column, duplicate name, a delta
            the budget cannot hold...).
    """
    releases: list[ReleasePlan[Any]] = []
    for kind in registered():
        items = [i for i in cfg.section(kind.section) if getattr(i, "publish", True)]
        releases += kind.plan_section(cfg, items)
    if not releases:
        raise ConfigError("the config declares no release")
    for what, names in (
        ("release names", [r.name for r in releases]),  # folders
        ("the ledger's release names", [p.name for r in releases for p in r.parts or (r,)]),
    ):
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ConfigError(f"{what} must be unique, got {dupes} more than once")
    if cfg.budget.delta == 0.0:
        with_delta = [r.name for r in releases if r.cost.delta > 0]
        if with_delta:
            raise ConfigError(
                f"release {with_delta[0]!r} declares delta > 0 but the dataset's budget has delta 0"
            )
    costs: list[PlannedCost] = [c for r in releases for c in r.planned_costs]
    chosen = engine or cfg.dataset.engine
    if chosen not in ("auto", "memory", "stream", "dask"):
        raise ConfigError(f"engine must be auto, memory, stream or dask, got {chosen!r}")
    resolved: Engine = chosen  # type: ignore[assignment]
    from_env = environment().memory_budget_mb  # every environment value is checked here
    memory = cfg.dataset.memory_budget_mb or from_env
    return Plan(
        config=cfg,
        releases=tuple(releases),
        total=check_planned_total(compose(costs)),
        engine=resolved,
        memory_budget_mb=memory or DEFAULT_MEMORY_BUDGET_MB,
    )


def load_config(path: str | Path) -> PipelineConfig:
    """Read and validate a pipeline config; raise :class:`ConfigError` with one clear line."""
    p = Path(path)
    raw, dataset_file = inline_dataset(read_config(p), p)
    for derived in DERIVED:  # fields the loader sets, never keys of the file
        if derived in raw:
            raise ConfigError(f"{p}: {derived}: Extra inputs are not permitted")
    model = config_model()
    try:
        cfg = model.model_validate(
            {**raw, "base_dir": p.resolve().parent, "dataset_file": dataset_file}
        )
    except ValidationError as exc:
        message = validation_message(p, exc, model, hidden=DERIVED, dataset_file=dataset_file)
        raise ConfigError(message) from None
    try:
        return completed(cfg)
    except ConfigError as exc:
        raise ConfigError(f"{p}: {exc}") from None


def for_run(
    cfg: PipelineConfig,
    *,
    period: str | None = None,
    ledger: str | None = None,
    at: datetime | None = None,
) -> PipelineConfig:
    """``cfg`` as one run plans it: the series period it publishes (None: the one due at
    ``at``, a scheduled run's time, or now) and the ledger it spends in (None: the config's),
    which a series reads what it published from."""
    if period is None and ledger is None and at is None:
        return cfg
    return cfg.model_copy(update={"run_period": period, "run_ledger": ledger, "run_time": at})


def completed(cfg: PipelineConfig) -> PipelineConfig:
    """``cfg`` with the leaves of its declared hierarchies, its value policies checked against
    its domains: what :func:`load_config` does after validating a file, for a config built in
    Python as well (:func:`dppub.api.plan`)."""
    leaves = checked_leaves(cfg)
    cfg = cfg.model_copy(update={"leaves": leaves}) if leaves else cfg
    cfg.table_schema  # noqa: B018 -- the value policies are checked against the domains
    return cfg


def load_plan(
    path: str | Path,
    engine: str | None = None,
    *,
    period: str | None = None,
    ledger: str | None = None,
    at: datetime | None = None,
) -> Plan:
    """:func:`load_config` then :func:`build_plan`; ``period``, ``ledger`` and ``at``: the
    run's (:func:`for_run`)."""
    p = Path(path).resolve()
    try:
        p.stat()
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror or exc}") from None
    cfg = for_run(load_config(p), period=period, ledger=ledger, at=at)
    try:
        return build_plan(cfg, engine)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def check_output(out_dir: Path, data: Path) -> None:
    """The publication folder: creatable and writable, neither inside the input (later runs
    would read published files as private data) nor holding it.

    Raises:
        ConfigError: one line naming the folder and the problem.
    """
    out, source = out_dir.resolve(), data.resolve()
    if out == source or source in out.parents or out in source.parents:
        raise ConfigError(
            f"--out {out_dir} overlaps the dataset {data}: publications must live apart from "
            "the private input"
        )
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out_dir} exists and is not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".dppub-write-check-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(f"--out {out_dir} cannot be written: {exc.strerror or exc}") from None


def ledger_for(cfg: PipelineConfig, given: str | None) -> str:
    """The ledger a config's runs spend in: its ``ledger:`` (default: ``ledger.sqlite`` beside
    the config), whoever runs it. ``--ledger`` may name another only for a config without a
    ``ledger:`` key.

    Raises:
        ConfigError: ``--ledger`` names another ledger than the config's ``ledger:``.
    """
    own = cfg.ledger_location
    if given is None:
        return ledger_location(own)
    chosen = ledger_location(given)
    if cfg.ledger is not None and chosen != ledger_location(own):
        raise ConfigError(
            f"--ledger {given} is not the config's ledger: {cfg.ledger} ({own}); a dataset's "
            "budget is kept in one ledger: drop --ledger"
        )
    return chosen
