"""A series run's plan: its figures, the chosen strategy, the period due, and its charge.

Everything here is public: the config, the ledger's rows of the series' earlier runs and the
already-private state they seal (:mod:`.series_store`). The period a run publishes is the one
named (``--period``) or the newest complete one by the run's date; the periods between the last
published and it are published too (caught up). A period published once is refused here, so
nothing is reserved. The run charges the increase of the series' cumulative loss
(:meth:`dp.series.SeriesRelease.charge`, times the measures): after every committed run the
ledger holds at least the loss of everything published. With ``rho`` the cumulative rho is
charged as its ``(epsilon, delta)`` conversion, the increase of epsilon each run and delta once,
at the first run, so the charges add up to the conversion of the cumulative rho.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from dppub.dp.budget import PrivacyCost, zcdp_to_dp
from dppub.dp.errors import ConfigError, InputError
from dppub.dp.ledger import PERIOD_FIELD
from dppub.dp.pipeline.config import PipelineConfig
from dppub.dp.pipeline.kinds.series.item import MovingModel, SeriesModel, SumModel
from dppub.dp.pipeline.kinds.series.series_calendar import due_label, label_of, ordinal
from dppub.dp.pipeline.kinds.series.series_store import Published, last_published
from dppub.dp.series import (
    Choice,
    Relation,
    SeriesRelease,
    SeriesWorkload,
    choose_strategy,
    moving_sum,
    per_period,
    running_total,
    stack,
    svd_bound,
    year_to_date,
)

__all__ = [
    "SeriesSpec",
    "block_bounds",
    "expected_rmse",
    "figures_of",
    "fingerprint",
    "plan_series",
    "relation_of",
]

_YEAR = {"month": 12, "quarter": 4, "year": 1}


@dataclass(frozen=True, slots=True, kw_only=True)
class SeriesSpec:
    """What executing one run of a series needs (public values only)."""

    item: SeriesModel
    choice: Choice
    release: SeriesRelease
    """One measure's mechanism (each measure gets the budget's equal share)."""
    period: int
    """The last period this run publishes (an index of the horizon)."""
    published: Published
    ledger: str
    dataset: str
    config_hash: str
    unit: str | None
    """The dataset's privacy unit (the scan bounds it per period)."""
    keys: tuple[tuple[str, tuple[str, ...]], ...]
    """Each ``by`` column and its declared categories."""
    groups: tuple[str, ...]
    """Each group's label (``North``, ``North/adult``; ``all`` without keys)."""
    scales: tuple[float, ...]
    """Each measure's scale: 1 for a count, ``hi`` for a sum."""
    labels: tuple[str, ...]
    """Each measure's name: ``count``, ``sum_cost``."""
    cumulative: float
    """Everything published after this run: epsilon (Laplace) or rho (Gaussian)."""
    refusal: str | None = None
    """Why nothing is due (a run with no period named): its run refuses with this line."""

    @property
    def after(self) -> int | None:
        state = self.published.state
        return None if state is None else state.last

    def label(self, period: int) -> str:
        per = self.item.period.per
        return label_of(ordinal(self.item.start, per) + period, per)


def figures_of(item: SeriesModel) -> SeriesWorkload:
    """The declared figures over the horizon, in the order ``publish`` lists them."""
    t = item.horizon
    made = []
    for figure in item.publish:
        if isinstance(figure, MovingModel):
            made.append(moving_sum(t, figure.moving))
        elif figure == "period":
            made.append(per_period(t))
        elif figure == "running_total":
            made.append(running_total(t))
        else:
            made.append(year_to_date(t, _YEAR[item.period.per]))
    return stack(*made)


def _choice(item: SeriesModel, relation: Relation) -> tuple[Choice, SeriesRelease]:
    """The chosen strategy and one measure's mechanism (seconds at long horizons: kept)."""
    return _cached_choice(item.model_dump_json(), relation)


