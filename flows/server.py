"""The Prefect API a dppub process talks to: a temporary one it owns, or a server for ``serve``.

Prefect runs in its local mode (no network). Unless ``PREFECT_HOME`` is set, its state lives
in ``./.state/prefect``. Nothing here touches private data.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dp.errors import ConfigError

__all__ = ["STATE", "local_server", "own_temporary_server", "prefect_env"]

STATE = Path(".state")


def prefect_env() -> None:
    """Local-mode Prefect settings; must run before prefect is imported."""
    os.environ.setdefault("PREFECT_HOME", str((STATE / "prefect").resolve()))
    # The temporary server's first start with a fresh home takes ~20 s here (default limit: 20 s).
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")


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
    from prefect.settings import PREFECT_API_URL, temporary_settings

    for _ in range(5):
        server = SubprocessASGIServer(port=_free_port())
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
    runs need a real server; this one lives only as long as ``dppub serve``.

    Raises:
        ConfigError: it did not answer its health check in time.
    """
    port = _free_port()
    state.mkdir(parents=True, exist_ok=True)
    log = (state / "prefect-server.log").open("ab")
    command = [sys.executable, "-m", "prefect", "server", "start"]
    server = subprocess.Popen(
        [*command, "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/api"
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
