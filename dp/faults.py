"""Fault injection for the crash-safety tests, kept free of heavy imports.

``DPPUB_FAULT_AT=<step>[,<step>...]`` makes the running process fail at each listed step of the
run protocol (every time it is reached), the way real faults happen; ``DPPUB_FAULT`` says how
(default ``kill``):

* ``kill`` / ``term`` / ``int``: the process sends itself SIGKILL / SIGTERM / SIGINT;
* ``eio`` / ``enospc``: an ``OSError`` (an I/O error, a full disk) is raised right there.

Both are unset in normal use. The steps, in protocol order: ``reserved`` (budget held),
``reading`` (the read task starts, before any value is read), ``drawn`` (a release recorded its
draw, before the noise), ``staged`` (every release written), ``composed`` (release rows in the
ledger), ``renamed`` (the run folder just renamed into place), ``published`` (publication
finished) and ``committed``. ``DPPUB_FAULT_AT=drawn,settling`` adds a second signal while the
interrupted run is being settled.
"""

from __future__ import annotations

import errno
import os
import signal

__all__ = ["ACTIONS", "POINTS", "STEPS", "fault_point"]

STEPS = ("reserved", "reading", "drawn", "staged", "composed", "renamed", "published", "committed")
POINTS = (*STEPS, "writing", "settling")
"""``writing``: before each released file is written (e.g. ``DPPUB_FAULT=enospc``: a full disk);
``settling``: as a pending run starts to be settled."""
ACTIONS = ("kill", "term", "int", "eio", "enospc")
_SIGNALS = {"kill": signal.SIGKILL, "term": signal.SIGTERM, "int": signal.SIGINT}
_ERRORS = {"eio": errno.EIO, "enospc": errno.ENOSPC}


def fault_point(step: str) -> None:
    """Fail here, as ``DPPUB_FAULT`` says, if ``DPPUB_FAULT_AT`` names ``step``."""
    if step not in os.environ.get("DPPUB_FAULT_AT", "").split(","):
        return
    action = os.environ.get("DPPUB_FAULT", "kill")
    if action in _ERRORS:
        code = _ERRORS[action]
        raise OSError(code, os.strerror(code), f"<fault injected at {step}>")
    os.kill(os.getpid(), _SIGNALS.get(action, signal.SIGKILL))
