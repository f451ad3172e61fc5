"""A throwaway PostgreSQL server for the tests: Debian's ``postgresql``, one per test process.

The ``postgres`` fixture starts a server in a temporary folder the first time a test asks for
it: no TCP port (a Unix socket in that folder only), trust authentication, and durability off
(``fsync``), since the tests kill clients, never the server. When the server binaries are missing
it installs Debian's ``postgresql`` once (``apt-get``, idempotent and serialized between test
processes by a file lock); as root, the server runs as the ``postgres`` user, because PostgreSQL
refuses to run as root. Use it from a conftest with ``from tests.pg import postgres``.

Not the ``pgserver`` wheel, which does run as root here: to do so it adds a system user and
opens every parent folder of its data and of the virtualenv up to ``/`` to other users, its
server start has a fixed 10 s limit (tight on two loaded cores), and it bundles its own server
build; Debian's server is part of the machine image and takes ~1 s to start.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

__all__ = ["PostgresServer", "postgres"]

_INSTALL_LOCK = Path(tempfile.gettempdir()) / "dppub-postgresql-install.lock"


def _bindir() -> Path | None:
    """The newest installed server's binaries (Debian keeps them per major version)."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    return None if initdb is None else Path(initdb).parent


def _install() -> Path:
    if os.geteuid() != 0:
        pytest.fail(
            "no PostgreSQL server found: install Debian's postgresql (or put initdb on PATH)"
        )
    with _INSTALL_LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other test process may be installing it now
        if _bindir() is None:
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "postgresql"]
            if subprocess.run(install, env=env, capture_output=True).returncode != 0:
                subprocess.run(["apt-get", "update", "-q"], env=env, check=True)
                subprocess.run(install, env=env, check=True, capture_output=True)
    found = _bindir()
    if found is None:
        pytest.fail("apt-get installed postgresql, but no initdb was found")
    return found


class PostgresServer:
    """A running server; :meth:`schema_url` and :meth:`database_url` give fresh ledgers.

    Args:
        durable: keep PostgreSQL's default ``fsync``/``synchronous_commit`` (for benchmarks).
    """

    def __init__(self, *, durable: bool = False) -> None:
        bindir = _bindir() or _install()
        # Under /tmp: the postgres user must reach it, and a socket path has ~100 characters.
        self.base = Path(tempfile.mkdtemp(prefix="dppub-pg-", dir="/tmp"))
        self._as: dict[str, Any] = {"cwd": self.base, "capture_output": True, "text": True}
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.base, user.pw_uid, user.pw_gid)
            self._as.update(user=user.pw_uid, group=user.pw_gid, extra_groups=[])
        self._pg_ctl = [str(bindir / "pg_ctl"), "-D", str(self.base / "data")]
        self._run(
            str(bindir / "initdb"),
            *("-D", str(self.base / "data"), "-U", "postgres", "--auth=trust", "-E", "UTF8"),
            "--no-sync",
        )
        options = f"-c listen_addresses='' -c unix_socket_directories={self.base}"
        if not durable:  # the tests kill clients, never the server: durability costs only time
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self._run(
            *self._pg_ctl, "-l", str(self.base / "log"), "-w", "-t", "120", "-o", options, "start"
        )

    def _run(self, *command: str) -> None:
        done = subprocess.run(command, check=False, **self._as)
        if done.returncode != 0:
            log = self.base / "log"
            tail = log.read_text()[-2000:] if log.is_file() else ""
            pytest.fail(f"{Path(command[0]).name} failed: {done.stderr[-2000:]}{tail}")

    def url(self, database: str = "postgres", **params: str) -> str:
        query = "".join(f"&{k}={v}" for k, v in params.items())
        return f"postgresql://postgres@/{database}?host={self.base}{query}"

    def _create(self, what: str) -> str:
        name = f"t_{uuid.uuid4().hex[:16]}"  # generated: nothing to escape
        with psycopg.connect(self.url(), autocommit=True) as con:
            con.execute(f"CREATE {what} {name}")
        return name

    def schema_url(self) -> str:
        """A URL whose search path is a new, empty schema (a millisecond to make)."""
        return self.url(options=f"-csearch_path%3D{self._create('SCHEMA')}")

    def database_url(self) -> str:
        """A URL of a new, empty database (its ``public`` schema; ~0.5 s to make)."""
        return self.url(self._create("DATABASE"))

    def stop(self) -> None:
        subprocess.run([*self._pg_ctl, "-m", "immediate", "-w", "stop"], check=False, **self._as)
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server for this test process, stopped and removed at the end."""
    server = PostgresServer()
    try:
        yield server
    finally:
        server.stop()
