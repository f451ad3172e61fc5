"""A throwaway PostgreSQL server for the tests, from the ``pgserver`` wheel: one per test process.

``make setup`` installs ``pgserver`` into ``.venv`` (the ``dev`` extra); it bundles PostgreSQL's
own binaries (16.x, relocatable: ``initdb``, ``pg_ctl``, ``postgres``), which run here directly.
Nothing is installed on the machine. The ``postgres`` fixture starts a server in a temporary
folder the first time a test asks for it: no TCP port (a Unix socket in that folder only), trust
authentication, and durability off (``fsync``), since the tests kill clients, never the server.
Without the wheel, a test that asks for the server skips with one line naming the install
command (under ``DPPUB_REQUIRE_ALL=1``, as ``.ci/run`` sets, it fails: ``tests/conftest.py``).
The root conftest registers the fixture (one server per test process, whatever asks for it).

PostgreSQL refuses to run as root: as root, the server runs as ``nobody`` (every Debian machine
has it), from the wheel's folder when ``nobody`` can reach it, else from a copy under ``/tmp``.
pgserver's Python API is not used: as root it adds a system user and opens every parent folder
of its data and of the virtualenv up to ``/`` to other users, and its start has a fixed 10 s
limit (tight on two loaded cores). Its binaries start a server in ~1 s.
"""

from __future__ import annotations

import importlib.util
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

INSTALL = "make setup (or: .venv/bin/pip install -e '.[dev]')"


def _bundled() -> Path:
    """The folder of the wheel's PostgreSQL (``bin/``, ``lib/``, ``share/``)."""
    spec = importlib.util.find_spec("pgserver")  # found, not imported: its import does nothing here
    if spec is None or spec.origin is None:
        pytest.skip(f"PostgreSQL tests need the pgserver wheel: {INSTALL}")
    return Path(spec.origin).parent / "pginstall"


class PostgresServer:
    """A running server; :meth:`schema_url` and :meth:`database_url` give fresh ledgers.

    Args:
        durable: keep PostgreSQL's default ``fsync``/``synchronous_commit`` (for benchmarks).
    """

    def __init__(self, *, durable: bool = False) -> None:
        install = _bundled()
        # Under /tmp: the server's user must reach it, and a socket path has ~100 characters.
        self.base = Path(tempfile.mkdtemp(prefix="dppub-pg-", dir="/tmp"))
        self._as: dict[str, Any] = {"cwd": self.base, "capture_output": True, "text": True}
        self.uid, self.gid = os.geteuid(), os.getegid()  # the server's user, owner of its files
        if self.uid == 0:
            user = pwd.getpwnam("nobody")
            self.uid, self.gid = user.pw_uid, user.pw_gid
            os.chown(self.base, self.uid, self.gid)
            self._as.update(user=self.uid, group=self.gid, extra_groups=[])
            install = self._reachable(install)
        bindir = install / "bin"
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

    def _reachable(self, install: Path) -> Path:
        """``install``, or a copy in the server's folder when the server's user cannot run it
        there (a virtualenv under a folder closed to others, such as ``/root``)."""
        probe = [str(install / "bin" / "initdb"), "--version"]
        try:
            if subprocess.run(probe, check=False, **self._as).returncode == 0:
                return install
        except PermissionError:  # the file itself cannot be executed as that user
            pass
        site = self.base / "site"  # the wheel's layout: the binaries' RPATH is relative
        for part in ("bin", "lib", "share"):
            shutil.copytree(install / part, site / "pgserver" / "pginstall" / part, symlinks=True)
        libs = install.parents[1] / "pgserver.libs"  # RPATH $ORIGIN/../../../pgserver.libs
        if libs.is_dir():
            shutil.copytree(libs, site / "pgserver.libs", symlinks=True)
        return site / "pgserver" / "pginstall"

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
