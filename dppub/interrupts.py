"""SIGINT and SIGTERM during ``dppub run``: the first one stops the run, none changes how it
is settled.

The first signal raises :class:`Interrupted` in the main thread -- wherever that is, in dppub's
code or in Prefect's (which may turn it into another exception or a crashed state). Later
signals are only noted: the run is already on its way to being settled, and settlement itself
is never cut short (:func:`dp.runs.settle` defers signals until it is done). What the command
reports is decided by :attr:`Signals.first`, the signal that arrived, not by the exception that
came out of the flow.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from dppub.dp.pipeline.hooks import clear_stop, request_stop

__all__ = ["Interrupted", "Signals", "arrived", "catching", "ignore_from_now"]


class Interrupted(BaseException):
    """SIGTERM or SIGINT arrived; carries the signal number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class Signals:
    """What arrived, and whether the next signal may still interrupt."""

    def __init__(self) -> None:
        self.first: int | None = None
        self.armed = True

    def handler(self, signum: int, frame: FrameType | None) -> None:
        if self.first is None:
            self.first = signum
            request_stop()  # releases still computing stop at their next safe point
        if self.armed:
            self.armed = False  # one interruption: a second Ctrl-C cannot cut the first short
            raise Interrupted(signum)

    def disarm(self) -> None:
        """From now on signals are only noted (the run is being opened or settled)."""
        self.armed = False

    def arm(self) -> None:
        """The next signal interrupts; one noted while disarmed interrupts now."""
        if self.first is not None:
            raise Interrupted(self.first)
        self.armed = True

    def note(self, signum: int) -> None:
        """A signal that reached another handler (Prefect's SIGTERM bridge) first."""
        if self.first is None:
            self.first = signum
            request_stop()

    def line(self) -> str:
        """``interrupted by SIGINT`` (call only after a signal arrived)."""
        return f"interrupted by {signal.Signals(self.first or signal.SIGINT).name}"

    @property
    def exit_code(self) -> int:
        return 128 + int(self.first or signal.SIGINT)


@contextmanager
def catching() -> Iterator[Signals]:
    """SIGTERM and SIGINT are handled by a :class:`Signals` (SIGTERM like Ctrl-C: the run
    settles, then the process exits 143) until the block ends."""
    global _active
    clear_stop()
    signals = Signals()
    previous = {s: signal.signal(s, signals.handler) for s in (signal.SIGTERM, signal.SIGINT)}
    _active = signals
    try:
        yield signals
    finally:
        signals.disarm()
        _active = None
        clear_stop()
        for s, h in previous.items():
            signal.signal(s, h)


_active: Signals | None = None


def arrived() -> bool:
    """A signal interrupted the command running now: whatever fails after it (in Prefect's
    engine too) is its consequence, reported by the command's one line."""
    return _active is not None and _active.first is not None


def ignore_from_now() -> None:
    """After a command has settled and reported its run, only Prefect's exit work is left (its
    log and event workers drain to the server): a signal then changes nothing and must not
    print a traceback."""
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, signal.SIG_IGN)
