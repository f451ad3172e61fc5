"""The Prefect API a dppub process talks to: a temporary one it owns, or a server for ``serve``.

Prefect runs in its local mode (no network). Unless ``PREFECT_HOME`` is set, its state lives in
the per-user dppub state folder (:data:`STATE`), so ``dppub`` works from any directory. Nothing
here touches private data.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from dp.errors import ConfigError

__all__ = [
    "STATE",
    "USER_PREFECT_HOME",
    "check_api",
    "check_served",
    "die_with_parent",
    "local_server",
    "own_temporary_server",
    "prefect_env",
    "register_served",
    "stop_server",
]


def _state() -> Path:
    if os.environ.get("DPPUB_HOME"):
        return Path(os.environ["DPPUB_HOME"])
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "dppub"


STATE = _state()
"""The default folder of the ledger, the publications and Prefect's home: ``$DPPUB_HOME``, else
``$XDG_STATE_HOME/dppub``, else ``~/.local/state/dppub`` -- the same from any directory."""

USER_PREFECT_HOME = os.environ.get("PREFECT_HOME")
"""``PREFECT_HOME`` as the user set it (None: Prefect's default), read before :func:`prefect_env`
sets dppub's: where Prefect finds the user's profile (:func:`flows.deploy.configured_api`)."""


def prefect_env() -> None:
    """Local-mode Prefect settings; must run before prefect is imported. Creates Prefect's
    home with its parents (Prefect would not)."""
    home = Path(os.environ.setdefault("PREFECT_HOME", str((STATE / "prefect").resolve())))
    home.mkdir(parents=True, exist_ok=True)
    # The temporary server's first start with a fresh home takes ~20 s here (default limit: 20 s).
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")


_SERVED = "DPPUB_SERVED"
"""The deployments ``dppub serve`` registered, as JSON, in the environment its runs inherit."""


def register_served(runs: list[dict[str, str]]) -> None:
    """Record what each served deployment runs (config, ledger, output folder) where only the
    serving process can set it: the environment its flow-run processes inherit."""
    os.environ[_SERVED] = json.dumps(runs)


def check_served(parameters: dict[str, str | None]) -> None:
    """A run of a deployment must run exactly what was registered: its config, ledger and
    output folder are never run parameters (anyone reaching the Prefect API or UI could
    otherwise point a run at a fresh ledger: a new budget). The deployment's parameters on the
    Prefect server decide (``dppub deploy``); a served run must also be one that ``dppub
    serve`` recorded in the environment its runs inherit, out of the API's reach.

    Raises:
        ConfigError: the run's parameters differ from the registration.
    """
    from flows.deploy import registered_parameters

    given = {k: v for k, v in parameters.items() if v is not None}
    served = os.environ.get(_SERVED)
    if given == registered_parameters() and (served is None or given in json.loads(served)):
        return
    fixed = ", ".join(f"{k}={v}" for k, v in sorted(given.items()))
    raise ConfigError(
        f"refused a deployment run with {fixed}: a deployment's config, ledger and output "
        "folder are the ones `dppub serve` or `dppub deploy` registered, never run parameters"
    )


def check_api(timeout: float = 10.0) -> None:
    """If ``PREFECT_API_URL`` names a Prefect server, it must answer its health check: asked
    before the ledger is opened, so an unreachable server refuses the run before any budget is
    held (instead of Prefect's retries failing it after the reservation).

    Raises:
        ConfigError: one line with the URL, the cause and what to do.
    """
    url = os.environ.get("PREFECT_API_URL", "").strip()
    if not url:
        return
    advice = "start that server, or unset PREFECT_API_URL to let dppub start a temporary one"
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"PREFECT_API_URL must be an http(s) URL, got {url!r}; {advice}")
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/health", timeout=timeout) as resp:
            if resp.status == 200:
                return
            cause = f"HTTP {resp.status}"
    except (OSError, ValueError) as exc:  # URLError, HTTPError, timeouts are OSErrors
        cause = str(getattr(exc, "reason", None) or exc)
    raise ConfigError(
        f"the Prefect API at PREFECT_API_URL={url} is unreachable ({cause}); {advice}"
    )


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` for a child process that must not outlive the process starting it.

    The kernel sends the child ``sig`` when the thread that forked it ends -- even when the
    parent is killed with SIGKILL and runs no clean-up (``PR_SET_PDEATHSIG``, Linux). If the
    parent died between the fork and the ``prctl``, the child exits at once. Elsewhere None:
    there the parent's ``finally`` is the only clean-up.
    """
    if not sys.platform.startswith("linux"):
        return None
    parent = os.getpid()
    libc = ctypes.CDLL(None, use_errno=True)  # loaded here: nothing to import after the fork

    def preexec() -> None:
        if libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0 or os.getppid() != parent:
            os._exit(1)

    return preexec


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def own_temporary_server() -> Iterator[None]:
    """Prefect's temporary API server, started by and owned by this process.

    Prefect picks its temporary server's port at random from 8000-8999 and checks it with a
    health request, so two ``dppub run`` processes starting together can end up on one port:
    the loser's health check is answered by the winner's server, which later shuts down under
    it. Here the port comes from the OS and the server counts only if *our* process serves it
    (the same arrangement as ``prefect_test_harness``).

    Raises:
        ConfigError: the server did not start on this machine.
    """
    if os.environ.get("PREFECT_API_URL"):
        yield
        return
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

    class OwnedServer(SubprocessASGIServer):
        """Prefect's temporary server in a session of its own (Ctrl-C to dppub's process
        group does not reach it: dppub settles its run, then stops it) that dies with dppub
        (SIGTERM or SIGKILL of dppub leaves no server behind)."""

        def _run_uvicorn_command(self) -> subprocess.Popen[bytes]:
            import prefect

            args = ["--app-dir", str(prefect.__module_path__.parent), "--factory"]
            args += ["prefect.server.api.server:create_app", "--host", "127.0.0.1"]
            args += ["--port", str(self.port), "--log-level", "error", "--lifespan", "on"]
            env = {
                **os.environ,
                "PREFECT_UI_ENABLED": "0",
                "PREFECT__SERVER_EPHEMERAL": "1",
                "PREFECT__SERVER_FINAL": "1",
                **get_current_settings().to_environment_variables(exclude_unset=True),
            }
            return subprocess.Popen(
                [sys.executable, "-m", "uvicorn", *args],
                env=env,
                start_new_session=True,
                preexec_fn=die_with_parent(signal.SIGKILL),
            )

    for _ in range(5):
        server = OwnedServer(port=_free_port())
        server.start()
        if server.server_process is not None and server.server_process.poll() is None:
            break
        server.stop()
    else:
        raise ConfigError("Prefect's temporary server did not start on this machine")
    SubprocessASGIServer._instances[None] = server  # what flow code asks for by default
    # No explicit stop: start() registered one at exit, after which Prefect's log and event
    # workers (registered later, so run earlier) have drained into this server.
    with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
        yield


def local_server(state: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start a Prefect server on loopback for ``serve``; returns it and its API URL.

    Prefect's temporary (ephemeral) server does not run the scheduler service, so scheduled
    runs need a real server; this one lives only as long as ``dppub serve``: it is stopped
    when ``serve`` ends and killed by the kernel if ``serve`` dies (:func:`die_with_parent`).
    Its dashboard is told where its API is (``PREFECT_UI_API_URL``): by default the UI's
    settings point at port 4200, and the page could not reach the server on any other port.

    Raises:
        ConfigError: it did not answer its health check in time.
    """
    port = _free_port()
    state.mkdir(parents=True, exist_ok=True)
    log = (state / "prefect-server.log").open("ab")
    url = f"http://127.0.0.1:{port}/api"
    env = {
        **os.environ,
        "PREFECT_UI_API_URL": url,
        "PREFECT_SERVER_API_HOST": "127.0.0.1",
        "PREFECT_SERVER_API_PORT": str(port),
    }
    env.pop("PREFECT_API_URL", None)  # the server is the API: it must not point elsewhere
    command = [sys.executable, "-m", "prefect", "server", "start"]
    server = subprocess.Popen(
        [*command, "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        preexec_fn=die_with_parent(),  # only a prctl in the child: safe after a fork
    )
    limit = float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90"))
    deadline = time.monotonic() + limit
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
                if resp.status == 200:
                    return server, url
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            raise ConfigError(
                f"the local Prefect server did not start; see {state / 'prefect-server.log'}"
            )
        time.sleep(0.5)


def stop_server(server: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """Stop a server :func:`local_server` started: SIGTERM, then SIGKILL after ``timeout``."""
    server.terminate()
    try:
        server.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
