"""``dppub deploy`` and ``dppub serve``: each config's deployment and schedule on a Prefect
server, for a process work pool whose workers (``prefect worker start --pool NAME``) run them,
or served by this process (:func:`serve_schedules`).

A deployment's entrypoint is the publish flow's module path in the installed package: no image,
no code storage, no pull steps; a worker runs it in the Python it was started with, on a host
that sees the dataset, the ledger and the output folder at the registered paths. The config,
ledger and output folder are the deployment's parameters, fixed at registration: a run whose
parameters name anything else fails before it opens a ledger (:func:`registered_parameters`,
checked by :func:`flows.server.check_served`). Nothing here reads private data.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from dppub.dp.errors import ConfigError
from dppub.dp.pipeline.plan import Plan, ledger_for, load_plan
from dppub.flows.server import check_api, configured_api

if TYPE_CHECKING:
    from prefect.deployments.runner import RunnerDeployment
    from prefect.runner import Runner
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
    "serve_schedules",
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


def deployment_of(bound: Bound, *, module_path: bool = False) -> RunnerDeployment:
    """The deployment of one config: named after its dataset, on its schedule, with its
    config, ledger and output folder as the parameters; its entrypoint the flow's file, or
    with ``module_path`` its module (a worker imports the installed package)."""
    from prefect.types.entrypoint import EntrypointType

    from dppub.flows.runner import dask_cluster, flow_for

    sched = bound.plan.config.schedule
    if sched is None:
        raise ConfigError(f"no schedule in {bound.path}")
    made = flow_for(dask_cluster(bound.plan)).to_deployment(
        name=bound.plan.config.dataset.name,
        parameters=bound.parameters,
        schedule=schedule_of(sched),
        entrypoint_type=EntrypointType.MODULE_PATH if module_path else EntrypointType.FILE_PATH,
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

    with temporary_settings(updates={PREFECT_API_URL: url}):
        _check_pool(pool, url)
        deployments = [deployment_of(b, module_path=True) for b in bound]
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


async def _serve_until_ctrl_c(runner: Runner) -> None:
    """``runner.start()`` until it ends or Ctrl-C, which stops it wherever it is -- also while
    it is still starting (asyncio's own handler cancelled the main task, which Prefect's
    start-up could absorb: the first Ctrl-C was lost under load) -- and then raises
    ``KeyboardInterrupt``. A second Ctrl-C is Python's own."""
    loop = asyncio.get_running_loop()
    interrupted = asyncio.Event()
    loop.add_signal_handler(signal.SIGINT, interrupted.set)
    serving = asyncio.ensure_future(runner.start())
    waiting = asyncio.ensure_future(interrupted.wait())
    try:
        await asyncio.wait({serving, waiting}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
    if not interrupted.is_set():
        waiting.cancel()
        serving.result()  # its own end, or its error
        return
    if runner.started:
        await runner.astop()
    serving.cancel()
    await asyncio.wait({serving}, timeout=_STOP_WAIT_SECONDS)
    raise KeyboardInterrupt


_STOP_WAIT_SECONDS = 30.0
"""How long a Ctrl-C waits for the runner to wind down before ``serve`` exits anyway."""


def serve_schedules(
    configs: list[Path], ledger: str | None, out: Path, say: Callable[[str], None]
) -> None:
    """Serve each config's schedule until interrupted (``dppub serve``); each deployment's
    config, ledger and output folder are bound here, never run parameters. Ctrl-C comes out
    as ``KeyboardInterrupt`` once the runner has stopped."""

    from dppub.flows.server import STATE, local_server, register_served, serve_home, stop_server

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
            asyncio.run(_serve_until_ctrl_c(runner))
    finally:
        if server is not None:
            stop_server(server)
