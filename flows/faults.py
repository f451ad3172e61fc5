"""Crash-safety test hook (fault injection), kept free of heavy imports.

``DPPUB_FAULT_AT=<step>`` makes the running process SIGKILL itself at ``step``: ``reserved``,
``staged``, ``composed``, ``published`` or ``committed``. It is unset in normal use; the
kill-at-every-step tests use it to stop a real ``dppub run`` at each step of the protocol.
"""

from __future__ import annotations

import os
import signal

__all__ = ["STEPS", "fault_point"]

STEPS = ("reserved", "staged", "composed", "published", "committed")


def fault_point(step: str) -> None:
    """SIGKILL this process if ``DPPUB_FAULT_AT`` names ``step``."""
    if os.environ.get("DPPUB_FAULT_AT") == step:
        os.kill(os.getpid(), signal.SIGKILL)
