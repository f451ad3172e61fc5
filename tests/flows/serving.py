"""``dppub serve`` as the tests start and stop it: in its own process group (a signal reaches
its runner and the runs it started), its output in a log file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path


def start_serve(
    args: Sequence[str], *, cwd: Path, env: Mapping[str, str], log: Path
) -> subprocess.Popen[bytes]:
    """``dppub serve ARGS`` started, writing to ``log``."""
    with log.open("wb") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "dppub.cli", "serve", *args],
            cwd=cwd,
            env=dict(env),
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to ``proc``'s process group, SIGKILL after 30 s; waits for it."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