@lru_cache(maxsize=16)
def _cached_choice(text: str, relation: Relation) -> tuple[Choice, SeriesRelease]:
    item = SeriesModel.model_validate_json(text)
    workload = figures_of(item)
    choice = choose_strategy(workload, relation, noise=item.noise, revisions=item.revisions)
    release = SeriesRelease(
        strategy=choice.strategy,
        workload=workload,
        relation=relation,
        noise=item.noise,
        budget=item.budget / len(item.measures),
        revisions=item.revisions,
    )
    return choice, release


def fingerprint(release: SeriesRelease) -> str:
    """The mechanism a state belongs to: the strategy's name and a digest of its matrix, the
    relation, the noise, the budget and the estimator. A series continues only under the
    mechanism it started with (its loss is accounted for that one): a config amended to
    other figures, budget or bounds is refused by its stored state."""
    h = hashlib.sha256(np.ascontiguousarray(release.strategy.matrix).tobytes())
    r = release.relation
    h.update(
        f"{r.max_periods_per_unit}/{r.max_rows_per_unit}/{release.noise}/"
        f"{release.budget!r}/{release.revisions}".encode()
    )
    return f"{release.strategy.name}@{h.hexdigest()[:16]}"


def block_bounds(item: SeriesModel, relation: Relation) -> dict[str, float]:
    """The SVD bound of each block of figures alone (what no strategy beats on it)."""
    workload = figures_of(item)
    return {
        name: svd_bound(
            SeriesWorkload(matrix=workload.matrix[workload.block(name)], blocks=((name, rows),)),
            relation,
            noise=item.noise,
        )
        for name, rows in workload.blocks
    }


def relation_of(cfg: PipelineConfig, item: SeriesModel) -> Relation:
    ds = cfg.dataset
    where = f"series {item.name!r}"
    if ds.privacy_unit is None:
        if item.max_periods_per_unit is not None:
            raise ConfigError(f"{where}: max_periods_per_unit needs the dataset's privacy_unit")
        return Relation()
    if item.max_periods_per_unit is None:
        raise ConfigError(
            f"{where}: with privacy_unit {ds.privacy_unit!r}, declare max_periods_per_unit "
            "(the periods of the horizon one unit appears in)"
        )
    return Relation(
        max_periods_per_unit=item.max_periods_per_unit,
        max_rows_per_unit=ds.max_rows_per_unit or 1,
    )


def _columns(
    cfg: PipelineConfig, item: SeriesModel
) -> tuple[tuple[tuple[str, tuple[str, ...]], ...], tuple[str, ...], tuple[float, ...]]:
    """The keys' categories, each group's label and each measure's scale, columns checked."""
    where = f"series {item.name!r}"
    cols = cfg.dataset.columns
    date = cols.get(item.period.column)
    if date is None or date.type not in ("date", "string"):
        raise ConfigError(
            f"{where}: period column {item.period.column!r} must be a declared date column "
            "(or string, of ISO dates: 2027-03-14)"
        )
    groups: list[str] = [""]
    keys = []
    for key in item.by:
        c = cols.get(key)
        if c is None or c.type != "category" or not c.categories:
            raise ConfigError(f"{where}: by column {key!r} must be a declared category column")
        groups = [f"{g}/{v}" if g else v for g in groups for v in c.categories]
        keys.append((key, tuple(c.categories)))
    scales = []
    for m in item.measures:
        if not isinstance(m, SumModel):
            scales.append(1.0)
            continue
        c = cols.get(m.sum)
        if c is None or c.type not in ("int", "float") or c.bounds is None:
            raise ConfigError(f"{where}: sum column {m.sum!r} must be a declared numeric column")
        lo, hi = (float(b) for b in c.bounds)
        if lo < 0 or hi <= 0:
            raise ConfigError(
                f"{where}: sum column {m.sum!r} needs bounds [lo, hi] with 0 <= lo < hi, got "
                f"[{lo}, {hi}]"
            )
        scales.append(hi)
    return tuple(keys), tuple(g or "all" for g in groups), tuple(scales)


