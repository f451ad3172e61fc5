"""dppub's Python API: plan a config's releases, publish them (what ``dppub plan`` and ``dppub
run`` do, returning values and raising errors instead of printing and exiting).

A config is the path of its YAML file, as for the CLI (relative paths in it resolve against its
folder, its ``ledger:``, default ``ledger.sqlite`` beside it, is where every run of its data
spends), or a config built in Python: an instance of the typed config model (:data:`Config`,
:class:`dp.pipeline.config.PipelineConfig` with the registered release sections), whose
relative paths resolve against its ``base_dir`` (default: the working folder).

:func:`plan` returns a :class:`PlanReport`; :func:`publish` a :class:`Publication`, the same
value the ``dppub-publish`` flow returns. Both raise dppub's errors
(:class:`~dp.errors.BudgetExceededError` when the budget refuses a run,
:class:`~dp.errors.ConfigError`, :class:`~dp.errors.InputError`,
:class:`~dp.errors.LedgerError`, all :class:`~dp.errors.DPPubError`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dppub.dp.budget import PrivacyCost
from dppub.dp.errors import DPPubError

if TYPE_CHECKING:
    from dppub.dp.pipeline.config import PipelineConfig
    from dppub.dp.pipeline.kinds import JSON, ReleasePlan
    from dppub.dp.pipeline.kinds.plan_facts import PlanFacts
    from dppub.dp.pipeline.plan import Plan
    from dppub.dp.pipeline.published import Publication

__all__ = ["ConfigArg", "PlanReport", "PlannedRelease", "plan", "publish"]

PathArg = str | os.PathLike[str]
ConfigArg = "PathArg | PipelineConfig"
"""A config: its file, or the typed config object."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedRelease:
    """One planned release."""

    name: str
    kind: str
    """Its label (``workload``, ``k-anonymity``...)."""
    cost: PrivacyCost
    """What it spends (epsilon 0 for a release that is not differentially private)."""
    facts: PlanFacts
    """What its kind says of it beyond its cost (strategy, expected errors...): the kind's own
    model (its ``facts``, e.g. a table's
    :class:`~dp.pipeline.kinds.tables.facts.TableFacts`)."""
    details: dict[str, JSON]
    """What ``dppub plan --json`` shows of it: its name, kind and cost, :attr:`facts` as JSON
    and, for a DP release, its neighbours."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanReport:
    """A config's plan and whether its ledger would accept the run now (what ``dppub plan``
    shows; reads no data)."""

    fits: bool
    """The ledger would accept the run: it fits the budget and the config agrees with what the
    ledger recorded for its data."""
    refusal: str | None
    """Why not (the line ``dppub run`` would refuse with), or None."""
    refused: DPPubError | None
    """The error ``dppub run`` would refuse the run with, or None."""
    releases: tuple[PlannedRelease, ...]
    total: PrivacyCost
    """What the run would spend."""
    total_epsilon: float
    """``total.epsilon``."""
    remaining_epsilon: float
    """What the budget in force leaves before the run."""
    details: dict[str, JSON]
    """Everything ``dppub plan --json`` prints: releases, costs, expected errors, budget."""
    text: str
    """What ``dppub plan`` prints."""


def plan(
    config: PathArg | PipelineConfig,
    *,
    ledger: PathArg | None = None,
    period: str | None = None,
) -> PlanReport:
    """Plan ``config`` and ask its ledger, read-only, whether it would accept the run: the
    checks ``dppub run`` makes before it reserves, in its order -- the input's structure from
    the Parquet footers, then the ledger's record and budget. Never creates a ledger.

    Args:
        config: The config file, or a config object.
        ledger: A SQLite file or ``postgresql://`` URL; default: the config's ``ledger:``, else
            ``ledger.sqlite`` beside the config. May not differ from the config's ``ledger:``.
        period: The period a series publishes (``2027-03``); default: the one due now.

    Raises:
        ConfigError: the config is invalid, or ``ledger`` is not the config's.
        LedgerError: the ledger cannot be read.
    """
    from dppub.dp.budget import PrivacyCost
    from dppub.dp.errors import BudgetExceededError, ConfigError, InputError
    from dppub.dp.ledger import Ledger, NoLedgerError
    from dppub.dp.ledger.admission import admit
    from dppub.dp.pipeline.environment import environment
    from dppub.dp.pipeline.plan import ledger_for

    environment()
    planned = _plan_of(config, None, period=period, ledger=ledger)
    cfg = planned.config
    data, policy = cfg.data_identity, cfg.budget_policy
    refused: DPPubError | None = None
    try:
        book = Ledger(ledger_for(cfg, _location(ledger)), create=False)
    except NoLedgerError:  # no ledger yet: nothing spent (plan never creates one)
        book = None
    try:
        planned.check_input()
        if book is None:
            admit(data.name, policy, planned.total, None, lambda **_: PrivacyCost.zero())
        else:
            book.check_reserve(data=data, policy=policy, cost=planned.total)
    except (InputError, ConfigError, BudgetExceededError) as exc:
        refused = exc
    declared = None if book is None else book.declaration_of(data)
    if declared is not None:
        policy = declared.policy  # the budget in force is the recorded one, until amended
    remaining = policy.total if book is None else book.remaining(data=data, policy=policy)
    releases = tuple(_planned(planned, r) for r in planned.releases)
    ds = cfg.dataset
    details: dict[str, JSON] = {
        "dataset": ds.name,
        "privacy_unit": ds.privacy_unit,
        "max_rows_per_unit": ds.max_rows_per_unit if ds.privacy_unit else None,
        "max_partitions_per_unit": ds.max_partitions_per_unit if ds.privacy_unit else None,
        "releases": [r.details for r in releases],
        "total_epsilon": planned.total.epsilon,
        "total_delta": planned.total.delta,
        "budget_epsilon": policy.total.epsilon,
        "budget": policy.describe(),
        "budget_period": policy.period(),
        "remaining_epsilon": remaining.epsilon,
        "fits": refused is None,
        **({} if refused is None else {"refusal": str(refused)}),
    }
    return PlanReport(
        fits=refused is None,
        refusal=None if refused is None else str(refused),
        refused=refused,
        releases=releases,
        total=planned.total,
        total_epsilon=planned.total.epsilon,
        remaining_epsilon=remaining.epsilon,
        details=details,
        text=_text(planned, releases, remaining, policy.total, policy.describe()),
    )


def _planned(planned: Plan, release: ReleasePlan[object]) -> PlannedRelease:
    """A release as ``dppub plan`` shows it: its kind's facts, and its JSON."""
    facts = planned.kind(release).describe(release)
    entry: dict[str, JSON] = {
        "name": release.name,
        "kind": release.kind,
        "epsilon": release.cost.epsilon,
        "delta": release.cost.delta,
        **facts.to_json(),
    }
    if release.is_dp:
        entry["neighbours"] = release.bounding.neighbours
    return PlannedRelease(
        name=release.name, kind=release.kind, cost=release.cost, facts=facts, details=entry
    )


