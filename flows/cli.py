"""The ``dppub`` command line: plan, run, audit, recover, serve.

Prefect runs in its local mode (a temporary API server, no network); unless ``PREFECT_HOME`` is
set, its state lives in ``./.state/prefect``. Every error dppub raises on purpose is printed as
one line on stderr with a non-zero exit code (2 for configuration/input/ledger errors, 3 when the
budget refuses a run, 1 when an audit finds a broken chain).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

STATE = Path(".state")
# Seconds to wait for another process holding the ledger's write lock.
LEDGER_TIMEOUT = float(os.environ.get("DPPUB_LEDGER_TIMEOUT", "30"))
DEFAULT_LEDGER = STATE / "ledger.sqlite"
DEFAULT_OUT = STATE / "published"

app = typer.Typer(
    name="dppub",
    help="Differentially private data publishing with a tamper-evident budget ledger.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

LedgerOpt = Annotated[Path, typer.Option("--ledger", help="Budget ledger (SQLite file).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def _prefect_env() -> None:
    """Local-mode Prefect settings; must run before prefect is imported."""
    os.environ.setdefault("PREFECT_HOME", str((STATE / "prefect").resolve()))
    # The temporary server's first start with a fresh home takes ~20 s here (default limit: 20 s).
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")


@contextmanager
def _own_temporary_server() -> Iterator[None]:
    """Prefect's temporary API server, started by and owned by this process.

    Prefect picks its temporary server's port at random from 8000-8999 and checks it with a
    health request, so two ``dppub run`` processes starting together can end up on one port:
    the loser's health check is answered by the winner's server, which later shuts down under
    it. Here the port comes from the OS and the server counts only if *our* process serves it
    (the same arrangement as ``prefect_test_harness``).
    """
    if os.environ.get("PREFECT_API_URL"):
        yield
        return
    import socket

    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import PREFECT_API_URL, temporary_settings

    for _ in range(5):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        server = SubprocessASGIServer(port=port)
        server.start()
        if server.server_process is not None and server.server_process.poll() is None:
            break
        server.stop()
    else:
        _fail("Prefect's temporary server did not start on this machine", 2)
    SubprocessASGIServer._instances[None] = server  # what flow code asks for by default
    # No explicit stop: start() registered one at exit, after which Prefect's log and event
    # workers (registered later, so run earlier) have drained into this server.
    with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
        yield


def _fail(message: str, code: int) -> None:
    typer.echo(f"dppub: error: {message}", err=True)
    raise typer.Exit(code)


def _guard(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run ``fn``; turn dppub's own errors into one line and an exit code."""
    from dp.errors import BudgetExceededError, DPPubError

    try:
        return fn(*args, **kwargs)
    except BudgetExceededError as exc:
        _fail(str(exc), 3)
    except DPPubError as exc:
        _fail(str(exc), 2)


def _plan_payload(config: Path, ledger: Path) -> dict[str, Any]:
    from dp.ledger import Ledger
    from flows.config import load_config, plan_releases
    from flows.stages import expected_errors

    cfg = load_config(config)
    plan, total = plan_releases(cfg)
    remaining = cfg.budget
    if ledger.exists():
        book = Ledger(ledger, create=False)
        remaining = book.remaining(data=cfg.data_identity, policy=cfg.budget_policy)
    workloads = {w.name: w for w in cfg.workloads}
    releases = []
    for p in plan:
        entry: dict[str, Any] = {
            "name": p.name,
            "kind": p.kind,
            "epsilon": p.epsilon,
            "delta": p.delta,
        }
        if p.name in workloads:
            entry.update(expected_errors(cfg, workloads[p.name]))
        releases.append(entry)
    return {
        "dataset": cfg.dataset.name,
        "releases": releases,
        "total_epsilon": total.epsilon,
        "total_delta": total.delta,
        "budget_epsilon": cfg.budget.epsilon,
        "budget": cfg.budget_policy.describe(),
        "budget_period": cfg.period(),
        "remaining_epsilon": remaining.epsilon,
    }


