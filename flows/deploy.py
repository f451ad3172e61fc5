"""``dppub deploy``: each config's deployment and schedule on a Prefect server, for a process
work pool whose workers (``prefect worker start --pool NAME``) run them.

A deployment's entrypoint is the publish flow's module path in the installed package: no image,
no code storage, no pull steps; a worker runs it in the Python it was started with, on a host
that sees the dataset, the ledger and the output folder at the registered paths. The config,
ledger and output folder are the deployment's parameters, fixed at registration: a run whose
parameters name anything else fails before it opens a ledger (:func:`registered_parameters`,
checked by :func:`flows.server.check_served`). Nothing here reads private data.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from dppub.dp.errors import ConfigError
from dppub.dp.pipeline.plan import Plan, load_plan
from dppub.flows.server import check_api, configured_api

if TYPE_CHECKING:
    from prefect.deployments.runner import RunnerDeployment
    from prefect.schedules import Schedule

    from dppub.dp.pipeline.config import ScheduleModel

__all__ = [
    "Bound",
    "Deployed",
    "bind",
    "deploy_configs",
    "deployment_of",
    "registered_parameters",
    "run_command",
    "schedule_of",
]


def schedule_of(sched: ScheduleModel) -> Schedule:
    """A config's ``schedule:`` as Prefect's schedule (``serve`` and ``deploy`` alike)."""
    from prefect.schedules import Cron, Interval

    if sched.cron is not None:
        return Cron(sched.cron, timezone=sched.timezone)
    return Interval(sched.interval_seconds or 0, timezone=sched.timezone)


class Bound(NamedTuple):
    """A config, its plan, and the parameters its deployment is registered with."""

    path: Path
    plan: Plan
    parameters: dict[str, str]


def bind(configs: list[Path], ledger: str | None, out: Path) -> list[Bound]:
    """Each config with what its runs are bound to: the config, its ledger (as for ``run``)
    and the output folder, absolute (``serve`` and ``deploy`` alike).

    Raises:
        ConfigError: a config without a schedule, or a ``--ledger`` it refuses (checked for
            every config before anything is registered).
    """
    from dppub.flows.commands import ledger_for

    plans = [(c, load_plan(c)) for c in configs]
    missing = [str(c) for c, p in plans if p.config.schedule is None]
    if missing:
        raise ConfigError(f"no schedule in {', '.join(missing)}")
    return [
        Bound(
            c,
            p,
            {
                "config_path": str(c.resolve()),
                "ledger_path": ledger_for(p.config, ledger),
                "out_dir": str(out.resolve()),
            },
        )
        for c, p in plans
    ]


def deployment_of(bound: Bound, **options: Any) -> RunnerDeployment:
    """The deployment of one config: named after its dataset, on its schedule, with its
    config, ledger and output folder as the parameters."""
    from dppub.flows.runner import flow_for

    sched = bound.plan.config.schedule
    if sched is None:
        raise ConfigError(f"no schedule in {bound.path}")
    made = flow_for(bound.plan).to_deployment(
        name=bound.plan.config.dataset.name,
        parameters=bound.parameters,
        schedule=schedule_of(sched),
        **options,
    )
    return cast("RunnerDeployment", made)  # sync call: not a coroutine


def run_command(api_url: str, deployment: str) -> str:
    """The command that starts a run of ``deployment`` (``flow/name``) now, from any shell."""
    return (
        f"PREFECT_API_URL={shlex.quote(api_url)} prefect deployment run {shlex.quote(deployment)}"
    )


@dataclass(frozen=True, slots=True)
class Deployed:
    """One registered deployment: ``flow/name`` and the command that runs it now."""

    name: str
    command: str


def deploy_configs(configs: list[Path], pool: str, ledger: str | None, out: Path) -> list[Deployed]:
    """Register each config's deployment and schedule on the configured Prefect server for
    the process work pool ``pool`` (``dppub deploy``).

    Raises:
        ConfigError: a pool name Prefect cannot look up (empty, with ``/``); no Prefect API
            configured, or it does not answer; no such work pool, or not a process pool; a
            config without a schedule (checked before anything is registered).
    """
    if not pool or pool != pool.strip() or any(c in pool for c in "/%"):
        # an empty name made Prefect's client ask for the pools' collection: a 405 traceback
        raise ConfigError(
            f"--pool must name a work pool (no '/' or '%', no surrounding spaces), got {pool!r}"
        )
    bound = bind(configs, ledger, out)
    url = configured_api()
    if url is None:
        raise ConfigError(
            "no Prefect API configured to deploy to: set PREFECT_API_URL to its API "
            "(e.g. PREFECT_API_URL=http://127.0.0.1:4200/api, or `prefect config set "
            "PREFECT_API_URL=...`)"
        )
    os.environ["PREFECT_API_URL"] = url  # what this process and its health check talk to
    check_api(url)
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.types.entrypoint import EntrypointType

    with temporary_settings(updates={PREFECT_API_URL: url}):
        _check_pool(pool, url)
        deployments = [deployment_of(b, entrypoint_type=EntrypointType.MODULE_PATH) for b in bound]
        for d in deployments:
            d.apply(work_pool_name=pool)
    return [
        Deployed(name, run_command(url, name))
        for name in (f"{d.flow_name}/{d.name}" for d in deployments)
    ]


def _check_pool(pool: str, url: str) -> None:
    from prefect import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            found = client.read_work_pool(pool)
        except ObjectNotFound:
            raise ConfigError(
                f"no work pool {pool!r} at {url}; create it: prefect work-pool create "
                f"{shlex.quote(pool)} --type process"
            ) from None
    if found.type != "process":
        raise ConfigError(
            f"work pool {pool!r} is of type {found.type!r}; dppub deploys to a process pool "
            "(its workers run the installed dppub): prefect work-pool create NAME --type process"
        )


def registered_parameters() -> dict[str, Any]:
    """The parameters the running flow run's deployment was registered with, as the Prefect
    server holds them (call only inside a deployment's run)."""
    from uuid import UUID

    from prefect import get_client
    from prefect.runtime import deployment

    with get_client(sync_client=True) as client:
        return dict(client.read_deployment(UUID(deployment.id)).parameters)