def _text(
    planned: Plan,
    releases: tuple[PlannedRelease, ...],
    remaining: PrivacyCost,
    budget: PrivacyCost,
    described: str,
) -> str:
    """What ``dppub plan`` prints (each release's line ends in its kind's words)."""
    ds, total = planned.config.dataset, planned.total
    lines = [f"dataset {ds.name}"]
    if ds.privacy_unit is None:
        lines.append("  privacy unit: one row (neighbours differ by one row)")
    else:
        lines.append(
            f"  privacy unit: {ds.privacy_unit} (neighbours differ by all its rows); "
            f"at most {ds.max_rows_per_unit} row(s) per unit are read, in at most "
            f"{ds.max_partitions_per_unit} partition(s) of a partitioned release"
        )
    for r, release in zip(releases, planned.releases, strict=True):
        line = f"  {r.name:<22} {r.kind:<12} "
        if "neighbours" in r.details:  # a DP release states its neighbours; a syntactic one not
            line += f"epsilon={r.cost.epsilon:<6g} delta={r.cost.delta:g}"
        else:  # its epsilon of 0 is what the ledger charges, not a guarantee: it has none
            line += "not differentially private (no epsilon bounds what it reveals)"
        lines.append(line + release.release_kind.plan_text(r.facts))
    lines.append(
        f"total epsilon={total.epsilon:g} delta={total.delta:g}; "
        f"remaining before this run: epsilon={remaining.epsilon:g} "
        f"of {budget.epsilon:g} ({described})"
    )
    return "".join(f"{line}\n" for line in lines)