@app.command()
def plan(config: Path, ledger: LedgerOpt = DEFAULT_LEDGER, as_json: JsonOpt = False) -> None:
    """Show the planned releases, their costs and what the ledger says is left (reads no data)."""
    payload = _guard(_plan_payload, config, ledger)
    if as_json:
        typer.echo(json.dumps(payload, indent=2))
        return
    typer.echo(f"dataset {payload['dataset']}")
    for r in payload["releases"]:
        line = f"  {r['name']:<22} {r['kind']:<12} epsilon={r['epsilon']:<6g} delta={r['delta']:g}"
        if "expected_rmse" in r:
            line += (
                f"  {r['queries']} queries, {r['strategy']}: expected RMSE "
                f"{r['expected_rmse']:.4g} (SVD bound {r['svd_bound_rmse']:.4g})"
            )
        typer.echo(line)
    typer.echo(
        f"total epsilon={payload['total_epsilon']:g} delta={payload['total_delta']:g}; "
        f"remaining before this run: epsilon={payload['remaining_epsilon']:g} "
        f"of {payload['budget_epsilon']:g}"
    )


def _open(config: Path, ledger: Path, out: Path) -> tuple[Any, Any, Any]:
    """Validate the config and the input's structure, then open (lock and reserve) the run."""
    from dp.io import check_source
    from dp.ledger import Ledger
    from dp.runs import Run
    from flows.config import load_config, plan_releases

    cfg = load_config(config)
    _, total = plan_releases(cfg)
    # Structure only (files, columns, types), from Parquet metadata: no value is read before
    # the budget is reserved, and no single record can change what happens.
    check_source(cfg.data_path(), cfg.schema, columns=cfg.used_columns)
    book = Ledger(ledger, timeout=LEDGER_TIMEOUT)
    return cfg, book, Run.open(book, out, cfg.run_plan(total))


