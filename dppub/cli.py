"""The ``dppub`` command line: plan, run, audit, recover, budget amend, serve, deploy.

Argument parsing and printing over the API (:mod:`dppub.api`, :mod:`dppub.run`,
:mod:`dppub.commands`). Every error dppub raises on purpose is printed as one line on stderr
with a non-zero exit code, the line and the code :mod:`dppub.failures` gives (2 for
configuration / environment / input / ledger / I/O errors, 3 when the budget refuses a run --
``plan`` exits with the code ``run`` would --, 70 for an internal error, 130 / 143 when SIGINT /
SIGTERM interrupted a run, after settling it); 1 when an audit finds a broken chain. Prefect is
imported only by the commands that run flows.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, NoReturn, ParamSpec, TypeVar

import typer

from dppub.flows.server import STATE, prefect_env
from dppub.interrupts import Interrupted, catching, ignore_from_now

P = ParamSpec("P")
T = TypeVar("T")

DEFAULT_LEDGER = str(STATE / "ledger.sqlite")
DEFAULT_OUT = STATE / "published"

app = typer.Typer(
    name="dppub",
    help="Differentially private data publishing with a tamper-evident budget ledger.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",  # a docstring's wrapped lines join into paragraphs
)

PeriodOpt = Annotated[
    str | None,
    typer.Option(
        "--period",
        help="The period a series publishes (2027-03, 2027-Q1, 2027); default: the newest "
        "complete one. A period published once is refused.",
    ),
]
ConfigLedgerOpt = Annotated[
    str | None,
    typer.Option(
        "--ledger",
        help="Budget ledger (default: the config's ledger:, else ledger.sqlite beside the "
        "config); may not differ from the config's ledger:.",
    ),
]
ReadLedgerOpt = Annotated[
    str | None,
    typer.Option(
        "--ledger",
        help="Budget ledger: a SQLite file, or a postgresql:// URL (default: --config's, else "
        f"{DEFAULT_LEDGER}).",
    ),
]
ReadConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="Read the ledger this config's runs spend in (its ledger:, else ledger.sqlite "
        "beside it), as run does.",
    ),
]
OutOpt = Annotated[Path, typer.Option("--out", help="Publication folder.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def _version(asked: bool) -> None:
    if asked:
        from importlib.metadata import version

        typer.echo(f"dppub {version('dppub')}")
        raise typer.Exit(0)


VersionOpt = Annotated[
    bool,
    typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit."),
]


@app.callback()
def _before_any_command(show_version: VersionOpt = False) -> None:
    """Every environment value dppub reads is checked before any command opens a ledger, and
    dppub's Prefect settings are made before any command can import Prefect: it reads them
    once, when first imported. Nothing this module imports up front imports Prefect
    (tests/flows/test_cli.py checks)."""
    from dppub.dp.pipeline.environment import environment

    _guard(environment)
    prefect_env()


def _ledger_timeout() -> float:
    """Seconds to wait for another process holding the ledger's write lock."""
    from dppub.dp.pipeline.environment import environment

    return environment().ledger_timeout


def _fail(message: str, code: int) -> NoReturn:
    """One line on stderr (whatever a message quotes) and the exit code."""
    line = " ".join(message.split())  # a value quoted in a message never breaks the line
    typer.echo(f"dppub: error: {line}", err=True)
    raise typer.Exit(code)


