"""What the ``dppub`` commands do, apart from parsing arguments and printing (:mod:`flows.cli`).

Each function raises dppub's own errors; the CLI turns them into one line and an exit code.
Prefect is imported only where a flow runs on a Prefect API.
"""

from __future__ import annotations

import getpass
import os
import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from dppub.dp.errors import ConfigError, DPPubError, InputError
from dppub.dp.ledger import Declaration, Ledger, NoLedgerError, ledger_location
from dppub.dp.ledger.summary import spending_summary
from dppub.flows.interrupts import Interrupted, Signals

if TYPE_CHECKING:
    from dppub.dp.pipeline.config import PipelineConfig
    from dppub.dp.pipeline.kinds import JSON
    from dppub.dp.pipeline.plan import Plan
    from dppub.dp.pipeline.publish import Publication
    from dppub.dp.runs import Recovered, Run

# The pipeline (and with it the engines, the estimators and their solvers, ~1.3 s) is imported
# by the commands that plan, the run protocol (pandas) by those that run or settle: `dppub
# audit` needs only the ledger.

INTERNAL_ERROR = 70
"""Exit code of an unexpected error (a bug in dppub; sysexits' EX_SOFTWARE): not 1, which
means a broken hash chain."""

__all__ = [
    "INTERNAL_ERROR",
    "Failure",
    "Opened",
    "amend",
    "audit_lines",
    "audit_payload",
    "execute_opened",
    "io_error_line",
    "ledger_for",
    "open_run",
    "plan_checked",
    "plan_payload",
    "publish_opened",
    "serve_schedules",
    "settle_dead",
    "write_audit_page",
]


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


def plan_payload(config: Path, ledger: str | None) -> dict[str, JSON]:
    """What ``dppub plan`` shows: releases, costs, expected errors, what the ledger leaves."""
    return plan_checked(config, ledger)[0]


def plan_checked(config: Path, ledger: str | None) -> tuple[dict[str, JSON], DPPubError | None]:
    """:func:`plan_payload`, and the error ``dppub run`` would refuse the run with (None: it
    would reserve): the checks run makes before it reserves, in its order, read-only -- the
    input's structure from the Parquet footers, then the ledger's record and budget."""
    from dppub.dp.budget import PrivacyCost
    from dppub.dp.errors import BudgetExceededError
    from dppub.dp.ledger.book import admit
    from dppub.dp.pipeline.plan import load_plan

    plan = load_plan(config)
    cfg = plan.config
    data, policy = cfg.data_identity, cfg.budget_policy
    refusal: DPPubError | None = None
    try:
        book = Ledger(ledger_for(cfg, ledger), create=False)
    except NoLedgerError:  # no ledger yet: nothing spent (plan never creates one)
        book = None
    try:
        plan.check_input()
        if book is None:
            admit(data.name, policy, plan.total, None, lambda **_: PrivacyCost.zero())
        else:
            book.check_reserve(data=data, policy=policy, cost=plan.total)
    except (InputError, ConfigError, BudgetExceededError) as exc:
        refusal = exc
    declared = None if book is None else book.declaration_of(data)
    if declared is not None:
        policy = declared.policy  # the budget in force is the recorded one, until amended
    remaining = policy.total if book is None else book.remaining(data=data, policy=policy)
    releases = []
    for r in plan.releases:
        entry: dict[str, JSON] = {
            "name": r.name,
            "kind": r.kind,
            "epsilon": r.cost.epsilon,
            "delta": r.cost.delta,
            **plan.kind(r).describe(r),
        }
        if r.is_dp:
            entry["neighbours"] = r.bounding.neighbours
        releases.append(entry)
    ds = cfg.dataset
    return {
        "dataset": ds.name,
        "privacy_unit": ds.privacy_unit,
        "max_rows_per_unit": ds.max_rows_per_unit if ds.privacy_unit else None,
        "max_partitions_per_unit": ds.max_partitions_per_unit if ds.privacy_unit else None,
        "releases": releases,
        "total_epsilon": plan.total.epsilon,
        "total_delta": plan.total.delta,
        "budget_epsilon": policy.total.epsilon,
        "budget": policy.describe(),
        "budget_period": policy.period(),
        "remaining_epsilon": remaining.epsilon,
        "fits": refusal is None,
        **({} if refusal is None else {"refusal": str(refusal)}),
    }, refusal