class _Interrupted(BaseException):
    """SIGTERM or SIGINT arrived; carries the signal number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextmanager
def _signals_raise() -> Iterator[None]:
    """SIGTERM and SIGINT raise :class:`_Interrupted` in the main thread (SIGTERM is handled
    like Ctrl-C: the run settles, then the process exits 143)."""
    import signal

    def handler(signum: int, frame: object) -> None:
        raise _Interrupted(signum)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _settle_quietly(book: Any, run: Any) -> None:
    """Settle the run with SIGTERM/SIGINT held back, so a second signal cannot cut it short."""
    import signal

    from dp.runs import settle

    held = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        _guard(settle, book, run.staging)
    finally:
        run.close()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)


@app.command()
def run(
    config: Path,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    out: Annotated[Path, typer.Option("--out", help="Publication folder.")] = DEFAULT_OUT,
    engine: Annotated[
        str | None,
        typer.Option(help="Override the config's engine: pandas, stream or dask."),
    ] = None,
) -> None:
    """Run the publishing flow once; prints the run id.

    The run's cost is reserved atomically before Prefect starts: a run the budget refuses
    exits 3 at once, writes nothing and publishes nothing. SIGTERM and Ctrl-C settle the run
    (a published run is committed, one that drew noise is charged) and exit 143 / 130.
    """
    import signal

    from prefect.exceptions import TerminationSignal

    if engine not in (None, "pandas", "stream", "dask"):
        _fail(f"--engine must be pandas, stream or dask, got {engine!r}", 2)
    from dp.errors import DPPubError

    failure: tuple[str, int] | None = None
    with _signals_raise():
        try:
            cfg, book, opened = _guard(_open, config, ledger, out)
        except _Interrupted as exc:
            name = signal.Signals(exc.signum).name
            _fail(
                f"interrupted by {name} before the run started; nothing was spent", 128 + exc.signum
            )
        try:
            _prefect_env()
            from flows.runner import flow_for

            with _own_temporary_server():
                flow_for(cfg, engine)(
                    str(config.resolve()),
                    str(ledger.resolve()),
                    str(out.resolve()),
                    run_id=opened.run_id,
                    engine=engine,
                )
        except (_Interrupted, TerminationSignal, KeyboardInterrupt) as exc:
            signum = getattr(exc, "signum", signal.SIGINT)
            if isinstance(exc, TerminationSignal):
                signum = signal.SIGTERM
            failure = (f"interrupted by {signal.Signals(signum).name}", 128 + int(signum))
        except DPPubError as exc:
            failure = (str(exc), 2)
        except OSError as exc:
            where = f" ({exc.filename})" if exc.filename else ""
            failure = (f"I/O error: {exc.strerror or exc}{where}", 2)
        except Exception as exc:  # a bug: say so in one line; DPPUB_DEBUG=1 shows the traceback
            if os.environ.get("DPPUB_DEBUG"):
                raise
            failure = (f"internal error {type(exc).__name__}: {exc} (DPPUB_DEBUG=1 for more)", 1)
        finally:
            _settle_quietly(book, opened)
    if failure is not None:
        state = book.reservation(opened.run_id).state
        message, code = failure
        _fail(f"{message}; run {opened.run_id} was {state}", code)
    typer.echo(f"published to {opened.staging.final}", err=True)
    typer.echo(opened.run_id)


@app.command()
def recover(
    ledger: LedgerOpt = DEFAULT_LEDGER,
    dataset: Annotated[str | None, typer.Option(help="Only this dataset.")] = None,
) -> None:
    """Resolve reservations left by dead runs: commit the published, release the rest."""
    from dp.ledger import Ledger
    from dp.runs import recover as recover_runs

    def settle_dead() -> Any:
        book = Ledger(ledger, create=False)
        keys = [d.key for d in book.declarations() if dataset in (None, d.name)]
        return [r for k in keys for r in recover_runs(book, key=k)]

    done = _guard(settle_dead)
    for r in done:
        typer.echo(f"{r.dataset} {r.run_id}: {r.action}")
    typer.echo(f"{len(done)} pending run(s) examined")


def _audit_payload(ledger: Path, dataset: str | None) -> dict[str, Any]:
    from dp.ledger import Ledger
    from dp.ledger.summary import spending_summary

    book = Ledger(ledger, create=False)
    chain = book.verify()
    return {
        "chain_ok": chain.ok,
        "rows": chain.rows,
        "head": chain.head,
        "problems": list(chain.problems),
        "datasets": spending_summary(book, dataset),
    }


@app.command()
def audit(
    ledger: LedgerOpt = DEFAULT_LEDGER,
    dataset: Annotated[str | None, typer.Option(help="Only this dataset.")] = None,
    as_json: JsonOpt = False,
    html_file: Annotated[
        Path | None, typer.Option("--html", help="Also write a self-contained HTML report.")
    ] = None,
) -> None:
    """Verify the ledger's hash chain and report spending per dataset."""
    payload = _guard(_audit_payload, ledger, dataset)
    if html_file is not None:
        from dp.ledger import Ledger
        from flows.audit_html import render_audit_html

        history = _guard(lambda: Ledger(ledger, create=False).history(dataset))
        html_file.write_text(render_audit_html(payload, history), encoding="utf-8")
        typer.echo(f"wrote {html_file}", err=True)
    if as_json:
        typer.echo(json.dumps(payload, indent=2))
    else:
        header = ("dataset", "budget", "lifetime", "remaining", "runs", "charged", "pending")
        line = "{:<24} {:>8} {:>9} {:>9} {:>5} {:>7} {:>7}"
        typer.echo(line.format(*header))
        for name, d in payload["datasets"].items():
            typer.echo(
                line.format(
                    name,
                    f"{d['budget_epsilon']:g}",
                    f"{d['lifetime_spent_epsilon']:g}",
                    f"{d['remaining_epsilon']:g}",
                    d["runs"],
                    d["charged_runs"],
                    d["pending_runs"],
                )
            )
            for a in d["amendments"]:
                typer.echo(
                    f"  amended {a['ts']} by {a['who']}: {'; '.join(a['changes'])} ({a['why']})"
                )
        state = "ok" if payload["chain_ok"] else "BROKEN"
        typer.echo(f"hash chain: {state} ({payload['rows']} rows, head {payload['head'][:16]}…)")
        for p in payload["problems"]:
            typer.echo(f"  {p}")
    if not payload["chain_ok"]:
        raise typer.Exit(1)


