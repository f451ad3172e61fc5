"""What a release's computation may call back while it runs, given by the step computing it.

:func:`dp.pipeline.execute.compute_release` sets the :class:`Hooks` of the step
(:func:`dp.pipeline.publish.compute`: its logger, and :func:`stop_requested`) for the call of
the kind's ``execute``; a kind with a long loop reads them with :func:`hooks` (in the same
thread) -- AIM's rounds (:mod:`dp.pipeline.kinds.synthetic`). Outside a step they do nothing.

:func:`request_stop` is the process's one stop request: ``dppub run``'s signal handler
(:mod:`dppub.interrupts`) makes it when a signal interrupts the run, so releases still
computing stop at their next safe point and the run settles now, not after work it will not
publish. Stdlib only: the CLI imports this before anything heavy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from threading import Event

__all__ = ["Hooks", "clear_stop", "hooks", "hooks_set", "request_stop", "stop_requested"]

_stop = Event()


def request_stop() -> None:
    """The run of this process was interrupted: stop at the next safe point."""
    _stop.set()


def stop_requested() -> bool:
    """Whether :func:`request_stop` was called since the last :func:`clear_stop`."""
    return _stop.is_set()


def clear_stop() -> None:
    """A new command starts: nothing asks it to stop."""
    _stop.clear()


def _quiet(_line: str) -> None:
    return None


def _never() -> bool:
    return False


@dataclass(frozen=True, slots=True)
class Hooks:
    """The step's callbacks for one release (inert by default)."""

    progress: Callable[[str], None] = _quiet
    """Logs one line of progress. Public values only (a round's number, a share of the
    budget): never a count, a value or anything else computed from the data."""
    should_stop: Callable[[], bool] = _never
    """True once the run was interrupted: stop at the next safe point and raise
    :class:`~dp.errors.Stopped` (what was drawn stays charged)."""


_INERT = Hooks()
_CURRENT: ContextVar[Hooks | None] = ContextVar("dppub_release_hooks", default=None)


def hooks() -> Hooks:
    """The hooks of the release being computed in this thread (inert outside a step)."""
    return _CURRENT.get() or _INERT


@contextmanager
def hooks_set(given: Hooks) -> Iterator[None]:
    """``given`` are :func:`hooks` in the block."""
    token = _CURRENT.set(given)
    try:
        yield
    finally:
        _CURRENT.reset(token)