@dataclass(frozen=True, slots=True)
class Failure:
    """A run that did not publish, as :func:`execute_opened` saw it."""

    line: str
    """What went wrong and how the run was settled (``...; run R was aborted, ...``)."""
    code: int
    """The exit code ``dppub run`` exits with."""
    error: BaseException | None
    """The exception behind it (None: a signal arrived while nothing failed)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Opened:
    """A run ``dppub run`` has opened (locked and reserved) before publishing."""

    plan: Plan
    location: str
    """Where the ledger is (named in the flow run's parameters)."""
    run: Run
    api: str | None
    """The Prefect API the run is recorded in (:func:`flows.server.configured_api`), or None:
    the run publishes without Prefect (:mod:`flows.local`)."""


def open_run(
    config: Path,
    ledger: str | None,
    out: Path,
    engine: str | None,
    timeout: float,
    signals: Signals,
) -> Opened:
    """Load the plan, open the run (no value read yet) through
    :meth:`dp.pipeline.plan.Plan.open_run`, the one way a run opens.

    Whether the run is recorded in Prefect is decided here, once: a Prefect API configured
    the way Prefect resolves it must answer before the ledger is opened. From the reservation
    on, a signal is only noted: :func:`execute_opened` delivers it once it holds the run, so an
    interrupted run is always settled (here, aborted at no cost).
    """
    from dppub.dp.pipeline.plan import load_plan
    from dppub.flows.server import check_api, configured_api

    plan = load_plan(config, engine)
    api = configured_api()
    if api is not None:
        check_api(api)
    location = ledger_for(plan.config, ledger)
    run = plan.open_run(location, out, timeout=timeout, reserving=signals.disarm)
    return Opened(plan=plan, location=location, run=run, api=api)


def publish_opened(opened: Opened, config: Path, out: Path, engine: str | None) -> Publication:
    """Publish an opened run in this process, as the Prefect flow (recorded at ``opened.api``)
    or without Prefect. The caller holds the run and settles it (:func:`execute_opened`)."""
    if opened.api is None:
        from dppub.flows.local import publish_locally

        return publish_locally(opened.plan, opened.run).publication(opened.plan)
    from dppub.flows.publish import Handed
    from dppub.flows.runner import flow_for

    return flow_for(opened.plan)(
        str(config.resolve()),
        opened.location,
        str(out.resolve()),
        engine=engine,
        handed=Handed(opened.plan, opened.run),
    )


def execute_opened(
    opened: Opened, config: Path, out: Path, engine: str | None, *, signals: Signals
) -> Failure | None:
    """Publish an opened run (:func:`publish_opened`), then settle it whatever happened;
    returns the failure (one line, an exit code, the exception) or None.

    A SIGINT or SIGTERM at any moment (``signals`` saw it, or Prefect's SIGTERM bridge raised
    ``TerminationSignal``) ends in its exit code and one line saying how the run was settled,
    whatever exception Prefect made of it. Prefect's settings were made before Prefect was
    first imported (the CLI's callback runs :func:`flows.server.prefect_env` first).
    """
    failure: tuple[str, int] | None = None
    error: BaseException | None = None
    run = opened.run
    try:
        with run:  # leaving it settles the run; signals wait until that is done
            try:
                signals.arm()
                publish_opened(opened, config, out, engine)
            finally:
                signals.disarm()
    except (Interrupted, KeyboardInterrupt, _termination()) as exc:
        error = exc
        terminated = not isinstance(exc, Interrupted | KeyboardInterrupt)
        signals.note(int(signal.SIGTERM if terminated else signal.SIGINT))
    except DPPubError as exc:
        error, failure = exc, (str(exc), 2)
    except OSError as exc:
        error, failure = exc, (io_error_line(exc), 2)
    except Exception as exc:
        error = exc
        if opened.api is not None and _prefect_api_failed(exc):
            failure = (
                f"the Prefect API ({opened.api}) failed: {exc}; check that server and retry",
                2,
            )
        elif os.environ.get("DPPUB_DEBUG") and signals.first is None:
            raise
        else:  # a bug: say so in one line; DPPUB_DEBUG=1 shows the traceback
            line = f"internal error {type(exc).__name__}: {exc} (DPPUB_DEBUG=1 for more)"
            failure = (line, INTERNAL_ERROR)
    if signals.first is not None:  # the signal decides, not what Prefect made of it
        failure = (signals.line(), signals.exit_code)
    if failure is None:
        return None
    state = run.ledger.reservation(run.run_id).state
    spent = ", nothing was spent" if state == "aborted" else ""
    return Failure(f"{failure[0]}; run {run.run_id} was {state}{spent}", failure[1], error)


def _termination() -> type[BaseException]:
    """Prefect's SIGTERM bridge exception, if Prefect ran (a run without it never imports it)."""
    exceptions = sys.modules.get("prefect.exceptions")
    if exceptions is None:
        return Interrupted
    return cast("type[BaseException]", exceptions.TerminationSignal)


def io_error_line(exc: OSError) -> str:
    """``I/O error: No space left on device (/dev/full)``."""
    where = f" ({exc.filename})" if exc.filename else ""
    return f"I/O error: {exc.strerror or exc}{where}"


def _prefect_api_failed(exc: Exception) -> bool:
    """Prefect could not talk to its API (the server went away, or is not a Prefect API)."""
    import httpx

    return isinstance(exc, httpx.HTTPError) or str(exc).startswith("Failed to reach API")


def settle_dead(ledger: str, dataset: str | None) -> list[Recovered]:
    """Settle every pending run of a dead process (of one dataset, or all)."""
    from dppub.dp.runs import recover

    book = Ledger(ledger, create=False)
    keys = [d.key for d in book.declarations() if dataset in (None, d.name)]
    return [r for k in keys for r in recover(book, key=k)]


def audit_payload(ledger: str, dataset: str | None) -> dict[str, JSON]:
    """The whole chain verified, and each dataset's spending (``audit --json``)."""
    book = Ledger(ledger, create=False)
    chain = book.verify()
    return {
        "chain_ok": chain.ok,
        "rows": chain.rows,
        "head": chain.head,
        "problems": list(chain.problems),
        "datasets": spending_summary(book, dataset),
    }


def audit_lines(payload: Mapping[str, Any]) -> list[str]:
    """The text form of an audit."""
    line = "{:<24} {:>8} {:>9} {:>9} {:>5} {:>7} {:>7} {:>7}"
    heads = ("dataset", "budget", "spent", "remaining", "runs", "charged", "pending", "aborted")
    out = [line.format(*heads)]
    for name, d in payload["datasets"].items():
        spent, left = d["lifetime_spent_epsilon"], d["remaining_epsilon"]
        counts = (d["runs"], d["charged_runs"], d["pending_runs"], d["aborted_runs"])
        out.append(
            line.format(name, f"{d['budget_epsilon']:g}", f"{spent:g}", f"{left:g}", *counts)
        )
        out.append(f"  neighbours: {'; '.join(d['neighbours']) or 'nothing published yet'}")
        for a in d["amendments"]:
            out.append(f"  amended {a['ts']} by {a['who']}: {'; '.join(a['changes'])} ({a['why']})")
    state = "ok" if payload["chain_ok"] else "BROKEN"
    out.append(f"hash chain: {state} ({payload['rows']} rows, head {payload['head'][:16]}…)")
    out += [f"  {p}" for p in payload["problems"]]
    return out


def write_audit_page(ledger: str, payload: dict[str, JSON], target: Path) -> None:
    """The self-contained audit page."""
    from dppub.dp.pipeline.audit_page import render_audit_html

    history = Ledger(ledger, create=False).history()
    try:
        target.write_text(render_audit_html(payload, history), encoding="utf-8")
    except OSError as exc:  # a write error carries no file name: name the page
        raise OSError(exc.errno, exc.strerror, str(target)) from None


def amend(config: Path, ledger: str | None, reason: str, timeout: float) -> Declaration:
    """Record the config's budget, name and source for its data (``budget amend``)."""
    from dppub.dp.pipeline.plan import load_plan

    cfg = load_plan(config).config
    book = Ledger(ledger_for(cfg, ledger), timeout=timeout, create=False)
    return book.amend(
        data=cfg.data_identity, policy=cfg.budget_policy, who=getpass.getuser(), why=reason
    )


def serve_schedules(
    configs: list[Path], ledger: str | None, out: Path, say: Callable[[str], None]
) -> None:
    """Serve each config's schedule until interrupted (``dppub serve``); each deployment's
    config, ledger and output folder are bound here, never run parameters. Ctrl-C comes out
    as ``KeyboardInterrupt`` once the runner has stopped."""
    import asyncio

    from dppub.flows.deploy import bind, deployment_of, run_command
    from dppub.flows.server import (
        STATE,
        check_api,
        configured_api,
        local_server,
        register_served,
        serve_home,
        stop_server,
    )

    bound = bind(configs, ledger, out)
    url = configured_api()
    server = None
    if url is not None:
        check_api(url)
        os.environ["PREFECT_API_URL"] = url  # what the served runs' processes inherit
    else:
        serve_home()
        server, url = local_server(STATE)
        os.environ["PREFECT_API_URL"] = url
        say(f"Prefect server for the schedules: {url.removesuffix('/api')}")
    try:
        from prefect.runner import Runner
        from prefect.settings import PREFECT_API_URL, temporary_settings

        register_served([b.parameters for b in bound])  # the runs' processes inherit it
        with temporary_settings(updates={PREFECT_API_URL: url}):
            runner = Runner()
            for b in bound:
                made = deployment_of(b)
                runner.add_deployment(made)  # registered on the server now
                name = f"{made.flow_name}/{made.name}"
                say(f"serving {name}; to run it now: {run_command(url, name)}")
            asyncio.run(runner.start())
    finally:
        if server is not None:
            stop_server(server)