budget_app = typer.Typer(help="Change a dataset's recorded budget, name or source.")
app.add_typer(budget_app, name="budget")


@budget_app.command("amend")
def budget_amend(
    config: Path,
    reason: Annotated[str, typer.Option("--reason", help="Why (recorded in the ledger).")],
    ledger: LedgerOpt = DEFAULT_LEDGER,
) -> None:
    """Record the config's budget, name and source as the dataset's declaration.

    The ledger refuses runs whose config disagrees with what it recorded; this is the one way
    to change it, and the change (who, when, why, what) is a ledger entry that audits show.
    """
    import getpass

    from dp.ledger import Ledger
    from flows.config import load_config

    def amend() -> Any:
        cfg = load_config(config)
        book = Ledger(ledger, timeout=LEDGER_TIMEOUT, create=False)
        return book.amend(
            data=cfg.data_identity, policy=cfg.budget_policy, who=getpass.getuser(), why=reason
        )

    done = _guard(amend)
    typer.echo(f"recorded: dataset {done.name!r} ({done.path}): {done.policy.describe()}")


def _local_server(state: Path) -> Any:
    """Start a Prefect server on loopback for ``serve`` and point this process at it.

    Prefect's temporary (ephemeral) server does not run the scheduler service, so scheduled
    runs need a real server; this one lives only as long as ``dppub serve``.
    """
    import socket
    import subprocess
    import time
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    state.mkdir(parents=True, exist_ok=True)
    log = (state / "prefect-server.log").open("ab")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "prefect",
            "server",
            "start",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/api"
    deadline = time.monotonic() + float(
        os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
    )
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
                if resp.status == 200:
                    break
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            _fail(f"the local Prefect server did not start; see {state / 'prefect-server.log'}", 2)
        time.sleep(0.5)
    os.environ["PREFECT_API_URL"] = url
    typer.echo(f"Prefect server for the schedules: {url.removesuffix('/api')}", err=True)
    return server


@app.command()
def serve(
    configs: list[Path],
    ledger: LedgerOpt = DEFAULT_LEDGER,
    out: Annotated[Path, typer.Option("--out", help="Publication folder.")] = DEFAULT_OUT,
) -> None:
    """Serve the publishing flow on each config's schedule (runs until interrupted).

    Uses the Prefect server at PREFECT_API_URL if set; otherwise starts one on loopback.
    """
    from flows.config import load_config

    cfgs = [(c, _guard(load_config, c)) for c in configs]
    missing = [str(c) for c, cfg in cfgs if cfg.schedule is None]
    if missing:
        _fail(f"no schedule in {', '.join(missing)}", 2)
    _prefect_env()
    server = None if os.environ.get("PREFECT_API_URL") else _local_server(STATE)
    try:
        from prefect import serve as prefect_serve
        from prefect.schedules import Cron, Interval

        from flows.runner import flow_for

        deployments = []
        for path, cfg in cfgs:
            sched = cfg.schedule
            if sched is None:  # narrowed above; keeps the type checker informed
                continue
            params = {
                "config_path": str(path.resolve()),
                "ledger_path": str(ledger.resolve()),
                "out_dir": str(out.resolve()),
            }
            schedule = (
                Cron(sched.cron, timezone=sched.timezone)
                if sched.cron is not None
                else Interval(sched.interval_seconds or 0, timezone=sched.timezone)
            )
            deployments.append(
                flow_for(cfg).to_deployment(
                    name=cfg.dataset.name, parameters=params, schedule=schedule
                )
            )
        prefect_serve(*deployments)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
