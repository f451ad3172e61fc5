"""A real Prefect server for the tests (``prefect server start``, never a mocked client): one per
test process, started the first time a test asks for ``prefect_server`` and shared by every test
after it (each test keeps to its own flow runs, work pools and folders). Used from the root
conftest, so that a test process never starts two.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest


class PrefectServer(NamedTuple):
    url: str
    """Its API URL (what PREFECT_API_URL names)."""
    home: Path
    """Its PREFECT_HOME: its database."""


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrefectServer]:
    """A real ``prefect server start`` (full services: task runs, artifacts, events are
    recorded) on a free loopback port, with its own home. Session-scoped: one per test worker
    that asks for it (the tests that need it are in few files)."""
    home = tmp_path_factory.mktemp("prefect-server")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/api"
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env |= {"PREFECT_HOME": str(home), "PREFECT_UI_ENABLED": "false"}
    command = [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1"]
    with (home / "server.log").open("wb") as log:
        server = subprocess.Popen([*command, "--port", str(port)], stdout=log, stderr=log, env=env)
    try:
        deadline = time.monotonic() + 300  # a loaded 2-core machine: up to a minute or more
        while True:
            assert server.poll() is None, (home / "server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the Prefect server did not start"
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        yield PrefectServer(url, home)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