def _guard(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run ``fn``; dppub's own errors and the machine's I/O errors end the command with their
    line and exit code (:func:`dppub.failures.failure`), any other error is a bug: its
    traceback is shown."""
    from dppub.dp.errors import DPPubError

    try:
        return fn(*args, **kwargs)
    except (DPPubError, OSError) as exc:
        from dppub.failures import failure

        _fail(*failure(exc))


@app.command()
def plan(
    config: Path,
    ledger: ConfigLedgerOpt = None,
    as_json: JsonOpt = False,
    period: PeriodOpt = None,
) -> None:
    """Show the planned releases, their costs and what the ledger says is left (reads no data
    values, only the Parquet footers).

    When run would refuse the run -- the data file, its declared columns or their types (from
    the footers), the ledger's record of the dataset, or its budget -- exits after the plan
    with run's line and run's exit code (3: the budget; 2: the rest).
    """
    from dppub.api import plan as planned

    report = _guard(planned, config, ledger=ledger, period=period)
    if as_json:
        typer.echo(json.dumps(report.details, indent=2))
    else:
        typer.echo(report.text, nl=False)
    if report.refused is not None:
        from dppub.failures import failure

        _fail(*failure(report.refused))


@contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Send everything written to stdout -- by Prefect, a solver's native banner, any library --
    to stderr, so that stdout carries only what the README says (the run id)."""
    import sys

    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


@contextmanager
def _collecting_later() -> Iterator[None]:
    """No cyclic garbage collection while a run opens: it imports most of dppub and its
    libraries, which makes no garbage, yet cost three full collections (a tenth of a second and
    more of a small run); what was made is then frozen out of later collections."""
    import gc

    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


@app.command()
def run(
    config: Path,
    ledger: ConfigLedgerOpt = None,
    out: OutOpt = DEFAULT_OUT,
    engine: Annotated[
        str | None,
        typer.Option(help="Override the config's engine: auto, memory, stream or dask."),
    ] = None,
    period: PeriodOpt = None,
) -> None:
    """Run the publishing flow once; prints the run id.

    The run is recorded in the Prefect API configured for Prefect (PREFECT_API_URL, or the
    active Prefect profile), if any; without one it runs without Prefect. The run's cost is
    reserved atomically before it starts: a run the budget refuses exits 3 at once, writes
    nothing and publishes nothing. SIGTERM and Ctrl-C settle the run (a published run is
    committed, one that drew noise is charged) and exit 143 / 130.
    """
    from dppub.dp.pipeline.plan import load_plan
    from dppub.failures import INTERNAL_ERROR, failure
    from dppub.run import NOT_RECORDED, NotPublished, execute, open_run

    with catching() as signals, _stdout_to_stderr():
        try:
            with _collecting_later():
                opened = _guard(
                    lambda: open_run(
                        load_plan(config, engine, period=period, ledger=ledger),
                        str(config.resolve()),
                        ledger=ledger,
                        out=out,
                        engine=engine,
                        timeout=_ledger_timeout(),
                        signals=signals,
                    )
                )
        except Interrupted:
            _fail(f"{signals.line()} before the run started; nothing was spent", signals.exit_code)
        if opened.api is None:
            typer.echo(NOT_RECORDED, err=True)
        failed = None
        try:
            execute(opened, signals)
        except NotPublished as exc:
            failed = exc
            if failure(exc)[1] == INTERNAL_ERROR and os.environ.get("DPPUB_DEBUG") and exc.cause:
                raise exc.cause from None  # a bug: DPPUB_DEBUG=1 shows its traceback
    if failed is not None:
        _fail(*failure(failed))
    typer.echo(f"published to {opened.run.staging.final}", err=True)
    typer.echo(opened.run.run_id)


def _read_ledger(config: Path | None, ledger: str | None) -> str:
    """The ledger audit and recover read: ``--config``'s (as run resolves it), else ``--ledger``,
    else the state folder's."""
    if config is None:
        return DEFAULT_LEDGER if ledger is None else ledger
    from dppub.dp.pipeline.plan import ledger_for, load_config

    return _guard(lambda: ledger_for(load_config(config), ledger))


@app.command()
def recover(
    ledger: ReadLedgerOpt = None,
    dataset: Annotated[str | None, typer.Option(help="Only this dataset.")] = None,
    config: ReadConfigOpt = None,
) -> None:
    """Settle runs that died: commit the published, charge those that drew noise, abort the rest."""
    from dppub.commands import settle_dead

    done = _guard(settle_dead, _read_ledger(config, ledger), dataset)
    for r in done:
        typer.echo(f"{r.dataset} {r.run_id}: {r.action}")
    typer.echo(f"{len(done)} pending run(s) examined")


@app.command()
def audit(
    ledger: ReadLedgerOpt = None,
    dataset: Annotated[str | None, typer.Option(help="Only this dataset.")] = None,
    as_json: JsonOpt = False,
    html_file: Annotated[
        Path | None, typer.Option("--html", help="Also write a self-contained HTML report.")
    ] = None,
    config: ReadConfigOpt = None,
) -> None:
    """Verify the ledger's hash chain and report spending per dataset."""
    from dppub.commands import audit_lines, audit_payload, write_audit_page

    ledger = _read_ledger(config, ledger)
    payload = _guard(audit_payload, ledger, dataset)
    if html_file is not None:
        _guard(write_audit_page, ledger, payload, html_file)
        typer.echo(f"wrote {html_file}", err=True)
    if as_json:
        typer.echo(json.dumps(payload, indent=2))
    else:
        for line in audit_lines(payload):
            typer.echo(line)
    if not payload["chain_ok"]:
        raise typer.Exit(1)


budget_app = typer.Typer(help="Change a dataset's recorded budget, name or source.")
app.add_typer(budget_app, name="budget")


@budget_app.command("amend")
def budget_amend(
    config: Path,
    reason: Annotated[str, typer.Option("--reason", help="Why (recorded in the ledger).")],
    ledger: ConfigLedgerOpt = None,
) -> None:
    """Record the config's budget, name and source as the dataset's declaration.

    The ledger refuses runs whose config disagrees with what it recorded; this is the one way
    to change it, and the change (who, when, why, what) is a ledger entry that audits show.
    """
    from dppub.commands import amend

    done = _guard(amend, config, ledger, reason, _ledger_timeout())
    typer.echo(f"recorded: dataset {done.name!r} ({done.path}): {done.policy.describe()}")


@app.command()
def serve(configs: list[Path], ledger: ConfigLedgerOpt = None, out: OutOpt = DEFAULT_OUT) -> None:
    """Serve the publishing flow on each config's schedule (runs until interrupted).

    Uses the Prefect server at PREFECT_API_URL (or the Prefect profile's) if there is one;
    otherwise starts one on loopback. Prints the command that starts a run now. Ctrl-C stops
    it: exit 130.
    """
    from dppub.flows.deploy import serve_schedules

    try:
        _guard(serve_schedules, configs, ledger, out, lambda line: typer.echo(line, err=True))
    except KeyboardInterrupt:
        _fail("interrupted by SIGINT; serve stopped", 130)


@app.command()
def deploy(
    configs: list[Path],
    pool: Annotated[str, typer.Option("--pool", help="A process work pool on the server.")],
    ledger: ConfigLedgerOpt = None,
    out: OutOpt = DEFAULT_OUT,
) -> None:
    """Register each config's deployment and schedule for a process work pool.

    The server is PREFECT_API_URL's (or the Prefect profile's); `prefect worker start --pool
    NAME` runs the deployments. The config, ledger and output folder are fixed here: a run whose
    parameters name others fails. Prints, per deployment, the command that starts a run now.
    """
    from dppub.flows.deploy import deploy_configs

    for d in _guard(deploy_configs, configs, pool, ledger, out):
        typer.echo(f"deployed {d.name} to work pool {pool!r}; to run it now: {d.command}")


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    finally:
        ignore_from_now()


if __name__ == "__main__":
    main()