def plan_series(cfg: PipelineConfig, item: SeriesModel) -> tuple[SeriesSpec, PrivacyCost]:
    """The run's spec and what it charges (module doc).

    Raises:
        ConfigError: what the config gets wrong, or a period outside the horizon.
        InputError: the period was published, or the stored state is missing or tampered.
    """
    from dppub.dp.pipeline.plan import ledger_for  # the plan module imports the registry

    where = f"series {item.name!r}"
    if cfg.dataset.budget.renew:
        raise ConfigError(
            f"{where}: the dataset path names {PERIOD_FIELD}, so a run reads one period's file "
            f"and its budget renews each period; a series reads every period so far from its "
            f"date column {item.period.column!r} in one dataset under one budget"
        )
    keys, groups, scales = _columns(cfg, item)
    relation = relation_of(cfg, item)
    choice, release = _choice(item, relation)
    per = item.period.per
    label = cfg.run_period or due_label(per, cfg.run_time)
    period = ordinal(label, per) - ordinal(item.start, per)
    refusal = None
    if not 0 <= period < item.horizon:
        end = label_of(ordinal(item.start, per) + item.horizon - 1, per)
        refusal = f"{where}: period {label} is outside its horizon {item.start} .. {end}"
        if cfg.run_period is not None:
            raise ConfigError(refusal)
        period = min(max(period, 0), item.horizon - 1)
    ledger = ledger_for(cfg, cfg.run_ledger)
    published = last_published(
        ledger, cfg.dataset.name, item.name, strategy=fingerprint(release), horizon=item.horizon
    )
    state = published.state
    after = None if state is None else state.last
    if state is not None and period <= state.last and refusal is None:
        refusal = (
            f"{where}: period {label} was published (up to {state.periods[-1]}); a period is "
            "published once"
        )
        if cfg.run_period is not None:
            raise InputError(f"{refusal}: nothing reserved")
    n = len(item.measures)
    cumulative = n * release.loss(period)
    if refusal is not None:
        # Nothing due now (a served run, or serve registering the schedule): a plan of no cost
        # whose run refuses with this line once it holds its (empty) reservation.
        cost = PrivacyCost.zero()
        cumulative = n * release.loss(after)
    elif item.noise == "laplace":
        cost = PrivacyCost(epsilon=n * release.charge(period, after))
    else:
        before = 0.0 if after is None else zcdp_to_dp(n * release.loss(after), item.delta)
        epsilon = max(zcdp_to_dp(cumulative, item.delta) - before, 0.0)
        cost = PrivacyCost(epsilon=epsilon, delta=item.delta if after is None else 0.0)
    spec = SeriesSpec(
        item=item,
        choice=choice,
        release=release,
        period=period,
        published=published,
        ledger=ledger,
        dataset=cfg.dataset.name,
        config_hash=cfg.config_hash,
        unit=cfg.dataset.privacy_unit,
        keys=keys,
        groups=groups,
        scales=scales,
        labels=tuple(m if isinstance(m, str) else f"sum_{m.sum}" for m in item.measures),
        cumulative=cumulative,
        refusal=refusal,
    )
    return spec, cost


def expected_rmse(
    choice: Choice, release: SeriesRelease, item: SeriesModel
) -> npt.NDArray[np.float64]:
    """Each figure's expected RMSE as first published, for one measure in counts (a sum's:
    times its ``hi``): the chosen strategy's profile at the measure's share of the budget, its
    noise sized for the certified sensitivity the release uses (a hair above the declared)."""
    share = item.budget / len(item.measures)
    unit = 1.0 / (2.0 * share) if item.noise == "gaussian" else 1.0 / share**2
    profile = choice.profile
    ratio = release.sensitivity / profile.sensitivity.declared
    return np.asarray(np.sqrt(profile.per_figure * unit) * ratio, dtype=np.float64)
