"""The Prefect API a dppub process talks to: the one the user configured, or a server for ``serve``.

``dppub run`` uses a Prefect API only if one is configured the way Prefect resolves it (the
environment, the active profile in ``$PREFECT_HOME/profiles.toml``, ``prefect.toml``,
``pyproject.toml``, ``.env``): :func:`configured_api`. Without one it starts no server and
imports no Prefect (:mod:`dppub.run`). ``dppub serve`` without a configured API starts its
own server, whose home is in the per-user dppub state folder (:data:`STATE`) unless
``PREFECT_HOME`` is set. Nothing here touches private data.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path

from dppub.dp.errors import ConfigError

__all__ = [
    "STATE",
    "check_api",
    "check_served",
    "configured_api",
    "die_with_parent",
    "local_server",
    "prefect_env",
    "register_served",
    "serve_home",
    "stop_server",
]


def _state() -> Path:
    if os.environ.get("DPPUB_HOME"):
        return Path(os.environ["DPPUB_HOME"])
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "dppub"


STATE = _state()
"""The default folder of the ledger, the publications and ``serve``'s Prefect home:
``$DPPUB_HOME``, else ``$XDG_STATE_HOME/dppub``, else ``~/.local/state/dppub`` -- the same from
any directory."""


def prefect_env() -> None:
    """dppub's Prefect settings (no telemetry); must run before Prefect is imported. The user's
    own Prefect settings (``PREFECT_HOME``, its profiles) are left alone: they say which API
    runs are recorded in (:func:`configured_api`)."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")


def configured_api() -> str | None:
    """The Prefect API URL Prefect itself would use (its settings object: the environment, the
    active profile, ``prefect.toml`` / ``pyproject.toml`` / ``.env``), or None.

    Importing ``prefect`` takes seconds (its whole engine); the settings model needs only
    pydantic-settings. When Prefect is not imported yet, its ``settings`` package is loaded
    under a bare package module and removed again, so the run imports Prefect for real only if
    it uses the API (and then reads its settings afresh); if that ever fails, Prefect is
    imported normally. Quicker still (a fifth of a second), when no source Prefect reads can
    name an API at all, the answer is None without reading the model: :func:`_surely_no_api`.
    """
    if "prefect" not in sys.modules:
        if _surely_no_api():
            return None
        try:
            return _settings_only_url()
        except Exception:  # a Prefect release laid out otherwise: the normal way below
            _forget_prefect()
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    return url or None


_OURS = frozenset({"PREFECT_HOME", "PREFECT_SERVER_ANALYTICS_ENABLED"})
"""``PREFECT_*`` variables that cannot name an API (the profiles' folder; :func:`prefect_env`)."""


def _surely_no_api() -> bool:
    """True only if none of the sources Prefect's settings read can set an API URL: no other
    ``PREFECT_*`` variable in the environment (any case: Prefect's names are case-insensitive),
    no ``.env`` or ``prefect.toml`` and no ``[tool.prefect]`` in ``pyproject.toml`` here, and
    the active profile of ``$PREFECT_HOME/profiles.toml`` (``~/.prefect`` by default) names no
    key with ``API`` in it (a missing file means Prefect's own template: no API). Whenever in
    doubt, False: :func:`configured_api` then asks Prefect's settings model."""
    if any(k.upper().startswith("PREFECT_") and k not in _OURS for k in os.environ):
        return False
    import tomllib  # here: `import dppub` imports this module for prefect_env alone

    try:
        if Path(".env").exists() or Path("prefect.toml").exists():
            return False
        pyproject = Path("pyproject.toml")
        if pyproject.exists() and "prefect" in tomllib.loads(pyproject.read_text()).get("tool", {}):
            return False
        home = os.environ.get("PREFECT_HOME") or str(Path.home() / ".prefect")
        profiles = Path(home) / "profiles.toml"
        if "~" in home or not profiles.is_absolute():
            return False
        if not profiles.exists():
            return True
        data = tomllib.loads(profiles.read_text())
        profile = data.get("profiles", {}).get(data.get("active"))
    except (OSError, ValueError, AttributeError):  # unreadable, not TOML, not a table
        return False
    return isinstance(profile, dict) and not any("API" in str(k).upper() for k in profile)


def _settings_only_url() -> str | None:
    spec = importlib.util.find_spec("prefect")
    if spec is None or spec.submodule_search_locations is None:
        raise ImportError("prefect is not installed")
    bare = types.ModuleType("prefect")
    bare.__path__ = list(spec.submodule_search_locations)
    bare.__spec__ = spec
    sys.modules["prefect"] = bare
    try:
        from prefect.settings.models.root import Settings

        url = Settings().api.url
    finally:
        _forget_prefect()
    return url or None


def _forget_prefect() -> None:
    for name in [m for m in sys.modules if m == "prefect" or m.startswith("prefect.")]:
        del sys.modules[name]


def serve_home() -> None:
    """``serve``'s Prefect home: ``$PREFECT_HOME``, else ``STATE/prefect`` (created: Prefect
    would not create its parents). Call before Prefect is imported."""
    home = Path(os.environ.setdefault("PREFECT_HOME", str((STATE / "prefect").resolve())))
    home.mkdir(parents=True, exist_ok=True)


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
    from dppub.flows.deploy import registered_parameters

    given = {k: v for k, v in parameters.items() if v is not None}
    served = os.environ.get(_SERVED)
    if given == registered_parameters() and (served is None or given in json.loads(served)):
        return
    fixed = ", ".join(f"{k}={v}" for k, v in sorted(given.items()))
    raise ConfigError(
        f"refused a deployment run with {fixed}: a deployment's config, ledger and output "
        "folder are the ones `dppub serve` or `dppub deploy` registered, never run parameters"
    )


def check_api(url: str, timeout: float = 10.0) -> None:
    """The configured Prefect API (:func:`configured_api`) must answer its health check: asked
    before the ledger is opened, so an unreachable server refuses the run before any budget is
    held (instead of Prefect's retries failing it after the reservation).

    Raises:
        ConfigError: one line with the URL, the cause and what to do.
    """
    import urllib.request

    advice = "start that server, or unset PREFECT_API_URL (environment and Prefect profile)"
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


def local_server(state: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start a Prefect server on loopback for ``serve``; returns it and its API URL.

    Prefect's temporary (ephemeral) server does not run the scheduler service, so scheduled
    runs need a real server; this one lives only as long as ``dppub serve``: it is stopped
    when ``serve`` ends and killed by the kernel if ``serve`` dies (:func:`die_with_parent`).
    Its dashboard is told where its API is: by default the UI's settings point at port 4200,
    and the page could not reach the server on any other port. Prefect 3 reads that setting
    under two names, ``PREFECT_SERVER_UI_API_URL`` first, then ``PREFECT_UI_API_URL``: both are
    set, so neither an inherited value (a shell, a profile's server on 4200) wins.

    Raises:
        ConfigError: it did not answer its health check in time.
    """
    import urllib.request

    port = _free_port()
    state.mkdir(parents=True, exist_ok=True)
    log = (state / "prefect-server.log").open("ab")
    url = f"http://127.0.0.1:{port}/api"
    env = {
        **os.environ,
        "PREFECT_SERVER_UI_API_URL": url,
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