def publish(
    config: PathArg | PipelineConfig,
    *,
    ledger: PathArg | None = None,
    out: PathArg | None = None,
    engine: str | None = None,
    period: str | None = None,
) -> Publication:
    """Run ``config``'s publication once, exactly as ``dppub run`` does (the same functions,
    in this process): reserve its cost, run the publication, publish, commit.

    With a Prefect API configured (``PREFECT_API_URL``, or the Prefect profile, as Prefect
    resolves it) the run is the Prefect flow, recorded there; without one it runs the same
    steps without Prefect (no server is started).

    Args:
        config: The config file, or a config object.
        ledger: As for :func:`plan`.
        out: The publication folder (default: ``published`` in dppub's state folder, as for
            the CLI).
        engine: Override the config's engine: ``auto``, ``memory``, ``stream`` or ``dask``.
        period: The period a series publishes (``2027-03``): default, the newest complete
            one; a period published once is refused, nothing reserved.

    Returns:
        The published run: its id, folder, manifest, cost and each release's result.

    Raises:
        BudgetExceededError: the budget refuses the run; nothing was reserved or written.
        DPPubError: any other error dppub raises on purpose (:class:`ConfigError`,
            :class:`InputError`, :class:`LedgerError`, ...). Once the run was reserved, the
            message ends like ``dppub run``'s line, with how the run was settled (``run R was
            aborted, nothing was spent``, or ``charged`` once noise was drawn).
        KeyboardInterrupt: Ctrl-C, re-raised once the run is settled.
    """
    from dppub.dp.pipeline.environment import environment
    from dppub.failures import failure
    from dppub.flows.server import STATE
    from dppub.interrupts import Signals
    from dppub.run import NotPublished, execute, open_run

    timeout = environment().ledger_timeout
    target = Path(out) if out is not None else STATE / "published"
    signals = Signals()  # no handlers here: Ctrl-C stays Python's KeyboardInterrupt
    opened = open_run(
        _plan_of(config, engine, period=period, ledger=ledger),
        _name(config),
        ledger=_location(ledger),
        out=target,
        engine=engine,
        timeout=timeout,
        signals=signals,
    )
    try:
        return execute(opened, signals)
    except NotPublished as failed:
        line = failure(failed)[0]
        error = failed.cause
        if error is None:  # a signal noted while nothing failed
            raise KeyboardInterrupt(line) from None
        if isinstance(error, DPPubError):  # its message says how the run was settled
            error.args = (line,)
        else:
            error.add_note(f"dppub: {line}")
        raise error from None


def _plan_of(
    config: PathArg | PipelineConfig,
    engine: str | None,
    *,
    period: str | None = None,
    ledger: PathArg | None = None,
) -> Plan:
    from dppub.dp.pipeline.config import PipelineConfig
    from dppub.dp.pipeline.plan import build_plan, completed, for_run, load_plan

    given = _location(ledger)
    if isinstance(config, PipelineConfig):
        return build_plan(for_run(completed(config), period=period, ledger=given), engine)
    return load_plan(Path(config), engine, period=period, ledger=given)


def _name(config: PathArg | PipelineConfig) -> str:
    """The config as a flow run's parameters name it."""
    if isinstance(config, str | os.PathLike):
        return str(Path(config).resolve())
    return f"<config object of dataset {config.dataset.name}>"


def _location(ledger: PathArg | None) -> str | None:
    return None if ledger is None else os.fspath(ledger)
